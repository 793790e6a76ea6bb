"""Paged attention on top of flex_attention (PyTorch's
``torch.nn.attention.experimental._paged_attention``).

A KV cache of ``n_pages`` pages of ``page_size`` tokens, ``(1, H, n_pages * page_size, D)``,
is shared by a batch of sequences of different lengths.  A page table maps each sequence's
logical blocks to physical pages; ``convert_logical_block_mask`` rewrites a BlockMask built for
logical positions to physical ones and wraps its ``mask_mod`` (``get_mask_mod``) so it sees
logical key positions, as ``get_score_mod`` does for a score_mod.  Pages past a sequence's end
and pages of other sequences are masked.
"""

from __future__ import annotations

from typing import Callable

from ember import dtypes as dt
from ember._frontend.creation import arange, full, tensor, zeros
from ember._frontend.pointwise_logic import where
from ember.errors import EmberRuntimeError
from ember.nn.attention._flex_block_mask import BlockMask, noop_mask
from ember.tensor import Tensor

__all__ = ["PagedAttention"]


def _cdiv(x: int | Tensor, multiple: int | Tensor) -> int | Tensor:
    return (x + multiple - 1) // multiple


def _identity(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
    return score


class PagedAttention:
    """A paged KV cache's page table for flex_attention inference with large batches.

    Example::

        pa = PagedAttention(n_pages=64, page_size=128, max_batch_size=4, device="cpu")
        pa.reserve(ember.tensor(0), ember.tensor(300))        # sequence 0 may hold 300 tokens
        pa.assign(batch_idx, input_pos, k_new, v_new, k_cache, v_cache)
        bm = pa.convert_logical_block_mask(logical_block_mask, batch_idx)
        out = flex_attention(q, k_cache, v_cache, block_mask=bm)
    """

    def __init__(self, n_pages: int, page_size: int, max_batch_size: int,
                 device: str = "cuda") -> None:
        self.n_pages = n_pages
        self.page_size = page_size
        # [batch, logical block] -> physical page (-1: none)
        self.page_table = full((max_batch_size, n_pages), -1, dtype=dt.int64, device=device)
        # batch -> allocated sequence length
        self.capacity = zeros(max_batch_size, dtype=dt.int64, device=device)
        # free physical pages, the next to hand out last
        self.empty_pages = list(range(n_pages - 1, -1, -1))
        # [batch, physical page] -> logical block (-1: not this batch's)
        self.physical_to_logical = full((max_batch_size, n_pages), -1, dtype=dt.int64,
                                        device=device)

    def reserve(self, batch_idx: Tensor, seq_len: Tensor) -> None:
        """Grow batch ``batch_idx``'s capacity to at least ``seq_len`` tokens (whole pages)."""
        b = int(batch_idx)
        cap, want = int(self.capacity[b]), int(seq_len)
        if want <= cap:
            return
        n_new = _cdiv(want - cap, self.page_size)
        if len(self.empty_pages) < n_new:
            raise AssertionError(
                f"requested {n_new} pages but there are only {len(self.empty_pages)} empty pages")
        start = cap // self.page_size
        pages = self.empty_pages[-n_new:]
        self.empty_pages = self.empty_pages[:-n_new]
        self.page_table[b, start:start + n_new] = tensor(pages, dtype=dt.int64)
        self.physical_to_logical[b, tensor(pages, dtype=dt.int64)] = arange(
            start, start + n_new, dtype=dt.int64)
        self.capacity[b] += n_new * self.page_size

    def erase(self, batch_idx: Tensor) -> None:
        """Free every page of batch ``batch_idx``."""
        b = int(batch_idx)
        row = self.page_table[b]
        pages = [int(p) for p in row.tolist() if p != -1]
        self.capacity[b] = 0
        self.empty_pages += pages
        if pages:
            self.physical_to_logical[b, tensor(pages, dtype=dt.int64)] = -1
        self.page_table[b] = -1

    def assign(self, batch_idx: Tensor, input_pos: Tensor, k_val: Tensor, v_val: Tensor,
               k_cache: Tensor, v_cache: Tensor) -> None:
        """Write ``k_val``/``v_val`` ``(B, H, S, D)`` of sequences ``batch_idx`` ``(B,)`` at
        positions ``input_pos`` ``(B, S)`` into the caches ``(1, H, n_pages * page_size, D)``."""
        if k_val.requires_grad:
            raise EmberRuntimeError("[PagedAttention.assign] val must not require gradient")
        B, H, S, K_D = k_val.shape  # noqa: N806 (PyTorch's names)
        V_D = v_val.shape[3]  # noqa: N806
        checks = [(B == batch_idx.shape[0], f"Expect val and batch_idx have the same batch size "
                   f"but got B={B} and B={batch_idx.shape[0]}."),
                  (H == k_cache.shape[1], f"Expect val and cache has the same number of heads "
                   f"but got H={H} and H={k_cache.shape[1]}."),
                  (S == input_pos.shape[1], f"Expect val and input_pos has the same length but "
                   f"got S={S} and S={input_pos.shape[0]}."),
                  (K_D == k_cache.shape[3], f"Expect k_val and k_cache has the same hidden dim "
                   f"but got D={K_D} and D={k_cache.shape[3]}."),
                  (V_D == v_cache.shape[3], f"Expect v_val and v_cache has the same hidden dim "
                   f"but got D={V_D} and D={v_cache.shape[3]}.")]
        for ok, msg in checks:
            if not ok:
                raise EmberRuntimeError(f"[PagedAttention.assign] {msg}")
        logical_block = input_pos // self.page_size
        offset = input_pos % self.page_size
        physical = self.page_table[batch_idx].gather(1, logical_block.to(dt.int64))
        addr = (physical * self.page_size + offset).view(-1)
        k_cache[:, :, addr, :] = k_val.permute(1, 0, 2, 3).reshape(1, H, B * S, K_D)
        v_cache[:, :, addr, :] = v_val.permute(1, 0, 2, 3).reshape(1, H, B * S, V_D)

    def convert_logical_block_mask(self, block_mask: BlockMask, batch_idx: Tensor | None = None,
                                   kv_len: Tensor | None = None) -> BlockMask:
        """The BlockMask over physical pages for ``block_mask`` over logical positions."""
        B, H, ROWS, MAX_BLOCKS = block_mask.kv_indices.shape  # noqa: N806
        if block_mask.BLOCK_SIZE[1] != self.page_size:
            raise EmberRuntimeError(
                f"[PagedAttention.convert_logical_block_mask] Expect block_mask has the same "
                f"column block size as page_sizebut got size={block_mask.BLOCK_SIZE[1]} and "
                f"size={self.page_size}")
        if batch_idx is None:
            batch_idx = arange(B)
        table = self.page_table[batch_idx]

        def convert(indices: Tensor) -> Tensor:
            out = zeros((B, H, ROWS, self.n_pages), dtype=dt.int32)
            mapped = table.gather(1, indices.reshape(B, -1).to(dt.int64))
            out[:, :, :, :MAX_BLOCKS] = mapped.view(*indices.shape).to(dt.int32)
            return out

        full_num = full_idx = None
        if block_mask.full_kv_num_blocks is not None:
            if block_mask.full_kv_indices is None:
                raise AssertionError("block_mask.full_kv_indices must not be None when "
                                     "full_kv_num_blocks is not None")
            full_num = block_mask.full_kv_num_blocks.clone()
            full_idx = convert(block_mask.full_kv_indices)
        return BlockMask.from_kv_blocks(
            block_mask.kv_num_blocks.clone(), convert(block_mask.kv_indices), full_num, full_idx,
            block_mask.BLOCK_SIZE, self.get_mask_mod(block_mask.mask_mod, kv_len),
            seq_lengths=(block_mask.seq_lengths[0], self.n_pages * self.page_size))

    def _logical(self, b: Tensor, physical_kv_idx: Tensor, kv_len: Tensor | None) -> tuple:
        """(logical key index, whether it is a live position of sequence ``b``)."""
        block = physical_kv_idx // self.page_size
        logical_block = self.physical_to_logical[b, block]
        logical = logical_block * self.page_size + physical_kv_idx % self.page_size
        valid = (logical_block >= 0) & (logical >= 0)
        if kv_len is not None:
            valid = valid & (logical < kv_len[b])
        return logical, valid

    def get_mask_mod(self, mask_mod: Callable | None, kv_len: Tensor | None = None
                     ) -> Callable:
        """``mask_mod`` over logical positions as a mask_mod over physical ones."""
        mask_mod = noop_mask if mask_mod is None else mask_mod

        def new_mask_mod(b: Tensor, h: Tensor, q_idx: Tensor, physical_kv_idx: Tensor
                         ) -> Tensor:
            logical, valid = self._logical(b, physical_kv_idx, kv_len)
            return where(valid, mask_mod(b, h, q_idx, logical), False)

        return new_mask_mod

    def get_score_mod(self, score_mod: Callable | None, kv_len: Tensor | None = None
                      ) -> Callable:
        """``score_mod`` over logical positions as a score_mod over physical ones (-inf at
        positions that are not live)."""
        score_mod = _identity if score_mod is None else score_mod

        def new_score_mod(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor,
                          physical_kv_idx: Tensor) -> Tensor:
            logical, valid = self._logical(b, physical_kv_idx, kv_len)
            return where(valid, score_mod(score, b, h, q_idx, logical), float("-inf"))

        return new_score_mod
