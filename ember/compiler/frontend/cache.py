"""The caches of ``ember.compile``: per code object (``CodeCache``), per graph position
(``SegmentCache``), and the compiled graphs themselves (``Entry``), keyed by the function's code
object (``_code_key``).  ``reset()`` forgets them all.

>>> import ember
>>> ember.compiler.reset()
"""

from __future__ import annotations

import functools
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ember.compiler.frontend.graph import Graph


# ------------------------------------------------------------------------------ cache
@dataclass
class Entry:
    """One compiled graph: the numbers it specializes and the callable the backend made."""

    graph: Graph
    fn: Callable
    generic: frozenset
    values: tuple            # the capture's numbers when compiled (specialized ones must match)
    kinds: tuple
    compile_time: float
    backend: Any = None      # the compiler function that made ``fn`` (entries are per backend)
    pin01: frozenset = frozenset()  # sizes and view-shape ints: a 0 or 1 there never matches

    def matches(self, values: list) -> bool:
        gen, pin = self.generic, self.pin01
        for k, (mine, theirs) in enumerate(zip(self.values, values)):
            if k in gen:
                # sizes (and the ints of a view's shape) of 0 and 1 always specialize, as in
                # PyTorch: a lifted size is never a broadcast 1
                if k in pin and type(theirs) is int and theirs in (0, 1):
                    return False
            elif mine != theirs or type(mine) is not type(theirs):
                return False
        return True


@dataclass
class SegmentCache:
    """The entries of one graph position (segment) of a code object."""

    entries: dict = field(default_factory=dict)   # key -> [Entry]
    order: list = field(default_factory=list)     # (key, Entry) in compile order
    last_values: dict = field(default_factory=dict)  # key -> values of the last capture
    # the trace that last ran compiled here, for the next calls to follow (``_lazy.Known``)
    known: Any = None
    unfollowed: int = 0   # Knowns made in a row that no call followed to the end

    @property
    def count(self) -> int:
        return len(self.order)


@dataclass
class CodeCache:
    """Everything compiled for one code object (copies of a function share it)."""

    name: str
    filename: str
    lineno: int
    segments: dict = field(default_factory=dict)   # segment index -> SegmentCache
    calls: int = 0                                 # calls so far (eager_then_compile)
    warned: bool = False                           # the recompile-limit warning was given
    grad_flags: list = field(default_factory=list)  # requires_grad of tensor args, per call kind
    # one lock per (segment, graph key): a thread that misses compiles under it, threads that
    # miss on the same key wait for it and then find its entry (one compile per key)
    locks: dict = field(default_factory=dict)

    def key_lock(self, segment: int, key: Any) -> threading.RLock:
        """The lock under which graph ``key`` of ``segment`` is compiled (made once)."""
        lock = self.locks.get((segment, key))
        if lock is None:
            with _LOCK:
                lock = self.locks.setdefault((segment, key), threading.RLock())
        return lock

    def segment(self, index: int) -> SegmentCache:
        """The cache of graph position ``index`` (made once, also under concurrent calls)."""
        seg = self.segments.get(index)
        if seg is None:
            seg = self.segments.setdefault(index, SegmentCache())
        return seg

    @property
    def recompiles(self) -> int:
        """Graphs compiled beyond the first of each segment."""
        return sum(max(seg.count - 1, 0) for seg in self.segments.values())

    def where(self) -> str:
        return f"{self.filename}:{self.lineno}"


_CACHES: dict = {}        # code object (or other key) -> CodeCache
_LOCK = threading.Lock()  # guards making the per-key locks


def _code_key(fn: Callable) -> tuple:
    try:  # decorators made with functools.wraps (error_on_graph_break, disable, ...) share
        f = inspect.unwrap(fn)  # one wrapper code object: key by the function they wrap
    except ValueError:
        f = fn
    while isinstance(f, functools.partial):
        f = f.func
    f = getattr(f, "__func__", f)
    code = getattr(f, "__code__", None)
    if code is None:  # a callable object (a module): its forward's code
        fwd = getattr(type(f), "forward", None) or type(f).__call__
        code = getattr(fwd, "__code__", None)
    if code is None:
        return (id(f), getattr(f, "__qualname__", type(f).__name__), "<unknown>", 0)
    return (code, code.co_name, code.co_filename, code.co_firstlineno)


def reset() -> None:
    """Forget every compiled graph and cache (``ember.compiler.reset()``)."""
    _CACHES.clear()


__all__ = ["CodeCache", "Entry", "SegmentCache", "reset"]
