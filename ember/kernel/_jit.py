"""``@jit`` kernels and ``kernel[grid](args...)`` launches.

A launch binds the arguments (tensors become pointers, ``constexpr`` parameters compile-time
values, other ints/floats runtime scalars), resolves the grid (a tuple, or a callable of the
bound arguments, Triton's ``meta``) and then:

* under ``ember.compile``/``ember.export`` tracing (a lazy tensor among the arguments): records
  one ``kernel_launch`` node (``_trace.py``) whose outputs are the new values of the tensors
  the kernel stores to;
* with ``EMBER_KERNEL_INTERPRET=1`` (or ``interpret=True``): runs the Python function once per
  program on NumPy (``language.py``), checking every unmasked access;
* otherwise: compiles the specialization to C (``_front.py``), builds it with the C backend's
  toolchain and calls it (grid as an OpenMP loop).
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember import dtypes as _dt
from ember.config import config
from ember.errors import EmberTypeError, EmberValueError
from ember.kernel import language as tl
from ember.sym import SymInt


@dataclass(frozen=True)
class Arg:
    """One bound argument of a launch: ``kind`` "tensor", "int", "float" or "constexpr"."""

    name: str
    kind: str
    value: Any

    @property
    def dtype_name(self) -> str:
        """A tensor argument's dtype (its value is the tensor, or its dtype's name)."""
        return self.value if isinstance(self.value, str) else self.value.dtype.name


def _is_constexpr(annotation: Any) -> bool:
    if annotation is tl.constexpr:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


class JITFunction:
    """A kernel: ``kernel[grid](*args)`` launches it (``grid``: a tuple of up to 3 ints, or a
    callable of the bound arguments returning one).

    >>> @jit
    ... def fill(out_ptr, n, value, BLOCK: constexpr):
    ...     offs = program_id(0) * BLOCK + arange(0, BLOCK)
    ...     store(out_ptr + offs, full((BLOCK,), value, float32), mask=offs < n)
    >>> fill[(cdiv(10, 4),)](out, 10, 1.5, BLOCK=4)     # doctest: +SKIP
    """

    def __init__(self, fn: Callable, interpret: bool | None = None) -> None:
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self._plain = all(p.kind == p.POSITIONAL_OR_KEYWORD
                          for p in self.signature.parameters.values())
        self.constexprs = {n for n, p in self.signature.parameters.items()
                           if _is_constexpr(p.annotation)}
        self.interpret = interpret
        self._compiled: dict = {}
        self._lock = threading.Lock()
        self._stored: frozenset | None = None
        self._access: dict = {}   # specialization -> (loaded, stored) params (_front.access)
        self._digest: str | None = None

    def __repr__(self) -> str:
        # the source's digest: a graph that launches the kernel prints it, so compiled graphs
        # cached on disk (keyed by their printed form) are rebuilt when the kernel changes
        return f"<ember.kernel.jit {self.__name__} {self.source_digest[:12]}>"

    @property
    def source_digest(self) -> str:
        """sha256 of the kernel's source (its bytecode when the source is unavailable)."""
        if self._digest is None:
            try:
                text = inspect.getsource(self.fn).encode()
            except (OSError, TypeError):
                text = self.fn.__code__.co_code
            self._digest = hashlib.sha256(text).hexdigest()
        return self._digest

    def __getitem__(self, grid: Any) -> Callable:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    # -- binding -------------------------------------------------------------------------------
    def bind(self, args: tuple, kwargs: dict) -> list[Arg]:
        """The launch's arguments in parameter order, classified."""
        from ember.tensor import Tensor
        names = self.arg_names
        if self._plain and len(args) + len(kwargs) == len(names) and all(
                n in kwargs for n in names[len(args):]):
            values = dict(zip(names, args))   # every argument given: Signature.bind's result
            values.update(kwargs)
        else:
            try:
                ba = self.signature.bind(*args, **kwargs)
            except TypeError as e:
                raise EmberTypeError(f"[ember.kernel] {self.__name__}: {e}") from None
            ba.apply_defaults()
            values = ba.arguments
        out = []
        for name in names:
            v = values[name]
            if name in self.constexprs:
                v = v.value if isinstance(v, tl.constexpr) else v
                # a size passed as a constexpr specializes (guarded, as PyTorch does)
                out.append(Arg(name, "constexpr", int(v) if isinstance(v, SymInt) else v))
            elif isinstance(v, Tensor):
                out.append(Arg(name, "tensor", v))
            elif isinstance(v, (bool, np.bool_)):
                out.append(Arg(name, "int", int(v)))
            elif isinstance(v, (int, np.integer)):
                out.append(Arg(name, "int", int(v)))
            elif isinstance(v, SymInt):   # a size under export: recorded, never run
                out.append(Arg(name, "int", v))
            elif isinstance(v, (float, np.floating)):
                out.append(Arg(name, "float", float(v)))
            elif v is None:
                out.append(Arg(name, "constexpr", None))
            else:
                raise EmberTypeError(f"[ember.kernel] {self.__name__}: argument {name} is a "
                                     f"{type(v).__name__}; expected a tensor, an int, a float "
                                     "or a constexpr")
        return out

    def grid_of(self, grid: Any, bound: list[Arg]) -> tuple:
        if callable(grid):
            grid = grid({a.name: a.value for a in bound})
        grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        if not 1 <= len(grid) <= 3 or any(
                not (isinstance(g, SymInt) or isinstance(g, (int, np.integer)) and g >= 0)
                for g in grid):
            raise EmberValueError(f"[ember.kernel] {self.__name__}: the grid must be 1 to 3 "
                                  f"non-negative ints, got {grid!r}")
        # a SymInt (a size under export) stays symbolic: the launch is recorded, not run
        return tuple(g if isinstance(g, SymInt) else int(g) for g in grid) + \
            (1,) * (3 - len(grid))

    # -- launching -----------------------------------------------------------------------------
    def run(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        """Launch over ``grid`` (what ``kernel[grid](*args)`` calls)."""
        from ember.kernel import _trace
        bound = self.bind(args, kwargs)
        g = self.grid_of(grid, bound)
        if _trace.is_tracing(bound):
            _trace.record_launch(self, bound, g)
            return
        arrays = [a.value._data for a in bound if a.kind == "tensor"]
        self.run_arrays(bound, g, arrays)
        for a in bound:
            if a.kind == "tensor" and a.name in self.stored_params(bound):
                a.value._version_counter[0] += 1

    def run_arrays(self, bound: list[Arg], grid: tuple, arrays: list) -> None:
        """Run on NumPy ``arrays`` (the tensor arguments' memory, in order), in place."""
        if self.interpret if self.interpret is not None else config.kernel_interpret:
            self._interpret(bound, grid, arrays)
        else:
            self.compiled(bound).call(bound, grid, arrays)

    def _interpret(self, bound: list[Arg], grid: tuple, arrays: list) -> None:
        it = iter(arrays)
        call = []
        for a in bound:
            if a.kind == "tensor":
                call.append(tl.Pointer(_flat_view(next(it)), a.name))
            elif a.kind == "float":
                call.append(np.float32(a.value))
            elif a.kind == "int":
                call.append(np.int64(a.value))
            else:
                call.append(a.value)
        saved = (tl.STATE.pid, tl.STATE.grid, tl.STATE.code, tl.STATE.name)
        tl.STATE.grid, tl.STATE.code, tl.STATE.name = grid, self.fn.__code__, self.__name__
        try:
            with np.errstate(all="ignore"):
                for z in range(grid[2]):
                    for y in range(grid[1]):
                        for x in range(grid[0]):
                            tl.STATE.pid = (x, y, z)
                            self.fn(*call)
        finally:
            tl.STATE.pid, tl.STATE.grid, tl.STATE.code, tl.STATE.name = saved

    # -- compiling -----------------------------------------------------------------------------
    def specialization(self, bound: list[Arg]) -> tuple:
        """What a compiled kernel depends on: tensor dtypes, scalar kinds, constexpr values."""
        key = []
        for a in bound:
            if a.kind == "tensor":
                key.append((a.name, "tensor", a.dtype_name))
            elif a.kind == "constexpr":
                key.append((a.name, "constexpr", _hashable(a.value)))
            else:
                key.append((a.name, a.kind))
        return tuple(key)

    def compiled(self, bound: list[Arg]) -> Any:
        """The ``CompiledKernel`` of this specialization (compiled once, kept)."""
        from ember.kernel import _front
        key = self.specialization(bound)
        ck = self._compiled.get(key)
        if ck is None:
            with self._lock:
                ck = self._compiled.get(key)
                if ck is None:
                    ck = self._compiled[key] = _front.compile_kernel(self, bound)
        return ck

    def stored_params(self, bound: list[Arg] | None = None) -> frozenset:
        """Names of the parameters the kernel stores through (read from its source)."""
        if self._stored is None:
            from ember.kernel import _front
            self._stored = _front.stored_params(self)
        return self._stored


def _hashable(v: Any) -> Any:
    if isinstance(v, _dt.dtype):
        return ("dtype", v.name)
    if isinstance(v, list):
        return tuple(v)
    return v


def _flat_view(a: np.ndarray) -> np.ndarray:
    """A 1-D writable view of ``a``'s memory from its first element to its last (element
    offsets as the kernel computes them from strides)."""
    if a.size == 0:
        return a.reshape(-1)
    if a.flags.c_contiguous:
        return a.reshape(-1)
    item = a.itemsize
    if any(s < 0 for s in a.strides) or any(s % item for s in a.strides):
        raise EmberValueError("[ember.kernel] a tensor argument with negative or unaligned "
                              "strides; pass a .contiguous() tensor")
    span = 1 + sum((n - 1) * s // item for n, s in zip(a.shape, a.strides))
    return np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(item,))


def jit(fn: Callable | None = None, *, interpret: bool | None = None, **_options: Any) -> Any:
    """Make ``fn`` a kernel (``@jit`` or ``@jit(interpret=True)``); Triton's other options
    (``do_not_specialize``, ...) are accepted and ignored."""
    if fn is None:
        return lambda f: JITFunction(f, interpret)
    return JITFunction(fn, interpret)


__all__ = ["Arg", "JITFunction", "jit"]
