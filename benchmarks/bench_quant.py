"""int8 dynamic quantization: ember ``quantize_dynamic`` vs ember float32 vs torch's
``quantize_dynamic`` (fbgemm), inference, interleaved in one process, medians.

Run: ``python benchmarks/bench_quant.py [--quick]`` (needs torch).  Models: a 3-layer MLP
1024-4096-4096-1024 (batch 64 and 512), single Linears at MiniLM's shapes (2944 rows) and
the char-GPT of ``ember.demo`` (6 layers, d=384, 6 heads, block 256, batch 8; random weights:
speed only).  Also prints the max difference of
ember's int8 outputs from torch's int8 outputs (the kernels are meant to agree bit for bit).
"""

from __future__ import annotations

import os
import statistics
import sys
import warnings

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import fmt_time, time_per_call  # noqa: E402

if os.environ.get("PYTHONPATH"):  # PYTHONPATH's ember first: benchmark that tree
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ember  # noqa: E402
from ember.demo import CharGPT  # noqa: E402

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    sys.exit("benchmarks need torch (pip install torch==2.13.0)")

warnings.filterwarnings("ignore")


class TBlock(torch.nn.Module):
    """torch mirror of ``ember.demo.Block`` (same parameter names)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(TF.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TCharGPT(torch.nn.Module):
    def __init__(self, vocab: int, block: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(block, d)
        self.blocks = torch.nn.ModuleList([TBlock(d, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos.weight[:idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return TF.linear(self.ln(x), self.tok.weight)


def _mlp(lib: object) -> object:
    nn = lib.nn
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 1024))


def _models(name: str) -> tuple:
    """(ember float32, ember int8, torch float32, torch int8) for one model."""
    ember.manual_seed(0)
    if name == "mlp":
        e, t = _mlp(ember), _mlp(torch)
    elif name.startswith("linear"):       # "linear K M": one Linear at MiniLM's shapes
        k, m = (int(v) for v in name.split()[1:])
        e, t = ember.nn.Sequential(ember.nn.Linear(k, m)), torch.nn.Sequential(
            torch.nn.Linear(k, m))
    else:
        e, t = CharGPT(96, block=256, d=384, layers=6, heads=6), TCharGPT(96, 256, 384, 6, 6)
    t.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                       for k, v in e.state_dict().items()})
    e.eval()
    t.eval()
    eq = ember.ao.quantization.quantize_dynamic(e, {ember.nn.Linear}, dtype=ember.qint8)
    tq = torch.ao.quantization.quantize_dynamic(t, {torch.nn.Linear}, dtype=torch.qint8)
    return e, eq, t, tq


def _cases(quick: bool) -> list:
    rng = np.random.default_rng(0)
    out = []
    models = _models("mlp")
    for batch in (64,) if quick else (64, 512):
        x = rng.standard_normal((batch, 1024)).astype(np.float32)
        out.append((f"MLP 1024-4096-4096-1024, batch {batch}", *models,
                    ember.tensor(x), torch.from_numpy(x)))
    for k, m in ((384, 384), (384, 1536), (1536, 384)):
        x = rng.standard_normal((2944, k)).astype(np.float32)
        out.append((f"Linear {k}->{m}, 2944 rows (MiniLM 32x92)", *_models(f"linear {k} {m}"),
                    ember.tensor(x), torch.from_numpy(x)))
    idx = rng.integers(0, 96, (8, 256))
    out.append(("char-GPT 6x384, batch 8x256", *_models("gpt"), ember.tensor(idx),
                torch.from_numpy(idx)))
    return out


def main() -> None:
    quick = "--quick" in sys.argv
    torch.set_num_threads(ember.get_num_threads())
    rounds = 3 if quick else 7
    with open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    print(f"CPU: {cpu}, {os.cpu_count()} cores, threads {ember.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| model | ember f32 | ember int8 | torch f32 | torch int8 | ember int8 / ember f32 | "
          "ember int8 / torch int8 | max abs(ember int8 - torch int8) | max abs(int8 - f32) |")
    print("|---|---|---|---|---|---|---|---|---|")
    with ember.no_grad(), torch.no_grad():
        for name, e, eq, t, tq, ex, tx in _cases(quick):
            fns = (lambda m=e, x=ex: m(x), lambda m=eq, x=ex: m(x), lambda m=t, x=tx: m(x),
                   lambda m=tq, x=tx: m(x))
            for fn in fns:
                fn()
            times: list[list[float]] = [[] for _ in fns]
            for _ in range(rounds):
                for i, fn in enumerate(fns):
                    times[i].append(time_per_call(fn, 1))
            me, mq, mtf, mt = (statistics.median(v) for v in times)
            yq, yt, yf = eq(ex).numpy(), tq(tx).numpy(), e(ex).numpy()
            print(f"| {name} | {fmt_time(me)} | {fmt_time(mq)} | {fmt_time(mtf)} | "
                  f"{fmt_time(mt)} | {mq / me:.2f} | {mq / mt:.2f} | "
                  f"{np.abs(yq - yt).max():.3g} | {np.abs(yq - yf).max():.3g} |")


if __name__ == "__main__":
    main()
