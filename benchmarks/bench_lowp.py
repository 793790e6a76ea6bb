"""float16/bfloat16 against float32 and against torch: 1024^3 matmul and a linear layer (eager),
and with ``--compiled`` the same matmul under ``ember.compile`` plus memory-bound ops (add,
exact gelu, softmax over rows of 1024) on 2^24 elements, eager and compiled.

Run: ``python benchmarks/bench_lowp.py [--compiled] [--quick]`` (needs torch).  ember and torch
interleaved in one process, medians.  torch's CPU half matmul has no fast kernel without AMX
(about 100x slower than its float32), so torch's half rows are timed with fewer calls.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import compare, fmt_time  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ember  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _compiled_cases() -> None:
    """1024^3 matmul compiled and memory-bound ops on 2^24 elements, each dtype against
    float32 (speedup = float32 time / dtype time) and against torch's same op."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    big = rng.standard_normal((1 << 14, 1 << 10)).astype(np.float32)   # 2^24 elements
    F, TF = ember.nn.functional, torch.nn.functional
    ops = {"matmul 1024^3": (lambda x, y: x @ y, lambda x, y: x @ y, (a, b)),
           "add 2^24": (lambda x, y: x + y, lambda x, y: x + y, (big, big)),
           "gelu 2^24": (lambda x: F.gelu(x), lambda x: TF.gelu(x), (big,)),
           "softmax 2^24 (rows of 1024)": (lambda x: F.softmax(x, -1),
                                           lambda x: TF.softmax(x, -1), (big,))}
    cases, keys = {}, []
    for op, (fe, ft, arrs) in ops.items():
        fc = ember.compile(fe)
        for name in ("float32", "bfloat16", "float16"):
            ed, td = getattr(ember, name), getattr(torch, name)
            ea = [ember.tensor(v).to(ed) for v in arrs]
            ta = [torch.tensor(v).to(td) for v in arrs]
            slow = name != "float32" and op.startswith("matmul")
            for mode, fn in (("eager", fe), ("compiled", fc)):
                key = f"{op} {name} {mode}"
                cases[key] = (lambda fn=fn, ea=ea: fn(*ea), lambda ft=ft, ta=ta: ft(*ta),
                              1 if slow else 3)
                keys.append((op, name, mode, key))
    rows = {r[0]: r for r in compare(cases, rounds=3 if "--quick" in sys.argv else 5,
                                     warmup=1)}
    print("| op | dtype | mode | ember | torch (eager) | ember/torch time | "
          "speedup over ember float32 (same mode) |")
    print("|---|---|---|---|---|---|---|")
    for op, name, mode, key in keys:
        _, me, mt, r = rows[key]
        base = rows[f"{op} float32 {mode}"][1]
        print(f"| {op} | {name} | {mode} | {fmt_time(me)} | {fmt_time(mt)} | {r:.3f} | "
              f"{base / me:.2f}x |")


def main() -> None:
    torch.set_num_threads(ember.get_num_threads())
    if "--compiled" in sys.argv:
        print(f"CPU: {_cpu_model()}, {os.cpu_count()} cores, ember threads "
              f"{ember.get_num_threads()}, load average {os.getloadavg()[0]:.1f}")
        _compiled_cases()
        return
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    x = rng.standard_normal((256, 1024)).astype(np.float32)
    w = rng.standard_normal((4096, 1024)).astype(np.float32) * 0.03
    bias = rng.standard_normal(4096).astype(np.float32)
    cases = {}
    flops = {}
    for name in ("float32", "bfloat16", "float16"):
        ed, td = getattr(ember, name), getattr(torch, name)
        ea, eb = ember.tensor(a).to(ed), ember.tensor(b).to(ed)
        ta, tb = torch.tensor(a).to(td), torch.tensor(b).to(td)
        ex, ew, ebias = (ember.tensor(v).to(ed) for v in (x, w, bias))
        tx, tw, tbias = (torch.tensor(v).to(td) for v in (x, w, bias))
        slow = name != "float32"  # torch's half GEMM: about 3 s per 1024^3 product here
        cases[f"matmul 1024^3 {name}"] = (lambda ea=ea, eb=eb: ea @ eb,
                                          lambda ta=ta, tb=tb: ta @ tb, 1 if slow else 3)
        flops[f"matmul 1024^3 {name}"] = 2 * 1024 ** 3
        cases[f"linear 256x1024 -> 4096 {name}"] = (
            lambda ex=ex, ew=ew, eb=ebias: ember.nn.functional.linear(ex, ew, eb),
            lambda tx=tx, tw=tw, tb=tbias: torch.nn.functional.linear(tx, tw, tb),
            1 if slow else 3)
        flops[f"linear 256x1024 -> 4096 {name}"] = 2 * 256 * 1024 * 4096
    rows = compare(cases, rounds=3 if "--quick" in sys.argv else 5, warmup=1)
    print(f"CPU: {_cpu_model()}, {os.cpu_count()} cores, ember threads "
          f"{ember.get_num_threads()}")
    print("| case | ember | ember GFLOP/s | torch | torch GFLOP/s | ember/torch time |")
    print("|---|---|---|---|---|---|")
    f32 = {}
    for name, me, mt, r in rows:
        g, gt = flops[name] / me / 1e9, flops[name] / mt / 1e9
        f32.setdefault(name.rsplit(" ", 1)[0], g)
        print(f"| {name} | {fmt_time(me)} | {g:.1f} | {fmt_time(mt)} | {gt:.2f} | {r:.3f} |")
    print()
    for name, me, _, _ in rows:
        base = f32[name.rsplit(" ", 1)[0]]
        print(f"{name}: {flops[name] / me / 1e9 / base:.2f}x ember float32 GFLOP/s")


if __name__ == "__main__":
    main()
