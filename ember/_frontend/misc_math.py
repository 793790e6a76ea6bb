"""Composite math ops PyTorch has at the top level and as Tensor methods: ``addr``, ``aminmax``,
``block_diag``, ``cartesian_prod``, ``combinations``, ``cross``, ``dist``, ``cov``,
``corrcoef``, ``diagflat``, ``trapezoid``/``cumulative_trapezoid``, ``vander``,
``chain_matmul``, ``matrix_power``, ``unravel_index``, ``renorm``, ``put``, ``fill_diagonal_``.

Each is a composition of existing ops (formulas as in ATen), so autograd and the compiler need
nothing new."""

from __future__ import annotations

import itertools
import warnings
from typing import Any, Sequence

from ember import dtypes as dt
from ember._frontend.core import check_tensor
from ember._frontend.counting import heaviside, ldexp
from ember._frontend.creation import arange, eye, ones, zeros
from ember._frontend.inplace import inplace_method
from ember._frontend.linalg import matmul, outer
from ember._frontend.linalg_solve import linalg_inv
from ember._frontend.movement import cat, stack
from ember._frontend.pointwise_logic import where
from ember._frontend.pointwise_math import float_power
from ember._frontend.reduction import _return_type, amax, amin, vector_norm
from ember._frontend.shape import clone
from ember._frontend.structure import diag, meshgrid
from ember.errors import EmberNotImplementedError, EmberRuntimeError, EmberTypeError, ShapeError
from ember.ops._util import wrap_dim
from ember.tensor import Tensor, tensor_method

__all__ = [
    "addr", "aminmax", "block_diag", "cartesian_prod", "chain_matmul", "combinations",
    "corrcoef", "cov", "cross", "cumulative_trapezoid", "diagflat", "dist", "is_signed",
    "matrix_power", "put", "renorm", "trapezoid", "trapz", "unravel_index", "vander",
]

_aminmax = _return_type("aminmax", "min max")


@tensor_method("addr")
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)`` (``input`` ignored when ``beta == 0``).

    >>> ember.addr(ember.zeros(2, 2), ember.tensor([1.0, 2.0]), ember.tensor([1.0, 1.0]))
    tensor([[1., 1.],
            [2., 2.]])
    """
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise ShapeError(f"[addr] addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    o = outer(vec1, vec2)
    if alpha != 1:
        o = o * alpha
    if beta == 0:
        return o + zeros(input.shape, dtype=input.dtype) * 0
    return (input if beta == 1 else input * beta) + o


@tensor_method("aminmax")
def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> Any:
    """``(amin, amax)`` over ``dim`` (all elements when None).

    >>> ember.aminmax(ember.tensor([3, 1, 2]))
    ember.return_types.aminmax(
    min=tensor(1),
    max=tensor(3))
    """
    check_tensor(input, "aminmax")
    if dim is None:
        if input.numel() == 0:
            raise EmberRuntimeError("[aminmax] aminmax(): cannot compute aminmax over an empty "
                                    "dimension as the operation has no identity.")
        dims = tuple(range(input.ndim))
        if not dims:
            return _aminmax(clone(input), clone(input))
        return _aminmax(amin(input, dims, keepdim), amax(input, dims, keepdim))
    return _aminmax(amin(input, dim, keepdim), amax(input, dim, keepdim))


def block_diag(*tensors: Tensor) -> Tensor:
    """The block-diagonal matrix of 0-, 1- or 2-D tensors.

    >>> ember.block_diag(ember.ones(1, 1), ember.ones(1, 2) * 2)
    tensor([[1., 0., 0.],
            [0., 2., 2.]])
    """
    mats = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise EmberRuntimeError(f"[block_diag] torch.block_diag: Input tensors must have 2 "
                                    f"or fewer dimensions. Input {i} has {t.ndim} dimensions")
        mats.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not mats:
        return zeros(1, 0)
    d = mats[0].dtype
    for m in mats[1:]:
        d = dt.promote_types(d, m.dtype)
    cols = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        rows.append(cat([zeros(r, left, dtype=d), m.to(d), zeros(r, cols - left - c, dtype=d)],
                        1))
        left += c
    return cat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """All tuples of one element from each 1-D tensor, one per row (itertools.product order)."""
    for t in tensors:
        if t.ndim != 1:
            raise ShapeError(f"[cartesian_prod] Expect a 1D vector, but got shape "
                             f"[{', '.join(str(s) for s in t.shape)}]")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """Length-``r`` combinations of a 1-D tensor's elements, one per row.

    >>> ember.combinations(ember.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    if input.ndim != 1:
        raise ShapeError(f"[combinations] Expect a 1D vector, but got shape "
                         f"[{', '.join(str(s) for s in input.shape)}]")
    if r < 0:
        raise EmberRuntimeError(f"[combinations] Expect a non-negative number, but got {r}")
    if r == 0:
        return zeros(0, dtype=input.dtype)
    gen = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    idx = list(gen(range(input.shape[0]), r))
    if not idx:
        return zeros(0, r, dtype=input.dtype)
    from ember._frontend.creation import tensor
    return input[tensor(idx, dtype=dt.int64)]


def _cross(input: Tensor, other: Tensor, dim: int, op: str) -> Tensor:
    from ember._frontend.structure import broadcast_tensors
    a, b = broadcast_tensors(input, other)
    d = wrap_dim(dim, a.ndim, op)
    if a.shape[d] != 3:
        raise EmberRuntimeError(f"[{op}] {op}: inputs dimension {dim} must have length 3. "
                                f"Got {input.shape[d] if input.ndim == a.ndim else 1} and "
                                f"{other.shape[d] if other.ndim == a.ndim else 1}")
    i = [a.select(d, k) for k in range(3)]
    j = [b.select(d, k) for k in range(3)]
    return stack([i[1] * j[2] - i[2] * j[1], i[2] * j[0] - i[0] * j[2],
                  i[0] * j[1] - i[1] * j[0]], d)


@tensor_method("cross")
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """The cross product along ``dim`` (default: the first dim of size 3, deprecated)."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease "
                      "either pass the dim explicitly or simply use torch.linalg.cross.\nThe "
                      "default value of dim will change to agree with that of linalg.cross in "
                      "a future release.", UserWarning, stacklevel=2)
        sizes = [s for s in (input.shape if input.ndim >= other.ndim else other.shape)]
        dim = next((k for k, s in enumerate(sizes) if s == 3), -1)
    return _cross(input, other, dim, "linalg.cross")


def linalg_cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """``torch.linalg.cross``: the cross product of 3-vectors along ``dim`` (broadcasting)."""
    return _cross(input, other, dim, "linalg.cross")


@tensor_method("dist")
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """``vector_norm(input - other, p)``.

    >>> ember.dist(ember.tensor([0.0, 0.0]), ember.tensor([3.0, 4.0]))
    tensor(5.)
    """
    return vector_norm(input - other, p)


@tensor_method("cov")
def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the rows of ``input`` (variables) over its columns (observations)."""
    if input.ndim > 2:
        raise ShapeError(f"[cov] cov(): expected input to have two or fewer dimensions but got "
                         f"an input with {input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(dt.get_default_dtype())
    n = x.shape[1]
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        avg, w_sum = x.mean(1), n
        norm = n - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    if isinstance(norm, Tensor):
        norm = norm.clamp_min(0)
    elif norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
        norm = 0
    xm = x - avg.unsqueeze(1)
    c = matmul(xm, (xm if w is None else xm * w).t())
    return (c / norm).squeeze()


@tensor_method("corrcoef")
def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of ``input`` (clipped to [-1, 1])."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.reshape(-1, 1)
    c = c / std.reshape(1, -1)
    return c.clamp(-1, 1)


@tensor_method("diagflat")
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """``diag(input.flatten(), offset)``."""
    return diag(input.reshape(-1), offset)


def _trap_dx(x: Tensor, y: Tensor, d: int) -> Tensor:
    if x.ndim == 1:
        dx = x[1:] - x[:-1]
        shape = [1] * y.ndim
        shape[d] = dx.shape[0]
        return dx.reshape(shape)
    return x.narrow(d, 1, x.shape[d] - 1) - x.narrow(d, 0, x.shape[d] - 1)


def _trap_parts(y: Tensor, d: int) -> tuple[Tensor, Tensor]:
    n = y.shape[d]
    return y.narrow(d, 1, n - 1), y.narrow(d, 0, n - 1)


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Any = 1.0, dim: int = -1) -> Tensor:
    """The trapezoid rule along ``dim``, with sample points ``x`` or spacing ``dx`` (default 1).

    >>> ember.trapezoid(ember.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    if x is not None and dx != 1.0:
        raise EmberTypeError("[trapezoid] trapezoid() received an invalid combination of "
                             "arguments: x and dx cannot both be given")
    d = wrap_dim(dim, y.ndim, "trapezoid")
    if y.shape[d] == 0:
        return y.sum(d) * 0
    if x is None:
        return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * dx
    left, right = _trap_parts(y, d)
    return (_trap_dx(x, y, d) * (left + right)).sum(d) / 2.0


def trapz(y: Tensor, x: Tensor | None = None, *, dx: Any = 1.0, dim: int = -1) -> Tensor:
    """Alias of :func:`trapezoid`."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Any = 1.0,
                         dim: int = -1) -> Tensor:
    """Running trapezoid-rule integral along ``dim`` (one element shorter)."""
    d = wrap_dim(dim, y.ndim, "cumulative_trapezoid")
    if y.shape[d] == 0:
        return y.narrow(d, 0, 0) * 1.0
    left, right = _trap_parts(y, d)
    if x is None:
        return (dx / 2.0 * (left + right)).cumsum(d)
    return (_trap_dx(x, y, d) * (left + right)).cumsum(d) / 2.0


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803
    """Columns ``x**(N-1), ..., x, 1`` (reversed when ``increasing``).

    >>> ember.vander(ember.tensor([1, 2, 3]), 3)
    tensor([[1, 1, 1],
            [4, 2, 1],
            [9, 3, 1]])
    """
    if x.ndim != 1:
        raise ShapeError("[vander] x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise EmberRuntimeError("[vander] N must be non-negative.")
    d = x.dtype if x.dtype.is_floating_point else dt.int64
    xs = x.to(d)
    if n == 0:
        return zeros(x.shape[0], 0, dtype=d)
    cols = [ones(x.shape[0], 1, dtype=d)]
    if n > 1:
        cols.append(xs.unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1))
    out = cat(cols, 1)
    return out if increasing else out.flip(1)


def linalg_vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803
    """``torch.linalg.vander``: powers ``x**0 ... x**(N-1)`` along a new last dim."""
    if x.ndim < 1:
        raise ShapeError("[linalg.vander] x must have at least one dimension.")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise EmberRuntimeError("[linalg.vander] N must be greater than 1.")
    d = x.dtype if x.dtype.is_floating_point else dt.int64
    xs = x.to(d).unsqueeze(-1)
    rest = xs.expand(*x.shape, n - 1).cumprod(-1)
    return cat([ones(*x.shape, 1, dtype=d), rest], -1)


def _check_square(a: Tensor, op: str) -> None:
    if a.ndim < 2:
        raise ShapeError(f"[{op}] {op}: The input tensor A must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"[{op}] {op}: A must be batches of square matrices, but they are "
                         f"{a.shape[-2]} by {a.shape[-1]} matrices")


@tensor_method("matrix_power")
def matrix_power(input: Tensor, n: int) -> Tensor:
    """``input`` to the integer power ``n`` (inverse first when ``n < 0``) by squaring."""
    _check_square(input, "linalg.matrix_power")
    if n == 0:  # as ATen: a copy of input overwritten, so the (zero) gradient flows
        out = clone(input)
        out.copy_(eye(input.shape[-1], dtype=input.dtype).expand(input.shape))
        return out
    a = linalg_inv(input) if n < 0 else input
    n = abs(n)
    result = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return result if result is not input else clone(input)


def chain_matmul(*matrices: Tensor, out: Tensor | None = None) -> Tensor:
    """``matrices[0] @ matrices[1] @ ...`` of 2-D tensors (deprecated in PyTorch)."""
    from ember._frontend.linalg_solve import _no_out
    _no_out("chain_matmul", out)
    if not matrices:
        raise EmberRuntimeError("[chain_matmul] chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.ndim != 2:
            raise ShapeError(f"[chain_matmul] Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return clone(matrices[0])
    return linalg_multi_dot(list(matrices))


def linalg_multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """``torch.linalg.multi_dot``: the product of 2-D matrices (the first and last may be 1-D)."""
    ts = list(tensors)
    if len(ts) < 2:
        raise EmberRuntimeError(f"[linalg.multi_dot] multi_dot(): expected at least 2 tensors "
                                f"but got {len(ts)}")
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    mats = [ts[0].unsqueeze(0) if first else ts[0], *ts[1:-1],
            ts[-1].unsqueeze(1) if last else ts[-1]]
    for i, m in enumerate(mats):
        if m.ndim != 2:
            raise ShapeError(f"[linalg.multi_dot] multi_dot(): tensor {i} must be 2D but got "
                             f"{ts[i].ndim}D")
    out = mats[0]
    for m in mats[1:]:
        out = matmul(out, m)
    if first:
        out = out.squeeze(0)
    if last:
        out = out.squeeze(-1)
    return out


def unravel_index(indices: Tensor, shape: Sequence[int] | int) -> tuple[Tensor, ...]:
    """Flat indices to a tuple of coordinate tensors for ``shape`` (C order)."""
    if indices.dtype.is_floating_point or indices.dtype == dt.bool:
        raise EmberTypeError(f"[unravel_index] expected 'indices' to be integer dtype, but got "
                             f"{indices.dtype}")
    dims = [shape] if isinstance(shape, int) else list(shape)
    numel = 1
    for s in dims:
        numel *= s
    if indices.numel() and (bool((indices < -numel).any()) or bool((indices >= numel).any())):
        raise EmberRuntimeError("[unravel_index] index out of bounds for shape "
                                f"{tuple(dims)}")
    idx = where(indices < 0, indices + numel, indices).to(dt.int64)
    out = []
    for s in reversed(dims):
        out.append(idx % s)
        idx = idx.div(s, rounding_mode="floor")
    return tuple(reversed(out))


@tensor_method("renorm")
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` rescaled to ``maxnorm``."""
    if p <= 0:
        raise EmberRuntimeError("[renorm] renorm: non-positive-norm not supported")
    d = wrap_dim(dim, input.ndim, "renorm")
    others = tuple(k for k in range(input.ndim) if k != d)
    norm = vector_norm(input, p, dim=others, keepdim=True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), ones((), dtype=norm.dtype))
    return input * factor


def is_signed(input: Tensor) -> bool:
    return input.is_signed()


@tensor_method("put")
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of ``input`` with ``source`` written at flat positions ``index``."""
    if source.dtype != input.dtype:
        raise EmberRuntimeError(f"[put_] put_(): self and source expected to have the same "
                                f"dtype, but got self.dtype = {_torch_name(input.dtype)} and "
                                f"source.dtype = {_torch_name(source.dtype)}")
    out = clone(input).contiguous()
    flat = out.view(-1)
    n = flat.shape[0]
    idx = index.reshape(-1)
    idx = where(idx < 0, idx + n, idx)
    flat.index_put_((idx,), source.reshape(-1), accumulate)
    return out


@tensor_method("fill_diagonal_")
def fill_diagonal_(input: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fill the main diagonal (all dims equal, or 2-D; ``wrap`` continues below tall ones)."""
    if input.ndim < 2:
        raise EmberRuntimeError("[fill_diagonal_] dimensions must larger than 1")
    rows = input.shape[0]
    if input.ndim > 2 and any(s != rows for s in input.shape):
        raise EmberRuntimeError("[fill_diagonal_] all dimensions of input must be of equal "
                                "length")
    cols = input.shape[1]
    step = sum(s for s in input.contiguous().stride()) if input.ndim > 2 else cols + 1
    numel = input.numel()
    end = numel if (wrap and input.ndim == 2) else min(rows, cols) * step if input.ndim == 2 \
        else numel
    idx = arange(0, end, step)
    if input.ndim == 2 and not wrap:
        idx = idx[: min(rows, cols)]
    if input.is_contiguous():
        input.view(-1)[idx] = fill_value
    else:
        input.copy_(put(input, idx, zeros(idx.shape, dtype=input.dtype) + fill_value))
    return input


def _float_power_checked(input: Tensor, exponent: Any) -> Tensor:
    if input.dtype != dt.float64:
        raise EmberRuntimeError(f"[float_power_] the base given to float_power_ has dtype "
                                f"{_torch_name(input.dtype)} but the operation's result requires "
                                f"dtype Double")
    return float_power(input, exponent)


def _torch_name(d: dt.dtype) -> str:
    from ember._frontend.inplace import _type_name
    return _type_name(d)


for _name, _fn in (("addr_", addr), ("float_power_", _float_power_checked),
                   ("heaviside_", heaviside),
                   ("ldexp_", ldexp), ("renorm_", renorm), ("put_", put)):
    inplace_method(_name, _fn)


# ---------------------------------------------------------------------------------- gcd, lcm
def _int_pair(op: str, input: Tensor, other: Tensor) -> tuple[Tensor, Tensor]:
    from ember._frontend.structure import broadcast_tensors
    d = dt.result_type(input, other)
    if d.is_floating_point or d == dt.bool:
        from ember._frontend.inplace import _type_name
        raise EmberNotImplementedError(f'[{op}] "{op}_cpu" not implemented for '
                                       f"'{_type_name(d)}'")
    a, b = broadcast_tensors(input.to(d), other.to(d))
    return a, b


@tensor_method("gcd")
def gcd(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise greatest common divisor (non-negative) of integer tensors (Euclid).

    >>> ember.gcd(ember.tensor([4, 0, -6]), ember.tensor([6, 5, 9]))
    tensor([2, 5, 3])
    """
    a, b = _int_pair("gcd", input, other)
    a, b = a.abs(), b.abs()
    while bool((b != 0).any()):
        nz = b != 0
        safe = where(nz, b, ones((), dtype=b.dtype))
        a, b = where(nz, b, a), where(nz, a % safe, b)
    return a


@tensor_method("lcm")
def lcm(input: Tensor, other: Tensor) -> Tensor:
    """Elementwise least common multiple (non-negative; 0 if either is 0) of integer tensors."""
    a, b = _int_pair("lcm", input, other)
    g = gcd(a, b)
    zero = g == 0
    return where(zero, g, (a.div(where(zero, ones((), dtype=g.dtype), g),
                                 rounding_mode="trunc") * b).abs())


inplace_method("gcd_", gcd)
inplace_method("lcm_", lcm)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between each row of ``x1`` (..., P, M) and of ``x2`` (..., R, M).

    >>> ember.cdist(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0]]))
    tensor([[5.]])
    """
    if x1.ndim < 2 or x2.ndim < 2:
        raise EmberRuntimeError(f"[cdist] cdist only supports at least 2D tensors, X1 got: "
                                f"{x1.ndim}D" if x1.ndim < 2 else
                                f"[cdist] cdist only supports at least 2D tensors, X2 got: "
                                f"{x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise EmberRuntimeError(f"[cdist] X1 and X2 must have the same number of columns. X1: "
                                f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise EmberRuntimeError("[cdist] cdist only supports non-negative p values")
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return vector_norm(diff, p, dim=-1)


def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The sum of singular values of the matrices over ``dim`` (default the last two)."""
    from ember._frontend.linalg_decomp import linalg_matrix_norm
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return linalg_matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)


__all__ += ["cdist", "gcd", "lcm", "nuclear_norm"]
