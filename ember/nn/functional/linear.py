"""``linear``, ``bilinear`` and ``scaled_dot_product_attention``.

``linear`` binds one fused ``linear`` op (the hottest op of most models); attention binds one
fused ``scaled_dot_product_attention`` op after the frontend has broadcast the batch dims,
repeated grouped key/value heads (``enable_gqa``) and turned bool or causal masks into additive
float masks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember._frontend.autocast import autocast_op
from ember._frontend.core import broadcast_shapes, check_tensor, expand_to
from ember._frontend.einsum import einsum
from ember._frontend.linalg import _CPP, _SCALAR, matmul
from ember._frontend.shape import reshape
from ember.errors import (
    DTypeRuntimeError,
    EmberNotImplementedError,
    EmberRuntimeError,
    ShapeError,
)
from ember.ops.attention import SDPA
from ember.ops.linalg import ADDMM, LINEAR
from ember.ops.registry import bind
from ember.ops.shape import EXPAND, PERMUTE
from ember.sym import has_symbolic
from ember.tensor import Tensor

__all__ = ["bilinear", "linear", "scaled_dot_product_attention"]


@autocast_op("lower")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` over any leading dims of ``input``."""
    if (isinstance(input, Tensor) and isinstance(weight, Tensor) and weight._data.ndim == 2
            and input._data.ndim and input._dtype is weight._dtype
            and input._data.shape[-1] == weight._data.shape[1] and input._dtype is not dt.bool):
        if bias is None:
            return bind(LINEAR, input, weight)
        if (isinstance(bias, Tensor) and bias._dtype is input._dtype
                and bias._data.shape == weight._data.shape[:1]):
            return bind(LINEAR, input, weight, bias)
    return _linear_slow(input, weight, bias)


def _linear_slow(input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    check_tensor(input, "linear")
    check_tensor(weight, "linear", "weight")
    ni, nw = input._data.ndim, weight._data.ndim
    if ni == 0 or nw == 0:
        raise ShapeError(f"[linear] both arguments to linear need to be at least 1D, but they "
                         f"are {ni}D and {nw}D")
    if nw > 2:
        raise ShapeError(f"[linear] t() expects a tensor with <= 2 dimensions, but self is {nw}D")
    if input._dtype is not weight._dtype:
        raise DTypeRuntimeError(
            f"[linear] expected m1 and m2 to have the same dtype, but got: "
            f"{_CPP[input._dtype.name]} != {_CPP[weight._dtype.name]}")
    if input._dtype is dt.bool:
        raise EmberNotImplementedError("[linear] \"addmm_impl_cpu_\" not implemented for 'Bool'")
    if nw == 2:
        si, sw = input._data.shape, weight._data.shape
        if si[-1] != sw[1]:
            rows = int(np.prod(si[:-1]))
            raise ShapeError(f"[linear] mat1 and mat2 shapes cannot be multiplied "
                             f"({rows}x{si[-1]} and {sw[1]}x{sw[0]})")
    if bias is None:
        return matmul(input, weight) if nw == 1 else bind(LINEAR, input, weight)
    check_tensor(bias, "linear", "bias")
    if bias._dtype is not input._dtype:
        raise DTypeRuntimeError(
            f"[linear] self and mat2 must have the same dtype, but got "
            f"{_SCALAR[bias._dtype.name]} and {_SCALAR[input._dtype.name]}")
    if nw == 1:
        out = matmul(input, weight)
        return bind(EXPAND, bias, shape=out._data.shape) + out
    # a bias that only broadcasts: one addmm over the folded rows (rounded once, as PyTorch)
    lead, (n_out, n_in) = input._data.shape[:-1], weight._data.shape
    rows = int(np.prod(lead))
    b = bind(EXPAND, bias, shape=lead + (n_out,))
    out = bind(ADDMM, reshape(b, (rows, n_out)), reshape(input, (rows, n_in)),
               bind(PERMUTE, weight, dims=(1, 0)), beta=1, alpha=1)
    return reshape(out, lead + (n_out,))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``."""
    for name, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        check_tensor(t, "bilinear", name)
    s1, s2, sw = input1._data.shape, input2._data.shape, weight._data.shape
    if len(sw) != 3 or not s1 or not s2:
        raise ShapeError(f"[bilinear] expected weight of 3 dims and inputs of at least 1 dim; "
                         f"got weight {tuple(sw)}, inputs {tuple(s1)} and {tuple(s2)}")
    if s1[:-1] != s2[:-1]:
        raise ShapeError(f"[bilinear] input1 and input2 must have the same size except the last "
                         f"dimension, but got {list(s1)} and {list(s2)}")
    if s1[-1] != sw[1] or s2[-1] != sw[2]:
        raise ShapeError(f"[bilinear] input sizes {s1[-1]} and {s2[-1]} do not match weight "
                         f"{list(sw)}")
    out = einsum("...i,oij,...j->...o", input1, weight, input2)
    if bias is not None:
        check_tensor(bias, "bilinear", "bias")
        out = out + bias
    return out


# ------------------------------------------------------------------------------ attention
_ERR = "scaled_dot_product_attention"


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    for name, t in (("query", q), ("key", k), ("value", v)):
        check_tensor(t, _ERR, name)
    nq, nk, nv = q._data.ndim, k._data.ndim, v._data.ndim
    if min(nq, nk, nv) < 2:
        raise ShapeError(f"[{_ERR}] Expected query, key, and value to all be  at least 2 "
                         f"dimensional, but got query.dim: {nq} key.dim: {nk} and value.dim: "
                         f"{nv} instead.")
    if not q._dtype is k._dtype is v._dtype:
        raise DTypeRuntimeError(
            f"[{_ERR}] Expected query, key, and value to have the same dtype, but got "
            f"query.dtype: {_CPP[q._dtype.name]} key.dtype: {_CPP[k._dtype.name]} and "
            f"value.dtype: {_CPP[v._dtype.name]} instead.")
    if not q._dtype.is_floating_point:
        raise DTypeRuntimeError(f"[{_ERR}] expected scalar type Float but found "
                                f"{_SCALAR[q._dtype.name]}")
    sq, sk, sv = q._data.shape, k._data.shape, v._data.shape
    if sq[-1] != sk[-1]:
        raise ShapeError(f"[{_ERR}] query and key must have the same embedding dimension; got "
                         f"{sq[-1]} and {sk[-1]} (shapes {tuple(sq)} and {tuple(sk)})")
    if sk[-2] != sv[-2]:
        raise ShapeError(f"[{_ERR}] key and value must have the same sequence length; got "
                         f"{sk[-2]} and {sv[-2]} (shapes {tuple(sk)} and {tuple(sv)})")


def _repeat_heads(x: Tensor, rep: int) -> Tensor:
    """``x.repeat_interleave(rep, dim=-3)`` as reshape + expand (grads sum back)."""
    s = x._data.shape
    y = reshape(x, s[:-2] + (1,) + s[-2:])
    y = bind(EXPAND, y, shape=s[:-2] + (rep,) + s[-2:])
    return reshape(y, s[:-3] + (s[-3] * rep,) + s[-2:])


def _gqa(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    if q._data.ndim < 3 or k._data.ndim < 3 or v._data.ndim < 3:
        return k, v
    hq, hk, hv = q._data.shape[-3], k._data.shape[-3], v._data.shape[-3]
    if hq % hk or hq % hv:
        raise EmberRuntimeError(
            f"[{_ERR}] Number of heads in key and value must divide the number of heads in "
            f"query; got {hq} query heads, {hk} key heads and {hv} value heads")
    if hk != hq:
        k = _repeat_heads(k, hq // hk)
    if hv != hq:
        v = _repeat_heads(v, hq // hv)
    return k, v


def _float_mask(mask: Tensor, q: Tensor) -> Tensor:
    """A bool mask (True = take part) as an additive mask of 0 / -inf in q's dtype."""
    if mask._dtype is dt.bool:
        from ember._frontend.pointwise_logic import where
        # with ember ops, not NumPy on the mask's values, so the mask traces (compile, export)
        zero = Tensor._from_array(np.zeros((), q._dtype.np), q._dtype)
        return where(mask, zero, -math.inf)
    if mask._dtype is not q._dtype and mask._dtype is not dt.float32:
        raise DTypeRuntimeError(
            f"[{_ERR}] Expected attn_mask dtype to be bool or float or to match query dtype, "
            f"but got attn_mask.dtype: {_CPP[mask._dtype.name]} and  query.dtype: "
            f"{_CPP[q._dtype.name]} instead.")
    return mask


@autocast_op("lower")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value`` over (..., L, E) / (..., S, E) /
    (..., S, Ev) inputs; a bool mask marks the positions that take part, ``is_causal`` is the
    top-left lower triangle, and a fully masked row gives zeros (as PyTorch 2.13 does)."""
    _check_qkv(query, key, value)
    # which of PyTorch's CPU kernels runs decides how float16/bfloat16 round
    flash = (query._data.ndim == key._data.ndim == value._data.ndim == 4
             and query._data.shape[-1] == value._data.shape[-1]
             and query._data.shape[0] == key._data.shape[0] == value._data.shape[0]
             and key._data.shape[1] == value._data.shape[1]
             and (enable_gqa or query._data.shape[1] == key._data.shape[1])
             and (attn_mask is None
                  or (isinstance(attn_mask, Tensor) and attn_mask._data.ndim in (2, 4))))
    if enable_gqa:
        key, value = _gqa(query, key, value)
    sq, sk = query._data.shape, key._data.shape
    n_l, n_s = sq[-2], sk[-2]
    mask = None
    if is_causal:
        if attn_mask is not None:
            raise EmberRuntimeError(f"[{_ERR}] _scaled_dot_product_attention: Explicit attn_mask "
                                    f"should not be set when is_causal=True")
        if has_symbolic((n_l, n_s)):  # export: the mask is recorded with ember ops
            from ember._frontend.creation import ones
            from ember._frontend.structure import tril
            tri_t = tril(ones((n_l, n_s), dtype=dt.bool))
        else:
            tri_t = Tensor._from_array(np.tril(np.ones((n_l, n_s), dtype=bool)), dt.bool)
        mask = _float_mask(tri_t, query)
    elif attn_mask is not None:
        check_tensor(attn_mask, _ERR, "attn_mask")
        mask = _float_mask(attn_mask, query)
    shapes = [sq[:-2], sk[:-2], value._data.shape[:-2]]
    if mask is not None:
        shapes.append(mask._data.shape[:-2])
    batch = broadcast_shapes(_ERR, *shapes)
    if mask is not None:
        mshape = broadcast_shapes(_ERR, mask._data.shape, (n_l, n_s))
        if mshape[-2:] != (n_l, n_s):
            raise ShapeError(f"[{_ERR}] attn_mask of shape {tuple(mask.shape)} does not "
                             f"broadcast to (..., {n_l}, {n_s})")
        mask = expand_to(mask, batch + (n_l, n_s))
    q = expand_to(query, batch + sq[-2:])
    k = expand_to(key, batch + sk[-2:])
    v = expand_to(value, batch + value._data.shape[-2:])
    sc = 1.0 / math.sqrt(sq[-1]) if scale is None else float(scale)
    if dropout_p > 0.0:
        return _attention_with_dropout(q, k, v, mask, sc, dropout_p)
    if mask is None:
        return bind(SDPA, q, k, v, scale=sc, flash=flash)
    return bind(SDPA, q, k, v, mask, scale=sc, flash=flash)


def _attention_with_dropout(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float,
                            p: float) -> Tensor:
    """The decomposed path: dropout needs the random stream between softmax and ``@ v``."""
    from ember.nn import functional as F  # dropout lands with the random-number helper
    from ember.ops.attention import SAFE_SOFTMAX
    from ember.ops.linalg import MATMUL, mT
    dropout: Any = getattr(F, "dropout", None)
    if dropout is None:
        raise EmberNotImplementedError(f"[{_ERR}] dropout_p > 0 needs "
                                       f"ember.nn.functional.dropout, which is not available")
    d = q._dtype
    if d.itemsize < 4:
        q, k, v = (t.to(dt.float32) for t in (q, k, v))
        mask = None if mask is None else mask.to(dt.float32)
    s = bind(MATMUL, q, mT(k)) * scale
    if mask is not None:
        s = s + mask
    attn = dropout(bind(SAFE_SOFTMAX, s), p, True)
    return bind(MATMUL, attn, v).to(d)
