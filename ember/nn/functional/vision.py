"""Resizing and rearranging images (``ember.nn.functional``): interpolate and the upsample
aliases, pixel_shuffle / pixel_unshuffle, fold / unfold.

``interpolate`` binds the separable resampling primitive of ``ember/ops/nn_resize.py``;
pixel (un)shuffle are a reshape-permute-reshape, and unfold/fold are compositions of padding,
strided slices and a stack (fold is their adjoint: a sum of strided slice assignments), so all
of them differentiate and compile through existing ops.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

from ember._frontend.core import check_tensor
from ember._frontend.creation import zeros
from ember._frontend.movement import stack
from ember.errors import (
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberTypeError,
    EmberValueError,
)
from ember.nn.functional.conv import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    not_implemented_for,
    pad,
)
from ember.ops import nn_resize as R
from ember.ops.registry import bind
from ember.tensor import Tensor

__all__ = ["fold", "interpolate", "pixel_shuffle", "pixel_unshuffle", "unfold", "upsample",
           "upsample_bilinear", "upsample_nearest"]

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
# mode -> (number of spatial dims, resample mode)
_INTERP = {"linear": (1, "linear"), "bilinear": (2, "linear"), "trilinear": (3, "linear"),
           "bicubic": (2, "cubic")}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) or (hasattr(v, "__index__") and not isinstance(v, float))


def _output_size(input: Tensor, size: Any, scale_factor: Any, recompute: bool | None) -> tuple:
    """(output sizes, scales handed to the kernel) as PyTorch's ``interpolate`` computes them."""
    dim = input.ndim - 2
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise EmberValueError("[interpolate] only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise EmberValueError(
                "[interpolate] recompute_scale_factor is not meaningful with an explicit size.")
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise EmberValueError(
                    f"[interpolate] Input and output must have the same number of spatial "
                    f"dimensions, but got input with spatial dimensions of {spatial} and output "
                    f"size of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                    f"format and output size in (o1, o2, ...,oK) format.")
            sizes = tuple(size)
        else:
            sizes = (size,) * dim
        if not all(_is_int(s) for s in sizes):
            raise EmberTypeError(
                f"[interpolate] expected size to be one of int or Tuple[int] or Tuple[int, int] "
                f"or Tuple[int, int, int], but got size with types "
                f"{[type(s) for s in sizes]}")
        return tuple(int(s) for s in sizes), (None,) * dim
    if scale_factor is None:
        raise EmberValueError("[interpolate] either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise EmberValueError(
                f"[interpolate] Input and scale_factor must have the same number of spatial "
                f"dimensions, but got input with spatial dimensions of {spatial} and "
                f"scale_factor of shape {list(scale_factor)}. Please provide input tensor in "
                f"(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
        scales = tuple(float(s) for s in scale_factor)
    else:
        scales = (float(scale_factor),) * dim
    sizes = tuple(math.floor(float(n) * s) for n, s in zip(spatial, scales))
    return sizes, ((None,) * dim if recompute else scales)


def _check_sizes(input: Tensor, sizes: tuple) -> None:
    if all(s > 0 for s in sizes) and all(n > 0 for n in input.shape[2:]):
        return
    names = "DHW"[3 - len(sizes):]
    sin = ", ".join(f"{a}: {n}" for a, n in zip(names, input.shape[2:]))
    sout = ", ".join(f"{a}: {n}" for a, n in zip(names, sizes))
    glue = " and" if len(sizes) == 1 else ""
    raise EmberRuntimeError(f"[interpolate] Input and output sizes should be greater than 0, but "
                            f"got input ({sin}){glue} output ({sout})")


def _wrong_dims(input: Tensor, mode: str) -> EmberNotImplementedError:
    if mode in _INTERP and mode != "bicubic" and 3 <= input.ndim <= 5:
        need = _INTERP[mode][0] + 2
        return EmberNotImplementedError(
            f"[interpolate] Got {input.ndim}D input, but {mode} mode needs {need}D input")
    return EmberNotImplementedError(
        f"[interpolate] Input Error: Only 3D, 4D and 5D input Tensors supported (got "
        f"{input.ndim}D) for the modes: {_MODES} (got {mode})")


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims of ``(N, C, *spatial)`` to ``size`` or by ``scale_factor``.

    Modes: ``nearest``, ``nearest-exact``, ``linear`` (3-D), ``bilinear``/``bicubic`` (4-D),
    ``trilinear`` (5-D), ``area`` (3-D/4-D); ``antialias=True`` for bilinear and bicubic.

    >>> F.interpolate(ember.ones(1, 1, 2, 2), scale_factor=2, mode="bilinear").shape
    ember.Size([1, 1, 4, 4])
    """
    check_tensor(input, "interpolate")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise EmberValueError(
                "[interpolate] align_corners option can only be set with the interpolating "
                "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if not 3 <= input.ndim <= 5:
        raise _wrong_dims(input, mode)
    sizes, scales = _output_size(input, size, scale_factor, recompute_scale_factor)
    if antialias:
        if not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
            raise EmberValueError(
                "[interpolate] Anti-alias option is restricted to bilinear, bicubic, and lanczos "
                "modes and requires a 4-D tensor as input")
    if mode == "area":
        if input.ndim == 3:
            return adaptive_avg_pool1d(input, sizes)
        if input.ndim == 4:
            return adaptive_avg_pool2d(input, sizes)
        kind = "area"  # 5-D: adaptive average pooling as separable taps
    elif mode in ("nearest", "nearest-exact"):
        kind = mode
    elif mode in _INTERP and _INTERP[mode][0] == input.ndim - 2:
        kind = _INTERP[mode][1] + ("_aa" if antialias else "")
    else:
        raise _wrong_dims(input, mode)
    _check_sizes(input, sizes)
    if input.dtype.name == "uint8" and input.ndim == 4 and kind[:5] in ("linea", "cubic"):
        raise EmberNotImplementedError(
            f"[interpolate] mode {mode!r} of uint8 input (PyTorch's fixed-point kernel) is not "
            f"implemented in ember; convert to float first")
    if not (input.dtype.is_floating_point or (input.dtype.name == "uint8"
                                              and kind.startswith("nearest"))):
        kernel = ("compute_indices_weights_nearest" if kind.startswith("nearest")
                  else f"compute_indices_weights_{kind}")
        raise not_implemented_for("interpolate", kernel, input.dtype)
    return bind(R.RESAMPLE, input, mode=kind, size=sizes, align_corners=bool(align_corners),
                scales=scales)


def _deprecated(name: str) -> None:
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  f"instead.", UserWarning, stacklevel=3)


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`interpolate` (kept, as in PyTorch)."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """``interpolate(..., mode="nearest")``."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """``interpolate(..., mode="bilinear", align_corners=True)``."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------------- pixel shuffle
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C*r*r, H, W) -> (*, C, H*r, W*r)``.

    >>> F.pixel_shuffle(ember.ones(1, 4, 2, 3), 2).shape
    ember.Size([1, 1, 4, 6])
    """
    check_tensor(input, "pixel_shuffle")
    r = int(upscale_factor)
    if input.ndim < 3:
        raise EmberRuntimeError(f"[pixel_shuffle] pixel_shuffle expects input to have at least "
                                f"3 dimensions, but got input with {input.ndim} dimension(s)")
    if r <= 0:
        raise EmberRuntimeError(f"[pixel_shuffle] pixel_shuffle expects a positive "
                                f"upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise EmberRuntimeError(
            f"[pixel_shuffle] pixel_shuffle expects its input's 'channel' dimension to be "
            f"divisible by the square of upscale_factor, but input.size(-3)={c} is not "
            f"divisible by {r * r}")
    k = len(lead)
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    x = x.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H*r, W*r) -> (*, C*r*r, H, W)``, the inverse of :func:`pixel_shuffle`.

    >>> F.pixel_unshuffle(ember.ones(1, 1, 4, 6), 2).shape
    ember.Size([1, 4, 2, 3])
    """
    check_tensor(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if input.ndim < 3:
        raise EmberRuntimeError(f"[pixel_unshuffle] pixel_unshuffle expects input to have at "
                                f"least 3 dimensions, but got input with {input.ndim} "
                                f"dimension(s)")
    if r <= 0:
        raise EmberRuntimeError(f"[pixel_unshuffle] pixel_unshuffle expects a positive "
                                f"downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    for name, n, d in (("height", h, -2), ("width", w, -1)):
        if n % r:
            raise EmberRuntimeError(
                f"[pixel_unshuffle] pixel_unshuffle expects {name} to be divisible by "
                f"downscale_factor, but input.size({d})={n} is not divisible by {r}")
    k = len(lead)
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    x = x.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))


# ---------------------------------------------------------------------------- fold / unfold
def _pair(v: Any, name: str, op: str) -> tuple:
    t = tuple(int(i) for i in v) if isinstance(v, (list, tuple)) else (int(v),) * 2
    if len(t) == 1:
        t = t * 2
    if len(t) != 2:
        raise EmberRuntimeError(f"[{op}] {name} must be an int or a pair of ints; got {v}")
    return t


def _fold_args(op: str, kernel_size: Any, dilation: Any, padding: Any, stride: Any) -> tuple:
    k, d = _pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op)
    p, s = _pair(padding, "padding", op), _pair(stride, "stride", op)
    for name, v, low in (("kernel", k, 1), ("stride", s, 1), ("dilation", d, 1),
                         ("padding", p, 0)):
        if min(v) < low:
            rel = "greater than zero" if low else "non-negative"
            raise EmberRuntimeError(f"[{op}] {name} should be {rel}, but got {name}_height: "
                                    f"{v[0]} {name}_width: {v[1]}")
    return k, d, p, s


def _blocks(op: str, spatial: tuple, k: tuple, d: tuple, p: tuple, s: tuple) -> tuple:
    out = tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                for n, kk, dd, pp, ss in zip(spatial, k, d, p, s))
    if min(out) < 1:
        raise EmberRuntimeError(
            f"[{op}] Given input with spatial size {tuple(spatial)}, kernel_size={k}, "
            f"dilation={d}, padding={p}, calculated shape of the array of sliding blocks as "
            f"{out}, but its components must be at least one.")
    return out


def _window(i: int, j: int, d: tuple, s: tuple, out: tuple) -> tuple:
    """The strided slice of the padded input read by kernel offset (i, j)."""
    return (slice(i * d[0], i * d[0] + s[0] * (out[0] - 1) + 1, s[0]),
            slice(j * d[1], j * d[1] + s[1] * (out[1] - 1) + 1, s[1]))


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """Extract sliding blocks (im2col): ``(N, C, H, W) -> (N, C*kh*kw, L)``; an unbatched
    ``(C, H, W)`` gives ``(C*kh*kw, L)``.

    >>> F.unfold(ember.ones(1, 2, 4, 4), 2).shape
    ember.Size([1, 8, 9])
    """
    check_tensor(input, "unfold")
    if input.ndim not in (3, 4):
        raise EmberIndexError(f"[unfold] Input Error: only 3D (unbatched) or 4D (batched) input "
                              f"tensors are supported (got {input.ndim}D)")
    k, d, p, s = _fold_args("unfold", kernel_size, dilation, padding, stride)
    x = input if input.ndim == 4 else input.reshape((1,) + tuple(input.shape))
    n, c, h, w = x.shape
    out = _blocks("unfold", (h, w), k, d, p, s)
    if p[0] or p[1]:
        x = pad(x, (p[1], p[1], p[0], p[0]))
    cols = [x[(slice(None), slice(None)) + _window(i, j, d, s, out)]
            for i in range(k[0]) for j in range(k[1])]
    y = cols[0].unsqueeze(2) if len(cols) == 1 else _stack(cols)
    y = y.reshape(n, c * k[0] * k[1], out[0] * out[1])
    return y if input.ndim == 4 else y.reshape(tuple(y.shape[1:]))


def _stack(ts: Sequence[Tensor]) -> Tensor:
    return stack(list(ts), 2)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Tensor:
    """Sum sliding blocks back into an image (col2im), the adjoint of :func:`unfold`:
    ``(N, C*kh*kw, L) -> (N, C, *output_size)``; an unbatched ``(C*kh*kw, L)`` gives
    ``(C, *output_size)``.

    >>> F.fold(ember.ones(1, 8, 9), (4, 4), 2).shape
    ember.Size([1, 2, 4, 4])
    """
    check_tensor(input, "fold")
    if input.ndim not in (2, 3) or 0 in tuple(input.shape[input.ndim - 2:]):
        raise EmberRuntimeError(
            f"[fold] Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size "
            f"and non-zero dimensions for input, but got: {list(input.shape)}")
    size = _pair(output_size, "output_size", "fold")
    k, d, p, s = _fold_args("fold", kernel_size, dilation, padding, stride)
    x = input if input.ndim == 3 else input.reshape((1,) + tuple(input.shape))
    n, ck, nl = x.shape
    if ck % (k[0] * k[1]):
        raise EmberRuntimeError(
            f"[fold] Expected size of input's dimension 1 to be divisible by the product of "
            f"kernel_size, but got input.size(1)={ck} and kernel_size={k}.")
    out = tuple((n_ + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                for n_, kk, dd, pp, ss in zip(size, k, d, p, s))
    if out[0] * out[1] != nl or min(out) < 1:
        raise EmberRuntimeError(
            f"[fold] Given output_size={size}, kernel_size={k}, dilation={d}, padding={p}, "
            f"stride={s}, expected size of input's dimension 2 to match the calculated number "
            f"of sliding blocks {out[0]} * {out[1]} = {out[0] * out[1]}, but got "
            f"input.size(2)={nl}.")
    c = ck // (k[0] * k[1])
    cols = x.reshape(n, c, k[0] * k[1], out[0], out[1])
    y = zeros((n, c, size[0] + 2 * p[0], size[1] + 2 * p[1]), dtype=input.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            sl = (slice(None), slice(None)) + _window(i, j, d, s, out)
            y[sl] = y[sl] + cols[:, :, i * k[1] + j]
    y = y[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return y if input.ndim == 3 else y.reshape(tuple(y.shape[1:]))
