"""Spatial transformer sampling (``ember.nn.functional``): ``affine_grid`` and ``grid_sample``
(4-D and 5-D input: bilinear (trilinear), nearest and 4-D bicubic modes, zeros / border /
reflection padding).

Both are compositions of ember ops (matmul; floor, clamp, gather, masks), following ATen's
``GridSampler.h`` formulas (``grid_sampler_unnormalize``, ``clip_coordinates``,
``reflect_coordinates``, the four corner weights), so gradients with respect to the input and
the grid come from autograd and the functions compile.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

from ember._frontend.core import check_tensor
from ember._frontend.creation import linspace, ones
from ember._frontend.movement import stack
from ember.errors import (
    DTypeRuntimeError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberValueError,
)
from ember.tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]

_DEFAULT_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details.")


def _base_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    """ATen's ``linspace_from_neg_one``: pixel centres in [-1, 1] coordinates."""
    if n <= 1:
        return linspace(0, 0, 1, dtype=like.dtype)
    r = linspace(-1, 1, n, dtype=like.dtype)
    return r if align_corners else r * ((n - 1) / n)


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """The sampling grid ``(N, H, W, 2)`` of the affine maps ``theta`` ``(N, 2, 3)`` for an
    output of ``size`` ``(N, C, H, W)``; ``(N, 3, 4)`` and ``(N, C, D, H, W)`` give
    ``(N, D, H, W, 3)``.

    >>> F.affine_grid(ember.eye(2, 3)[None], (1, 1, 2, 2), align_corners=False).shape
    ember.Size([1, 2, 2, 2])
    """
    check_tensor(theta, "affine_grid", "theta")
    if align_corners is None:
        warnings.warn(_DEFAULT_WARNING, UserWarning, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise EmberValueError(f"[affine_grid] Expected theta to have floating point type, but got "
                              f"ember.{theta.dtype.name}")
    size = [int(s) for s in size]
    d = len(size) - 2
    if d not in (2, 3):
        raise EmberNotImplementedError(
            f"[affine_grid] affine_grid only supports 4D and 5D sizes, for 2D and 3D affine "
            f"transforms, respectively. Got size {size}.")
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (d, d + 1):
        raise EmberValueError(
            f"[affine_grid] Expected a batch of {d}D affine matrices of shape Nx{d}x{d + 1} for "
            f"size {size}. Got {list(theta.shape)}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      UserWarning, stacklevel=2)
    elif min(size) <= 0:
        raise EmberValueError(f"[affine_grid] Expected non-zero, positive output size. Got "
                              f"{size}")
    # coordinates in (x, y[, z]) order: x runs over the last dim
    axes = [_base_coords(n, align_corners, theta) for n in reversed(spatial)]
    shape = list(reversed(spatial))
    cols = []
    for i, a in enumerate(axes):
        view = [1] * d
        view[d - 1 - i] = shape[i]
        cols.append(a.reshape(view).expand(*spatial))
    cols.append(ones(*spatial, dtype=theta.dtype))
    base = stack(cols, -1).reshape(1, -1, d + 1)
    grid = base @ theta.transpose(1, 2)
    return grid.reshape([size[0]] + spatial + [d])


# ---------------------------------------------------------------------------- grid_sample
def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    if twice_low == twice_high:
        return coord * 0
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    c = (coord - low).abs()
    extra = c.fmod(span)
    flips = (c / span).floor()
    even = flips.remainder(2) == 0
    return (extra + low).where(even, span - extra + low)


def _source(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """ATen's ``grid_sampler_compute_source_index``."""
    return _bounded(_unnormalize(coord, size, align_corners), size, padding_mode, align_corners)


def _bounded(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """ATen's ``compute_coordinates``: clip (border) or reflect and clip (reflection)."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        coord = (_reflect(coord, 0, 2 * (size - 1)) if align_corners
                 else _reflect(coord, -1, 2 * size - 1))
        return coord.clamp(0, size - 1)
    return coord


def _corner(flat: Tensor, coords: list, sizes: list) -> Tensor:
    """``input[n, :, ..., iy, ix]`` at integer-valued float coordinates ``coords`` (x first,
    each (N, L)) in an image of spatial ``sizes`` (x first); zero outside the image."""
    inside = None
    idx = None
    for cx, size in zip(reversed(coords), reversed(sizes)):  # outermost dim first
        ok = (cx >= 0) & (cx <= size - 1)
        inside = ok if inside is None else inside & ok
        cl = cx.clamp(0, size - 1)
        idx = cl if idx is None else idx * size + cl
    idx = idx.long()
    n, c = flat.shape[:2]
    vals = flat.gather(2, idx.unsqueeze(1).expand(n, c, idx.shape[1]))
    return vals * inside.unsqueeze(1).to(flat.dtype)


def _cubic_coeffs(t: Tensor) -> list:
    """ATen's ``get_cubic_upsample_coefficients`` (A = -0.75)."""
    a = -0.75

    def near(x: Tensor) -> Tensor:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Tensor) -> Tensor:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far((1 - t) + 1)]


def _bicubic(flat: Tensor, g: Tensor, sizes: list, padding_mode: str,
             align_corners: bool) -> Tensor:
    """ATen's bicubic grid sampling: 4 x 4 taps around ``floor``, each tap's coordinates
    bounded by the padding mode (zero outside for ``zeros``), rows then columns."""
    w, h = sizes
    ix = _unnormalize(g[..., 0], w, align_corners)
    iy = _unnormalize(g[..., 1], h, align_corners)
    x0, y0 = ix.floor().detach(), iy.floor().detach()
    cx, cy = _cubic_coeffs(ix - x0), _cubic_coeffs(iy - y0)
    xs = [_bounded(x0 + (j - 1), w, padding_mode, align_corners) for j in range(4)]
    out = None
    for i in range(4):
        yi = _bounded(y0 + (i - 1), h, padding_mode, align_corners)
        row = None
        for j in range(4):
            term = _corner(flat, [xs[j], yi], sizes) * cx[j].unsqueeze(1)
            row = term if row is None else row + term
        term = row * cy[i].unsqueeze(1)
        out = term if out is None else out + term
    return out


def _check_grid_sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> None:
    check_tensor(input, "grid_sample")
    check_tensor(grid, "grid_sample", "grid")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise EmberValueError(f"[grid_sample] nn.functional.grid_sample(): expected mode to be "
                              f"'bilinear', 'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise EmberValueError(f"[grid_sample] nn.functional.grid_sample(): expected "
                              f"padding_mode to be 'zeros', 'border', or 'reflection', but got: "
                              f"'{padding_mode}'")
    if input.dtype is not grid.dtype:
        raise DTypeRuntimeError(f"[grid_sample] grid_sampler(): expected grid and input to have "
                                f"same dtype, but input has ember.{input.dtype.name} and grid "
                                f"has ember.{grid.dtype.name}")
    if input.ndim not in (4, 5) or input.ndim != grid.ndim:
        raise EmberRuntimeError(
            f"[grid_sample] grid_sampler(): expected 4D or 5D input and grid with same number "
            f"of dimensions, but got input with sizes {list(input.shape)} and grid with sizes "
            f"{list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise EmberRuntimeError(
            f"[grid_sample] grid_sampler(): expected grid and input to have same batch size, "
            f"but got input with sizes {list(input.shape)} and grid with sizes "
            f"{list(grid.shape)}")
    if grid.shape[-1] != input.ndim - 2:
        raise EmberRuntimeError(
            f"[grid_sample] grid_sampler(): expected grid to have size {input.ndim - 2} in last "
            f"dimension, but got grid with sizes {list(grid.shape)}")


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Any:
    """Sample ``input`` ``(N, C, H, W)`` at the normalized ``(x, y)`` positions of ``grid``
    ``(N, Ho, Wo, 2)`` (-1 and 1 are the image's edges, or its corner pixels' centres with
    ``align_corners=True``); 5-D input ``(N, C, D, H, W)`` takes a grid ``(N, Do, Ho, Wo, 3)``.
    Modes ``bilinear``, ``nearest`` and (4-D) ``bicubic``; padding ``zeros``, ``border``,
    ``reflection``.

    >>> g = F.affine_grid(ember.eye(2, 3)[None], (1, 1, 3, 3), align_corners=False)
    >>> F.grid_sample(ember.ones(1, 1, 3, 3), g, align_corners=False).shape
    ember.Size([1, 1, 3, 3])
    """
    _check_grid_sample(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_DEFAULT_WARNING, UserWarning, stacklevel=2)
        align_corners = False
    if mode == "bicubic" and input.ndim != 4:
        raise EmberRuntimeError("[grid_sample] grid_sampler(): bicubic interpolation only "
                                "supports 4D input")
    n, c = input.shape[:2]
    spatial = list(input.shape[2:])
    out_spatial = list(grid.shape[1:-1])
    d = len(spatial)
    g = grid.reshape(n, -1, d)
    sizes = spatial[::-1]  # (W, H[, D]): grid coordinates are (x, y[, z])
    flat = input.reshape(n, c, -1)
    if mode == "bicubic":
        out = _bicubic(flat, g, sizes, padding_mode, align_corners)
        return out.reshape([n, c] + out_spatial)
    coords = [_source(g[..., i], sizes[i], padding_mode, align_corners) for i in range(d)]
    if mode == "nearest":
        r = [x.round() for x in coords]
        out = _corner(flat, [x.detach() for x in r], sizes)
        # PyTorch's nearest sampling has a zero gradient for the grid (not none): connect the
        # grid through round (whose gradient is zero), clamped so an infinite grid stays finite
        link = sum(x.clamp(-1, 1) for x in r) * 0
        return (out + link.unsqueeze(1)).reshape([n, c] + out_spatial)
    lows = [x.floor().detach() for x in coords]
    out = None
    # ATen's corner order (nw, ne, sw, se; top before bottom) and weights, e.g.
    # nw = (x_se - x) * (y_se - y): the x factor first
    for bits in range(1 << d):
        pick = [(bits >> i) & 1 for i in range(d)]  # x bit varies fastest
        corner = [lo + 1 if b else lo for lo, b in zip(lows, pick)]
        wt = None
        for x, lo, b in zip(coords, lows, pick):
            f = x - lo if b else (lo + 1) - x
            wt = f if wt is None else wt * f
        term = _corner(flat, corner, sizes) * wt.unsqueeze(1)
        out = term if out is None else out + term
    return out.reshape([n, c] + out_spatial)
