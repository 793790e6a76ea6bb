"""What the OpenMP regions of one compiled call cost (issue 21): the char GPT's inference
(logits of 1x256, no_grad, ``ember.compile(m, backend="c")``) at 1 and 2 threads, in turn, with
a small ``LD_PRELOAD`` probe around libgomp's ``GOMP_parallel`` (built here with ``gcc``).

Per call it prints the wall time, the parallel regions opened, how late the second thread
started each region's body (its wake-up: with ``OMP_WAIT_POLICY=PASSIVE`` a futex wake per
region, with libgomp's default spin ~0), the time spent inside regions, and how long the
caller waited at each region's end for the later thread (imbalance).  The sum of the late
starts bounds what keeping the threads awake across the call (``codegen/awake.py``) could save.

Run: ``python benchmarks/bench_omp_regions.py [--calls N] [--rounds R] [--policy PASSIVE|default]``
(the script re-runs itself with the probe preloaded; torch is not imported: its own libgomp
would be probed too).  On a shared machine, ``chrt -f 1 python ...`` emulates a quiet one.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

PROBE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
extern int omp_get_thread_num(void);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec; }
typedef void (*fn_t)(void *);
struct w { fn_t fn; void *data; double t0, late, mdone, wdone; };
static double acc[5];
static void wrap(void *p) { struct w *w = p; int t = omp_get_thread_num();
  if (t) w->late = now() - w->t0;
  w->fn(w->data);
  if (t) w->wdone = now(); else w->mdone = now(); }
void GOMP_parallel(fn_t fn, void *data, unsigned n, unsigned flags) {
  static void (*real)(fn_t, void *, unsigned, unsigned);
  if (!real) real = (void (*)(fn_t, void *, unsigned, unsigned))dlsym(RTLD_NEXT, "GOMP_parallel");
  struct w w = {fn, data, now(), -1, 0, 0};
  real(wrap, &w, n, flags);
  acc[0] += 1;
  if (w.late >= 0) { acc[1] += 1; acc[2] += w.late; acc[3] += now() - w.t0;
    if (w.wdone > w.mdone) acc[4] += w.wdone - w.mdone; }
}
void probe_read(double *out) { for (int i = 0; i < 5; i++) { out[i] = acc[i]; acc[i] = 0; } }
"""


def build_probe(d: str) -> str:
    src, lib = os.path.join(d, "probe.c"), os.path.join(d, "probe.so")
    with open(src, "w") as f:
        f.write(PROBE)
    subprocess.run([os.environ.get("CC", "gcc"), "-O2", "-shared", "-fPIC", "-fopenmp", src,
                    "-o", lib, "-ldl"], check=True)
    return lib


def child(calls: int, rounds: int) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(here))
    import numpy as np

    import ember
    from ember import demo
    probe = ctypes.CDLL(os.environ["EMBER_OMP_PROBE"])
    vocab = len(set(demo.load_text()))
    ember.manual_seed(0)
    m = demo.CharGPT(vocab, block=256, d=384, layers=6, heads=6)
    x = ember.tensor(np.random.default_rng(0).integers(0, vocab, (1, 256)), dtype=ember.int64)
    cm = ember.compile(m, backend="c")

    def infer():
        with ember.no_grad():
            return cm(x).numpy()
    out = (ctypes.c_double * 5)()
    print(f"{ember.__file__}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}")
    for _ in range(rounds):
        for n in (1, 2):
            ember.set_num_threads(n)
            infer(), infer()
            probe.probe_read(out)
            t0 = time.perf_counter()
            for _ in range(calls):
                infer()
            wall = (time.perf_counter() - t0) / calls
            probe.probe_read(out)
            r, par, late, inside, tail = (v / calls for v in out)
            print(f"threads {n}: {wall * 1e3:6.1f} ms/call; regions {r:.0f} ({par:.0f} on 2 "
                  f"threads); 2nd thread late {late * 1e3:.2f} ms/call "
                  f"({late / max(par, 1) * 1e6:.0f} us/region); in regions {inside * 1e3:.1f} ms; "
                  f"caller waited at ends {tail * 1e3:.2f} ms; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--policy", default="PASSIVE", help="OMP_WAIT_POLICY, or 'default' (unset)")
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        child(args.calls, args.rounds)
        return
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, EMBER_OMP_PROBE=build_probe(d))
        env["LD_PRELOAD"] = env["EMBER_OMP_PROBE"]   # libgomp reads its settings at load
        env.pop("OMP_WAIT_POLICY", None)
        if args.policy != "default":
            env["OMP_WAIT_POLICY"] = args.policy
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--calls",
                        str(args.calls), "--rounds", str(args.rounds)], env=env, check=True)


if __name__ == "__main__":
    main()
