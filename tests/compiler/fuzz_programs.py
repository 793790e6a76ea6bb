"""Random small programs for the compiler fuzzer (tests/compiler/test_fuzz.py).

A program is a list of steps ``(op, a, b, c)``; ``run_program`` interprets it on a pool of
tensors that starts with the inputs.  Every choice the interpreter makes depends only on shapes,
dtypes and flags (never on values), so the same program runs eagerly and compiled and the two
runs can be compared step for step.  ``a``, ``b`` and ``c`` are arbitrary non-negative ints
that pick pool entries, dims and constants modulo what is valid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ember
import ember.nn.functional as F

FLOATS = (ember.float32, ember.float64)

UNARY = ("neg", "exp", "abs", "sin", "tanh", "relu", "sigmoid", "mul2", "radd")
BINARY = ("add", "mul", "sub", "maximum", "div")
REDUCE = ("sum", "mean", "amax")
VIEWS = ("transpose", "permute", "slice", "select", "reshape", "view", "expand", "unsqueeze",
         "narrow", "diagonal", "t_flat", "detach")
INPLACE = ("add_", "mul_", "copy_", "zero_", "setitem", "masked_fill_", "setslice", "view_add_",
           "mul_t", "index_iadd", "nograd_sub_")
OTHER = ("retview", "break", "write_input_view", "matmul", "cat", "stack", "softmax",
         "layer_norm", "rand_like", "dropout", "item", "bool", "keep", "clone", "contiguous",
         "to64", "to32")
OPS = UNARY + BINARY + REDUCE + VIEWS + INPLACE + OTHER


def _pick(pool: list, a: int) -> ember.Tensor:
    return pool[a % len(pool)]


def _bcast_ok(sa: tuple, sb: tuple) -> bool:
    for x, y in zip(reversed(sa), reversed(sb)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def _writable(t: ember.Tensor) -> bool:
    """In-place writes that eager accepts (no leaf requiring grad, no overlapping memory)."""
    if t.dtype == ember.bool:
        return False
    if t.requires_grad and (t.is_leaf or (t._base is not None and t._base.is_leaf)):
        return False
    # (empty tensors: eager NumPy strides of empty views may be 0, lazy ones are not)
    return t.numel() == 0 or not any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape))


def _other(pool: list, t: ember.Tensor, b: int) -> Any:
    """An operand for ``t``: a pool tensor that broadcasts with it, else a Python scalar."""
    o = _pick(pool, b)
    if o.dtype != ember.bool and _bcast_ok(tuple(t.shape), tuple(o.shape)):
        return o
    return (b % 5) * 0.5 - 1.0 if t.dtype.is_floating_point else (b % 5) - 2


def run_program(prog: list, inputs: list, keep: list, seed: int) -> list:
    """Interpret ``prog`` on ``inputs``; returns the tensors (and scalars) it chose to return.
    ``keep`` is a list owned by the caller that the program appends tensors to."""
    pool: list = list(inputs)
    scalars: list = []
    # ids of pool tensors whose strides may differ between eager and compiled (results of
    # non-view ops on non-contiguous tensors, and views of those: the known layout gap, see
    # test_fuzz_regressions.test_pointwise_layout_of_transposed_input).  Layout-dependent
    # choices (is_contiguous, reshape/view/contiguous being a view or a copy) avoid them.
    tainted: set = set()

    def odd(t: Any) -> bool:
        # (empty tensors: eager NumPy strides of empty views vary; they hold no values)
        return isinstance(t, ember.Tensor) and t.numel() > 0 and (
            id(t) in tainted or not t.is_contiguous() or 0 in t.stride())

    ember.manual_seed(seed)
    for op, a, b, c in prog:
        x = _pick(pool, a)
        xt = id(x) in tainted
        dense = x.clone(memory_format="contiguous_format") if xt else x
        extra = None
        fl = x.dtype.is_floating_point
        nd = x.ndim
        r: Any = None
        if op == "neg":
            r = -x
        elif op in ("exp", "sin", "tanh", "sigmoid"):
            if fl:
                r = getattr(x, op)()
        elif op == "abs":
            r = x.abs()
        elif op == "relu":
            r = x.relu() if x.dtype != ember.bool else None
        elif op == "mul2":
            r = x * (scalars[-1] if scalars else 2)
        elif op == "radd":
            r = 1.5 + x if fl else 3 - x
        elif op in BINARY:
            if x.dtype == ember.bool:
                continue
            y = extra = _other(pool, x, b)
            if op == "add":
                r = x + y
            elif op == "mul":
                r = x * y
            elif op == "sub":
                r = x - y
            elif op == "div":
                r = x / (y if not isinstance(y, ember.Tensor) else y.abs() + 1)
                if not isinstance(y, ember.Tensor) and y == 0:
                    r = None
            elif isinstance(y, ember.Tensor):
                r = ember.maximum(x, y)
        elif op in REDUCE:
            if x.dtype == ember.bool or (op == "mean" and not fl):
                continue
            if nd == 0 or b % 4 == 0:
                r = getattr(x, op)() if op != "amax" or x.numel() else None
            else:
                d = b % nd
                if op == "amax" and x.shape[d] == 0:
                    continue
                r = getattr(x, op)(d, keepdim=bool(c % 2))
        elif op == "transpose":
            if nd >= 2:
                r = x.transpose(b % nd, c % nd)
        elif op == "permute":
            perm = list(range(nd))
            rng = np.random.RandomState(b)
            rng.shuffle(perm)
            r = x.permute(*perm)
        elif op == "slice":
            if nd:
                d = b % nd
                n = x.shape[d]
                start = c % (n + 1)
                step = 1 + (b // 7) % 2
                idx = [slice(None)] * nd
                idx[d] = slice(start, None, step)
                r = x[tuple(idx)]
        elif op == "select":
            if nd and x.shape[b % nd]:
                d = b % nd
                r = x.select(d, c % x.shape[d])
        elif op == "reshape":
            r = dense.reshape(-1) if b % 2 else dense.reshape(*x.shape[::-1])
        elif op == "view":
            y = dense.contiguous()
            r = y.view(-1) if b % 2 else y.view(1, *x.shape)
        elif op == "expand":
            r = x.expand(2, *x.shape)
        elif op == "unsqueeze":
            r = x.unsqueeze(b % (nd + 1))
        elif op == "narrow":
            if nd:
                d = b % nd
                n = x.shape[d]
                s = c % (n + 1)
                r = x.narrow(d, s, (n - s) // 2 + (n - s) % 2)
        elif op == "diagonal":
            if nd >= 2:
                r = x.diagonal(offset=(b % 3) - 1, dim1=0, dim2=1)
        elif op == "t_flat":
            r = x.t() if nd <= 2 else dense.flatten(1)
        elif op == "detach":
            r = x.detach()
        elif op == "nograd_sub_":
            # an optimizer-style update of a leaf (or anything) under no_grad
            if x.dtype.is_floating_point and (x.numel() == 0 or 0 not in x.stride()):
                y = _other(pool, x, b)
                with ember.no_grad():
                    if isinstance(y, ember.Tensor) and tuple(
                            ember.broadcast_shapes(x.shape, y.shape)) == tuple(x.shape):
                        x.sub_(0.1 * y.detach().to(x.dtype))
                    else:
                        x.sub_(0.25)
        elif op in INPLACE:
            if not _writable(x):
                continue
            if op == "add_":
                y = _other(pool, x, b)
                if isinstance(y, ember.Tensor):
                    if not _bcast_ok(tuple(x.shape), tuple(y.shape)) or y.ndim > nd or any(
                            n != m and m != 1 for n, m in zip(x.shape[::-1], y.shape[::-1])):
                        continue
                    y = y.to(x.dtype)
                x.add_(y)
            elif op == "mul_":
                x.mul_((b % 3) + 2 if not fl else 0.5 * (b % 3) + 0.5)
            elif op == "copy_":
                y = _pick(pool, b)
                if y.ndim > nd or any(n != m and m != 1 for n, m in
                                      zip(x.shape[::-1], y.shape[::-1])):
                    continue
                x.copy_(y)
            elif op == "mul_t":
                y = _other(pool, x, b)
                if not isinstance(y, ember.Tensor) or tuple(
                        ember.broadcast_shapes(x.shape, y.shape)) != tuple(x.shape) or (
                        y.dtype.is_floating_point and not fl):
                    continue
                x.mul_(y)
            elif op == "index_iadd":
                if nd and x.shape[0]:
                    idx = ember.tensor([c % x.shape[0], (c // 3) % x.shape[0]])
                    x[idx] += 1
            elif op == "zero_":
                x.zero_()
            elif op == "setitem":
                if nd and x.shape[0]:
                    x[c % x.shape[0]] = (b % 7) - 3
            elif op == "setslice":
                if nd and x.shape[-1] > 1:
                    x[..., 1::2] = _pick(pool, b).sum().to(x.dtype) if fl else 7
            elif op == "masked_fill_":
                m = x > 0 if x.dtype != ember.bool else x
                x.masked_fill_(m, (c % 5) - 2)
            elif op == "view_add_":
                if nd:
                    v = x.select(b % nd, 0) if x.shape[b % nd] else x
                    if _writable(v):
                        v.add_(1)
            r = x if b % 3 == 0 else None
        elif op == "retview":
            # a view of a pool tensor next to it in the pool: returned views of each other
            if nd:
                pool.append(x)
                r = x[c % x.shape[0]] if x.shape[0] else x.t() if nd <= 2 else x
        elif op == "break":
            ember._dynamo.graph_break()
        elif op == "write_input_view":
            # write through a view of an input (or of whatever x is), then read the base
            v = x.unsqueeze(0)[:, ...]
            if nd >= 2:
                v = x.transpose(0, 1)[: 1 + c % 2]
            if _writable(v):
                v.mul_(-1) if c % 2 else v.sub_(0.5 if fl else 1)
                r = x * 1
        elif op == "matmul":
            if nd >= 2 and x.dtype != ember.bool:
                r = x @ x.transpose(-1, -2)
            elif nd == 1 and x.dtype != ember.bool:
                r = x @ x
        elif op == "cat":
            if nd:
                d = b % nd
                r = ember.cat([x, x * 2], dim=d)
        elif op == "stack":
            y = _pick(pool, b)
            if y.shape == x.shape:
                r = ember.stack([x, y], dim=c % (nd + 1))
        elif op == "softmax":
            if fl and nd:
                r = x.softmax(b % nd)
        elif op == "layer_norm":
            if fl and nd and x.shape[-1]:
                r = F.layer_norm(x, (x.shape[-1],))
        elif op == "rand_like":
            if fl:
                r = x + ember.rand_like(x)
        elif op == "dropout":
            if fl:
                r = F.dropout(x, p=0.5, training=True)
        elif op == "item":
            if x.dtype != ember.bool:
                s = x.sum().item()
                scalars.append(s if np.isfinite(s) else 1.0)
        elif op == "bool":
            if x.numel() and x.dtype != ember.bool:
                r = x.neg() if bool(x.sum() > 0) else x.abs()
        elif op == "keep":
            keep.append(x)
            if nd and b % 2:
                keep.append(x[:1])
        elif op == "clone":
            r = x.clone()
        elif op == "contiguous":
            r = dense.contiguous()
        elif op == "to64":
            r = x.to(ember.float64) if x.dtype != ember.bool else None
        elif op == "to32":
            r = x.to(ember.float32) if x.dtype != ember.bool else None
        if r is not None:
            densified = op in ("reshape", "view", "contiguous", "t_flat")
            if r._base is not None and not (densified and xt):
                if xt:
                    tainted.add(id(r))
            elif r is not x and not densified and (odd(x) or odd(extra)):
                tainted.add(id(r))
            pool.append(r)
    return pool, scalars


def make_inputs(specs: list, seed: int, grow: int = 0) -> list:
    """Fresh ember tensors: ``(shape, dtype, layout, requires_grad, alias)`` per input; ``grow``
    adds to every size > 1 (the dynamic-shape runs)."""
    rng = np.random.RandomState(seed)
    out: list = []
    for shape, dtype, layout, rg, alias in specs:
        shape = tuple(n + grow if n > 1 else n for n in shape)
        if alias and out and out[0].ndim and out[0].shape[0] and not out[0].requires_grad:
            out.append(out[0][0])  # a view of the first input
            continue
        npd = dtype.np
        if layout == "t" and len(shape) >= 2:
            full = shape[:-2] + (shape[-1], shape[-2])
            arr = _values(rng, full, npd)
            t = ember.from_numpy(arr).transpose(-1, -2)
        elif layout == "s":
            full = shape[:-1] + (2 * shape[-1],) if shape else shape
            arr = _values(rng, full, npd)
            t = ember.from_numpy(arr)
            if shape:
                t = t[..., ::2]
        else:
            t = ember.from_numpy(_values(rng, shape, npd))
        if rg and dtype.is_floating_point:
            t = t.detach().requires_grad_(True) if layout == "c" else t.requires_grad_(True)
        out.append(t)
    return out


def _values(rng: np.random.RandomState, shape: tuple, npd: Any) -> np.ndarray:
    if np.issubdtype(npd, np.integer):
        return rng.randint(-5, 6, size=shape).astype(npd)
    return np.asarray(rng.randn(*shape)).astype(npd)
