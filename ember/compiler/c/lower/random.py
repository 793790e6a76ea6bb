"""Random ops as pointwise C (docs/compiler.md "Philox in C").

``dropout`` (forward and backward: the backward is dropout of the gradient with the same
params), ``uniform``, ``normal``, ``bernoulli``, ``exponential``, ``cauchy``, ``log_normal``,
``geometric`` and ``randint`` join the open fusion group like a pointwise op (the last five
call the prelude's ``ember_rand_exponential``/``_cauchy``/``_geometric``, ``ember_randn`` and
``ember_randint``); bernoulli's range check of ``p`` is a ``PointCheck`` (the kernel returns
1, the driver reruns eagerly and eager raises).  Element ``i`` (its flat index in C order of
the output, whatever the loop order) is computed from ``(seed, offset, i)`` by the prelude's
Philox helpers exactly as the eager op draws it from the stream (docs/random.md), so compiled
results equal eager bit for bit (float64 through libm's log/tan/exp/cos/sin: within a few
ulp).  ``seed``/``offset`` are runtime integers (``api._rng_slots`` lifts them), so a
generator that moves on does not recompile.

The flat index is a ``FlatIndex`` whose text is set when the group closes into a plain kernel
(``i`` in a flat loop, ``sum(i_d * stride_d)`` otherwise); a group holding a random op is
therefore never absorbed into a reduction, row kernel or GEMM epilogue (``has_random``), where
the loop variables differ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.compiler.c.ir.kernels import SortKernel
from ember.compiler.c.ir.loop_ir import (
    COMPUTE_CTYPES,
    STORAGE_CTYPES,
    FlatIndex,
    Geometry,
    Index,
    Kernel,
    Let,
    Op,
    PointCheck,
    Store,
    contiguous_strides,
)
from ember.compiler.c.lower.context import LoweringContext, is_ref, size_of
from ember.compiler.c.lower.pointwise import fill_outputs
from ember.compiler.c.lower.registry import lowering
from ember.compiler.frontend.graph import Sym
from ember.ops import OPS

_FLOATS = ("float32", "float64", "float16", "bfloat16")


def _u64(v: Any) -> str:
    if type(v) is Sym:
        return f"((uint64_t)ints[{v.index}])"
    return f"((uint64_t){int(v) % (1 << 64)}ULL)"


def _f64(v: Any) -> str:
    if type(v) is Sym:
        return f"(floats[{v.index}])"
    return f"({float(v)!r})"


def _round_to(dtype: Any, text: str) -> str:
    """A double rounded once to ``dtype``, as its compute type (float for float16/bfloat16)."""
    name = dtype.np.name
    if name == "float64":
        return f"({text})"
    if name == "float32":
        return f"((float)({text}))"
    if name == "float16":
        return f"ember_f16_to_f32(ember_f64_to_f16({text}))"
    return f"ember_bf16_to_f32(ember_f64_to_bf16({text}))"


def _scalar_ok(v: Any, kinds: tuple) -> bool:
    return type(v) is Sym or (type(v) in kinds)


def _seed_and_offset(n: Any) -> str | None:
    """Why the node's ``seed``/``offset`` cannot be read by C (None: they can)."""
    p = n.params
    for k in ("seed", "offset"):
        if not _scalar_ok(p.get(k), (int,)):
            return f"parameter {k}={p.get(k)!r}"
    return None


@lowering(OPS.dropout)
def lower_dropout(lw: LoweringContext, i: int, n: Any) -> str | None:
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    x = n.args[0]
    if not is_ref(x):
        return "no tensor input"
    d = lw.dtype_of(x)
    if d.np.name not in _FLOATS:
        return f"dtype {d.name}"
    p = n.params["p"]
    if not _scalar_ok(p, (int, float)):
        return f"parameter p={p!r}"
    ct = COMPUTE_CTYPES[d.np.name]
    if type(p) is Sym:
        scale = f"({_f64(p)} < 1.0 ? {_round_to(d, f'1.0 / (1.0 - {_f64(p)})')} : ({ct})0)"
    else:  # PyTorch's 1 / (1 - p) rounded to the input dtype (eager's `scale`)
        s = float(np.asarray(1.0 / (1.0 - p) if p < 1 else 0.0).astype(d.np))
        scale = f"(({ct}){s!r})"
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    tmpl = (f"({{0}} * (ember_dropout_keep({seed}, {off}, {{1}}, {_f64(p)}) ? {scale} : "
            f"({ct})0))")
    return _emit(lw, i, n, lw.shape_of(x), d, [x], tmpl)


@lowering(OPS.uniform)
def lower_uniform(lw: LoweringContext, i: int, n: Any) -> str | None:
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    d = n.specs[0][1]
    if d.np.name not in _FLOATS:
        return f"dtype {d.name}"
    lo, hi = n.params["low"], n.params["high"]
    if not (_scalar_ok(lo, (int, float)) and _scalar_ok(hi, (int, float))):
        return "non-numeric low/high"
    shape = tuple(size_of(m) for m in n.specs[0][0])
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    if d.np.name == "float64":
        v = f"ember_rand_uniform_f64({seed}, {off}, {{0}}, {_f64(lo)}, {_f64(hi)})"
    else:
        unit = {"float32": "ember_unit_f32", "float16": "ember_unit_f16",
                "bfloat16": "ember_unit_bf16"}[d.np.name]
        v = (f"({_f64(lo)} + ({_f64(hi)} - {_f64(lo)}) * "
             f"{unit}(ember_philox_word({seed}, {off} + {{0}})))")
    return _emit(lw, i, n, shape, d, [], _round_to(d, v))


@lowering(OPS.normal)
def lower_normal(lw: LoweringContext, i: int, n: Any) -> str | None:
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    d = n.specs[0][1]
    if d.np.name not in _FLOATS:
        return f"dtype {d.name}"
    shape = tuple(size_of(m) for m in n.specs[0][0])
    refs, parts = [], []
    for a in n.args[:2]:
        if is_ref(a):
            if lw.dtype_of(a) != d:
                return "mean/std of another dtype"
            parts.append(f"((double){{{len(refs)}}})")
            refs.append(a)
        elif _scalar_ok(a, (int, float)):
            parts.append(_f64(a))
        else:
            return f"mean/std {a!r}"
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    ix = f"{{{len(refs)}}}"
    if d.np.name == "float64":
        z = f"ember_randn({seed}, {off}, {ix}, 2, ember_unit_f32)"
    else:
        unit = {"float32": "ember_unit_f32", "float16": "ember_unit_f16",
                "bfloat16": "ember_unit_bf16"}[d.np.name]
        z = f"ember_randn({seed}, {off}, {ix}, 1, {unit})"
    return _emit(lw, i, n, shape, d, refs, _round_to(d, f"{parts[0]} + {parts[1]} * {z}"))


@lowering(OPS.bernoulli)
def lower_bernoulli(lw: LoweringContext, i: int, n: Any) -> str | None:
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    x = n.args[0]
    if not is_ref(x):
        return "no tensor input"
    pd, d = lw.dtype_of(x), n.specs[0][1]
    if pd.np.name not in _FLOATS:
        return f"probability dtype {pd.name}"
    if d.np.name not in STORAGE_CTYPES:
        return f"output dtype {d.name}"
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    tmpl = f"(ember_unit32(ember_philox_word({seed}, {off} + {{1}})) < (double){{0}})"
    # eager raises for p outside [0, 1] (NaN included): the kernel reports it, the driver
    # reruns the graph eagerly and eager raises its error
    return _emit(lw, i, n, tuple(lw.shape_of(x)), d, [x], tmpl,
                 check="(!(((double){0} >= 0.0) & ((double){0} <= 1.0)))")


_UNITS = {"float32": "ember_unit_f32", "float16": "ember_unit_f16", "bfloat16": "ember_unit_bf16",
          "float64": "ember_unit_f32"}  # float64 draws two words (wpu 2) and ignores the map


def _draw(n: Any, helper: str, *params: str, per_dtype: bool = True) -> str | None:
    """``helper(seed, offset, i[, wpu, unit], *params)`` for node ``n`` (``{0}`` the flat
    index), rounded once to the output dtype; None when the node's dtype is not a float."""
    d = n.specs[0][1]
    if d.np.name not in _FLOATS:
        return None
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    args = [seed, off, "{0}"]
    if per_dtype:
        args += ["2" if d.np.name == "float64" else "1", _UNITS[d.np.name]]
    return _round_to(d, f"{helper}({', '.join(args + list(params))})")


def _float_params(n: Any, names: tuple) -> list | str:
    """The params ``names`` as C doubles, or why one cannot be read by C."""
    out = []
    for k in names:
        v = n.params[k]
        if not _scalar_ok(v, (int, float)):
            return f"parameter {k}={v!r}"
        out.append(_f64(v))
    return out


@lowering(OPS.exponential, helper="ember_rand_exponential", names=("lambd",))
@lowering(OPS.cauchy, helper="ember_rand_cauchy", names=("median", "sigma"))
def lower_float_draw(lw: LoweringContext, i: int, n: Any, helper: str,
                     names: tuple) -> str | None:
    """exponential_ / cauchy_: one uniform per element mapped in double, rounded once."""
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    params = _float_params(n, names)
    if isinstance(params, str):
        return params
    v = _draw(n, helper, *params)
    if v is None:
        return f"dtype {n.specs[0][1].name}"
    shape = tuple(size_of(m) for m in n.specs[0][0])
    return _emit(lw, i, n, shape, n.specs[0][1], [], v)


@lowering(OPS.log_normal)
def lower_log_normal(lw: LoweringContext, i: int, n: Any) -> str | None:
    """exp(mean + std * z), z drawn as ``normal`` draws it."""
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    params = _float_params(n, ("mean", "std"))
    if isinstance(params, str):
        return params
    d = n.specs[0][1]
    if d.np.name not in _FLOATS:
        return f"dtype {d.name}"
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    wpu = "2" if d.np.name == "float64" else "1"
    z = f"ember_randn({seed}, {off}, {{0}}, {wpu}, {_UNITS[d.np.name]})"
    shape = tuple(size_of(m) for m in n.specs[0][0])
    return _emit(lw, i, n, shape, d, [], _round_to(d, f"exp({params[0]} + {params[1]} * {z})"))


def _to_dtype(d: Any, text: str) -> str:
    """A double or int64 ``text`` converted to ``d`` as NumPy's ``astype`` does."""
    if d.np.name in _FLOATS:
        return _round_to(d, f"(double)({text})")
    return f"(({STORAGE_CTYPES[d.np.name]})({text}))"


@lowering(OPS.geometric)
def lower_geometric(lw: LoweringContext, i: int, n: Any) -> str | None:
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    params = _float_params(n, ("p",))
    if isinstance(params, str):
        return params
    d = n.specs[0][1]
    if d.np.name not in STORAGE_CTYPES:
        return f"dtype {d.name}"
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    k = f"ember_rand_geometric({seed}, {off}, {{0}}, {params[0]})"
    if d.np.name not in _FLOATS and d.np.name != "bool":
        k = f"(int64_t)({k})"  # in range: exact; out of range: wraps (NumPy: platform values)
    shape = tuple(size_of(m) for m in n.specs[0][0])
    return _emit(lw, i, n, shape, d, [], _to_dtype(d, k))


@lowering(OPS.randint)
def lower_randint(lw: LoweringContext, i: int, n: Any) -> str | None:
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    lo, hi = n.params["low"], n.params["high"]
    if not (_scalar_ok(lo, (int,)) and _scalar_ok(hi, (int,))):
        return "non-integer low/high"
    d = n.specs[0][1]
    if d.np.name not in STORAGE_CTYPES:
        return f"dtype {d.name}"
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    v = f"ember_randint({seed}, {off}, {{0}}, {_u64(lo)}, {_u64(hi)})"
    if d.np.name == "float32":
        text = f"((float)({v}))"  # int64 -> float32 rounds once, as NumPy's astype
    else:
        text = _to_dtype(d, v)
    shape = tuple(size_of(m) for m in n.specs[0][0])
    return _emit(lw, i, n, shape, d, [], text)


@lowering(OPS.randperm)
def lower_randperm(lw: LoweringContext, i: int, n: Any) -> str | None:
    """The stable argsort of ``n`` uint64 keys (words ``2k``, ``2k + 1``): a kernel stores each
    key with its sign bit flipped (uint64 order as int64 order), a ``SortKernel`` sorts them
    ascending, and its indices are the permutation (converted to the output dtype)."""
    bad = _seed_and_offset(n)
    if bad is not None:
        return bad
    d, size = n.specs[0][1], n.params["n"]
    if type(size) is not int or d.np.name not in STORAGE_CTYPES:
        return f"n={size!r}, dtype {d.name}"
    if size == 0:
        fill_outputs(lw, i, n)
        return None
    seed, off = _u64(n.params["seed"]), _u64(n.params["offset"])
    lw.close_group()
    keys = lw.buffer(dt.int64, (size,), "temp")
    ix = FlatIndex((size,))
    ix.bind(True)
    key = Op("randperm_key", f"ember_randperm_key({seed}, {off}, {{0}})", (ix,))
    lw.add_kernel(Kernel(lw.kernel_name(), (size,), [Store(keys, Index(0, (("i", 1),)), key)],
                         flat=True, ops=[n.op.name]))
    vals = lw.buffer(dt.int64, (size,), "temp")
    idx = lw.buffer(dt.int64, (size,), "temp")
    lw.add_kernel(SortKernel(lw.kernel_name(), dt.int64, keys, Geometry.contiguous((size,)), 0,
                             False, size, [vals, idx], [n.op.name]))
    lw.bind(i, 0, idx, Geometry.contiguous((size,)), dt.int64)
    if d is not dt.int64:  # the indices converted as NumPy's astype, in the open group
        ref = ("n", i, 0)
        g = lw.join_group((size,), [ref])
        name = g.local()
        g.body.append(Let(name, COMPUTE_CTYPES[d.np.name],
                          Op("convert", _to_dtype(d, "{0}"), (lw.operand(g, ref),))))
        lw.add_value(g, i, name, (size,), d, contiguous_strides((size,)), n.op.name)
    return None


def _emit(lw: LoweringContext, i: int, n: Any, shape: tuple, out_dt: Any, refs: list,
          tmpl: str, check: str | None = None) -> str | None:
    """Append ``tmpl`` (``{0}``.. the operands in ``refs``, then the flat index) as a Let of
    the open group (a new group of ``shape`` if it iterates another shape)."""
    if "ember_dropout_keep(" in tmpl and "ember_dropout_keep" not in lw.helpers:
        return "C helper ember_dropout_keep not in the prelude"
    g = lw.join_group(shape, refs)
    args = [lw.operand(g, r) for r in refs]
    ix = FlatIndex(shape)
    g.flat_indices.append(ix)
    if check is not None:
        g.body.append(PointCheck(Op("check", check, tuple(args))))
    name = g.local()
    expr = Op(n.op.name, tmpl, tuple(args) + (ix,))
    g.body.append(Let(name, COMPUTE_CTYPES[out_dt.np.name], expr))
    lw.add_value(g, i, name, shape, out_dt, contiguous_strides(shape), n.op.name)
    return None


__all__ = ["lower_bernoulli", "lower_dropout", "lower_float_draw", "lower_geometric",
           "lower_log_normal", "lower_normal", "lower_randint", "lower_randperm",
           "lower_uniform"]
