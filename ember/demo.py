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
from typing import Callable, TextIO

import ember
import ember.nn.functional as F
from ember import nn
from ember.errors import EmberValueError


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

    def step(self, x: ember.Tensor, pos: ember.Tensor, k_buf: ember.Tensor,
             v_buf: ember.Tensor, mask: ember.Tensor) -> ember.Tensor:
        """One position with a KV cache: ``k``/``v`` written into the static ``(b, heads,
        max_len, d/heads)`` buffers at ``pos`` (a 0-d int64 tensor), attention over the whole
        buffer with ``mask`` (``(max_len,)`` bool: the positions ``<= pos``)."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        k_buf.index_copy_(2, pos.view(1), k)
        v_buf.index_copy_(2, pos.view(1), v)
        y = F.scaled_dot_product_attention(q, k_buf, v_buf, attn_mask=mask)
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
    def generate(self, idx: ember.Tensor, n: int, temperature: float = 0.8,
                 greedy: bool = False) -> ember.Tensor:
        """``n`` more tokens after ``idx`` (b, t), each from the logits of the whole window
        (the last ``block`` tokens) recomputed; ``greedy`` takes the argmax instead of sampling.
        ``generate_cached`` gives the same tokens with a KV cache."""
        for _ in range(n):
            logits = self(idx[:, -self.block:])[:, -1]
            idx = ember.cat([idx, next_token(logits, temperature, greedy)], dim=1)
        return idx

    @ember.no_grad()
    def decode_step(self, tok: ember.Tensor, pos: ember.Tensor, keys: list[ember.Tensor],
                    values: list[ember.Tensor]) -> ember.Tensor:
        """Logits (b, vocab) of the token ``tok`` (b, 1) at position ``pos`` (a 0-d int64
        tensor), reading and extending the KV cache in place (``keys``/``values``: a
        ``KVCache``'s per-layer buffers).  Every call has the same shapes (the position is a
        tensor, attention runs over the whole static buffer with a mask), so one compiled graph
        serves every position.

        >>> m = CharGPT(10, block=8); cache = KVCache(m, batch=1)
        >>> m.decode_step(ember.tensor([[3]]), ember.tensor(0), cache.k, cache.v).shape
        ember.Size([1, 10])
        """
        x = self.tok(tok) + self.pos(pos)
        mask = (ember.arange(keys[0].shape[2]) <= pos).view(1, 1, 1, -1)
        for blk, k_buf, v_buf in zip(self.blocks, keys, values):
            x = blk.step(x, pos, k_buf, v_buf, mask)
        return F.linear(self.ln(x), self.tok.weight)[:, -1]

    @ember.no_grad()
    def generate_cached(self, idx: ember.Tensor, n: int, temperature: float = 0.8,
                        greedy: bool = False, compiled: bool = True) -> ember.Tensor:
        """``generate`` with a KV cache: the prompt and then each new token go through
        ``decode_step`` one position at a time (when ``compiled``: ``compiled_decode_step()``,
        one replayed C call per token).  The sequence must fit in ``block``.

        >>> m = CharGPT(10, block=8)
        >>> m.generate_cached(ember.tensor([[1, 2]]), 3, greedy=True).shape
        ember.Size([1, 5])
        """
        b, t = idx.shape
        if t < 1 or t + n > self.block:
            raise EmberValueError(f"[generate_cached] a prompt of {t} tokens and {n} new ones "
                                  f"need {t + n} positions; expected 1 to block={self.block}")
        step = self.compiled_decode_step() if compiled else self.decode_step
        cache = KVCache(self, b)
        logits = None
        for p in range(t):
            logits = step(idx[:, p:p + 1].clone(), ember.tensor(p), cache.k, cache.v)  # one layout
        for p in range(t, t + n):
            nxt = next_token(logits, temperature, greedy)
            idx = ember.cat([idx, nxt], dim=1)
            if p + 1 < t + n:
                logits = step(nxt, ember.tensor(p), cache.k, cache.v)
        return idx

    def compiled_decode_step(self, mode: str | None = "reduce-overhead") -> Callable:
        """``decode_step`` compiled with ``ember.compile(..., mode=mode)``, made once per model
        and mode.  ``"reduce-overhead"`` (the default here: the step is pure apart from its
        tensor work) records the first call and replays the graph on later ones without running
        the Python: one C call per token.  ``mode=None`` runs the Python on lazy tensors every
        call (the same graph, looked up in the cache)."""
        fns = self.__dict__.setdefault("_compiled_decode_steps", {})
        fn = fns.get(mode)
        if fn is None:
            fn = fns[mode] = ember.compile(self.decode_step, mode=mode)
        return fn


class KVCache:
    """Static key/value buffers of a ``CharGPT``: per layer ``(batch, heads, block,
    d/heads)`` tensors that ``CharGPT.decode_step`` writes in place at each position.

    >>> cache = KVCache(CharGPT(10, block=8, d=16, heads=4), batch=2)
    >>> cache.k[0].shape
    ember.Size([2, 4, 8, 4])
    """

    def __init__(self, model: CharGPT, batch: int) -> None:
        d = model.tok.weight.shape[1]
        blk = model.blocks[0]
        shape = (batch, blk.heads, model.block, d // blk.heads)
        dtype = model.tok.weight.dtype
        self.k = [ember.zeros(shape, dtype=dtype) for _ in model.blocks]
        self.v = [ember.zeros(shape, dtype=dtype) for _ in model.blocks]


def next_token(logits: ember.Tensor, temperature: float, greedy: bool) -> ember.Tensor:
    """The next token (b, 1) from ``logits`` (b, vocab): the argmax, or a sample of
    ``softmax(logits / temperature)``."""
    if greedy:
        return logits.argmax(-1, keepdim=True)
    return ember.multinomial(F.softmax(logits / temperature, dim=-1), 1)


def run(steps: int = 1200, batch: int = 16, block: int = 64, seed: int = 0,
        out: TextIO | None = None, sample_chars: int = 300, d: int = 96, layers: int = 2,
        heads: int = 4, lr: float = 3e-3, dtype: str = "float32",
        cached: bool = False) -> list[float]:
    """Train for ``steps`` steps; returns the losses (the CLI prints progress and a sample).
    ``dtype="bfloat16"`` or ``"float16"`` trains under CPU autocast (products in that dtype,
    float32 parameters and optimizer); float16 adds ``ember.amp.GradScaler("cpu")``, as
    PyTorch's mixed-precision recipe does (bfloat16 has float32's range and needs none).
    ``cached`` samples with the KV cache (``generate_cached``, compiled; at most ``block``
    positions) instead of recomputing the window for every character."""
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
        if cached:
            n = min(sample_chars, block - prompt.shape[1])
            start = time.perf_counter()
            sample = model.generate_cached(prompt, n)[0].tolist()
            print(f"generated {n} characters with the KV cache in "
                  f"{time.perf_counter() - start:.2f} s (first call compiles)", file=out)
        else:
            sample = model.generate(prompt, sample_chars)[0].tolist()
        print("sample:\n" + "".join(chars[i] for i in sample), file=out)
    return losses
