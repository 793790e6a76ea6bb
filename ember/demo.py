"""``ember demo``: train a small character-level GPT on a text shipped with ember.

It uses only ember's public API (nn.Module, nn.Linear/LayerNorm/Embedding, nn.functional,
optim.AdamW), prints a
progress line with the loss and tokens/s, and a sample from the trained model.  It runs in about
a minute on 2 cores.
"""

from __future__ import annotations

import sys
import time
from importlib import resources
from typing import TextIO

import ember
import ember.nn.functional as F
from ember import nn


def load_text() -> str:
    return (resources.files("ember") / "data" / "pydoc_topics.txt").read_text()


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class CharGPT(nn.Module):
    """A small GPT over characters (token and position embeddings, blocks, tied head)."""

    def __init__(self, vocab: int, block: int = 64, d: int = 96, layers: int = 2,
                 heads: int = 4) -> None:
        super().__init__()
        self.block = block
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        for emb in (self.tok, self.pos):
            nn.init.normal_(emb.weight, std=0.02)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)

    def forward(self, idx: ember.Tensor) -> ember.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos.weight[:t]
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.ln(x), self.tok.weight)  # tied input/output embeddings

    @ember.no_grad()
    def generate(self, idx: ember.Tensor, n: int, temperature: float = 0.8) -> ember.Tensor:
        for _ in range(n):
            logits = self(idx[:, -self.block:])[:, -1] / temperature
            nxt = ember.multinomial(F.softmax(logits, dim=-1), 1)
            idx = ember.cat([idx, nxt], dim=1)
        return idx


def run(steps: int = 1200, batch: int = 16, block: int = 64, seed: int = 0,
        out: TextIO | None = None, sample_chars: int = 300, d: int = 96, layers: int = 2,
        heads: int = 4, lr: float = 3e-3, dtype: str = "float32") -> list[float]:
    """Train for ``steps`` steps; returns the losses (the CLI prints progress and a sample).
    ``dtype="bfloat16"`` or ``"float16"`` trains under CPU autocast (products in that dtype,
    float32 parameters and optimizer); float16 adds ``ember.amp.GradScaler("cpu")``, as
    PyTorch's mixed-precision recipe does (bfloat16 has float32's range and needs none)."""
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"[demo] dtype must be float32, bfloat16 or float16, got {dtype!r}")
    out = sys.stdout if out is None else out  # looked up per call: callers may redirect it
    ember.manual_seed(seed)
    text = load_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = ember.tensor([stoi[c] for c in text], dtype=ember.int64)
    model = CharGPT(len(chars), block=block, d=d, layers=layers, heads=heads)
    opt = ember.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    amp_dtype = None if dtype == "float32" else getattr(ember, dtype)
    scaler = ember.amp.GradScaler("cpu", enabled=dtype == "float16")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"ember demo: char GPT ({n_params / 1e3:.0f}k parameters, {len(chars)} characters) on "
          f"{len(text) / 1e3:.0f} kB of Python documentation", file=out)
    losses: list[float] = []
    start = time.perf_counter()
    offsets = ember.arange(block + 1)
    for step in range(1, steps + 1):
        ix = ember.randint(0, len(text) - block - 1, (batch, 1))
        chunk = data[ix + offsets]
        x, y = chunk[:, :-1], chunk[:, 1:]
        with ember.autocast("cpu", dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == steps:
            elapsed = time.perf_counter() - start
            done = step / steps
            bar = "#" * int(30 * done) + "-" * (30 - int(30 * done))
            recent = sum(losses[-10:]) / len(losses[-10:])
            print(f"\r[{bar}] step {step}/{steps}  loss {recent:.3f}  "
                  f"{step * batch * block / elapsed:,.0f} tokens/s", end="", file=out,
                  flush=True)
    print(file=out)
    if sample_chars:
        prompt = ember.tensor([[stoi[c] for c in "The "]], dtype=ember.int64)
        sample = model.generate(prompt, sample_chars)[0].tolist()
        print("sample:\n" + "".join(chars[i] for i in sample), file=out)
    return losses
