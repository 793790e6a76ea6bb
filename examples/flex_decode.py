"""Generation with a paged KV cache and flex_attention (``python examples/flex_decode.py``).

A small GPT (random weights, fixed seed) continues a batch of prompts of different lengths.
Each prompt is prefilled on its own; its keys and values go into one shared paged cache
(``PagedAttention``: pages of ``PAGE`` tokens handed out as sequences grow).  Every decode step
then runs the whole batch at once: one query per sequence against the shared cache, through a
BlockMask converted from logical to physical pages (``convert_logical_block_mask``), so each
sequence sees exactly its own tokens.  The tokens equal generation without paging (each
sequence alone, recomputing full causal attention over its whole text every step).
"""

from __future__ import annotations

import argparse

import ember as torch
import ember.nn as nn
from ember.nn.attention.experimental._paged_attention import PagedAttention
from ember.nn.attention.flex_attention import create_block_mask, flex_attention

PAGE = 16


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def split(self, x: torch.Tensor) -> tuple:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        return tuple(y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))

    def finish(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = att.shape
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, -1))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 2, layers: int = 2,
                 max_len: int = 256) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def embed(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.tok(ids) + self.pos(pos)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(x))[:, -1]

    def full(self, ids: torch.Tensor) -> torch.Tensor:
        """Last-position logits of ``ids`` (1, T) with causal attention over all of it."""
        t = ids.shape[1]
        bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, t, t, device="cpu",
                               BLOCK_SIZE=PAGE)
        x = self.embed(ids, torch.arange(t).unsqueeze(0))
        for blk in self.blocks:
            q, k, v = blk.split(x)
            x = blk.finish(x, flex_attention(q, k, v, block_mask=bm))
        return self.logits(x)


def _upto(pos: torch.Tensor):  # noqa: ANN202
    """mask_mod: sequence b sees its keys up to position pos[b]."""
    return lambda b, h, q, kv: kv <= pos[b]


def generate_unpaged(model: GPT, prompts: list, steps: int) -> list:
    out = []
    for p in prompts:
        ids = torch.tensor([p])
        for _ in range(steps):
            nxt = model.full(ids).argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
        out.append(ids[0].tolist())
    return out


def generate_paged(model: GPT, prompts: list, steps: int, n_pages: int = 32) -> list:
    bsz, heads = len(prompts), model.blocks[0].heads
    hd = model.head.in_features // heads
    pa = PagedAttention(n_pages, PAGE, bsz, device="cpu")
    caches = [(torch.zeros(1, heads, n_pages * PAGE, hd), torch.zeros(1, heads, n_pages * PAGE, hd))
              for _ in model.blocks]
    seqs = [list(p) for p in prompts]
    nxt = []
    for b, p in enumerate(prompts):  # prefill each prompt alone, its K/V into the pages
        pa.reserve(torch.tensor([b]), torch.tensor([len(p) + steps]))
        t = len(p)
        bm = create_block_mask(lambda bb, h, q, kv: q >= kv, None, None, t, t, device="cpu",
                               BLOCK_SIZE=PAGE)
        x = model.embed(torch.tensor([p]), torch.arange(t).unsqueeze(0))
        for blk, (kc, vc) in zip(model.blocks, caches):
            q, k, v = blk.split(x)
            pa.assign(torch.tensor([b]), torch.arange(t).unsqueeze(0), k, v, kc, vc)
            x = blk.finish(x, flex_attention(q, k, v, block_mask=bm))
        nxt.append(int(model.logits(x).argmax(-1)))
    batch = torch.arange(bsz)
    for _ in range(steps):
        for s, tok in zip(seqs, nxt):
            s.append(tok)
        pos = torch.tensor([len(s) - 1 for s in seqs])  # the new token's position
        logical = create_block_mask(_upto(pos), bsz, None, 1, n_pages * PAGE, device="cpu",
                                    BLOCK_SIZE=(1, PAGE))
        bm = pa.convert_logical_block_mask(logical, batch, kv_len=pos + 1)
        x = model.embed(torch.tensor([[s[-1]] for s in seqs]), pos.unsqueeze(1))
        for blk, (kc, vc) in zip(model.blocks, caches):
            q, k, v = blk.split(x)
            pa.assign(batch, pos.unsqueeze(1), k, v, kc, vc)
            x = blk.finish(x, flex_attention(q, kc, vc, block_mask=bm))
        nxt = model.logits(x).argmax(-1).tolist()
    return [s for s in seqs]


def main(argv: list | None = None) -> tuple:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    model = GPT().eval()
    prompts = [[1, 2, 3], [5, 8, 13, 21, 34, 55, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
               [7] * 9]
    with torch.no_grad():
        paged = generate_paged(model, prompts, args.steps)
        plain = generate_unpaged(model, prompts, args.steps)
    for p, a in zip(prompts, paged):
        print(f"prompt {p} -> {a[len(p):]}")
    print("paged == unpaged:", paged == plain)
    return paged, plain


if __name__ == "__main__":
    main()
