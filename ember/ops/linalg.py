"""Linear-algebra primitives: batched matmul, the fused ``linear`` (x W^T + b) and einsum.

The kernels call NumPy's BLAS (``np.matmul``); float16/bfloat16 are computed in float32 and
rounded once (PyTorch's CPU semantics; NumPy's own low-precision matmul is slow and, for
ml_dtypes' bfloat16, returns float32): the half GEMM kernels of ``_hgemm_c`` (through
``_parallel.matmul_lowp``), which pack the half operands directly (AMX for bfloat16).
Integer products wrap like C, as in PyTorch.

The primitives are strict: ``matmul`` takes two tensors of the same rank >= 2 with equal batch
dims (the frontend folds, broadcasts and reshapes), ``linear`` takes ``(..., in)``,
``(out, in)`` and an optional ``(out,)`` bias, and ``einsum`` takes an explicit equation without
ellipses whose labels have one size each (the frontend expands size-1 broadcasts).
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.errors import DTypeError, EmberNotImplementedError, ShapeError
from ember.ops import _parallel
from ember.ops import registry as _registry
from ember.ops._util import lowp
from ember.ops.reduction import SUM
from ember.ops.registry import OpDef, bind, register
from ember.ops.shape import PERMUTE


def check_dtypes(op: str, *ts) -> dt.dtype:  # noqa: ANN002
    """The common dtype of strict linear-algebra inputs (bool has no kernel, as in PyTorch)."""
    d = ts[0].dtype
    for t in ts[1:]:
        if t.dtype is not d:
            raise DTypeError(f"[{op}] primitive inputs must share a dtype; got {d.name} and "
                             f"{t.dtype.name}")
    if d is dt.bool:
        raise EmberNotImplementedError(f"[{op}] \"{op}\" not implemented for 'Bool'")
    return d


_LOWP_NP = frozenset({np.dtype(np.float16), dt.bfloat16.np})


def mT(x):  # noqa: ANN001, ANN201, N802
    """``x`` with its last two dims swapped (a view)."""
    n = len(x.shape)
    return x.permute(tuple(range(n - 2)) + (n - 1, n - 2))


# ---------------------------------------------------------------------------------- matmul
def _matmul_meta(a, b) -> tuple:  # noqa: ANN001
    sa, sb, d = tuple(a.shape), tuple(b.shape), a.dtype
    if (len(sa) < 2 or len(sa) != len(sb) or sa[:-2] != sb[:-2] or sa[-1] != sb[-2]
            or b.dtype is not d or d is dt.bool):
        if len(sa) < 2 or len(sa) != len(sb) or sa[:-2] != sb[:-2] or sa[-1] != sb[-2]:
            raise ShapeError(f"[matmul] primitive expects (..., m, k) and (..., k, n) with "
                             f"equal batch dims; got {sa} and {sb}")
        check_dtypes("matmul", a, b)
    return sa[:-1] + sb[-1:], d


def _matmul_eager(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # float16/bfloat16: _parallel computes in float32 (blocked conversion) and rounds once
    return _parallel.matmul(a, b)


def _matmul_vjp(ctx, g):  # noqa: ANN001
    a, b = ctx.inputs
    n0, n1 = ctx.needs_input_grad
    return (bind(MATMUL, g, mT(b)) if n0 else None, bind(MATMUL, mT(a), g) if n1 else None)


MATMUL = register(OpDef(
    "matmul", "extern", _matmul_meta, _matmul_eager, _matmul_vjp,
    save_for={0: (1,), 1: (0,)}, tags=frozenset({"lowp_upcast"}), grad_name="MmBackward0",
    doc="Batched matrix product of (..., m, k) and (..., k, n) with equal batch dims.",
))


# ---------------------------------------------------------------------------------- addmm
def _addmm_meta(c, a, b, *, beta: object, alpha: object) -> tuple:  # noqa: ANN001
    shape, d = _matmul_meta(a, b)
    if tuple(c.shape) != shape or c.dtype is not d:
        raise ShapeError(f"[addmm] primitive expects input of shape {shape} and dtype {d.name}; "
                         f"got {tuple(c.shape)} and {c.dtype.name}")
    return shape, d


def _addmm_eager(c: np.ndarray, a: np.ndarray, b: np.ndarray, *, beta: object,
                 alpha: object) -> np.ndarray:
    out = _parallel.matmul(a, b)
    if alpha != 1:
        out *= np.asarray(alpha, dtype=out.dtype)
    if beta == 1:
        out += c
    elif beta != 0:  # beta == 0 ignores c, NaNs included (PyTorch's rule)
        out += c * np.asarray(beta, dtype=out.dtype)
    return out


def _addmm_vjp(ctx, g):  # noqa: ANN001
    _, a, b = ctx.inputs
    beta, alpha = ctx.params["beta"], ctx.params["alpha"]
    n0, n1, n2 = ctx.needs_input_grad
    gc = (g if beta == 1 else g * beta) if n0 else None
    ga = bind(MATMUL, g, mT(b)) if n1 else None
    gb = bind(MATMUL, mT(a), g) if n2 else None
    if alpha != 1:
        ga = None if ga is None else ga * alpha
        gb = None if gb is None else gb * alpha
    return (gc, ga, gb)


ADDMM = register(OpDef(
    "addmm", "extern", _addmm_meta, lowp(_addmm_eager), _addmm_vjp,
    save_for={1: (2,), 2: (1,)}, tags=frozenset({"lowp_upcast"}), grad_name="AddmmBackward0",
    doc="beta * c + alpha * (a @ b) over equal batch dims, rounded once (addmm, baddbmm, ...).",
))


def _addbmm_meta(c, a, b, *, beta: object, alpha: object) -> tuple:  # noqa: ANN001
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) != 3 or len(sb) != 3 or sa[0] != sb[0] or sa[2] != sb[1]:
        raise ShapeError(f"[addbmm] primitive expects (b, n, m) and (b, m, p); got {sa} and {sb}")
    shape, d = (sa[1], sb[2]), check_dtypes("addbmm", c, a, b)
    if tuple(c.shape) != shape:
        raise ShapeError(f"[addbmm] primitive expects input of shape {shape}; got "
                         f"{tuple(c.shape)}")
    return shape, d


def _addbmm_eager(c: np.ndarray, a: np.ndarray, b: np.ndarray, *, beta: object,
                  alpha: object) -> np.ndarray:
    src = a.dtype
    if src not in _LOWP_NP:  # one product over the folded batch
        n, m, p = a.shape[1], a.shape[0] * a.shape[2], b.shape[2]
        a2 = np.ascontiguousarray(np.swapaxes(a, 0, 1)).reshape(n, m)
        return _addmm_eager(c, a2, b.reshape(m, p), beta=beta, alpha=alpha)
    # PyTorch accumulates batch by batch (result.addmm_ per batch), rounding after each step
    f = np.float32
    acc = np.zeros(c.shape, f) if beta == 0 else c.astype(f) * f(beta)
    for i in range(a.shape[0]):
        acc += np.matmul(a[i].astype(f), b[i].astype(f)) * f(alpha)
        acc = acc.astype(src).astype(f)
    return acc.astype(src)


def _addbmm_vjp(ctx, g):  # noqa: ANN001
    _, a, b = ctx.inputs
    beta, alpha = ctx.params["beta"], ctx.params["alpha"]
    n0, n1, n2 = ctx.needs_input_grad
    gc = (g if beta == 1 else g * beta) if n0 else None
    ga = gb = None
    if n1 or n2:
        gs = g.reshape((1,) + tuple(g.shape)).expand(ctx.input_shapes[1][:1] + tuple(g.shape))
        ga = bind(MATMUL, gs, mT(b)) if n1 else None
        gb = bind(MATMUL, mT(a), gs) if n2 else None
    if alpha != 1:
        ga = None if ga is None else ga * alpha
        gb = None if gb is None else gb * alpha
    return (gc, ga, gb)


def _addbmm_decomp(c, a, b, *, beta: object, alpha: object):  # noqa: ANN001, ANN202
    """addbmm with ember ops (the C backend's decomposition), as eager computes it: one
    ``addmm`` over the folded batch, or for float16/bfloat16 one float32 batched product
    accumulated batch by batch with a rounding to the dtype after each step."""
    nb, n, m = a.shape
    p = b.shape[2]
    if a.dtype.name not in ("float16", "bfloat16") or nb == 0:
        a2 = a.permute((1, 0, 2)).reshape((n, nb * m))
        return bind(ADDMM, c, a2, b.reshape((nb * m, p)), beta=beta, alpha=alpha)
    prods = bind(MATMUL, a.float(), b.float())
    acc = None if beta == 0 else c.float() * beta
    for i in range(nb):
        step = prods[i] * alpha
        acc = (step if acc is None else acc + step).to(a.dtype).float()
    return acc.to(a.dtype)


ADDBMM = register(OpDef(
    "addbmm", "extern", _addbmm_meta, _addbmm_eager, _addbmm_vjp,
    save_for={1: (2,), 2: (1,)}, tags=frozenset({"lowp_upcast"}), grad_name="AddbmmBackward0",
    decomp=_addbmm_decomp,
    doc="beta * c + alpha * sum_i a[i] @ b[i] (low precision rounds per batch, as PyTorch).",
))


# ---------------------------------------------------------------------------------- linear
def _linear_meta(x, w, b=None) -> tuple:  # noqa: ANN001
    sx, sw, d = tuple(x.shape), tuple(w.shape), x.dtype
    if (len(sw) != 2 or not sx or sx[-1] != sw[1] or w.dtype is not d or d is dt.bool
            or (b is not None and (b.dtype is not d or tuple(b.shape) != sw[:1]))):
        _linear_meta_error(x, w, b)
    return sx[:-1] + sw[:1], d


def _linear_meta_error(x, w, b) -> None:  # noqa: ANN001
    sx, sw = tuple(x.shape), tuple(w.shape)
    if len(sx) < 1 or len(sw) != 2 or sx[-1] != sw[1]:
        raise ShapeError(f"[linear] primitive expects (..., in) and (out, in); got {sx} and {sw}")
    if b is not None and tuple(b.shape) != sw[:1]:
        raise ShapeError(f"[linear] primitive expects a bias of shape {sw[:1]}; got "
                         f"{tuple(b.shape)}")
    check_dtypes("linear", *((x, w) if b is None else (x, w, b)))


def _linear_eager(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    if x.dtype in _LOWP_NP:  # float16/bfloat16: float32 product and bias, rounded once
        lead = x.shape[:-1]
        x2 = x.reshape(int(np.prod(lead, dtype=np.int64)), x.shape[-1])
        return _parallel.matmul_lowp(x2, w.T, b).reshape(lead + (w.shape[0],))
    if x.ndim == 2:
        out = _parallel.matmul(x, w.T)
    else:
        lead = x.shape[:-1]
        rows = 1
        for n in lead:
            rows *= n
        out = _parallel.matmul(x.reshape(rows, x.shape[-1]), w.T).reshape(lead + (w.shape[0],))
    if b is not None:
        out += b
    return out


# the params of the transposes and the bias sum below: what ``t.permute((1, 0))`` and
# ``t.sum(0)`` bind for a matrix (a float one for the sum), bound without their frontends; one
# shared dict each, so a followed call compares them by identity (never written)
_T2D = {"dims": (1, 0)}
_SUM0 = {"dims": (0,), "keepdim": False}


def _linear_vjp(ctx, g):  # noqa: ANN001
    # nothing is saved when only the bias needs a gradient
    x, w = ctx.inputs[:2] if ctx.inputs else (None, None)
    needs = ctx.needs_input_grad
    binder = _registry._binder
    gx = bind(LINEAR, g, binder(PERMUTE, (w,), _T2D)) if needs[0] else None
    out_f, in_f = ctx.input_shapes[1]
    rows = 1
    for n in ctx.input_shapes[0][:-1]:
        rows *= n
    flat = len(ctx.input_shapes[0]) == 2   # x and g are matrices already: no reshapes
    g2 = (g if flat else g.reshape((rows, out_f))) \
        if (len(needs) > 2 and needs[2]) or needs[1] else None
    gw = None
    if needs[1]:
        x2 = x if flat else x.reshape((rows, in_f))
        gw = bind(MATMUL, binder(PERMUTE, (g2,), _T2D), x2)
    gb = None
    if len(needs) > 2 and needs[2]:
        gb = binder(SUM, (g2,), _SUM0) if g2.dtype.is_floating_point else g2.sum(0)
    return (gx, gw) if len(needs) == 2 else (gx, gw, gb)


LINEAR = register(OpDef(
    "linear", "extern", _linear_meta, _linear_eager, _linear_vjp,
    save_for={0: (1,), 1: (0,)}, tags=frozenset({"lowp_upcast"}), grad_name="AddmmBackward0",
    doc="y = x @ w.T (+ b) over any leading dims of x (nn.functional.linear).",
))


# ---------------------------------------------------------------------------------- einsum
def parse_equation(equation: str) -> tuple[list[str], str]:
    """Split a normalized equation ``"ij,jk->ik"`` into its input terms and output term."""
    lhs, out = equation.split("->")
    return lhs.split(","), out


def _einsum_meta(*ops, equation: str) -> tuple:  # noqa: ANN002
    terms, out = parse_equation(equation)
    if len(terms) != len(ops):
        raise ShapeError(f"[einsum] equation {equation!r} names {len(terms)} operands; got "
                         f"{len(ops)}")
    sizes: dict[str, int] = {}
    for term, op in zip(terms, ops):
        if len(term) != len(op.shape):
            raise ShapeError(f"[einsum] term {term!r} does not match an operand of shape "
                             f"{tuple(op.shape)}")
        for c, n in zip(term, op.shape):
            if sizes.setdefault(c, n) != n:
                raise ShapeError(f"[einsum] primitive label {c} has sizes {sizes[c]} and {n}; "
                                 f"the frontend broadcasts first")
    return tuple(sizes[c] for c in out), check_dtypes("einsum", *ops)


def _einsum_eager(*ops: np.ndarray, equation: str) -> np.ndarray:
    # the optimizing path (BLAS through tensordot) pays off above small sizes only
    big = len(ops) > 2 or sum(o.size for o in ops) > 4096
    out = np.asarray(np.einsum(equation, *ops, optimize=big))
    if any(np.may_share_memory(out, o) for o in ops):
        out = out.copy()  # "ij->ji" and friends return views of the input
    return out


def _einsum_vjp(ctx, g):  # noqa: ANN001
    ops = ctx.inputs
    terms, out = parse_equation(ctx.params["equation"])
    used = set("".join(terms))
    fresh = iter(c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in used)
    grads = []
    for i, need in enumerate(ctx.needs_input_grad):
        if not need:
            grads.append(None)
            continue
        term, shape = terms[i], ctx.input_shapes[i]
        others = [t for j, t in enumerate(terms) if j != i]
        sub, args, target = [out], [g], []
        for j, t in enumerate(terms):
            if j != i:
                sub.append(t)
                args.append(ops[j])
        seen: set[str] = set()
        for c, n in zip(term, shape):
            if c in seen:  # a repeated label: the gradient lives on the diagonal
                f = next(fresh)
                sub.append(c + f)
                args.append(g.new_tensor(np.eye(n, dtype=g.dtype.np)))
                target.append(f)
                continue
            seen.add(c)
            target.append(c)
            if c not in out and all(c not in t for t in others):
                sub.append(c)  # summed over in this operand only: broadcast back
                args.append(g.new_ones((n,)))
        grads.append(bind(EINSUM, *args, equation=",".join(sub) + "->" + "".join(target)))
    return tuple(grads)


# the compiler's decomposition: pairwise products as batched matmuls
def _einsum_decomp(*ops, equation: str):  # noqa: ANN002, ANN202
    """einsum with ember tensor ops (the C backend's decomposition): repeated labels of a term
    become diagonals, a label only one operand has and the output lacks is summed there, and
    operands are contracted left to right, each pair as one batched ``matmul`` of
    ``(batch, rows, k) @ (batch, k, cols)``.  float16/bfloat16 run in float32 and round once
    (eager: ``lowp(np.einsum)``); integer sums are cast back to the dtype (NumPy's einsum
    accumulates, and wraps, in it)."""
    terms, out = parse_equation(equation)
    dtype = ops[0].dtype
    lowp_ = dtype.name in ("float16", "bfloat16")
    xs = [o.float() if lowp_ else o for o in ops]
    work = xs[0].dtype
    items = [_einsum_prepare(x, t, out, terms[:j] + terms[j + 1:], work)
             for j, (x, t) in enumerate(zip(xs, terms))]
    x, t = items[0]
    for j in range(1, len(items)):
        later = set(out).union(*(s for _, s in items[j + 1:]))
        x, t = _einsum_pair(x, t, items[j][0], items[j][1], later, work)
    x, t = _einsum_sum(x, t, set(out), work)
    x = x.permute(tuple(t.index(c) for c in out))
    return x.to(dtype) if lowp_ else x


def _einsum_sum(x, t: str, keep: set, work):  # noqa: ANN001, ANN202
    """Sum ``x`` (labels ``t``) over the labels not in ``keep``, in ``work`` dtype."""
    dims = tuple(d for d, c in enumerate(t) if c not in keep)
    if not dims:
        return x, t
    x = x.sum(dims)
    if x.dtype != work:
        x = x.to(work)  # integer sums promote to int64: wrap back, as NumPy's einsum
    return x, "".join(c for c in t if c in keep)


def _einsum_prepare(x, t: str, out: str, others: list, work):  # noqa: ANN001, ANN202
    """One operand with no repeated label (diagonals taken) and no label only it needs."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p = t.index(c)
        q = t.index(c, p + 1)
        x = x.diagonal(0, p, q)
        t = "".join(ch for d, ch in enumerate(t) if d not in (p, q)) + c
    keep = set(out).union(*others)
    return _einsum_sum(x, t, keep, work)


def _einsum_pair(a, ta: str, b, tb: str, later: set, work):  # noqa: ANN001, ANN202
    """``a`` (labels ``ta``) contracted with ``b`` (labels ``tb``) as one batched matmul."""
    a, ta = _einsum_sum(a, ta, later | set(tb), work)
    b, tb = _einsum_sum(b, tb, later | set(ta), work)
    batch = [c for c in ta if c in tb and c in later]
    red = [c for c in ta if c in tb and c not in later]
    rows = [c for c in ta if c not in tb]
    cols = [c for c in tb if c not in ta]
    size = dict(zip(ta, a.shape)) | dict(zip(tb, b.shape))

    def prod(labels: list) -> int:
        n = 1
        for c in labels:
            n *= size[c]
        return n

    nb, m, k, n = prod(batch), prod(rows), prod(red), prod(cols)
    a3 = a.permute(tuple(ta.index(c) for c in batch + rows + red)).reshape((nb, m, k))
    b3 = b.permute(tuple(tb.index(c) for c in batch + red + cols)).reshape((nb, k, n))
    if not red:  # nothing summed: a broadcast product (not nb GEMMs of k = 1)
        y = a3 * b3
    elif m == 1 and n == 1:  # a dot product per batch entry: a row reduction
        y, _ = _einsum_sum(a3.reshape((nb, k)) * b3.reshape((nb, k)), "bk", {"b"}, work)
    else:
        y = bind(MATMUL, a3, b3)
    y = y.reshape(tuple(size[c] for c in batch + rows + cols))
    return y, "".join(batch + rows + cols)


_MAX_OPERANDS = 52  # one label per operand at least; the vjp reads every operand

EINSUM = register(OpDef(
    "einsum", "extern", _einsum_meta, lowp(_einsum_eager), _einsum_vjp,
    save=tuple(range(_MAX_OPERANDS)), tags=frozenset({"lowp_upcast"}), decomp=_einsum_decomp,
    doc="Explicit einsum without ellipses.",
))
