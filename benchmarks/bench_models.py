"""Model training steps, eager ember against eager torch (issue 3).

Run: ``python benchmarks/bench_models.py [--profile mlp|gpt] [--rounds N]`` (needs torch).

Two cases, each one full training step (forward, cross_entropy, backward, AdamW step,
zero_grad) on the same batch in both libraries, ember and torch rounds interleaved in one
process, medians printed as a Markdown table:

* MLP 784-512-512-10 (ReLU), batch 256;
* the char GPT of ``ember demo`` (``ember/demo.py``) at 6 layers, 6 heads, width 384,
  block 256, batch 8; torch runs a module written the same way (``TorchCharGPT`` below) with
  the ember model's initial weights copied in.

Before timing, both models take a few identical steps and the losses are printed side by
side (a sanity check that the two libraries compute the same thing).  ``--profile NAME`` runs
cProfile over ember's steps of one case instead and prints the top functions.
"""

from __future__ import annotations

import argparse
import os
import sys

# Both libraries run in one process: idle worker threads must sleep, not spin, or each
# library's spinning pool steals the cores the other one is timed on.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # torch's OpenMP pool
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")    # NumPy's OpenBLAS pool (2^4 cycles)

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import compare, print_table  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ember  # noqa: E402
from ember import demo  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")


# ------------------------------------------------------------------------------ torch mirror
class TorchBlock(torch.nn.Module):
    """``ember.demo.Block`` written with torch (same names, so state dicts line up)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TorchCharGPT(torch.nn.Module):
    """``ember.demo.CharGPT`` written with torch."""

    def __init__(self, vocab: int, block: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.block = block
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(block, d)
        self.blocks = torch.nn.ModuleList([TorchBlock(d, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos.weight[:t]
        for blk in self.blocks:
            x = blk(x)
        return TF.linear(self.ln(x), self.tok.weight)


def copy_weights(src: ember.nn.Module, dst: torch.nn.Module) -> None:
    """Load ember's parameters into the torch module (names must match)."""
    state = {k: torch.from_numpy(np.array(v.numpy())) for k, v in src.state_dict().items()}
    dst.load_state_dict(state, strict=True)


# ------------------------------------------------------------------------------ cases
class Case:
    """One model in both libraries with its optimizer and a fixed batch."""

    def __init__(self, em: ember.nn.Module, tm: torch.nn.Module, ex: ember.Tensor,
                 ey: ember.Tensor, n_classes: int) -> None:
        self.em, self.tm = em, tm
        self.ex, self.ey = ex, ey
        self.tx = torch.from_numpy(np.array(ex.numpy()))
        self.ty = torch.from_numpy(np.array(ey.numpy()))
        self.n = n_classes
        self.eopt = ember.optim.AdamW(em.parameters(), lr=1e-3, weight_decay=0.01)
        self.topt = torch.optim.AdamW(tm.parameters(), lr=1e-3, weight_decay=0.01,
                                      foreach=False)

    def ember_step(self) -> float:
        out = self.em(self.ex)
        loss = ember.nn.functional.cross_entropy(out.reshape(-1, self.n), self.ey.reshape(-1))
        loss.backward()
        self.eopt.step()
        self.eopt.zero_grad()
        return loss

    def torch_step(self) -> float:
        out = self.tm(self.tx)
        loss = TF.cross_entropy(out.reshape(-1, self.n), self.ty.reshape(-1))
        loss.backward()
        self.topt.step()
        self.topt.zero_grad()
        return loss

    def check(self, steps: int = 3) -> list[tuple[float, float]]:
        return [(self.ember_step().item(), self.torch_step().item()) for _ in range(steps)]


def mlp_case() -> Case:
    ember.manual_seed(0)
    nn = ember.nn
    em = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                       nn.Linear(512, 10))
    tnn = torch.nn
    tm = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(),
                        tnn.Linear(512, 10))
    copy_weights(em, tm)
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((256, 784)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, 256), dtype=ember.int64)
    return Case(em, tm, x, y, 10)


def gpt_case(layers: int = 6, heads: int = 6, d: int = 384, block: int = 256,
             batch: int = 8) -> Case:
    ember.manual_seed(0)
    text = demo.load_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    em = demo.CharGPT(len(chars), block=block, d=d, layers=layers, heads=heads)
    tm = TorchCharGPT(len(chars), block, d, layers, heads)
    copy_weights(em, tm)
    data = np.array([stoi[c] for c in text[:200_000]], dtype=np.int64)
    rng = np.random.default_rng(0)
    ix = rng.integers(0, len(data) - block - 1, batch)
    chunk = np.stack([data[i:i + block + 1] for i in ix])
    x = ember.tensor(chunk[:, :-1].copy(), dtype=ember.int64)
    y = ember.tensor(chunk[:, 1:].copy(), dtype=ember.int64)
    return Case(em, tm, x, y, len(chars))


def profile(case: Case, steps: int) -> None:
    import cProfile
    import pstats
    for _ in range(2):
        case.ember_step()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        case.ember_step()
    pr.disable()
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(30)
    st.sort_stats("cumulative").print_stats(45)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=("mlp", "gpt"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--only", choices=("mlp", "gpt"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    ember.set_num_threads(2)
    makers = {"mlp": mlp_case, "gpt": gpt_case}
    if args.profile:
        profile(makers[args.profile](), 5 if args.profile == "gpt" else 50)
        return
    names = [args.only] if args.only else list(makers)
    labels = {"mlp": "MLP 784-512-512-10, batch 256, AdamW step",
              "gpt": "char GPT 6x384, block 256, batch 8, AdamW step"}
    cases = {}
    for name in names:
        case = makers[name]()
        print(f"{name} losses (ember, torch) over 3 identical steps:")
        for le, lt in case.check():
            print(f"  {le:.6f} {lt:.6f}  diff {abs(le - lt):.2e}")
        calls = 10 if name == "mlp" else 1
        cases[labels[name]] = (case.ember_step, case.torch_step, calls)
    print_table(compare(cases, rounds=args.rounds))


if __name__ == "__main__":
    main()
