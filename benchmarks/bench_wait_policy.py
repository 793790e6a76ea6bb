"""How the OpenMP pool and OpenBLAS's pool wait, measured on a step that alternates them.

The compiled MLP training step (``bench_mlp_c.py``'s: 784-512-512-10, batch 256, AdamW) runs
BLAS products (OpenBLAS's pthreads pool) between C kernels split over OpenMP threads (libgomp's
pool).  A pool that spins after its work keeps a core busy that the other pool needs next.
Each configuration below runs in its own process (both libraries read their settings once,
when they load), one process per configuration per round, configurations interleaved; each
process times ``--calls`` steps ``--reps`` times after a warm-up and reports the median wall
time and CPU time (all threads) per step.  Configurations (environment of the child):

* ``ember default``: nothing set: what ``import ember`` chooses (``ember/_memory.py``:
  ``OPENBLAS_THREAD_TIMEOUT=4``, libgomp's default);
* ``libraries' defaults``: ``EMBER_WAIT_POLICY=keep``: libgomp spins ~300k iterations before
  sleeping, OpenBLAS's threads poll for 2^28 cycles;
* ``passive``: ``OMP_WAIT_POLICY=PASSIVE`` and ``OPENBLAS_THREAD_TIMEOUT=4``: both sleep at once;
* ``OpenMP passive only`` / ``OpenBLAS timeout only``: one of the two;
* ``short spin``: ``GOMP_SPINCOUNT=10000`` (libgomp spins ~10k iterations, then sleeps) and
  ``OPENBLAS_THREAD_TIMEOUT=4``;
* ``active``: ``OMP_WAIT_POLICY=ACTIVE`` (libgomp spins without bound), OpenBLAS's default.

Run: python benchmarks/bench_wait_policy.py [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {
    "ember default": {},
    "libraries' defaults": {"EMBER_WAIT_POLICY": "keep"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"},
    "OpenMP passive only": {"OMP_WAIT_POLICY": "PASSIVE", "EMBER_WAIT_POLICY": "keep"},
    "OpenBLAS timeout only": {"OPENBLAS_THREAD_TIMEOUT": "4", "EMBER_WAIT_POLICY": "keep"},
    "short spin": {"GOMP_SPINCOUNT": "10000", "OPENBLAS_THREAD_TIMEOUT": "4",
                   "EMBER_WAIT_POLICY": "keep"},
    "active": {"OMP_WAIT_POLICY": "ACTIVE", "EMBER_WAIT_POLICY": "keep"},
}
_VARS = ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT", "EMBER_WAIT_POLICY")

_CHILD = r"""
import json, os, statistics, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, os.path.dirname(sys.argv[1]))
import ember
seen = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT")}
from bench_models import mlp_case   # (it sets both defaults for the model benchmarks: undo)
for k, v in seen.items():
    if v is None:
        os.environ.pop(k, None)
threads, calls, reps = (int(a) for a in sys.argv[2:5])
ember.set_num_threads(threads)
step = ember.compile(mlp_case().ember_step, backend="c")
for _ in range(5):
    step()
wall, cpu = [], []
for _ in range(reps):
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        step()
    wall.append((time.perf_counter() - w0) / calls)
    cpu.append((time.process_time() - c0) / calls)
print(json.dumps({"wall": statistics.median(wall), "cpu": statistics.median(cpu),
                  "env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY",
                                                         "OPENBLAS_THREAD_TIMEOUT",
                                                         "GOMP_SPINCOUNT")}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="comma list of configurations to run")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in _VARS}
    base["PYTHONPATH"] = os.path.dirname(HERE)
    names = [n for n in CONFIGS if not a.only or n in a.only.split(",")]
    res: dict = {k: {"wall": [], "cpu": []} for k in names}
    envs: dict = {}
    for _ in range(a.rounds):
        for name in names:
            extra = CONFIGS[name]
            out = subprocess.run([sys.executable, "-c", _CHILD, HERE, str(a.threads),
                                  str(a.calls), str(a.reps)], env={**base, **extra},
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            res[name]["wall"].append(r["wall"])
            res[name]["cpu"].append(r["cpu"])
            envs[name] = r["env"]
    print(f"MLP step compiled (C), {a.threads} threads, {a.rounds} rounds x {a.reps} x "
          f"{a.calls} steps; load {os.getloadavg()[0]:.2f}")
    print("| configuration | OMP_WAIT_POLICY / OPENBLAS_THREAD_TIMEOUT / GOMP_SPINCOUNT seen | "
          "wall per step "
          "(median, min) | CPU time per step (median) |")
    print("|---|---|---|---|")
    for name, r in res.items():
        e = envs[name]
        print(f"| {name} | {e['OMP_WAIT_POLICY']} / {e['OPENBLAS_THREAD_TIMEOUT']} / "
              f"{e['GOMP_SPINCOUNT']} | "
              f"{statistics.median(r['wall']) * 1e3:.2f} ms, {min(r['wall']) * 1e3:.2f} ms | "
              f"{statistics.median(r['cpu']) * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
