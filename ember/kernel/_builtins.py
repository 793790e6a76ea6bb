"""The C compiler's rule for each builtin of ``ember.kernel.language`` (keyed by identity).

Each rule is ``rule(gen, node, args, kwargs) -> Val | Obj | None``: it type-checks its
operands (errors name the kernel line), emits the loops it needs (reductions, ``dot``,
``store``) and returns the result's typed value."""

from __future__ import annotations

import math
from typing import Any

from ember import dtypes as _dt
from ember.compiler.c.codegen.prelude import load_expr, store_expr
from ember.kernel import language as tl
from ember.kernel._stmts import Obj, _py, wrap
from ember.kernel._values import (
    CTYPES,
    MATH,
    Val,
    broadcast,
    cast_expr,
    flat_index,
    is_float,
    literal,
    promote,
)

_MISSING = object()
LANES = 16


def _arg(g: Any, node: Any, args: list, kwargs: dict, i: int, name: str,
         default: Any = _MISSING) -> Any:
    if i < len(args):
        return args[i]
    if name in kwargs:
        return kwargs[name]
    if default is _MISSING:
        raise g.error(f"missing argument {name!r}", node)
    return default


def _val(g: Any, v: Any, node: Any, what: str) -> Val:
    if isinstance(v, Obj) and isinstance(v.obj, (bool, int, float)):
        v = literal(v.obj)
    if not isinstance(v, Val) or (v.const is not None and
                                  not isinstance(v.const, (bool, int, float))):
        raise g.error(f"{what} must be a kernel value, got {_describe(v)}", node)
    return v


def _describe(v: Any) -> str:
    return repr(v.obj) if isinstance(v, Obj) else v.type_str()


def _const_int(g: Any, v: Any, node: Any, what: str) -> int:
    c = _py(g, v, node)
    if not isinstance(c, int) or isinstance(c, bool):
        raise g.error(f"{what} must be a constexpr int, got {_describe(v)}", node)
    return c


def _shape(g: Any, v: Any, node: Any) -> tuple:
    c = _py(g, v, node)
    c = (c,) if isinstance(c, int) else c
    if not isinstance(c, tuple) or not all(isinstance(n, int) and n > 0 for n in c):
        raise g.error(f"a block shape must be constexpr positive ints, got {c!r}", node)
    return c


def _dtype(g: Any, v: Any, node: Any) -> str:
    c = v.obj if isinstance(v, Obj) else None
    if not isinstance(c, _dt.dtype) or c.name not in CTYPES and c.name not in (
            "float16", "bfloat16"):
        raise g.error(f"expected a dtype (ember.kernel.float32, ...), got {c!r}", node)
    return "float32" if c.name in ("float16", "bfloat16") else c.name


def _not_ptr(g: Any, v: Val, node: Any, what: str) -> Val:
    if v.ptr is not None:
        raise g.error(f"{what} takes values, not pointers (load them first)", node)
    return v


# -- program -------------------------------------------------------------------------------------
def program_id(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    axis = _const_int(g, _arg(g, node, args, kwargs, 0, "axis"), node, "axis")
    if axis not in (0, 1, 2):
        raise g.error(f"program_id axis must be 0, 1 or 2, got {axis}", node)
    return Val("int64", (), lambda i: f"pid{axis}")


def num_programs(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    axis = _const_int(g, _arg(g, node, args, kwargs, 0, "axis"), node, "axis")
    if axis not in (0, 1, 2):
        raise g.error(f"num_programs axis must be 0, 1 or 2, got {axis}", node)
    return Val("int64", (), lambda i: f"g{axis}")


def cdiv(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    a, b = (_val(g, x, node, "cdiv's operand") for x in args[:2])
    if a.const is not None and b.const is not None:
        return literal(-(-a.const // b.const))
    if is_float(a.dtype) or is_float(b.dtype):
        raise g.error("cdiv needs integers", node)
    return Val("int64", (), lambda i: f"ember_div_floor_i({cast_expr(a, 'int64', [])} + "
                                      f"{cast_expr(b, 'int64', [])} - 1, "
                                      f"{cast_expr(b, 'int64', [])})",
               cheap=a.cheap and b.cheap)


def arange(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    start = _const_int(g, _arg(g, node, args, kwargs, 0, "start"), node, "arange's start")
    end = _const_int(g, _arg(g, node, args, kwargs, 1, "end"), node, "arange's end")
    if end <= start:
        raise g.error(f"arange needs start < end, got {start} and {end}", node)
    return Val("int64", (end - start,),
               lambda i: f"({i[0]} + {start})" if start else f"({i[0]})",
               extra={"arange": end})


def full(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    shape = _shape(g, _arg(g, node, args, kwargs, 0, "shape"), node)
    value = _val(g, _arg(g, node, args, kwargs, 1, "value"), node, "full's value")
    dt = _dtype(g, _arg(g, node, args, kwargs, 2, "dtype"), node)
    return Val(dt, shape, lambda i: cast_expr(value, dt, []), cheap=value.cheap)


def zeros(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    shape = _arg(g, node, args, kwargs, 0, "shape")
    dt = _arg(g, node, args, kwargs, 1, "dtype")
    return full(g, node, [shape, literal(0), dt], {})


# -- memory --------------------------------------------------------------------------------------
def _mask(g: Any, m: Any, node: Any) -> Val | None:
    if m is None or (isinstance(m, Obj) and m.obj is None):
        return None
    m = _val(g, m, node, "mask")
    if m.dtype != "bool":
        raise g.error(f"mask must be a boolean block, got {m.type_str()}", node)
    return m


def load(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    p = _val(g, _arg(g, node, args, kwargs, 0, "pointer"), node, "load's pointer")
    if p.ptr is None:
        raise g.error(f"load needs a pointer (a tensor argument plus offsets), got "
                      f"{p.type_str()}", node)
    mask = _mask(g, _arg(g, node, args, kwargs, 1, "mask", None), node)
    other = _arg(g, node, args, kwargs, 2, "other", None)
    other = None if other is None or (isinstance(other, Obj) and other.obj is None) else \
        _not_ptr(g, _val(g, other, node, "other"), node, "other")
    shape = p.shape
    for extra in (mask, other):
        if extra is not None:
            shape = broadcast(shape, extra.shape)
            if shape is None or len(shape) > len(p.shape) and p.shape:
                raise g.error(f"mask/other of shape {list(extra.shape)} do not match the "
                              f"pointer block {list(p.shape)}", node)
    st = p.extra.get("storage_dtype", p.dtype)
    dt = p.dtype
    name = f"a_{p.ptr}"
    g.loaded.add(p.ptr)
    hook = g.fusion.get(p.ptr)

    def fn(idx: list) -> str:
        ref = hook.load(p.at(idx)) if hook is not None else \
            load_expr(st, f"{name}[{p.at(idx)}]")
        if mask is None:
            return ref
        alt = cast_expr(other, dt, idx) if other is not None else cast_expr(literal(0), dt, [])
        return f"({mask.at(idx)} ? {ref} : {alt})"

    return Val(dt, shape, fn, cheap=False, extra={"load": True})


def store(g: Any, node: Any, args: list, kwargs: dict) -> None:
    p = _val(g, _arg(g, node, args, kwargs, 0, "pointer"), node, "store's pointer")
    if p.ptr is None:
        raise g.error(f"store needs a pointer (a tensor argument plus offsets), got "
                      f"{p.type_str()}", node)
    v = _not_ptr(g, _val(g, _arg(g, node, args, kwargs, 1, "value"), node, "store's value"),
                 node, "store")
    mask = _mask(g, _arg(g, node, args, kwargs, 2, "mask", None), node)
    for extra, what in ((v, "value"), (mask, "mask")):
        if extra is not None and broadcast(p.shape, extra.shape) != p.shape:
            raise g.error(f"store's {what} of shape {list(extra.shape)} does not broadcast to "
                          f"the pointer block {list(p.shape)}", node)
    st = p.extra.get("storage_dtype", p.dtype)
    g.stored.add(p.ptr)
    hook = g.fusion.get(p.ptr)

    def body(idx: list) -> list:
        line = hook.store(p.at(idx), cast_expr(v, p.dtype, idx)) if hook is not None else \
            f"a_{p.ptr}[{p.at(idx)}] = {store_expr(st, v.at(idx))};"
        return [f"if ({mask.at(idx)}) {line}" if mask is not None else line]

    if p.shape:
        g.loops(p.shape, body)
    else:
        for line in body([]):
            g.emit(line)


# -- math ----------------------------------------------------------------------------------------
def _unary_math(name: str) -> Any:
    def rule(g: Any, node: Any, args: list, kwargs: dict) -> Val:
        x = _not_ptr(g, _val(g, _arg(g, node, args, kwargs, 0, "x"), node, name), node, name)
        dt = x.dtype if is_float(x.dtype) else "float32"
        return Val(dt, x.shape, lambda i: MATH[name].format(cast_expr(x, dt, i)), cheap=False)
    return rule


def _abs(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    x = _not_ptr(g, _val(g, args[0], node, "abs"), node, "abs")
    if is_float(x.dtype):
        return Val(x.dtype, x.shape, lambda i: f"ember_abs({x.fn(i)})", cheap=False)
    return Val(x.dtype, x.shape, lambda i: f"({x.fn(i)} < 0 ? -{x.fn(i)} : {x.fn(i)})",
               cheap=x.cheap)


def _binary(name: str) -> Any:
    def rule(g: Any, node: Any, args: list, kwargs: dict) -> Val:
        a, b = (_not_ptr(g, _val(g, x, node, name), node, name) for x in args[:2])
        shape = broadcast(a.shape, b.shape)
        if shape is None:
            raise g.error(f"{name}: cannot broadcast {list(a.shape)} and {list(b.shape)}", node)
        dt = promote(a, b)
        if is_float(dt):
            return Val(dt, shape, lambda i: f"ember_{name}({cast_expr(a, dt, i)}, "
                                            f"{cast_expr(b, dt, i)})", cheap=False)
        cmp = ">" if name == "maximum" else "<"
        return Val(dt, shape, lambda i: f"({cast_expr(a, dt, i)} {cmp} {cast_expr(b, dt, i)} "
                                        f"? {cast_expr(a, dt, i)} : {cast_expr(b, dt, i)})",
                   cheap=a.cheap and b.cheap)
    return rule


def where(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    c = _val(g, _arg(g, node, args, kwargs, 0, "condition"), node, "where's condition")
    x = _val(g, _arg(g, node, args, kwargs, 1, "x"), node, "where's x")
    y = _val(g, _arg(g, node, args, kwargs, 2, "y"), node, "where's y")
    if c.dtype != "bool":
        raise g.error(f"where's condition must be boolean, got {c.type_str()}", node)
    shape = broadcast(c.shape, x.shape)
    shape = broadcast(shape, y.shape) if shape is not None else None
    if shape is None:
        raise g.error(f"where: cannot broadcast {list(c.shape)}, {list(x.shape)} and "
                      f"{list(y.shape)}", node)
    if x.ptr or y.ptr:
        raise g.error("where selects values, not pointers", node)
    dt = promote(x, y)
    out = Val(dt, shape, lambda i: f"({c.at(i)} ? {cast_expr(x, dt, i)} : "
                                   f"{cast_expr(y, dt, i)})",
              cheap=c.cheap and x.cheap and y.cheap)
    out.weak = x.weak and y.weak
    return out


def fma(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    a, b, c = (_val(g, x, node, "fma") for x in args[:3])
    dt = promote(promote_val(a, b), c)
    shape = broadcast(broadcast(a.shape, b.shape) or (), c.shape)
    return Val(dt, shape, lambda i: f"ember_fma({cast_expr(a, dt, i)}, {cast_expr(b, dt, i)}, "
                                    f"{cast_expr(c, dt, i)})", cheap=False)


def promote_val(a: Val, b: Val) -> Val:
    return Val(promote(a, b), (), lambda i: "0", weak=a.weak and b.weak)


def cast(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    x = _not_ptr(g, _val(g, args[0], node, "cast"), node, "cast")
    dt = _dtype(g, args[1] if len(args) > 1 else kwargs.get("dtype"), node)
    if dt == "bool":
        return Val(dt, x.shape, lambda i: f"({x.fn(i)} != 0)", cheap=x.cheap)
    return Val(dt, x.shape, lambda i: cast_expr(x, dt, i), cheap=x.cheap and not is_float(dt),
               extra={"load": True} if x.extra.get("load") else {})


# -- shapes --------------------------------------------------------------------------------------
def broadcast_to(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    x = _val(g, args[0], node, "broadcast_to")
    shape = _shape(g, args[1], node)
    if broadcast(x.shape, shape) != shape:
        raise g.error(f"cannot broadcast {list(x.shape)} to {list(shape)}", node)
    return Val(x.dtype, shape, lambda i: x.at(i), ptr=x.ptr, cheap=x.cheap, extra=x.extra)


def trans(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    x = _val(g, args[0], node, "trans")
    if len(x.shape) != 2:
        raise g.error(f"trans needs a 2-D block, got {x.type_str()}", node)
    return Val(x.dtype, x.shape[::-1], lambda i: x.fn([i[1], i[0]]), ptr=x.ptr,
               cheap=x.cheap, extra=x.extra)


def reshape(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    x = _not_ptr(g, _val(g, args[0], node, "reshape"), node, "reshape")
    shape = _shape(g, args[1], node)
    if math.prod(shape) != x.numel:
        raise g.error(f"cannot reshape {list(x.shape)} into {list(shape)}", node)
    m = x if x.storage is not None and x.shape else g.materialize(x, "r")
    return Val(x.dtype, shape, lambda i: f"{m.storage}[{flat_index(i, shape)}]", cheap=False,
               storage=m.storage)


# -- reductions ----------------------------------------------------------------------------------
def _combine(kind: str, dt: str, acc: str, v: str) -> str:
    if kind == "sum":
        return f"{acc} + {v}"
    # NaN never wins (Triton's default, propagate_nan=NONE): a plain select vectorizes
    # several times faster than one that also tests for NaN
    cmp = ">" if kind == "max" else "<"
    return f"(({v} {cmp} {acc}) ? {v} : {acc})"


def _init(kind: str, dt: str) -> str:
    if kind == "sum":
        return "0"
    if is_float(dt):
        return "(-INFINITY)" if kind == "max" else "INFINITY"
    lim = {"int64": "INT64", "int32": "INT32", "int16": "INT16", "int8": "INT8"}.get(dt)
    if lim is None:  # bool/uint8
        return "0" if kind == "max" else "255"
    return f"{lim}_MIN" if kind == "max" else f"{lim}_MAX"


def _reduce_rule(kind: str) -> Any:
    def rule(g: Any, node: Any, args: list, kwargs: dict) -> Val:
        x = _not_ptr(g, _val(g, _arg(g, node, args, kwargs, 0, "input"), node, kind), node,
                     kind)
        axis = _py(g, _arg(g, node, args, kwargs, 1, "axis", None), node)
        keep = bool(_py(g, _arg(g, node, args, kwargs, 2, "keep_dims", False), node))
        if kind.startswith("arg") and axis is None:
            raise g.error(f"{kind} needs an axis", node)
        if not x.shape:
            raise g.error(f"{kind} of a scalar", node)
        if axis is None:
            flat = x if x.storage is not None else g.materialize(x, "f")
            x = Val(flat.dtype, (flat.numel,), lambda i: f"{flat.storage}[{i[0]}]", cheap=False)
            out = reduce_last(g, kind, x)
            return _keep_dims(out, (1,) * len(flat.shape)) if keep else out
        if not isinstance(axis, int) or not -len(x.shape) <= axis < len(x.shape):
            raise g.error(f"{kind}: axis {axis!r} out of range for a {len(x.shape)}-d block",
                          node)
        axis %= len(x.shape)
        out = reduce_last(g, kind, x) if axis == len(x.shape) - 1 else \
            reduce_outer(g, kind, x, axis)
        if keep:
            return _keep_dims(out, x.shape[:axis] + (1,) + x.shape[axis + 1:])
        return out
    return rule


def _keep_dims(out: Val, shape: tuple) -> Val:
    keep = [n != 1 for n in shape]
    return Val(out.dtype, shape, lambda i: out.fn([v for v, k in zip(i, keep) if k]),
               cheap=False, storage=out.storage)


def _acc_dtype(kind: str, x: Val) -> str:
    if kind == "sum" and not is_float(x.dtype):
        return "int64"
    return x.dtype


def _declare(g: Any, ct: str, shape: tuple) -> tuple[str, Any]:
    var = g.tmp("red")
    if shape:
        g.declare_array(ct, var, math.prod(shape))
        return var, lambda i: f"{var}[{flat_index(i, shape)}]"
    g.emit(f"{ct} {var};")
    return var, lambda i: var


def reduce_last(g: Any, kind: str, x: Val, keep: str | None = None,
                pre: Val | None = None) -> Val:
    """Reduce the last dim: ``LANES`` independent accumulators (so gcc vectorizes without
    reassociating float math), combined in order, then the tail.  ``keep``: a 1-D block
    array the same loop also stores ``x`` into (a named value reduced by the next
    statement: one pass over the block instead of two)."""
    out_shape = x.shape[:-1]
    n = x.shape[-1]
    g.work = max(g.work, x.numel)
    arg = kind.startswith("arg")
    dt = "int64" if arg else _acc_dtype(kind, x)
    var, at = _declare(g, CTYPES[dt], out_shape)
    vt = CTYPES[x.dtype] if arg else CTYPES[dt]

    def body(idx: list) -> list:
        c = g.tmp("c")
        if arg:
            cmp = ">" if kind == "argmax" else "<"
            nan = " | ((v_ != v_) & (b_ == b_))" if is_float(x.dtype) else ""
            return [f"{{ {vt} b_ = {x.at(idx + ['0'])}; int64_t bi_ = 0;",
                    f"  for (int64_t {c} = 1; {c} < {n}; {c}++) {{ const {vt} v_ = "
                    f"{x.at(idx + [c])};",
                    f"    if ((v_ {cmp} b_){nan}) {{ b_ = v_; bi_ = {c}; }} }}",
                    f"  {at(idx)} = bi_; }}"]
        init = _init(kind, dt)
        red = {"sum": "+", "max": "max", "min": "min"}[kind]
        v = f"(({vt})({x.at(idx + [c])}))"
        put = f" {keep}[{c}] = v_;" if keep is not None and pre is None else ""
        if pre is not None:  # the kept block's element is e_, which ``x`` reads
            v = (f"{CTYPES[pre.dtype]} e_ = {pre.at(idx + [c])}; {keep}[{c}] = e_; "
                 f"const {vt} v_ = {v}")
        else:
            v = f"const {vt} v_ = {v}"
        # OpenMP's simd reduction: per-lane partial results, as gcc cannot vectorize a float
        # fold without reassociating it (never -ffast-math); ignored without OpenMP
        return [f"{{ {vt} r_ = {init};",
                f"  #pragma omp simd reduction({red}:r_)",
                f"  for (int64_t {c} = 0; {c} < {n}; {c}++) {{ {v}; "
                f"r_ = {_combine(kind, dt, 'r_', 'v_')};{put} }}",
                f"  {at(idx)} = r_; }}"]

    if out_shape:
        g.loops(out_shape, body)
    else:
        for line in body([]):
            g.emit(line)
    return Val(dt, out_shape, at, cheap=False, storage=var)


def fused_reduction(g: Any, name: str, value: Val) -> Val | None:
    """When the statement after ``name = value`` reduces (``sum``/``max``/``min`` over the
    block) an expression of ``name`` (``tl.sum(x, axis=0)``, ``tl.sum(xc * xc, axis=0)``) and
    ``value`` is a 1-D float block: store ``value`` and reduce the expression in one loop; the
    reduction's result is kept for that statement (``g.prefused``).  None when the pattern
    does not apply."""
    import ast
    if len(value.shape) != 1 or not is_float(value.dtype) or not g.rest:
        return None
    st = g.rest[0]
    if not isinstance(st, ast.Assign):
        return None
    from ember.kernel._stmts import expr
    for call in ast.walk(st.value):
        if (isinstance(call, ast.Call) and len(call.args) == 1 and
                any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(call.args[0]))
                and all(k.arg == "axis" and isinstance(k.value, ast.Constant) and
                        k.value.value in (0, -1, None) for k in call.keywords)):
            f = expr(g, call.func)
            kind = {id(tl.sum): "sum", id(tl.max): "max", id(tl.min): "min"}.get(
                id(getattr(f, "obj", None)))
            if kind is not None:
                break
    else:
        return None
    # the reduced expression, with ``name`` read as the loop's element e_ (no code emitted)
    saved, mark = g.env.get(name), len(g.out)
    g.env[name] = Val(value.dtype, value.shape, lambda i: "e_", cheap=False)
    try:
        arg = expr(g, call.args[0])
    except Exception:  # noqa: BLE001 - not fusable: the statement reports its own errors
        arg = None
    finally:
        if saved is None:
            g.env.pop(name, None)
        else:
            g.env[name] = saved
    if len(g.out) != mark or not isinstance(arg, Val) or arg.shape != value.shape or \
            arg.ptr is not None:
        del g.out[mark:]
        return None
    var = g.tmp(f"{name}_")
    g.declare_array(CTYPES[value.dtype], var, value.numel)
    g.prefused[id(call)] = reduce_last(g, kind, arg, keep=var, pre=value)
    return Val(value.dtype, value.shape, lambda i: f"{var}[{i[0]}]", cheap=False, storage=var)


def reduce_outer(g: Any, kind: str, x: Val, axis: int) -> Val:
    """Reduce a dim that is not the last: the reduced loop outside, the inner dims inside
    (they vectorize)."""
    out_shape = x.shape[:axis] + x.shape[axis + 1:]
    arg = kind.startswith("arg")
    dt = "int64" if arg else _acc_dtype(kind, x)
    var, at = _declare(g, CTYPES[dt], out_shape)
    best = None
    if arg:
        best, bat = _declare(g, CTYPES[x.dtype], out_shape)
        g.loops(out_shape, lambda i: [f"{bat(i)} = {x.at(i[:axis] + ['0'] + i[axis:])};",
                                      f"{at(i)} = 0;"])
    else:
        g.loops(out_shape, lambda i: [f"{at(i)} = {_init(kind, dt)};"])

    def body(idx: list) -> list:
        o = idx[:axis] + idx[axis + 1:]
        v = f"(({CTYPES[dt if not arg else x.dtype]})({x.at(idx)}))"
        if not arg:
            return [f"{at(o)} = {_combine(kind, dt, at(o), v)};"]
        cmp = ">" if kind == "argmax" else "<"
        b = bat(o)
        nan = f" | (({v} != {v}) & ({b} == {b}))" if is_float(x.dtype) else ""
        return [f"if (({v} {cmp} {b}){nan}) {{ {b} = {v}; {at(o)} = {idx[axis]}; }}"]

    if arg:  # sequential along the axis: the first extreme wins
        g.loops(x.shape, body)
    else:
        g.loops(x.shape, body)
    del best
    return Val(dt, out_shape, at, cheap=False, storage=var)


def dot(g: Any, node: Any, args: list, kwargs: dict) -> Val:
    a = _not_ptr(g, _val(g, _arg(g, node, args, kwargs, 0, "input"), node, "dot"), node, "dot")
    b = _not_ptr(g, _val(g, _arg(g, node, args, kwargs, 1, "other"), node, "dot"), node, "dot")
    acc = _arg(g, node, args, kwargs, 2, "acc", None)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise g.error(f"dot needs (M, K) and (K, N) blocks, got {list(a.shape)} and "
                      f"{list(b.shape)}", node)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    g.work = max(g.work, m * k * n)
    dt = "float64" if a.dtype == b.dtype == "float64" else "float32"
    ma = a if a.storage is not None else g.materialize(a, "da")
    mb = b if b.storage is not None else g.materialize(b, "db")
    var = g.tmp("dot")
    ct = CTYPES[dt]
    g.declare_array(ct, var, m * n)
    if acc is not None and not (isinstance(acc, Obj) and acc.obj is None):
        acc = _val(g, acc, node, "dot's acc")
        if acc.shape != (m, n):
            raise g.error(f"dot's acc has shape {list(acc.shape)}, expected {[m, n]}", node)
        dt = acc.dtype
        g.loops((m, n), lambda i: [f"{var}[{flat_index(i, (m, n))}] = {cast_expr(acc, dt, i)};"])
    else:
        g.emit(f"for (int64_t i_ = 0; i_ < {m * n}; i_++) {var}[i_] = 0;")
    i, kk, j = g.tmp("i"), g.tmp("k"), g.tmp("j")
    g.emit(f"for (int64_t {i} = 0; {i} < {m}; {i}++)")
    g.emit(f"  for (int64_t {kk} = 0; {kk} < {k}; {kk}++) {{")
    g.emit(f"    const {ct} a_ = ({ct}){ma.fn([i, kk])};")
    g.emit("    #pragma GCC ivdep")
    g.emit(f"    for (int64_t {j} = 0; {j} < {n}; {j}++) {var}[{i} * {n} + {j}] += "
           f"a_ * ({ct}){mb.fn([kk, j])};")
    g.emit("  }")
    return Val(dt, (m, n), lambda ix: f"{var}[{flat_index(ix, (m, n))}]", cheap=False,
               storage=var)


def _nothing(g: Any, node: Any, args: list, kwargs: dict) -> None:
    return None


HANDLERS = {id(fn): rule for fn, rule in [
    (tl.program_id, program_id), (tl.num_programs, num_programs), (tl.cdiv, cdiv),
    (tl.arange, arange), (tl.zeros, zeros), (tl.full, full), (tl.load, load),
    (tl.store, store), (tl.abs, _abs), (tl.maximum, _binary("maximum")),
    (tl.minimum, _binary("minimum")), (tl.where, where), (tl.fma, fma), (tl.cast, cast),
    (tl.sum, _reduce_rule("sum")), (tl.max, _reduce_rule("max")),
    (tl.min, _reduce_rule("min")), (tl.argmax, _reduce_rule("argmax")),
    (tl.argmin, _reduce_rule("argmin")), (tl.dot, dot), (tl.reshape, reshape),
    (tl.broadcast_to, broadcast_to), (tl.trans, trans), (tl.device_assert, _nothing),
] + [(getattr(tl, name), _unary_math(name)) for name in MATH]}

__all__ = ["HANDLERS", "wrap"]
