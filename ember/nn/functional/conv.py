"""Convolution, padding, pooling, embedding and one_hot (``ember.nn.functional``).

The functions check arguments with PyTorch's messages, normalize sizes and bind the primitives
of ``ember/ops/nn_conv.py``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import check_tensor
from ember._lazy import static_sizes
from ember.autograd.grad_mode import is_grad_enabled, no_grad
from ember.errors import (
    DTypeRuntimeError,
    EmberIndexError,
    EmberNotImplementedError,
    EmberRuntimeError,
    EmberValueError,
    ShapeError,
)
from ember.ops import nn_conv as C
from ember.ops.registry import bind
from ember.tensor import Tensor, _wrap

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "conv1d", "conv2d",
    "conv_transpose1d", "conv_transpose2d",
    "embedding", "max_pool1d", "max_pool2d", "one_hot", "pad",
]


_TORCH_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
                     "uint8": "Byte", "bool": "Bool"}


def not_implemented_for(op: str, kernel: str, dtype: dt.dtype) -> EmberNotImplementedError:
    """PyTorch's error for a kernel without an implementation for ``dtype``."""
    name = _TORCH_TYPE_NAMES.get(dtype.name, dtype.name)
    return EmberNotImplementedError(f"[{op}] \"{kernel}\" not implemented for '{name}'")


def _ntuple(v: Any, n: int, name: str, op: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * n
        if len(v) != n:
            raise EmberRuntimeError(f"[{op}] expected {name} to be a single integer value or a "
                                    f"list of {n} values; got {list(v)}")
        return tuple(int(i) for i in v)
    return (int(v),) * n


def _unsqueeze0(x: Tensor) -> Tensor:
    return x.reshape((1,) + tuple(x.shape))


# ---------------------------------------------------------------------------------- conv
def _conv_padding(padding: Any, d: int, weight: Tensor, stride: tuple,
                  dilation: tuple) -> tuple:
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * d
        if padding == "same":
            if any(s != 1 for s in stride):
                raise EmberRuntimeError(
                    "[conv] padding='same' is not supported for strided convolutions")
            pairs = []
            for k, dl in zip(weight.shape[2:], dilation):
                total = dl * (k - 1)
                pairs.append((total // 2, total - total // 2))
            return tuple(pairs)
        raise EmberRuntimeError(f"[conv] Invalid padding string: '{padding}'")
    p = _ntuple(padding, d, "padding", "conv")
    if any(i < 0 for i in p):
        raise EmberRuntimeError("[conv] negative padding is not supported")
    return tuple((i, i) for i in p)


def _check_conv(name: str, x: Tensor, w: Tensor, bias: Tensor | None, d: int, groups: int,
                stride: tuple, padding: tuple, dilation: tuple) -> None:
    if w.ndim != d + 2:
        raise EmberRuntimeError(f"[{name}] weight should have at least three dimensions"
                                if w.ndim < 3 else
                                f"[{name}] Expected {w.ndim}-dimensional input for "
                                f"{w.ndim}-dimensional weight {list(w.shape)}, but got "
                                f"{x.ndim}-dimensional input of size {list(x.shape)} instead")
    if any(s <= 0 for s in stride):
        raise EmberRuntimeError(f"[{name}] non-positive stride is not supported")
    if any(s <= 0 for s in dilation):
        raise EmberRuntimeError(f"[{name}] dilation should be greater than zero")
    if groups <= 0:
        raise EmberRuntimeError(f"[{name}] non-positive groups is not supported")
    if w.shape[0] % groups:
        raise EmberRuntimeError(
            f"[{name}] Given groups={groups}, expected weight to be divisible by {groups} at "
            f"dimension 0, but got weight of size [{list(w.shape)}] instead")
    if x.shape[1] != w.shape[1] * groups:
        raise ShapeError(
            f"[{name}] Given groups={groups}, weight of size {list(w.shape)}, expected "
            f"input{list(x.shape)} to have {w.shape[1] * groups} channels, but got "
            f"{x.shape[1]} channels instead")
    if x._dtype is not w._dtype:
        raise DTypeRuntimeError(f"[{name}] expected scalar type {x._dtype.name} but found "
                                f"{w._dtype.name} (input and weight dtypes differ)")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != w.shape[0]):
        raise EmberRuntimeError(
            f"[{name}] Given weight of size {list(w.shape)}, expected bias to be 1-dimensional "
            f"with {w.shape[0]} elements, but got bias of size {list(bias.shape)} instead")
    padded = [s + lo + hi for s, (lo, hi) in zip(x.shape[2:], padding)]
    eff = [(k - 1) * dl + 1 for k, dl in zip(w.shape[2:], dilation)]
    if any(p < e for p, e in zip(padded, eff)):
        raise EmberRuntimeError(
            f"[{name}] Calculated padded input size per channel: "
            f"({' x '.join(map(str, padded))}). Kernel size: "
            f"({' x '.join(map(str, eff))}). Kernel size can't be greater than actual input "
            f"size")


def _conv(name: str, d: int, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
          padding: Any, dilation: Any, groups: int) -> Tensor:
    check_tensor(input, name)
    check_tensor(weight, name, "weight")
    if input.ndim not in (d + 1, d + 2):
        raise EmberRuntimeError(
            f"[{name}] Expected {d + 1}D (unbatched) or {d + 2}D (batched) input to {name}, but "
            f"got input of size: {list(input.shape)}")
    unbatched = input.ndim == d + 1
    x = _unsqueeze0(input) if unbatched else input
    stride = _ntuple(stride, d, "stride", name)
    dilation = _ntuple(dilation, d, "dilation", name)
    pads = _conv_padding(padding, d, weight, stride, dilation)
    _check_conv(name, x, weight, bias, d, groups, stride, pads, dilation)
    out = bind(C.CONV, x, weight, stride=stride, padding=pads, dilation=dilation,
               groups=int(groups))
    if bias is not None:
        out = out + bias.reshape((bias.shape[0],) + (1,) * d)
    return out.reshape(tuple(out.shape[1:])) if unbatched else out


@autocast_op("lower")
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-d convolution of ``(N, C, L)`` (or ``(C, L)``) with ``(O, C/groups, K)``."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


@autocast_op("lower")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-d convolution of ``(N, C, H, W)`` (or ``(C, H, W)``) with ``(O, C/groups, kH, kW)``.

    >>> conv2d(ember.ones(1, 3, 5, 5), ember.ones(4, 3, 3, 3), padding=1).shape
    ember.Size([1, 4, 5, 5])
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(name: str, d: int, input: Tensor, weight: Tensor, bias: Tensor | None,
                    stride: Any, padding: Any, output_padding: Any, groups: int,
                    dilation: Any) -> Tensor:
    check_tensor(input, name)
    check_tensor(weight, name, "weight")
    if input.ndim not in (d + 1, d + 2):
        raise EmberRuntimeError(
            f"[{name}] Expected {d + 1}D (unbatched) or {d + 2}D (batched) input to {name}, but "
            f"got input of size: {list(input.shape)}")
    unbatched = input.ndim == d + 1
    x = _unsqueeze0(input) if unbatched else input
    s = _ntuple(stride, d, "stride", name)
    p = _ntuple(padding, d, "padding", name)
    op = _ntuple(output_padding, d, "output_padding", name)
    dl = _ntuple(dilation, d, "dilation", name)
    if weight.ndim != d + 2:
        raise EmberRuntimeError(f"[{name}] weight should have {d + 2} dimensions; got "
                                f"{list(weight.shape)}")
    if any(i <= 0 for i in s + dl) or groups <= 0 or any(i < 0 for i in p + op):
        raise EmberRuntimeError(f"[{name}] stride, dilation and groups must be positive and "
                                f"padding non-negative; got {s}, {dl}, {groups}, {p}")
    if any(o >= max(ss, dd) for o, ss, dd in zip(op, s, dl)):
        raise EmberRuntimeError(f"[{name}] output padding must be smaller than either stride or "
                                f"dilation, but got output_padding={list(op)}, "
                                f"stride={list(s)}, dilation={list(dl)}")
    if x.shape[1] != weight.shape[0] or weight.shape[0] % groups:
        raise ShapeError(
            f"[{name}] Given transposed=1, weight of size {list(weight.shape)}, expected "
            f"input{list(x.shape)} to have {weight.shape[0]} channels, but got {x.shape[1]} "
            f"channels instead")
    if x._dtype is not weight._dtype:
        raise DTypeRuntimeError(f"[{name}] expected scalar type {x._dtype.name} but found "
                                f"{weight._dtype.name} (input and weight dtypes differ)")
    c_out = weight.shape[1] * groups
    spatial = tuple((n - 1) * ss - 2 * pp + dd * (k - 1) + oo + 1 for n, ss, pp, dd, k, oo in
                    zip(x.shape[2:], s, p, dl, weight.shape[2:], op))
    if any(n <= 0 for n in spatial):
        raise EmberRuntimeError(f"[{name}] Given input size {list(x.shape)}, the calculated "
                                f"output size {list(spatial)} is too small")
    # a transposed convolution is the input gradient of the convolution it transposes
    out = bind(C.CONV_INPUT_GRAD, x, weight, input_shape=(x.shape[0], c_out) + spatial,
               stride=s, padding=tuple((pp, pp) for pp in p), dilation=dl, groups=int(groups))
    if bias is not None:
        out = out + bias.reshape((bias.shape[0],) + (1,) * d)
    return out.reshape(tuple(out.shape[1:])) if unbatched else out


@autocast_op("lower")
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """1-d transposed convolution; ``weight`` is ``(C_in, C_out/groups, K)``."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


@autocast_op("lower")
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """2-d transposed convolution; ``weight`` is ``(C_in, C_out/groups, kH, kW)``."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


# ---------------------------------------------------------------------------------- pad
_NONCONST_HELP = (
    "Supported combinations for non-constant padding:\n"
    "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
    "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
    "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _pad_autocast(input: Any, pad: Any, mode: str = "constant", value: Any = None) -> str | None:
    """PyTorch's CPU autocast runs reflection padding of 1-2 dims and replication padding in
    float32 (they are on its fp32 list); other modes are not autocast."""
    if mode == "replicate" or (mode == "reflect" and len(pad) // 2 in (1, 2)):
        return "fp32"
    return None


@autocast_op(_pad_autocast)
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """Pad the trailing dims: ``pad = (left_last, right_last, left_2nd_last, ...)``.

    Negative pads crop.  Modes: 'constant', 'reflect', 'replicate', 'circular'.
    """
    check_tensor(input, "pad")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise EmberRuntimeError("[pad] Padding length must be divisible by 2")
    npd = len(pad) // 2
    if npd > input.ndim:
        raise EmberRuntimeError(
            f"[pad] Padding length should be less than or equal to two times the input "
            f"dimension but got padding length {len(pad)} and input of dimension {input.ndim}")
    pairs = tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(npd)))
    lead = input.ndim - npd
    if mode == "constant":
        for i, (lo, hi) in enumerate(pairs):
            n = input.shape[lead + i]
            if n + min(lo, 0) + min(hi, 0) < 0:
                raise EmberRuntimeError(
                    f"[pad] narrow(): length must be non-negative. (cropping {-min(lo, 0)} and "
                    f"{-min(hi, 0)} from dimension {lead + i} of size {n})")
            if n + lo + hi < 0:
                raise EmberRuntimeError(
                    f"[pad] The input size {n}, plus negative padding {lo} and {hi} resulted in "
                    f"a negative output size, which is invalid. Check dimension {lead + i} of "
                    f"your input.")
        full = ((0, 0),) * lead + pairs
        return bind(C.CONSTANT_PAD, input, pads=full, value=0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise EmberNotImplementedError(f"[pad] Unrecognised padding mode {mode}")
    if value not in (None, 0):
        raise EmberRuntimeError(
            f"[pad] Padding mode \"{mode}\" doesn't take in value argument")
    if npd not in (1, 2, 3) or input.ndim not in (npd + 1, npd + 2):
        raise EmberNotImplementedError(
            f"[pad] Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            + _NONCONST_HELP)
    _check_nonconst(mode, input, pairs, lead)
    x = input
    if mode == "circular" and any(lo < 0 or hi < 0 for lo, hi in pairs):
        # negative pads crop first; the wrap then copies from the cropped tensor (as PyTorch)
        crop = ((0, 0),) * lead + tuple((min(lo, 0), min(hi, 0)) for lo, hi in pairs)
        x = bind(C.CONSTANT_PAD, x, pads=crop, value=0)
        pairs = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pairs)
    if mode == "circular" and x.numel() == 0:
        # nothing to wrap (PyTorch copies no elements and leaves the memory as allocated)
        return bind(C.CONSTANT_PAD, x, pads=((0, 0),) * lead + pairs, value=0)
    return bind(C.INDEX_PAD, x, pads=pairs, mode=mode)


def _check_nonconst(mode: str, input: Tensor, pairs: tuple, lead: int) -> None:
    npd = len(pairs)
    # only a batch dim (present when the input has npd + 2 dims) may be empty
    if mode != "circular" and any(n == 0 for n in input.shape[input.ndim - npd - 1:]):
        raise EmberRuntimeError(
            f"[pad] Expected {npd + 1}D or {npd + 2}D (batch mode) tensor with possibly 0 batch "
            f"size and other non-zero dimensions for input, but got: {list(input.shape)}")
    for i, (lo, hi) in enumerate(pairs):
        n = input.shape[lead + i]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise EmberRuntimeError(
                f"[pad] Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({lo}, {hi}) at dimension {lead + i} of input "
                f"{list(input.shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise EmberRuntimeError(
                "[pad] Padding value causes wrapping around more than once.")
    sizes = [input.shape[lead + i] for i in range(npd)]
    outs = [n + lo + hi for n, (lo, hi) in zip(sizes, pairs)]
    if all(o < 1 for o in outs):
        names = "DHW"[3 - npd:]
        raise EmberRuntimeError(
            f"[pad] input ({', '.join(f'{a}: {n}' for a, n in zip(names, sizes))}) is too "
            f"small. Calculated output {' '.join(f'{a}: {o}' for a, o in zip(names, outs))}")
    if any(o < 0 for o in outs):
        raise EmberRuntimeError(f"[pad] Trying to create tensor with negative dimension "
                                f"{min(outs)}: padded sizes {outs}")


# ---------------------------------------------------------------------------------- pooling
def _pool_out(n: int, k: int, s: int, p: int, dl: int, ceil_mode: bool) -> int:
    num = n + 2 * p - dl * (k - 1) - 1
    o = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1
    return o


def _pool_args(name: str, d: int, input: Tensor, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any) -> tuple:
    check_tensor(input, name)
    if input.ndim not in (d + 1, d + 2) or any(s == 0 for s in input.shape[-d:]):
        raise EmberRuntimeError(
            f"[{name}] non-empty {d + 1}D or {d + 2}D (batch mode) tensor expected for input")
    k = _ntuple(kernel_size, d, "kernel_size", name)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _ntuple(stride, d, "stride", name)
    p = _ntuple(padding, d, "padding", name)
    dl = _ntuple(dilation, d, "dilation", name)
    if any(i <= 0 for i in k + s + dl):
        raise EmberRuntimeError(f"[{name}] kernel_size, stride and dilation must be greater "
                                f"than zero; got {k}, {s}, {dl}")
    for kk, pp, dd in zip(k, p, dl):
        if pp < 0 or pp > ((kk - 1) * dd + 1) // 2:
            raise EmberRuntimeError(
                f"[{name}] pad should be at most half of effective kernel size, but got "
                f"pad={pp}, kernel_size={kk} and dilation={dd}")
    x = input.reshape((1,) + tuple(input.shape)) if input.ndim == d + 1 else input
    return x, k, s, p, dl


def _check_pool_out(name: str, x: Tensor, out: tuple) -> None:
    if any(o <= 0 for o in out):
        c = x.shape[1]
        raise EmberRuntimeError(
            f"[{name}] Given input size: ({'x'.join(map(str, (c,) + tuple(x.shape[2:])))}). "
            f"Calculated output size: ({'x'.join(map(str, (c,) + tuple(out)))}). Output size "
            f"is too small")


def _max_pool(name: str, d: int, input: Tensor, kernel_size: Any, stride: Any, padding: Any,
              dilation: Any, ceil_mode: bool, return_indices: bool) -> Any:
    x, k, s, p, dl = _pool_args(name, d, input, kernel_size, stride, padding, dilation)
    if return_indices or (input.requires_grad and is_grad_enabled()):
        # PyTorch takes its with-indices kernel here, which bounds pad by the plain kernel
        if any(pp > kk // 2 for pp, kk in zip(p, k)):
            raise EmberRuntimeError(
                f"[{name}] pad should be smaller than or equal to half of kernel size, but got "
                f"padding={list(p)}, kernel_size={list(k)}")
    out = tuple(_pool_out(n, kk, ss, pp, dd, ceil_mode)
                for n, kk, ss, pp, dd in zip(x.shape[2:], k, s, p, dl))
    _check_pool_out(name, x, out)
    vals, idx = bind(C.MAX_POOL, x, kernel=k, stride=s, padding=p, dilation=dl, out=out)
    if input.ndim == d + 1:
        vals, idx = vals.reshape(tuple(vals.shape[1:])), idx.reshape(tuple(idx.shape[1:]))
    return (vals, idx) if return_indices else vals


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """1-d max pooling over ``(N, C, L)`` or ``(C, L)``."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """2-d max pooling; ``stride`` defaults to ``kernel_size``; ties go to the first max."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _avg_counts(n: int, o: int, k: int, s: int, p: int, include_pad: bool) -> np.ndarray:
    start = np.arange(o) * s - p
    end = np.minimum(start + k, n + p)
    if include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)


def _avg_pool(name: str, d: int, input: Tensor, kernel_size: Any, stride: Any, padding: Any,
              ceil_mode: bool, count_include_pad: bool, divisor_override: Any) -> Tensor:
    x, k, s, p, _dl = _pool_args(name, d, input, kernel_size, stride, padding, 1)
    if not input._dtype.is_floating_point and input._dtype is not dt.int64:
        raise not_implemented_for(name, name, input._dtype)
    if divisor_override is not None and int(divisor_override) == 0:
        raise EmberRuntimeError(f"[{name}] divisor must be not zero")
    spatial = tuple(x.shape[2:])
    out = tuple(_pool_out(n, kk, ss, pp, 1, ceil_mode)
                for n, kk, ss, pp in zip(spatial, k, s, p))
    _check_pool_out(name, x, out)
    # a depthwise convolution with a ones kernel sums each window; high padding covers
    # ceil_mode's last window
    pads = tuple((pp, max((o - 1) * ss + kk - n - pp, 0))
                 for n, kk, ss, pp, o in zip(spatial, k, s, p, out))
    n, c = x.shape[:2]
    flat = x.reshape((n * c, 1) + spatial)
    ones = static_sizes(_wrap(np.ones((1, 1) + k, dtype=x._dtype.np), x._dtype))
    sums = bind(C.CONV, flat, ones, stride=s, padding=pads, dilation=(1,) * d, groups=1)
    if divisor_override is not None:
        div = np.array(int(divisor_override), dtype=np.float64)
    else:
        div = np.ones((), dtype=np.float64)
        for i in range(d):
            cnt = _avg_counts(spatial[i], out[i], k[i], s[i], p[i], count_include_pad)
            div = np.multiply.outer(div, cnt)
    if x._dtype is dt.int64:
        # integer average pooling divides like C (truncation), as PyTorch's kernel
        quot = sums.to(dt.float64) / _wrap(div, dt.float64)
        return quot.to(dt.int64).reshape(tuple(input.shape[:-d]) + out)
    res = sums / _wrap(div.astype(x._dtype.np), x._dtype)
    shape = tuple(input.shape[:-d]) + out
    return res.reshape(shape)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    """1-d average pooling."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """2-d average pooling (``count_include_pad``, ``ceil_mode``, ``divisor_override``)."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _adaptive(name: str, d: int, input: Tensor, output_size: Any) -> Tensor:
    check_tensor(input, name)
    if input.ndim not in (d + 1, d + 2) or any(s == 0 for s in input.shape[-d:]):
        raise EmberRuntimeError(f"[{name}] Expected {d + 1}D or {d + 2}D tensor, with non-zero "
                                f"spatial sizes; got input of size {list(input.shape)}")
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * d
    if len(sizes) != d:
        raise EmberValueError(f"[{name}] output_size must be {d} values; got {output_size}")
    in_size = tuple(input.shape[-d:])
    out = tuple(n if o is None else int(o) for n, o in zip(in_size, sizes))
    if any(o < 0 for o in out):
        raise EmberRuntimeError(f"[{name}] output size must be non-negative; got {list(out)}")
    if not input._dtype.is_floating_point:
        raise not_implemented_for(name, name, input._dtype)
    return bind(C.ADAPTIVE_AVG_POOL, input, in_size=in_size, out_size=out, transpose=False)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """1-d adaptive average pooling: windows [floor(i*L/o), ceil((i+1)*L/o))."""
    return _adaptive("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """2-d adaptive average pooling; ``None`` in ``output_size`` keeps that input size."""
    return _adaptive("adaptive_avg_pool2d", 2, input, output_size)


# ---------------------------------------------------------------------------------- embedding
def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` at ``input``'s indices; no gradient flows to ``padding_idx``."""
    check_tensor(input, "embedding")
    check_tensor(weight, "embedding", "weight")
    if input._dtype not in (dt.int64, dt.int32):
        raise DTypeRuntimeError(
            f"[embedding] Expected tensor for argument #1 'indices' to have one of the following "
            f"scalar types: Long, Int; but got {input._dtype.name} instead")
    if weight.ndim != 2:
        raise EmberRuntimeError("[embedding] 'weight' must be 2-D")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise EmberValueError("[embedding] Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    if sparse:
        raise EmberNotImplementedError("[embedding] sparse gradients are not supported")
    if max_norm is not None:
        _renorm_rows(weight, input, float(max_norm), float(norm_type))
    return bind(C.EMBEDDING, weight, input, padding_idx=padding_idx,
                scale_grad_by_freq=bool(scale_grad_by_freq), masked=False)


def _renorm_rows(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """PyTorch's embedding_renorm_: rows referenced by ``input`` are scaled in place (no grad)
    to a norm of at most ``max_norm``."""
    idx = np.unique(input._data)
    if idx.size and (idx.min() < 0 or idx.max() >= weight.shape[0]):
        raise EmberIndexError("[embedding] index out of range in self")
    with no_grad():
        rows = weight._data[idx].astype(np.float64)
        norms = np.sum(np.abs(rows) ** norm_type, axis=1) ** (1.0 / norm_type)
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight._data[idx] = (rows * scale[:, None]).astype(weight._data.dtype)
        weight._version_counter[0] += 1


def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with a trailing ``num_classes`` dim (inferred when -1)."""
    check_tensor(input, "one_hot")
    if input._dtype is not dt.int64:
        raise DTypeRuntimeError(
            "[one_hot] one_hot is only applicable to index tensor of type LongTensor.")
    data = input._data
    if num_classes == -1 or (data.size == 0 and num_classes <= 0):
        if data.size == 0:
            raise EmberRuntimeError(
                "[one_hot] Can not infer total number of classes from empty tensor.")
        num_classes = int(data.max()) + 1
    if data.size and data.min() < 0:
        raise EmberRuntimeError("[one_hot] Class values must be non-negative.")
    if num_classes < 0 or (data.size and data.max() >= num_classes):
        raise EmberRuntimeError("[one_hot] Class values must be smaller than num_classes.")
    return bind(C.ONE_HOT, input, num_classes=int(num_classes))

