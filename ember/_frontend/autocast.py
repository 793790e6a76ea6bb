"""CPU autocast: the per-thread state and PyTorch's op policy, applied at frontend entry points.

PyTorch applies autocast in its dispatcher, before an op checks its arguments, so an op on a
bfloat16 activation and a float32 weight works under autocast.  ember does the same at the
frontend functions of the listed ops: ``@autocast_op("lower")`` (run in the autocast dtype),
``@autocast_op("fp32")`` (run in float32) and ``@autocast_op("promote")`` (run in the widest
floating input type).  The wrapper reads one thread-local flag and calls the function unchanged
when autocast is off, so eager code pays one attribute read per listed op and nothing elsewhere.

As in PyTorch: only floating tensors other than float64 are cast; the op itself (and every op it
calls) runs with autocast off; a float32 leaf that requires grad is cast once per outermost
autocast region (``cache_enabled``) and the cached copy is reused; gradients flow back through
the cast (``ToCopyBackward0``) to the float32 parameter in float32.

>>> with ember.autocast("cpu"):               # bfloat16 by default on the CPU
...     y = ember.nn.functional.linear(x, w)  # bfloat16
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from typing import Any, Callable

from ember import _lazy
from ember import dtypes as dt
from ember.errors import EmberRuntimeError
from ember.tensor import Tensor

__all__: list[str] = []  # internal: nothing is re-exported as ember.*


class _AnyThread:
    """``on``: some thread has CPU autocast enabled.  A plain attribute is the one thing the
    wrapper of a listed op reads when autocast is off (a ``threading.local`` read costs more)."""

    __slots__ = ("on", "threads")

    def __init__(self) -> None:
        self.on = False
        self.threads = 0


ANY = _AnyThread()


class _State(threading.local):
    """CPU autocast state of this thread (PyTorch keeps it thread-local too)."""

    _on: bool = False             # an enabled CPU autocast region is active
    dtype: dt.dtype = dt.bfloat16  # the CPU autocast dtype (``set_autocast_dtype``)
    cache_enabled: bool = True
    nesting: int = 0              # autocast regions entered (any device); cache cleared at 0

    @property
    def on(self) -> bool:
        return self._on

    @on.setter
    def on(self, value: bool) -> None:
        if value != self._on:
            ANY.threads += 1 if value else -1
            ANY.on = ANY.threads > 0
        self._on = value

    def __init__(self) -> None:
        # (id, dtype) -> (weakref to the float32 leaf, its cast).  PyTorch keys by tensor only,
        # so a float16 region nested in a bfloat16 one gets the bfloat16 copy and its op fails;
        # ember casts again instead.
        self.cache: dict[tuple, tuple[weakref.ref, Tensor]] = {}


STATE = _State()
_LZ = _lazy.STATE


def clear_cache() -> None:
    """Drop the cached weight casts (PyTorch does this on leaving the outermost region)."""
    STATE.cache.clear()


def _eligible(x: Any) -> bool:
    return isinstance(x, Tensor) and x._dtype.is_floating_point and x._dtype is not dt.float64


def _cast(x: Any, to: dt.dtype) -> Any:
    """PyTorch's ``cached_cast``: ``x`` in dtype ``to`` (lists and tuples elementwise)."""
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, to) for v in x)
    if not _eligible(x) or x._dtype is to:
        return x
    st = STATE
    cacheable = (to is st.dtype and x._dtype is dt.float32 and x._requires_grad
                 and x.grad_fn is None and x._base is None and st.cache_enabled
                 and _LZ.trace is None)
    if cacheable:
        hit = st.cache.get((id(x), to))
        if hit is not None and hit[0]() is x:
            return hit[1]
    out = x.to(to)
    if cacheable:
        st.cache[(id(x), to)] = (weakref.ref(x), out)
    return out


def _widest(args: tuple, kwargs: dict) -> dt.dtype:
    """PyTorch's ``promote_type``: float32 if any eligible input is float32, else the autocast
    dtype (float64 inputs are ignored; another half dtype is an error, as in PyTorch)."""
    low = current = STATE.dtype
    stack = list(args) + list(kwargs.values())
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif _eligible(x) and x._dtype is not current:
            if x._dtype is dt.float32 and current is low:
                current = dt.float32
            elif not (x._dtype is low and current is dt.float32):
                raise EmberRuntimeError("Unexpected floating ScalarType in "
                                        "at::autocast::prioritize")
    return current


def _run_cast(kind: str | Callable, fn: Callable, args: tuple, kwargs: dict) -> Any:
    if callable(kind):  # a policy that depends on the arguments (``pad``'s mode)
        kind = kind(*args, **kwargs)
        if kind is None:
            return fn(*args, **kwargs)
    st = STATE
    to = st.dtype if kind == "lower" else dt.float32 if kind == "fp32" else _widest(args, kwargs)
    args = tuple(_cast(a, to) for a in args)
    kwargs = {k: _cast(v, to) for k, v in kwargs.items()}
    st._on = False  # the op and everything it calls run without autocast (PyTorch's rule)
    try:
        return fn(*args, **kwargs)
    finally:
        st._on = True


def _forwarder_source(fn: Callable) -> tuple[str, dict]:
    """Source of a wrapper with ``fn``'s own signature (positional forwarding is several times
    cheaper than ``*args, **kwargs``) and the namespace holding its defaults."""
    sig = inspect.signature(fn)
    params, pos, kw, ns = [], [], [], {}
    star_done = False
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            pos.append(f"*{p.name}")
            star_done = True
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            kw.append(f"**{p.name}")
        else:
            assert p.kind is not p.POSITIONAL_ONLY, fn
            if p.kind is p.KEYWORD_ONLY and not star_done:
                params.append("*")
                star_done = True
            text = p.name
            if p.default is not p.empty:
                ns[f"_d_{p.name}"] = p.default
                text += f"=_d_{p.name}"
            params.append(text)
            (kw if p.kind is p.KEYWORD_ONLY else pos).append(
                f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name)
    args = ", ".join(pos + kw)
    kwargs = ", ".join(f"{a.split('=')[0]!r}: {a.split('=')[0]}" for a in kw if "**" not in a)
    var_kw = next((a for a in kw if a.startswith("**")), None)
    kw_dict = "{" + kwargs + (", " if kwargs and var_kw else "") + (var_kw or "") + "}"
    src = (f"def {fn.__name__}({', '.join(params)}):\n"
           f"    if _any.on and _st._on:\n"
           f"        return _run(_kind, _fn, ({''.join(a + ', ' for a in pos)}), {kw_dict})\n"
           f"    return _fn({args})\n")
    return src, ns


def autocast_op(kind: str | Callable) -> Callable[[Callable], Callable]:
    """Mark a frontend function as a CPU autocast op of ``kind`` ("lower", "fp32", "promote"),
    or of the kind a policy function returns for the call's arguments (None: not cast).

    The wrapper has the function's own signature and, with autocast off, reads one attribute
    and forwards its arguments positionally.
    """
    assert callable(kind) or kind in ("lower", "fp32", "promote"), kind

    def deco(fn: Callable) -> Callable:
        src, ns = _forwarder_source(fn)
        ns.update(_any=ANY, _st=STATE, _run=_run_cast, _kind=kind, _fn=fn)
        exec(compile(src, f"<autocast {fn.__qualname__}>", "exec"), ns)  # noqa: S102
        wrapper = functools.wraps(fn)(ns[fn.__name__])
        wrapper.autocast_kind = kind  # type: ignore[attr-defined]
        return wrapper
    return deco
