"""Structure primitives: the triangular masks ``tril``/``triu`` (zero the elements above or
below a diagonal of the last two dims).  Everything else of the structure family (diag, kron,
rot90, repeat_interleave, ...) is composed in ``ember/_frontend/structure.py``."""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError
from ember.ops.registry import OpDef, bind, register


def _tri_meta(x, *, diagonal: int) -> tuple:  # noqa: ANN001
    if len(x.shape) < 2:
        raise ShapeError(f"[tri] input tensor must have at least 2 dimensions; got shape "
                         f"{tuple(x.shape)}")
    return tuple(x.shape), x.dtype


def _tri_mask(shape: tuple, diagonal: int, upper: bool) -> np.ndarray:
    """Boolean (rows, cols) mask of the kept elements."""
    r, c = shape[-2], shape[-1]
    d = np.arange(c)[None, :] - np.arange(r)[:, None]  # column minus row
    return d >= diagonal if upper else d <= diagonal


def _tri_eager(upper: bool):  # noqa: ANN202
    def kernel(x: np.ndarray, *, diagonal: int) -> np.ndarray:
        keep = _tri_mask(x.shape, diagonal, upper)
        # one vectorised select; the zero is of x's dtype so bool/bfloat16 stay as they are
        return np.where(keep, x, np.zeros((), x.dtype))
    return kernel


TRIL = register(OpDef(
    "tril", "movement", _tri_meta, _tri_eager(False),
    lambda ctx, g: (bind(TRIL, g, diagonal=ctx.params["diagonal"]),),
))

TRIU = register(OpDef(
    "triu", "movement", _tri_meta, _tri_eager(True),
    lambda ctx, g: (bind(TRIU, g, diagonal=ctx.params["diagonal"]),),
))
