"""LSTM word-language-model training step (issue 13): ember eager and ember compiled against
torch eager.

Run: ``python benchmarks/bench_rnn.py [--vocab N] [--rounds N] [--check-steps N]
[--dropout P] [--threads N] [--mode M] [--cpu-time] [--profile]`` (needs torch).

The model is PyTorch's word-language-model example at the issue's size: Embedding(vocab, 650)
-> 2-layer LSTM(650, 650) -> Linear(650, vocab), sequence 35, batch 20; one step is the
example's: detach the carried hidden state, zero_grad, forward, NLL loss of log_softmax,
backward, ``clip_grad_norm_(0.25)``, ``p.data.add_(p.grad, alpha=-lr)`` for every parameter.
torch runs the same module written with torch.nn, ember's initial weights copied in.  ember
compiled is the whole step under ``ember.compile`` (default backend, C).

Dropout is 0 by default so the two libraries compute the same numbers (their random streams
differ); before timing, ``--check-steps`` steps (default 3) print the losses of ember eager,
ember compiled and torch side by side.  Then ember eager, ember compiled and torch eager rounds
run interleaved in this one process; medians are printed with ratios to torch eager (below 1
is ember faster).  ``--cpu-time`` times CPU seconds of all threads instead of wall time
(steadier on a loaded machine); ``--threads`` (default: all cores) sets both libraries' thread
count; ``--mode M`` (e.g. ``reduce-overhead``) also times the step compiled with that mode.
``--profile`` runs cProfile over compiled steps instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # torch's OpenMP pool
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")    # NumPy's OpenBLAS pool

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))

from common import fmt_time, time_per_call  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")

EMB = HID = 650
LAYERS, SEQ, BATCH, LR, CLIP = 2, 35, 20, 20.0, 0.25


def make_model(lib, vocab: int, dropout: float):  # noqa: ANN001, ANN201
    """The example's RNNModel (LSTM) written against ``lib`` (ember or torch)."""
    nn = lib.nn

    class RNNModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(vocab, EMB)
            self.rnn = nn.LSTM(EMB, HID, LAYERS, dropout=dropout)
            self.decoder = nn.Linear(HID, vocab)

        def forward(self, input, hidden):  # noqa: ANN001, ANN202
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            decoded = self.decoder(self.drop(output)).view(-1, vocab)
            return lib.nn.functional.log_softmax(decoded, dim=1), hidden

    return RNNModel()


def make_step(lib, model):  # noqa: ANN001, ANN201
    criterion = lib.nn.NLLLoss()

    def step(data, targets, hidden):  # noqa: ANN001, ANN202
        hidden = tuple(h.detach() for h in hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-LR)
        return loss, hidden
    return step


class Runner:
    """One model copy with its step function, data and carried hidden state."""

    def __init__(self, lib, model, step, data: np.ndarray, target: np.ndarray) -> None:  # noqa: ANN001
        self.lib, self.model, self.step = lib, model, step
        self.x = lib.tensor(data)
        self.y = lib.tensor(target.reshape(-1))
        z = lib.zeros(LAYERS, BATCH, HID)
        self.hidden = (z, z.clone())

    def __call__(self) -> float:
        loss, self.hidden = self.step(self.x, self.y, self.hidden)
        return loss.detach()


def build(vocab: int, dropout: float, mode: str | None = None) -> dict:
    ember.manual_seed(0)
    em, ec = make_model(ember, vocab, dropout), make_model(ember, vocab, dropout)
    ec.load_state_dict(em.state_dict())
    tm = make_model(torch, vocab, dropout)
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in
                        em.state_dict().items()})
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, (SEQ + 1, BATCH))
    data, target = ids[:-1].copy(), ids[1:].copy()
    runners = {
        "ember eager": Runner(ember, em, make_step(ember, em), data, target),
        "ember compiled": Runner(ember, ec, ember.compile(make_step(ember, ec)), data, target),
    }
    if mode is not None:
        er = make_model(ember, vocab, dropout)
        er.load_state_dict(em.state_dict())
        step = ember.compile(make_step(ember, er), mode=mode)
        runners[f"ember compiled {mode}"] = Runner(ember, er, step, data, target)
    runners["torch eager"] = Runner(torch, tm, make_step(torch, tm), data, target)
    return runners


def check(runners: dict, steps: int) -> None:
    print(f"losses over {steps} identical steps (each starts from the previous hidden state):")
    for s in range(steps):
        row = {}
        for name, r in runners.items():
            t0 = time.perf_counter()
            row[name] = float(r())
            if s == 0 and name.startswith("ember compiled"):
                print(f"  first call of {name} (compile or cache load): "
                      f"{time.perf_counter() - t0:.2f} s")
        ref = row["torch eager"]
        worst = max(abs(v - ref) / abs(ref) for v in row.values())
        print(f"  step {s}: " + ", ".join(f"{k} {v:.6f}" for k, v in row.items())
              + f"  (max rel diff to torch {worst:.2e})")


def cpu_time_per_call(fn, number: int) -> float:  # noqa: ANN001
    """CPU seconds of all the process's threads per call (steadier than wall time on a loaded
    machine; blind to threads that wait idle)."""
    t0 = time.process_time()
    for _ in range(number):
        fn()
    return (time.process_time() - t0) / number


TIMER = {"fn": time_per_call}


def timings(runners: dict, rounds: int) -> dict:
    per = {name: [] for name in runners}
    for r in runners.values():  # warm-up (and the compile, when check() did not run)
        float(r())
    for _ in range(rounds):
        for name, r in runners.items():
            per[name].append(TIMER["fn"](lambda r=r: float(r()), 1))
    return {name: statistics.median(v) for name, v in per.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--cpu-time", action="store_true")
    ap.add_argument("--mode", default=None, help="also time ember.compile(step, mode=MODE)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ember.set_num_threads(args.threads)
    runners = build(args.vocab, args.dropout, args.mode)
    if args.cpu_time:
        TIMER["fn"] = cpu_time_per_call
    if args.profile:
        import cProfile
        import pstats
        r = runners["ember compiled"]
        cProfile.runctx("for _ in range(3): float(r())", globals(), {"r": r}, "/tmp/rnn.prof")
        pstats.Stats("/tmp/rnn.prof").sort_stats("cumulative").print_stats(25)
        return
    check(runners, args.check_steps)
    med = timings(runners, args.rounds)
    load = os.getloadavg()[0]
    print(f"\nLSTM LM training step, vocab {args.vocab}, 2x{HID}, seq {SEQ}, batch {BATCH}, "
          f"dropout {args.dropout}; medians of {args.rounds} interleaved rounds "
          f"({'CPU' if args.cpu_time else 'wall'} time, {args.threads} threads); load {load:.1f}")
    print("| | time per step | / torch eager |")
    print("|---|---|---|")
    ref = med["torch eager"]
    for name, t in med.items():
        print(f"| {name} | {fmt_time(t)} | {t / ref:.2f} |")
    print(f"torch eager / ember compiled = {ref / med['ember compiled']:.2f}x (goal >= 1.2x)")


if __name__ == "__main__":
    main()
