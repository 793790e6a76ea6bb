"""The char GPT compiled with the C backend (issue 5): training step and inference against ember
eager, torch eager and torch.compile, plus cold and warm compile times.

Run: ``python benchmarks/bench_cbackend_models.py [--rounds N] [--check-steps N] [--mode M]
[--profile] [--kernels]`` (needs torch).  The model is ``ember.demo.CharGPT`` at 6 layers,
6 heads, width 384, block 256 (``benchmarks/bench_models.py``; torch runs its mirror
``TorchCharGPT`` with ember's initial weights).

* training step (forward, cross_entropy, backward, AdamW step, zero_grad) on a batch of 8x256,
  the whole step compiled with ``ember.compile(step, backend="c")`` and ``torch.compile(step)``;
* inference, logits of 1x256 under no_grad, the module compiled; with ``--freezing`` also
  with the weights frozen in both (``ember._inductor.config.freezing``; torch.compile with
  ``options={"freezing": True}``), each ratio still against torch.compile's default.
  ``--threads N`` sets both libraries' threads (default 2); ``--fifo`` times each round with
  the process's threads under SCHED_FIFO (``chrt``: wall time on a loaded machine).

Implementations run interleaved in one process (one model copy each, medians).  Before timing,
``--check-steps`` identical training steps (default 3) compare the losses of ember eager and
ember C (relative difference printed) and torch eager; inference compares logits.

Compile times are measured in fresh subprocesses (``--child``): the first two calls of the
compiled training step (two graphs: the first step creates AdamW's state) minus two steady
calls, with an empty cache (cold: a new ``EMBER_CACHE_DIR`` / ``TORCHINDUCTOR_CACHE_DIR``) and
again with ember's cache warm.  The ember child also reports the compile phases ember timed
itself (``Entry.compile_time``: lowering, codegen, gcc or cache lookups, dlopen).
With ``--mode M`` (e.g. ``reduce-overhead``) ember C is also timed compiled with
``ember.compile(..., mode=M)`` next to the default mode, its losses and logits checked against
ember eager like the others, and the number of replayed calls printed.  ``--cpu-time`` times
CPU time of all threads (``time.process_time``) instead of wall time: steadier on a loaded
machine, blind to threads waiting idle.
``--profile`` runs cProfile over compiled training steps (in ``--mode`` when given) and prints the
top functions; ``--kernels`` builds the C training step and inference with per-kernel timers
(``EMBER_C_PROFILE``, docs/compiler.md) and prints each kernel's time per call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember import demo  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")

from bench_models import TorchCharGPT, copy_weights  # noqa: E402
from common import fmt_time, time_per_call  # noqa: E402

LAYERS, HEADS, D, BLOCK, BATCH = 6, 6, 384, 256, 8


def ember_step(m, opt, x, y):
    out = m(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def torch_step(m, opt, x, y):
    out = m(x)
    loss = TF.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def batch(vocab: int, b: int, seed: int = 0) -> tuple:
    text = demo.load_text()
    stoi = {c: i for i, c in enumerate(sorted(set(text)))}
    data = np.array([stoi[c] for c in text[:200_000]], dtype=np.int64)
    rng = np.random.default_rng(seed)
    ix = rng.integers(0, len(data) - BLOCK - 1, b)
    chunk = np.stack([data[i:i + BLOCK + 1] for i in ix])
    return chunk[:, :-1].copy(), chunk[:, 1:].copy()


def vocab() -> int:
    return len(set(demo.load_text()))


def ember_model(layers: int = LAYERS) -> ember.nn.Module:
    ember.manual_seed(0)
    return demo.CharGPT(vocab(), block=BLOCK, d=D, layers=layers, heads=HEADS)


def ember_opt(m):
    return ember.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)


def torch_model(em) -> torch.nn.Module:
    tm = TorchCharGPT(vocab(), BLOCK, D, LAYERS, HEADS)
    copy_weights(em, tm)
    return tm


def torch_opt(m):
    return torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)


# ------------------------------------------------------------------------------ child: compile
def child(which: str) -> None:
    """First two compiled training steps in this fresh process, minus two steady ones."""
    xs, ys = batch(vocab(), BATCH)
    if which == "ember":
        from ember.compiler.frontend import api
        ember.set_num_threads(2)
        m = ember_model()
        opt = ember_opt(m)
        x, y = ember.tensor(xs, dtype=ember.int64), ember.tensor(ys, dtype=ember.int64)
        step = ember.compile(ember_step, backend="c")
        run = lambda: step(m, opt, x, y).item()  # noqa: E731
    else:
        torch.set_num_threads(2)
        tm = torch_model(ember_model())
        opt = torch_opt(tm)
        x, y = torch.from_numpy(xs), torch.from_numpy(ys)
        step = torch.compile(torch_step)
        run = lambda: step(tm, opt, x, y).item()  # noqa: E731
    t0 = time.perf_counter()
    run()
    run()
    first = time.perf_counter() - t0
    steady = []
    for _ in range(2):
        t0 = time.perf_counter()
        run()
        run()
        steady.append(time.perf_counter() - t0)
    out = {"first_two": first, "steady_two": min(steady), "compile": first - min(steady)}
    if which == "ember":
        entries = [e for code in api._CACHES.values() if hasattr(code, "segments")
                   for seg in code.segments.values() for _, e in seg.order]
        out["ember_compile_time"] = sum(e.compile_time for e in entries)
        out["graphs"] = len(entries)
    print("RESULT " + json.dumps(out))


def run_child(which: str, env: dict) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", which]
    res = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=3600)
    for line in res.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"child {which} failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}")


def compile_times() -> None:
    cache = tempfile.mkdtemp(prefix="ember-cold-")
    tcache = tempfile.mkdtemp(prefix="inductor-cold-")
    cold = run_child("ember", {"EMBER_CACHE_DIR": cache})
    warm = run_child("ember", {"EMBER_CACHE_DIR": cache})
    tcold = run_child("torch", {"TORCHINDUCTOR_CACHE_DIR": tcache})
    print(f"\ncompile times of the GPT training step (fresh processes; first two calls minus "
          f"two steady calls; load {os.getloadavg()[0]:.1f}):")
    print("| | first two calls | steady two calls | compile overhead | ember's own timing |")
    print("|---|---|---|---|---|")
    for name, r in (("ember C, cold cache", cold), ("ember C, warm cache", warm),
                    ("torch.compile, cold cache", tcold)):
        own = f"{r['ember_compile_time']:.3f} s ({r['graphs']} graphs)" \
            if "ember_compile_time" in r else "-"
        print(f"| {name} | {r['first_two']:.2f} s | {r['steady_two']:.2f} s | "
              f"{r['compile']:.2f} s | {own} |")
    print(f"cold ember / torch.compile (compile overhead): {cold['compile'] / tcold['compile']:.2f}"
          f"; by ember's own timing: {cold['ember_compile_time'] / tcold['compile']:.2f}")


# ------------------------------------------------------------------------------ timings
TIMER = {"fn": time_per_call, "what": "median"}


def cpu_time_per_call(fn, number: int) -> float:  # noqa: ANN001
    """CPU seconds of all the process's threads per call (steadier than wall time when other
    jobs load the machine; a thread that waits idle costs nothing here)."""
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number


def _fifo(on: bool) -> None:
    """``--fifo``: every thread of this process SCHED_FIFO 1 (``chrt``) while a round is timed,
    so that other processes' threads do not take the cores; back to SCHED_OTHER after."""
    args = ["chrt", "-f", "-a", "-p", "1"] if on else ["chrt", "-o", "-a", "-p", "0"]
    subprocess.run(args + [str(os.getpid())], check=True, capture_output=True)


def medians(cases: dict, rounds: int, number: int = 1) -> dict:
    times: dict = {k: [] for k in cases}
    for _ in range(rounds):
        if TIMER.get("fifo"):
            _fifo(True)
        try:
            for k, fn in cases.items():
                times[k].append(TIMER["fn"](fn, number))
        finally:
            if TIMER.get("fifo"):
                _fifo(False)
    return {k: statistics.median(v) for k, v in times.items()}


def table(title: str, med: dict) -> None:
    ref = med["torch.compile"]
    print(f"\n{title}")
    print(f"| implementation | {TIMER['what']} | vs torch.compile (>1: slower) |")
    print("|---|---|---|")
    for k, t in med.items():
        print(f"| {k} | {fmt_time(t)} | {t / ref:.2f} |")


def _replays(compiled: dict) -> None:
    """How many calls of each ``mode="reduce-overhead"`` function replayed."""
    for name, f in compiled.items():
        f = getattr(f, "_compiled", f)
        if hasattr(f, "replay_count"):
            print(f"  {name}: {f.record_count} recorded calls, {f.replay_count} replayed"
                  + (f" (last recording not replayable: {f.why_not})" if f.why_not else ""))


def training(rounds: int, check_steps: int, mode: str | None) -> None:
    xs, ys = batch(vocab(), BATCH)
    ex, ey = ember.tensor(xs, dtype=ember.int64), ember.tensor(ys, dtype=ember.int64)
    tx, ty = torch.from_numpy(xs), torch.from_numpy(ys)
    m_e, m_c = ember_model(), ember_model()
    o_e, o_c = ember_opt(m_e), ember_opt(m_c)
    t_e, t_c = torch_model(m_e), torch_model(m_e)
    p_e, p_c = torch_opt(t_e), torch_opt(t_c)
    cstep = ember.compile(ember_step, backend="c")
    tstep = torch.compile(torch_step)
    cases = {
        "ember eager": lambda: ember_step(m_e, o_e, ex, ey).item(),
        "ember backend='c'": lambda: cstep(m_c, o_c, ex, ey).item(),
        "torch eager": lambda: torch_step(t_e, p_e, tx, ty).item(),
        "torch.compile": lambda: tstep(t_c, p_c, tx, ty).item(),
    }
    compiled = {"ember backend='c'": cstep}
    if mode is not None:
        m_m = ember_model()
        o_m = ember_opt(m_m)
        # a function object of its own: ember caches compiled code per code object
        mstep = ember.compile(lambda *a: ember_step(*a), backend="c", mode=mode)
        cases = {"ember eager": cases.pop("ember eager"),
                 f"ember backend='c' mode={mode!r}": lambda: mstep(m_m, o_m, ex, ey).item(),
                 **cases}
        compiled[f"mode={mode!r}"] = mstep
    names = ", ".join(cases)
    print(f"training step losses over {check_steps} identical steps ({names}):")
    worst = {k: 0.0 for k in cases if k.startswith("ember backend")}
    for i in range(check_steps):
        losses = {k: fn() for k, fn in cases.items()}
        le = losses["ember eager"]
        for k in worst:
            worst[k] = max(worst[k], abs(losses[k] - le) / abs(le))
        if i < 5 or i == check_steps - 1:
            print(f"  step {i}: " + " ".join(f"{v:.7f}" for v in losses.values()))
    for k, w in worst.items():
        print(f"  max |{k} - ember eager| / |loss| over {check_steps} steps: {w:.2e}")
    from ember.compiler.c import backend as cbackend
    cg = cbackend.last_compiled()
    print(f"  C graph: {cg.stats.kernels} kernels in {cg.stats.segments} segments, "
          f"{cg.stats.externs} externs")
    table(f"char GPT {LAYERS}x{D} training step, batch {BATCH}x{BLOCK}, AdamW "
          f"(load {os.getloadavg()[0]:.1f})", medians(cases, rounds))
    _replays(compiled)


def _freezing_cases(m, ex, tx) -> dict:  # noqa: ANN001
    """``--freezing``: ember C with ``ember._inductor.config.freezing`` and torch.compile with
    ``options={"freezing": True}`` (a copy of the model: torch's switch is per compile)."""
    import ember._inductor.config as icfg
    cm = ember.compile(m, backend="c")
    ctm = torch.compile(torch_model(m), options={"freezing": True})

    def e_cf():
        with ember.no_grad(), icfg.patch(freezing=True):
            return cm(ex).numpy()

    def t_cf():
        with torch.no_grad():
            return ctm(tx).numpy()
    return {"ember backend='c' freezing": e_cf, "torch.compile freezing": t_cf}


def inference(rounds: int, mode: str | None, freezing: bool = False) -> None:
    xs, _ = batch(vocab(), 1)
    ex, tx = ember.tensor(xs, dtype=ember.int64), torch.from_numpy(xs)
    m = ember_model()
    tm = torch_model(m)
    cm = ember.compile(m, backend="c")
    ctm = torch.compile(tm)
    compiled = {"ember backend='c'": cm}

    def e_eager():
        with ember.no_grad():
            return m(ex).numpy()

    def e_c():
        with ember.no_grad():
            return cm(ex).numpy()

    def t_eager():
        with torch.no_grad():
            return tm(tx).numpy()

    def t_c():
        with torch.no_grad():
            return ctm(tx).numpy()

    cases = {"ember eager": e_eager, "ember backend='c'": e_c, "torch eager": t_eager,
             "torch.compile": t_c}
    if mode is not None:
        mm = ember.compile(ember_model(), backend="c", mode=mode)

        def e_mode():
            with ember.no_grad():
                return mm(ex).numpy()

        cases = {"ember eager": e_eager, f"ember backend='c' mode={mode!r}": e_mode,
                 **{k: v for k, v in cases.items() if k != "ember eager"}}
        compiled[f"mode={mode!r}"] = mm
    if freezing:
        cases.update(_freezing_cases(m, ex, tx))
    for fn in cases.values():   # a replaying mode records on its first calls
        fn()
    outs = {k: fn() for k, fn in cases.items()}
    ref = outs["ember eager"]
    print("\ninference logits, max |x - ember eager|: " + ", ".join(
        f"{k} {np.abs(v - ref).max():.2e}" for k, v in outs.items() if k != "ember eager"))
    table(f"char GPT {LAYERS}x{D} inference, 1x{BLOCK} (load {os.getloadavg()[0]:.1f})",
          medians(cases, rounds, number=3))
    _replays(compiled)


def profile(mode: str | None, steps: int = 5) -> None:
    import cProfile
    import pstats
    xs, ys = batch(vocab(), BATCH)
    ex, ey = ember.tensor(xs, dtype=ember.int64), ember.tensor(ys, dtype=ember.int64)
    m = ember_model()
    o = ember_opt(m)
    cstep = ember.compile(ember_step, backend="c", mode=mode)
    for _ in range(3):
        cstep(m, o, ex, ey).item()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        cstep(m, o, ex, ey).item()
    pr.disable()
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(25)


def kernels(mode: str | None, steps: int = 3) -> None:
    """Per-kernel C times (EMBER_C_PROFILE) of the training step and of inference."""
    from ember.compiler.c import backend as cbackend
    from ember.config import config
    config.c_profile = True
    xs, ys = batch(vocab(), BATCH)
    ex, ey = ember.tensor(xs, dtype=ember.int64), ember.tensor(ys, dtype=ember.int64)
    m = ember_model()
    o = ember_opt(m)
    cstep = ember.compile(ember_step, backend="c", mode=mode)
    for _ in range(3):
        cstep(m, o, ex, ey).item()
    cbackend.reset_profile()
    t = time_per_call(lambda: cstep(m, o, ex, ey).item(), steps)
    print(f"training step, ember C with timers: {fmt_time(t)} per step ({steps} steps; "
          f"load {os.getloadavg()[0]:.2f})")
    print(cbackend.format_profile(cbackend.profile(), per=steps))
    ix = ember.tensor(batch(vocab(), 1)[0], dtype=ember.int64)
    cm = ember.compile(m, backend="c", mode=mode)
    calls = 3 * steps

    def infer():
        with ember.no_grad():
            return cm(ix).numpy()
    for _ in range(3):
        infer()
    cbackend.reset_profile()
    t = time_per_call(infer, calls)
    print(f"\ninference 1x{BLOCK}, ember C with timers: {fmt_time(t)} per call ({calls} calls; "
          f"load {os.getloadavg()[0]:.2f}; rows of the training step's graph show 0 calls)")
    print(cbackend.format_profile(cbackend.profile(), per=calls))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--child", choices=("ember", "torch"))
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--kernels", action="store_true", help="per-kernel C times")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time.process_time (CPU time of all threads) instead of wall time")
    ap.add_argument("--mode", default=None,
                    help="also time ember C under ember.compile(..., mode=MODE)")
    ap.add_argument("--skip", default="", help="comma list of: train,infer,compile")
    ap.add_argument("--freezing", action="store_true",
                    help="inference also with weights frozen: ember._inductor.config.freezing "
                         "and torch.compile(options={'freezing': True})")
    ap.add_argument("--threads", type=int, default=2, help="threads of both libraries")
    ap.add_argument("--fifo", action="store_true",
                    help="time each round with all threads under SCHED_FIFO 1 (chrt; needs "
                         "the privilege; a round of inference holds the cores ~1 s)")
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    if args.profile:
        profile(args.mode)
        return
    if args.kernels:
        kernels(args.mode)
        return
    if args.cpu_time:
        TIMER.update(fn=cpu_time_per_call, what="median CPU time")
    if args.fifo:
        TIMER.update(fifo=True, what=TIMER["what"] + " (SCHED_FIFO rounds)")
    skip = set(args.skip.split(","))
    if "train" not in skip:
        training(args.rounds, args.check_steps, args.mode)
    if "infer" not in skip:
        inference(args.rounds, args.mode, args.freezing)
    if "compile" not in skip:
        compile_times()


if __name__ == "__main__":
    main()
