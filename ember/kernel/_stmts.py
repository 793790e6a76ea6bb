"""Statements and expressions of the kernel compiler (``_front.Gen`` holds the state).

``block`` compiles a statement list, ``expr`` an expression to a ``Val`` (a typed value) or an
``Obj`` (a Python object: a module, a builtin, a dtype, a tuple of constants)."""

from __future__ import annotations

import ast
import builtins
import operator
import re
from typing import Any

from ember import dtypes as _dt
from ember.kernel import language as tl
from ember.kernel._values import (
    BINOPS,
    CMPOPS,
    Val,
    broadcast,
    cast_expr,
    is_float,
    literal,
    promote,
)


class Obj:
    """A compile-time Python object met in the kernel's source."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


# -- statements ----------------------------------------------------------------------------------
def block(g: Any, body: list) -> None:
    for k, st in enumerate(body):
        g.node = st
        g.rest = body[k + 1:]
        statement(g, st)


def _names(node: Any, ctx: type) -> set:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _inlinable(g: Any, name: str, node: Any, value: Val) -> bool:
    """A computed block used once (a plain load: used any number of times) later in the same
    statement list and not inside a loop, with nothing before its last use that stores to
    memory or re-assigns a name it reads: it stays an expression, inlined at its uses (one
    loop over the block less; a load re-reads memory, which is as cheap as a local copy)."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or g.defs.get(name, 0) != 1:
        return False
    want = g.uses.get(name, 0)
    if want != 1 and not (value.extra.get("load") and want <= 4):
        return False
    reads = _names(node.value, ast.Load)
    seen = 0
    for st in g.rest:
        here = sum(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                   for n in ast.walk(st))
        if here and any(isinstance(n, (ast.For, ast.While)) and name in _names(n, ast.Load)
                        for n in ast.walk(st)):
            return False
        seen += here
        if seen == want:
            return True
        if _names(st, ast.Store) & reads or any(
                isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", ""))
                in ("store", "device_assert") for n in ast.walk(st)):
            return False
    return False


def statement(g: Any, st: Any) -> None:
    if isinstance(st, ast.Assign):
        value = expr(g, st.value)
        for t in st.targets:
            assign(g, t, value, st)
    elif isinstance(st, ast.AnnAssign) and st.value is not None:
        assign(g, st.target, expr(g, st.value), st)
    elif isinstance(st, ast.AugAssign):
        if not isinstance(st.target, ast.Name):
            raise g.error("only names can be assigned in a kernel", st)
        cur = expr(g, st.target)
        assign(g, st.target, binop(g, type(st.op).__name__, cur, expr(g, st.value), st), st)
    elif isinstance(st, ast.Expr):
        if isinstance(st.value, ast.Constant):
            return  # a docstring
        expr(g, st.value)
    elif isinstance(st, ast.For):
        for_loop(g, st)
    elif isinstance(st, ast.If):
        if_stmt(g, st)
    elif isinstance(st, ast.Return):
        if st.value is not None and not (isinstance(st.value, ast.Constant) and
                                         st.value.value is None):
            raise g.error("a kernel returns nothing (write results with store)", st)
        g.emit("return;")
    elif isinstance(st, (ast.Pass, ast.Assert)):
        return
    else:
        raise g.error(f"{type(st).__name__} statements are not supported in kernels", st)


def assign(g: Any, target: Any, value: Any, node: Any) -> None:
    if isinstance(target, ast.Tuple):
        vals = value.obj if isinstance(value, Obj) and isinstance(value.obj, tuple) else None
        if vals is None or len(vals) != len(target.elts):
            raise g.error("tuple assignment needs a tuple of the same length", node)
        for t, v in zip(target.elts, vals):
            assign(g, t, v, node)
        return
    if not isinstance(target, ast.Name):
        raise g.error("only names can be assigned in a kernel", node)
    name = target.id
    outer = any(name in s for s in g.scopes[:-1]) and name not in g.scopes[-1]
    if isinstance(value, Obj):
        if outer:
            raise g.error(f"{name}: cannot re-assign a Python object inside a loop/branch", node)
        g.env[name] = value  # type: ignore[assignment]
        g.scopes[-1].add(name)
        return
    if outer:
        g.assign_into(g.env[name], value, name, node)
        return
    if value.extra.get("carried"):  # a copy: the carried storage changes later
        g.env[name] = g.materialize(value, name)
        g.scopes[-1].add(name)
        return
    keep = value.cheap or value.const is not None or (
        value.ptr is None and value.shape and _inlinable(g, name, node, value))
    if keep:
        g.env[name] = value
    else:
        from ember.kernel._builtins import fused_reduction
        g.env[name] = fused_reduction(g, name, value) or g.materialize(value, name)
    g.scopes[-1].add(name)


def _assigned(body: list) -> set:
    out = set()
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    for x in ast.walk(t):
                        if isinstance(x, ast.Name):
                            out.add(x.id)
    return out


def _promote(g: Any, names: set, node: Any) -> None:
    """Give each outer name assigned in a loop/branch body a storage of its own."""
    for name in sorted(names):
        v = g.env.get(name)
        if isinstance(v, Val):
            if v.const is not None and not isinstance(v.const, (bool, int, float)):
                raise g.error(f"{name} is a constexpr and cannot be re-assigned", node)
            if v.extra.get("carried"):  # an enclosing loop/branch gave it its storage
                continue
            m = g.materialize(v, name)
            m.extra["carried"] = True
            g.env[name] = m


def _scoped(g: Any, body: list) -> None:
    g.scopes.append(set())
    saved = dict(g.env)
    try:
        block(g, body)
    finally:
        local = g.scopes.pop()
        for name in local:   # names first defined in the body end with it
            if name in saved:
                g.env[name] = saved[name]
            else:
                g.env.pop(name, None)


def for_loop(g: Any, st: ast.For) -> None:
    if not isinstance(st.target, ast.Name) or st.orelse:
        raise g.error("kernel loops are 'for name in range(...)' without else", st)
    it = st.iter
    fn = expr(g, it.func) if isinstance(it, ast.Call) else None
    if fn is None or not isinstance(fn, Obj) or fn.obj not in (range, tl.static_range):
        raise g.error("kernel loops iterate over range(...) or static_range(...)", st)
    args = [scalar_int(g, expr(g, a), a) for a in it.args]
    start, stop, step = (["0"] + args + ["1"])[:3] if len(args) == 1 else (
        args + ["1"])[:3]
    neg = step.lstrip("(").startswith("-")
    outer = [set().union(*g.scopes)]
    _promote(g, _assigned(st.body) & outer[0], st)
    var = g.tmp(f"{st.target.id}_")
    g.emit(f"for (int64_t {var} = {start}; {var} {'>' if neg else '<'} {stop}; "
           f"{var} += {step}) {{")
    g.ind += "  "
    saved = g.env.get(st.target.id)
    g.env[st.target.id] = Val("int64", (), lambda i: var)
    _scoped(g, st.body)
    if saved is not None:
        g.env[st.target.id] = saved
    else:
        g.env.pop(st.target.id, None)
    g.ind = g.ind[:-2]
    g.emit("}")


def if_stmt(g: Any, st: ast.If) -> None:
    cond = expr(g, st.test)
    if isinstance(cond, Obj) or (isinstance(cond, Val) and cond.const is not None):
        value = cond.obj if isinstance(cond, Obj) else cond.const
        block(g, st.body if value else st.orelse)
        return
    if cond.shape:
        raise g.error("an if condition must be a scalar (use where() for blocks)", st)
    _promote(g, (_assigned(st.body) | _assigned(st.orelse)) & set().union(*g.scopes), st)
    g.emit(f"if ({cond.fn([])}) {{")
    g.ind += "  "
    _scoped(g, st.body)
    g.ind = g.ind[:-2]
    if st.orelse:
        g.emit("} else {")
        g.ind += "  "
        _scoped(g, st.orelse)
        g.ind = g.ind[:-2]
    g.emit("}")


def scalar_int(g: Any, v: Any, node: Any) -> str:
    if isinstance(v, Obj) and isinstance(v.obj, int):
        v = literal(v.obj)
    if not isinstance(v, Val) or v.shape or v.ptr or is_float(v.dtype):
        raise g.error("range bounds must be integer scalars", node)
    return cast_expr(v, "int64", [])


# -- expressions ---------------------------------------------------------------------------------
def wrap(obj: Any) -> Any:
    """A Python value as a kernel value (numbers become literals)."""
    if isinstance(obj, tl.constexpr):
        obj = obj.value
    if isinstance(obj, (bool, int, float)):
        return literal(obj)
    return Obj(obj)


def expr(g: Any, node: Any) -> Any:
    if isinstance(node, ast.Constant):
        return wrap(node.value)
    if isinstance(node, ast.Name):
        if node.id in g.env:
            return g.env[node.id]
        if node.id in g.globals:
            return wrap(g.globals[node.id])
        if hasattr(builtins, node.id):
            return Obj(getattr(builtins, node.id))
        raise g.error(f"name {node.id!r} is not defined", node)
    if isinstance(node, ast.Attribute):
        return attribute(g, expr(g, node.value), node)
    if isinstance(node, (ast.Tuple, ast.List)):
        return Obj(tuple(_py(g, expr(g, e), e) for e in node.elts))
    if isinstance(node, ast.BinOp):
        return binop(g, type(node.op).__name__, expr(g, node.left), expr(g, node.right), node)
    if isinstance(node, ast.UnaryOp):
        return unary(g, node)
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1:
            raise g.error("chained comparisons are not supported; use & between them", node)
        return compare(g, type(node.ops[0]).__name__, expr(g, node.left),
                       expr(g, node.comparators[0]), node)
    if isinstance(node, ast.BoolOp):
        vals = [expr(g, v) for v in node.values]
        op = "BitAnd" if isinstance(node.op, ast.And) else "BitOr"
        out = vals[0]
        for v in vals[1:]:
            out = binop(g, op, _to_bool(g, out, node), _to_bool(g, v, node), node)
        return out
    if isinstance(node, ast.IfExp):
        c = expr(g, node.test)
        if isinstance(c, Val) and c.const is not None:
            return expr(g, node.body if c.const else node.orelse)
        from ember.kernel._builtins import where
        return where(g, node, [c, expr(g, node.body), expr(g, node.orelse)], {})
    if isinstance(node, ast.Subscript):
        return subscript(g, expr(g, node.value), node)
    if isinstance(node, ast.Call):
        return call(g, node)
    raise g.error(f"{type(node).__name__} expressions are not supported in kernels", node)


def _py(g: Any, v: Any, node: Any) -> Any:
    if isinstance(v, Obj):
        return v.obj
    if not isinstance(v, Val):
        return v
    if v.const is not None:
        return v.const
    return v


def _to_bool(g: Any, v: Val, node: Any) -> Val:
    if v.dtype == "bool" or v.const is not None:
        return v
    return compare(g, "NotEq", v, literal(0), node)


def attribute(g: Any, base: Any, node: ast.Attribute) -> Any:
    if isinstance(base, Obj):
        try:
            return wrap(getattr(base.obj, node.attr))
        except AttributeError:
            raise g.error(f"{node.attr!r} is not defined on {base.obj!r}", node) from None
    if node.attr == "to":
        return Obj(("method_to", base))
    if node.attr == "dtype":
        return Obj(_dt.by_name(base.dtype))
    if node.attr == "shape":
        return Obj(tuple(base.shape))
    if node.attr == "T":
        from ember.kernel._builtins import trans
        return trans(g, node, [base], {})
    raise g.error(f"kernel values have no attribute {node.attr!r}", node)


_FOLD = {"Add": operator.add, "Sub": operator.sub, "Mult": operator.mul,
         "Div": operator.truediv, "FloorDiv": operator.floordiv, "Mod": operator.mod,
         "BitAnd": operator.and_, "BitOr": operator.or_, "BitXor": operator.xor,
         "LShift": operator.lshift, "RShift": operator.rshift, "Pow": operator.pow}


def _const(v: Any) -> Any:
    if isinstance(v, Obj):
        return v.obj if isinstance(v.obj, (int, float, bool)) else None
    return v.const if v.const is not None and not isinstance(v.const, (str, _dt.dtype)) \
        else None


def binop(g: Any, op: str, a: Any, b: Any, node: Any) -> Val:
    ca, cb = _const(a), _const(b)
    if ca is not None and cb is not None and op in _FOLD:
        try:
            r = _FOLD[op](ca, cb)
        except ZeroDivisionError:
            raise g.error("division by zero in a constant expression", node) from None
        v = literal(r)
        v.weak = getattr(a, "weak", True) and getattr(b, "weak", True)
        return v
    if isinstance(a, Obj) or isinstance(b, Obj):
        raise g.error(f"unsupported operand types for {BINOPS.get(op, op)}", node)
    if a.ptr or b.ptr:
        return _pointer_arith(g, op, a, b, node)
    if op not in BINOPS:
        raise g.error(f"operator {op} is not supported in kernels", node)
    shape = broadcast(a.shape, b.shape)
    if shape is None:
        raise g.error(f"cannot broadcast blocks of shapes {list(a.shape)} and "
                      f"{list(b.shape)} for {BINOPS[op]}", node)
    dt = promote(a, b)
    sym = BINOPS[op]
    if op == "Div" and not is_float(dt):
        dt = "float32"
    if op in ("BitAnd", "BitOr", "BitXor", "LShift", "RShift") and is_float(dt):
        raise g.error(f"{sym} needs integer or boolean operands, got {a.dtype} and "
                      f"{b.dtype}", node)

    def fn(idx: list, a: Val = a, b: Val = b, dt: str = dt) -> str:
        x, y = cast_expr(a, dt, idx), cast_expr(b, dt, idx)
        if op == "FloorDiv":
            return f"ember_div_floor_i({x}, {y})" if not is_float(dt) else \
                f"ember_floor({x} / {y})"
        if op == "Mod":
            return f"ember_remainder_i({x}, {y})" if not is_float(dt) else \
                f"ember_remainder({x}, {y})"
        return f"({x} {sym} {y})"

    weak = a.weak and b.weak
    return _arange_offset(g, op, a, b, Val(dt, shape, fn, weak=weak, cheap=a.cheap and b.cheap))


def _pointer_arith(g: Any, op: str, a: Val, b: Val, node: Any) -> Val:
    if a.ptr and b.ptr:
        raise g.error("cannot add two pointers", node)
    p, off = (a, b) if a.ptr else (b, a)
    if op not in ("Add", "Sub") or (op == "Sub" and b.ptr):
        raise g.error(f"pointers support + and - of integer offsets, not "
                      f"{BINOPS.get(op, op)}", node)
    if is_float(off.dtype) or off.dtype == "bool":
        raise g.error(f"pointer arithmetic needs integer offsets, got {off.type_str()} added "
                      f"to {p.ptr}", node)
    shape = broadcast(p.shape, off.shape)
    if shape is None:
        raise g.error(f"cannot broadcast pointer block {list(p.shape)} with offsets "
                      f"{list(off.shape)}", node)
    sym = "+" if op == "Add" else "-"

    def fn(idx: list, p: Val = p, off: Val = off) -> str:
        base = p.at(idx)
        o = cast_expr(off, "int64", idx)
        return o if base == "0" and sym == "+" else f"({base} {sym} {o})"

    return Val(p.dtype, shape, fn, ptr=p.ptr, cheap=p.cheap and off.cheap, extra=p.extra)


def _static(v: Any) -> Any:
    if isinstance(v, Obj):
        return v.obj
    return v.const


_IDENT = re.compile(r"(?<!\w)[A-Za-z_]\w*")
# what a program-uniform C expression may name (besides the int parameters ``a_<name>``)
_UNIFORM = frozenset({"pid0", "pid1", "pid2", "g0", "g1", "g2", "int64_t",
                      "ember_div_floor_i", "ember_remainder_i"})


def _uniform(g: Any, v: Any) -> str | None:
    """C text of ``v`` when it is an int scalar that one program sees as one value (made of
    the program ids, the grid, int parameters and literals), so that the grid loop can
    evaluate it before running the program; else None."""
    if isinstance(v, Obj) or v.ptr or v.shape or is_float(v.dtype) or v.dtype == "bool":
        return None
    text = cast_expr(v, "int64", [])
    ints = {f"a_{n}" for n, k, _ in g.params if k == "int"}
    return text if all(w in _UNIFORM or w in ints for w in _IDENT.findall(text)) else None


def _arange_info(v: Any) -> tuple | None:
    """(program-uniform offset, end) of ``offset + arange(s, end)`` (offset "0" when none)."""
    if isinstance(v, Obj):
        return None
    if "arange" in v.extra:
        return "0", v.extra["arange"]
    return v.extra.get("arange_off")


def _arange_offset(g: Any, op: str, a: Any, b: Any, out: Val) -> Val:
    """``out`` (= a + b) remembering ``offset + arange(s, end)`` for the masks below."""
    if op == "Add":
        for x, y in ((a, b), (b, a)):
            info = _arange_info(x)
            off = _uniform(g, y) if info is not None else None
            if off is not None:
                total = off if info[0] == "0" else f"({info[0]} + {off})"
                out.extra = {"arange_off": (total, info[1])}
                break
    return out


def _arange_below(g: Any, op: str, a: Any, b: Any) -> Val | None:
    """``o + arange(s, B) < n`` (or ``n > ...``) with ``o`` and ``n`` the same for a whole
    program (``pid * BLOCK``, int parameters, literals): an all-true block when that is known
    now (``n`` a literal, no offset), else the condition ``o + B <= n`` is recorded (the
    kernel gets a second body, run for the programs where it holds) and, in that body, an
    all-true block."""
    if op == "Gt":
        op, a, b = "Lt", b, a
    info = _arange_info(a)
    if op != "Lt" or info is None or isinstance(b, Obj) or b.shape:
        return None
    known = b.extra.get("int_value")
    if info[0] == "0" and known is not None:
        return Val("bool", a.shape, lambda idx: "1", cheap=True) if info[1] <= known else None
    bound = _uniform(g, b)
    if bound is None:
        return None
    cond = f"{bound} >= {info[1]}" if info[0] == "0" else f"{info[0]} + {info[1]} <= {bound}"
    g.versions[cond] = True
    if cond in g.assume:
        return Val("bool", a.shape, lambda idx: "1", cheap=True)
    return None


def compare(g: Any, op: str, a: Any, b: Any, node: Any) -> Val:
    ca, cb = _static(a), _static(b)
    if ca is not None and cb is not None:
        fold = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge,
                "Eq": operator.eq, "NotEq": operator.ne}
        if op in fold:
            return literal(bool(fold[op](ca, cb)))
    if op in ("Is", "IsNot"):
        x = _py(g, a, node)
        y = _py(g, b, node)
        return literal((x is y) == (op == "Is"))
    if isinstance(a, Obj) or isinstance(b, Obj) or op not in CMPOPS:
        raise g.error(f"unsupported comparison {op}", node)
    if a.ptr or b.ptr:
        raise g.error("pointers cannot be compared", node)
    shape = broadcast(a.shape, b.shape)
    if shape is None:
        raise g.error(f"cannot broadcast blocks of shapes {list(a.shape)} and "
                      f"{list(b.shape)} for {CMPOPS[op]}", node)
    bounded = _arange_below(g, op, a, b)
    if bounded is not None:
        return bounded
    dt = promote(a, b)
    sym = CMPOPS[op]
    return Val("bool", shape, lambda idx: f"({cast_expr(a, dt, idx)} {sym} "
                                          f"{cast_expr(b, dt, idx)})",
               cheap=a.cheap and b.cheap)


def unary(g: Any, node: ast.UnaryOp) -> Val:
    v = expr(g, node.operand)
    c = _const(v)
    op = type(node.op).__name__
    if c is not None:
        r = {"USub": operator.neg, "UAdd": operator.pos, "Not": operator.not_,
             "Invert": operator.invert}[op](c)
        out = literal(r)
        out.weak = v.weak
        return out
    if isinstance(v, Obj) or v.ptr:
        raise g.error(f"unsupported operand for {op}", node)
    if op == "USub":
        return Val(v.dtype, v.shape, lambda i: f"(-{v.fn(i)})", cheap=v.cheap)
    if op == "UAdd":
        return v
    if op == "Not" or (op == "Invert" and v.dtype == "bool"):
        return Val("bool", v.shape, lambda i: f"(!{v.fn(i)})", cheap=v.cheap)
    if is_float(v.dtype):
        raise g.error("~ needs an integer or boolean operand", node)
    return Val(v.dtype, v.shape, lambda i: f"(~{v.fn(i)})", cheap=v.cheap)


def subscript(g: Any, base: Any, node: ast.Subscript) -> Any:
    if isinstance(base, Obj):
        key = expr(g, node.slice)
        return wrap(base.obj[_py(g, key, node)])
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    new_shape: list = []
    keep: list = []   # for each new dim: the source dim it reads, or None
    src = 0
    for it in items:
        if isinstance(it, ast.Constant) and it.value is None:
            new_shape.append(1)
            keep.append(None)
        elif isinstance(it, ast.Slice) and it.lower is None and it.upper is None \
                and it.step is None:
            if src >= len(base.shape):
                raise g.error("too many indices for the block", node)
            new_shape.append(base.shape[src])
            keep.append(src)
            src += 1
        else:
            raise g.error("blocks are indexed only with ':' and None (x[:, None])", node)
    for d in range(src, len(base.shape)):
        new_shape.append(base.shape[d])
        keep.append(d)

    def fn(idx: list) -> str:
        own = [i for i, k in zip(idx, keep) if k is not None]
        return base.fn(own)

    return Val(base.dtype, tuple(new_shape), fn, ptr=base.ptr, cheap=base.cheap,
               extra=base.extra)


def call(g: Any, node: ast.Call) -> Any:
    from ember.kernel._builtins import HANDLERS, cast
    done = g.prefused.pop(id(node), None)
    if done is not None:  # computed with the block it reduces (fused_reduction)
        return done
    f = expr(g, node.func)
    if not isinstance(f, Obj):
        raise g.error("only builtins of ember.kernel can be called in a kernel", node)
    args = [expr(g, a) for a in node.args]
    kwargs = {k.arg: expr(g, k.value) for k in node.keywords}
    obj = f.obj
    if isinstance(obj, tuple) and obj and obj[0] == "method_to":
        return cast(g, node, [obj[1]] + args, kwargs)
    h = HANDLERS.get(id(obj))
    if h is not None:
        return h(g, node, args, kwargs)
    if obj in (float, int, bool, builtins.min, builtins.max, abs, len):
        vals = [_py(g, a, node) for a in args]
        if any(isinstance(v, Val) for v in vals):
            raise g.error(f"{obj.__name__}() works on constants only in kernels "
                          "(use ember.kernel's builtins on values)", node)
        return wrap(obj(*vals))
    name = getattr(obj, "__name__", repr(obj))
    raise g.error(f"{name} cannot be called in a kernel (only ember.kernel builtins)", node)


__all__ = ["Obj", "block", "expr", "wrap"]
