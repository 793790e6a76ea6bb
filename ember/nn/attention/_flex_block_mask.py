"""``BlockMask`` and the mask helpers of ``ember.nn.attention.flex_attention``.

A ``BlockMask`` is PyTorch's block-sparse (BCSR-like) description of which (q block, kv block)
tiles attention visits: ``kv_num_blocks[b, h, i]`` partial blocks ``kv_indices[b, h, i, :n]``
(``mask_mod`` applied) and ``full_kv_*`` fully-kept blocks (``mask_mod`` skipped), plus the
transposed q-side lists for the backward.  The tensors are int32, laid out exactly as PyTorch's.

``create_block_mask`` evaluates ``mask_mod`` one tile at a time with broadcastable index tensors
(``b`` (B,1,1,1), ``h`` (1,H,1,1), ``q_idx`` (1,1,Lq,1), ``kv_idx`` (1,1,1,Lk), int32), so the
dense ``Q_LEN x KV_LEN`` mask is never built.  PyTorch calls ``mask_mod`` under ``vmap`` on 0-d
tensors; broadcasting gives the same values for the elementwise functions masks are written with.
"""

# PyTorch's API names (B, H, Q_LEN, BLOCK_SIZE) and shape letters are kept as they are.
# ruff: noqa: N803, N806

from __future__ import annotations

import functools
import itertools
import operator
import warnings
from typing import Any, Callable

import numpy as np

from ember import dtypes as dt
from ember._frontend.core import broadcast_shapes
from ember._frontend.creation import arange, from_numpy, zeros
from ember._frontend.pointwise_logic import isneginf, logical_not
from ember.errors import EmberRuntimeError, EmberValueError, ShapeError
from ember.tensor import Tensor

_score_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]
_mask_mod_signature = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30
# how many mask elements one create_block_mask step evaluates at most (memory bound)
_MASK_TILE_ELEMENTS = 1 << 20


def noop_mask(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor) -> Tensor:
    """Returns a noop mask_mod (keeps everything)."""
    return batch.new_ones(size=(), dtype=dt.bool)


def _sliced_mask_mod_error(batch: Tensor, head: Tensor, token_q: Tensor, token_kv: Tensor):
    raise EmberRuntimeError(
        "[BlockMask] Cannot use mask_mod from a sliced BlockMask. When you slice a BlockMask "
        "using [], the mask_mod attribute is reset; set it from the original BlockMask's "
        "mask_mod.")


def or_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """Returns a mask_mod that's the union of provided mask_mods.

    Example: ``or_masks(causal, prefix_lm)``.
    """
    if not all(callable(arg) for arg in mask_mods):
        raise EmberRuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_zeros((), dtype=dt.bool)
        for mask in mask_mods:
            result = result | mask(b, h, q_idx, kv_idx)
        return result

    return or_mask


def and_masks(*mask_mods: _mask_mod_signature) -> _mask_mod_signature:
    """Returns a mask_mod that's the intersection of provided mask_mods.

    Example: ``and_masks(causal, sliding_window)``.
    """
    if not all(callable(arg) for arg in mask_mods):
        raise EmberRuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        result = b.new_ones((), dtype=dt.bool)
        for mask in mask_mods:
            result = result & mask(b, h, q_idx, kv_idx)
        return result

    return and_mask


def _num_positional(fn: Callable) -> int:
    code = getattr(fn, "__code__", None)
    if code is not None:
        return code.co_argcount - len(getattr(fn, "__defaults__", None) or ())
    import inspect
    return sum(1 for p in inspect.signature(fn).parameters.values()
               if p.default is inspect.Parameter.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _idx(n0: int, n: int, dim: int) -> Tensor:
    shape = [1, 1, 1, 1]
    shape[dim] = n
    return arange(n0, n0 + n, dtype=dt.int32).view(*shape)


def _eval_mod(fn: Callable, op: str, tile: tuple[int, ...], args: tuple) -> Tensor:
    """Call a score_mod/mask_mod on broadcastable index tensors; check the result's shape."""
    out = fn(*args)
    if not isinstance(out, Tensor):
        raise EmberRuntimeError(f"[{op}] the function must return a Tensor; got {type(out)}")
    try:
        ok = tuple(broadcast_shapes(op, tuple(out.shape), tile)) == tile
    except Exception:  # noqa: BLE001 - any broadcast failure is reported below
        ok = False
    if not ok:
        raise ShapeError(
            f"[{op}] {getattr(fn, '__name__', fn)} returned shape {tuple(out.shape)}, which does "
            f"not broadcast to the tile {tile}. ember evaluates score_mod/mask_mod once per tile "
            "with index tensors b (B,1,1,1), h (1,H,1,1), q_idx (1,1,Lq,1), kv_idx (1,1,1,Lk); "
            "write them with elementwise tensor ops (torch.where, +, indexing a captured table).")
    return out


def create_mask(mod_fn: Callable, B: int | None, H: int | None, Q_LEN: int, KV_LEN: int,
                device: Any = None) -> Tensor:
    """Dense ``(B, H, Q_LEN, KV_LEN)`` bool mask of a mask_mod (or of a score_mod: kept where
    the modified score of 0 is not -inf).

    Example: ``create_mask(lambda b, h, q, kv: q >= kv, 1, 1, 4, 4)``.
    """
    B = 1 if B is None else B
    H = 1 if H is None else H
    tile = (B, H, Q_LEN, KV_LEN)
    idx = (_idx(0, B, 0), _idx(0, H, 1), _idx(0, Q_LEN, 2), _idx(0, KV_LEN, 3))
    n = _num_positional(mod_fn)
    if n == 5:
        out = _eval_mod(mod_fn, "create_mask", tile, (zeros(tile),) + idx)
        return logical_not(isneginf(out)).expand(*tile).contiguous()
    if n == 4:
        return _eval_mod(mod_fn, "create_mask", tile, idx).to(dt.bool).expand(*tile).contiguous()
    raise EmberValueError(f"[create_mask] expected 4 or 5 positional args, got {n}")


def _dense_to_ordered(dense: np.ndarray) -> tuple[Tensor, Tensor]:
    """Per row: the count of set blocks and the column order PyTorch uses (set blocks first in
    ascending order, then the unset ones, as a stable descending argsort of the 0/1 row)."""
    dense = dense.astype(np.int32)
    num = dense.sum(axis=-1).astype(np.int32)
    cols = np.argsort(-dense, axis=-1, kind="stable").astype(np.int32)
    return from_numpy(np.ascontiguousarray(num)), from_numpy(np.ascontiguousarray(cols))


def _ordered_to_dense_np(num: Tensor, indices: Tensor, num_cols: int) -> np.ndarray:
    num_np, idx_np = num.numpy(), indices.numpy()
    valid = np.arange(idx_np.shape[-1]) < num_np[..., None]
    dense = np.zeros(idx_np.shape[:-1] + (num_cols + 1,), np.int32)
    cols = np.where(valid, idx_np, num_cols)
    np.put_along_axis(dense, cols.astype(np.int64), 1, axis=-1)
    return dense[..., :num_cols]


def _transpose_ordered(num: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
    dense = _ordered_to_dense_np(num, indices, indices.shape[-1])
    return _dense_to_ordered(np.swapaxes(dense, -2, -1))


def _adjust_num_blocks_and_indices(num: Tensor, indices: Tensor, rows: int, cols: int):
    idx = indices.numpy()[:, :, :rows, :cols]
    n = np.minimum(num.numpy()[:, :, :rows], cols)
    n = (idx < n[..., None]).sum(-1).astype(np.int32)
    return from_numpy(np.ascontiguousarray(n)), from_numpy(np.ascontiguousarray(idx))


class BlockMask:
    """Block-sparse attention mask (PyTorch's layout; see the module docstring).

    Example::

        bm = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, 512, 512)
        bm.kv_num_blocks.shape   # (1, 1, 4)
        print(bm)                # block diagram
    """

    _TENSOR_ATTRS = ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                     "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"]

    def __init__(self, seq_lengths: tuple[int, int], kv_num_blocks: Tensor, kv_indices: Tensor,
                 full_kv_num_blocks: Tensor | None, full_kv_indices: Tensor | None,
                 q_num_blocks: Tensor | None, q_indices: Tensor | None,
                 full_q_num_blocks: Tensor | None, full_q_indices: Tensor | None,
                 BLOCK_SIZE: tuple[int, int] = (_DEFAULT_SPARSE_BLOCK_SIZE,
                                                _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod: _mask_mod_signature = noop_mask) -> None:
        if kv_indices.dim() < 2:
            raise EmberRuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError(
                "full_q_num_blocks and full_q_indices must be both provided or omitted")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks = kv_num_blocks
        self.kv_indices = kv_indices
        self.full_kv_num_blocks = full_kv_num_blocks
        self.full_kv_indices = full_kv_indices
        self.q_num_blocks = q_num_blocks
        self.q_indices = q_indices
        self.full_q_num_blocks = full_q_num_blocks
        self.full_q_indices = full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks: Tensor, kv_indices: Tensor,
                       full_kv_num_blocks: Tensor | None = None,
                       full_kv_indices: Tensor | None = None,
                       BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod: _mask_mod_signature | None = None,
                       seq_lengths: tuple[int, int] | None = None,
                       compute_q_blocks: bool = True) -> BlockMask:
        """BlockMask from the kv-side lists; the q-side (transposed) lists are computed."""
        if kv_indices.dim() < 2:
            raise EmberRuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError(
                "full_kv_num_blocks and full_kv_indices must be both provided or omitted")
        q_num = q_idx = full_q_num = full_q_idx = None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num, full_q_idx = _transpose_ordered(full_kv_num_blocks, full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                   q_num, q_idx, full_q_num, full_q_idx, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten: bool = True) -> tuple[Any, ...]:
        """The fields as a tuple (``flatten`` splits seq_lengths and BLOCK_SIZE)."""
        block = tuple(self.BLOCK_SIZE) if flatten else (self.BLOCK_SIZE,)
        seq = tuple(self.seq_lengths) if flatten else (self.seq_lengths,)
        return (*seq, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices, self.full_q_num_blocks,
                self.full_q_indices, *block, self.mask_mod)

    @property
    def shape(self) -> tuple[int, ...]:
        *batch_dims, _, _ = self.kv_indices.shape
        return tuple(batch_dims) + tuple(self.seq_lengths)

    def numel(self) -> int:
        """Number of elements of the (unsparsified) mask."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """Percent of blocks skipped (PyTorch's formula: it counts whole blocks, so a length
        that is not a multiple of the block size can give a negative number)."""
        computed = int(self.kv_num_blocks.numpy().sum())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.numpy().sum())
        computed_size = computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - computed_size / self.numel())

    def _dense_np(self) -> np.ndarray:
        dense = _ordered_to_dense_np(self.kv_num_blocks, self.kv_indices,
                                     self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense_np(self.full_kv_num_blocks, self.full_kv_indices,
                                                 self.full_kv_indices.shape[-1])
        return dense

    def to_dense(self) -> Tensor:
        """Block-level 0/1 int32 matrix ``[..., num_q_blocks, num_kv_blocks]``."""
        return from_numpy(np.ascontiguousarray(self._dense_np()))

    def to_string(self, grid_size: int | tuple[int, int] = (20, 20), limit: int = 4) -> str:
        """Text block diagram (█ computed, ░ partly, blank skipped), as PyTorch prints it."""
        dense = self._dense_np()
        *batch_dims, rows, cols = dense.shape
        if isinstance(grid_size, int) and grid_size == -1:
            max_rows, max_cols = rows, cols
        elif isinstance(grid_size, int):
            max_rows = max_cols = grid_size
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-rows // max_rows))
        col_step = max(1, -(-cols // max_cols))

        def char(section: np.ndarray) -> str:
            frac = section.astype(np.float32).mean()
            return "█" if frac == 1 else (" " if frac == 0 else "░")

        out = []
        for n, batch_idx in enumerate(itertools.product(*[range(i) for i in batch_dims])):
            if n == limit:
                out += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                        "You can also index (BlockMask[batch, head]) to choose a specific batch "
                        "or head"]
                break
            cur = dense[batch_idx]
            vis = f"{batch_idx}\n"
            for r in range(0, rows, row_step):
                for c in range(0, cols, col_step):
                    vis += char(cur[r:r + row_step, c:c + col_step]) * 2
                vis += "\n"
            out.append(vis)
        return "\n".join(out)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        def shp(x: Tensor | None) -> Any:
            return x.shape if x is not None else None

        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return ("BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shp(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shp(self.full_kv_indices)},\n"
                f"    q_num_blocks={shp(self.q_num_blocks)},\n"
                f"    q_indices={shp(self.q_indices)},\n"
                f"    full_q_num_blocks={shp(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shp(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={name}\n)")

    def __getitem__(self, index: Any) -> BlockMask:
        """Index batch / head / q-block dims; the result's mask_mod raises until reassigned."""
        index = index if isinstance(index, tuple) else (index,)
        padded = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple((slice(i + n, i + n + 1) if -n <= i < 0 else slice(i, i + 1))
                      if isinstance(i, int) else i for i, n in zip(padded, sizes))
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None:
            full_num = self.full_kv_num_blocks[index]
            full_idx = self.full_kv_indices[index]
        return BlockMask.from_kv_blocks(
            self.kv_num_blocks[index], self.kv_indices[index], full_num, full_idx,
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _adjust(self, new_q_len: int, new_kv_len: int) -> BlockMask:
        """Crop to the upper-left ``(new_q_len, new_kv_len)`` corner (not right for every
        mask_mod, as in PyTorch)."""
        rows = -(-new_q_len // self.BLOCK_SIZE[0])
        cols = -(-new_kv_len // self.BLOCK_SIZE[1])
        num, idx = _adjust_num_blocks_and_indices(self.kv_num_blocks, self.kv_indices, rows, cols)
        full_num = full_idx = None
        if self.full_kv_num_blocks is not None:
            full_num, full_idx = _adjust_num_blocks_and_indices(
                self.full_kv_num_blocks, self.full_kv_indices, rows, cols)
        return self.from_kv_blocks(num, idx, full_num, full_idx, BLOCK_SIZE=self.BLOCK_SIZE,
                                   mask_mod=self.mask_mod, seq_lengths=(new_q_len, new_kv_len),
                                   compute_q_blocks=self.q_indices is not None)

    def to(self, device: Any) -> BlockMask:
        """A new BlockMask with every tensor moved to ``device``."""
        moved = {a: (getattr(self, a).to(device) if getattr(self, a) is not None else None)
                 for a in self._TENSOR_ATTRS}
        return BlockMask(self.seq_lengths, **moved, BLOCK_SIZE=self.BLOCK_SIZE,
                         mask_mod=self.mask_mod)


def _tile_counts(mask_mod: Callable, B: int, H: int, q0: int, lq: int, Q_LEN: int,
                 KV_LEN: int, QB: int, KB: int) -> np.ndarray:
    """Kept-element counts of the blocks of q rows [q0, q0+lq) x all kv blocks: (B,H,nq,nkv)."""
    nkv = -(-KV_LEN // KB)
    counts = np.zeros((B, H, lq // QB if lq % QB == 0 else -(-lq // QB), nkv), np.int64)
    step = max(KB, (_MASK_TILE_ELEMENTS // max(1, B * H * lq)) // KB * KB)
    b, h = _idx(0, B, 0), _idx(0, H, 1)
    lq_real = min(lq, Q_LEN - q0)
    qi = _idx(q0, lq_real, 2)
    for k0 in range(0, KV_LEN, step):
        lk = min(step, KV_LEN - k0)
        tile = (B, H, lq_real, lk)
        keep = _eval_mod(mask_mod, "create_block_mask", tile, (b, h, qi, _idx(k0, lk, 3)))
        keep = np.broadcast_to(keep.numpy().astype(bool), tile)
        pad_q, pad_k = -lq_real % QB, -lk % KB
        if pad_q or pad_k:  # padding counts as masked, as PyTorch pads the dense mask
            keep = np.pad(keep, ((0, 0), (0, 0), (0, pad_q), (0, pad_k)))
        blocks = keep.reshape(B, H, keep.shape[2] // QB, QB, keep.shape[3] // KB, KB)
        counts[:, :, :, k0 // KB:(k0 + lk + KB - 1) // KB] = blocks.sum(axis=(3, 5))
    return counts


def create_block_mask(mask_mod: _mask_mod_signature, B: int | None, H: int | None, Q_LEN: int,
                      KV_LEN: int, device: Any = None,
                      BLOCK_SIZE: int | tuple[int, int] = _DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile: bool = False, separate_full_blocks: bool = True) -> BlockMask:
    """Build a BlockMask from a mask_mod, one tile at a time (never the dense mask).

    Example::

        def causal(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx
        bm = create_block_mask(causal, None, None, 1024, 1024, device="cpu")
    """
    if _compile:
        warnings.warn(
            "_compile flag on create_block_mask was originally added to work around a "
            "torch.compile limitation. That limitation has since been addressed. So, to compile "
            "create_block_mask, we suggest doing torch.compile(create_block_mask). This still "
            "works for now, but will be removed in the future.", DeprecationWarning, stacklevel=2)
    n = _num_positional(mask_mod)
    if n != 4:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}"
                             if n == 5 else f"Expected 4 or 5 positional args, got {n}")
    B = 1 if B is None else B
    H = 1 if H is None else H
    QB, KB = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else BLOCK_SIZE
    nq = -(-Q_LEN // QB)
    rows_per_step = max(1, _MASK_TILE_ELEMENTS // max(1, B * H * QB * KB * 8))
    counts = np.concatenate([
        _tile_counts(mask_mod, B, H, i * QB, min(rows_per_step, nq - i) * QB, Q_LEN, KV_LEN,
                     QB, KB)
        for i in range(0, nq, rows_per_step)], axis=2) if nq else np.zeros((B, H, 0, 0), np.int64)
    if separate_full_blocks:
        full = counts == QB * KB
        partial = (counts > 0) & ~full
        full_num, full_idx = _dense_to_ordered(full)
    else:
        partial, full_num, full_idx = counts > 0, None, None
    num, idx = _dense_to_ordered(partial)
    return BlockMask.from_kv_blocks(num, idx, full_num, full_idx, BLOCK_SIZE=(QB, KB),
                                    mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))
