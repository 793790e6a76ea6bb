"""Loading a stable-ABI extension and calling its boxed kernels from ember.

``load_library(path)`` reads the ABI version the extension was built for (text the
registration macros write into the binary) and refuses one newer than this ember before
loading it; then it loads the library (its constructors record their ``EMBER_STABLE_LIBRARY``
blocks in the shim), runs each block and registers the defined ops as custom ops
(``ember.ops.<ns>.<name>``).  ``StableKernel`` marshals one call: ember tensors lend their
memory to the kernel as DLPack handles for the duration of the call; results come back as
arrays over the memory the shim allocated, released with the array."""

from __future__ import annotations

import ctypes
import functools
import re
import struct
import threading
from ctypes import c_char_p, c_int, c_int64, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ember.errors import EmberRuntimeError, EmberTypeError
from ember.library import Library
from ember.library._custom_op import PACKETS
from ember.library._schema import Schema
from ember.ops._layout import storage_offset
from ember.tensor import Tensor, _wrap
from ember.utils.cpp_extension import _fast, _host
from ember.utils.cpp_extension._host import (
    CODE_OF,
    DTYPE_OF,
    SHIM,
    array_of,
    owned_array,
    raise_error,
)

_TAG = re.compile(rb"EMBER_STABLE_ABI_TARGET:\(*\s*(\d+)")
_LOAD_LOCK = threading.Lock()
_PINNED: list = []      # argument memory a kernel kept a handle to: alive for the process
_LOADED: dict[str, ctypes.CDLL] = {}
_CODE_OF_NP = _host.CODE_OF_NP
_F64_PACK = struct.Struct("<d").pack
_F64_BITS = struct.Struct("<Q").unpack
_TLS = threading.local()


def _buffers() -> tuple:
    """This thread's buffers for argument and result descriptions (a kernel call releases the
    GIL; a call never starts another one on its thread, so one set per thread is enough)."""
    bufs = getattr(_TLS, "bufs", None)
    if bufs is None:
        stack = (c_uint64 * _STACK_SLOTS)()
        bufs = _TLS.bufs = ((c_int64 * 128)(), (c_int64 * 4096)(), stack,
                            ctypes.addressof(stack))
    return bufs


_STACK_SLOTS = 64  # a kernel with more arguments or results gets a stack of its own

# schema type -> how an argument goes on the stack
_ARG_KIND = {"Tensor": "T", "Tensor?": "T?", "int": "i", "SymInt": "i", "float": "f",
             "bool": "b", "ScalarType": "d", "ScalarType?": "d?", "int[]": "l", "SymInt[]": "l",
             "int?": "i?", "SymInt?": "i?", "float?": "f?", "bool?": "b?", "str": "s",
             "Tensor[]": "L", "float[]": "F", "int[]?": "l?", "SymInt[]?": "l?",
             "float[]?": "F?", "Tensor[]?": "L?", "Tensor?[]": "O"}
_RET_KIND = {"Tensor": "T", "int": "i", "SymInt": "i", "float": "f", "bool": "b",
             "Tensor[]": "L"}


def target_versions(path: str | Path) -> list[int]:
    """The ABI versions an extension's translation units were built for."""
    return [int(v) for v in _TAG.findall(Path(path).read_bytes())]


def check_abi(path: str | Path, name: str) -> int:
    """The extension's target version; raises when it is newer than this ember's ABI."""
    versions = target_versions(path)
    ours = _host.abi_version()
    if not versions:
        raise EmberRuntimeError(
            f"[cpp_extension.load] {name!r} ({path}) registers no ops with the ember stable ABI "
            "(no EMBER_STABLE_LIBRARY block); build it against ember/stable/library.h")
    if max(versions) > ours:
        raise EmberRuntimeError(
            f"[cpp_extension.load] {name!r} ({path}) was built for ember stable ABI version "
            f"{max(versions)}, newer than this ember's version {ours}; it was not loaded. "
            "Rebuild it with EMBER_TARGET_VERSION set to the oldest ember it must run on, or "
            "upgrade ember")
    return max(versions)


def load_library(path: str | Path, name: str | None = None) -> list[str]:
    """Load a built extension and register its ops; returns their names ``"ns::op"``.

    >>> load_library("build/myext.so")          # doctest: +SKIP
    ['myext::mul_scalar']
    """
    path = Path(path).resolve()
    name = name or path.stem
    check_abi(path, name)
    lib = SHIM.lib  # the shim's symbols must be global before the extension loads
    with _LOAD_LOCK:
        lib.ember_stable_py_pending_clear()
        try:
            handle = ctypes.CDLL(str(path))
        except OSError as e:
            raise EmberRuntimeError(f"[cpp_extension.load] cannot load {name!r}: {e}") from e
        try:
            blocks = _run_blocks(lib, name)
        finally:
            lib.ember_stable_py_pending_clear()
        _LOADED[str(path)] = handle
    return _register(blocks, name)


def _run_blocks(lib: ctypes.CDLL, name: str) -> list[tuple[str, str, str, list, list]]:
    blocks = []
    for i in range(lib.ember_stable_py_pending_count()):
        version, strs, line = c_uint64(), [c_char_p() for _ in range(4)], c_uint32()
        lib.ember_stable_py_pending_get(i, ctypes.byref(version),
                                        *[ctypes.byref(s) for s in strs], ctypes.byref(line))
        ns, kind, key, file = (s.value.decode() for s in strs)
        where = f"{file}:{line.value}"
        if version.value > _host.abi_version():  # also checked on the bytes before loading
            raise EmberRuntimeError(f"[cpp_extension.load] {name!r}: the library block at "
                                    f"{where} targets ABI version {version.value}, newer than "
                                    f"{_host.abi_version()}")
        handle = c_void_p()
        code = lib.ember_stable_py_pending_run(i, ctypes.byref(handle))
        if code:
            raise_error(code, f"cpp_extension.load {name} ({where})")
        nd, ni = c_int(), c_int()
        lib.ember_stable_py_lib_counts(handle, ctypes.byref(nd), ctypes.byref(ni))
        defs = [lib.ember_stable_py_lib_def(handle, k).decode() for k in range(nd.value)]
        impls = []
        for k in range(ni.value):
            op, kernel, invoker = c_char_p(), c_void_p(), c_void_p()
            lib.ember_stable_py_lib_impl(handle, k, ctypes.byref(op), ctypes.byref(kernel),
                                         ctypes.byref(invoker))
            impls.append((op.value.decode(), kernel.value, invoker.value or 0))
        blocks.append((ns, kind, key, defs, impls))
    return blocks


def _register(blocks: list, name: str) -> list[str]:
    names = []
    for ns, _kind, _, defs, _ in blocks:
        for schema in defs:
            lib = Library(ns, "FRAGMENT")
            op = lib.define(schema)
            names.append(f"{ns}::{op}")
    for ns, kind, key, _, impls in blocks:
        if kind != "IMPL" and impls:
            raise EmberRuntimeError(f"[cpp_extension.load] {name!r}: m.impl belongs in "
                                    f"EMBER_STABLE_LIBRARY_IMPL({ns}, CPU, m)")
        if impls and key not in ("CPU", "CompositeExplicitAutograd"):
            raise EmberRuntimeError(f"[cpp_extension.load] {name!r}: dispatch key {key!r} is "
                                    "not supported (CPU, CompositeExplicitAutograd)")
        for op, kernel, invoker in impls:
            qual = f"{ns}::{op}"
            if qual not in PACKETS:
                raise EmberRuntimeError(f"[cpp_extension.load] {name!r}: m.impl({op!r}) names "
                                        f"no defined op {qual!r}; add m.def(\"{op}(...) -> "
                                        "...\") to an EMBER_STABLE_LIBRARY block")
            sk = StableKernel(qual, PACKETS[qual]._schema, kernel, invoker)
            Library(ns, "FRAGMENT").impl(op, sk.as_function(), "CPU")
    return names


class StableKernel:
    """One boxed kernel with its schema: ``__call__(*args)`` in schema order."""

    def __init__(self, qualname: str, schema: Schema, kernel: int, invoker: int) -> None:
        self.qualname, self.schema = qualname, schema
        self.kernel, self.invoker = kernel, invoker
        self.arg_kinds = tuple(self._kind(a.type, _ARG_KIND, "argument") for a in schema.args)
        self.ret_kinds = tuple(self._kind(r, _RET_KIND, "return") for r in schema.returns)
        self.out_mask = sum(1 << i for i, k in enumerate(self.ret_kinds) if k == "T")
        list_mask = sum(1 << i for i, k in enumerate(self.ret_kinds) if k == "L")
        self.nargs, self.nouts = len(schema.args), len(schema.returns)
        self.stack_type = c_uint64 * max(self.nargs, self.nouts, 1)
        self.names = tuple(a.name for a in schema.args)
        self.head = (c_int64 * 6)(kernel, invoker or 0, self.nargs, self.nouts, self.out_mask,
                                  list_mask)
        self.one_tensor = self.ret_kinds == ("T",) and not schema.returns_tuple
        SHIM.lib  # noqa: B018 (loads the shim)
        self._call = SHIM.call
        self.plan = _fast.plan(self.head, self.arg_kinds, self._ret_mode(), self, qualname)

    def _ret_mode(self) -> int:
        if not self.schema.returns:
            return _fast.RET_NONE
        if self.schema.returns_tuple or len(self.ret_kinds) != 1:
            return _fast.RET_OTHER
        return {"T": _fast.RET_TENSOR, "i": _fast.RET_INT, "f": _fast.RET_FLOAT,
                "b": _fast.RET_BOOL}.get(self.ret_kinds[0], _fast.RET_OTHER)

    def fast_function(self) -> Callable:
        """The cheapest callable of the kernel (positional arguments): ``fastcall.call`` bound
        to this kernel's plan, or the kernel itself when the C fast path is not available."""
        module = _fast.MODULE.get()
        if module is None or self.plan is None:
            return self
        return functools.partial(module.call, self.plan)

    def op_fast_call(self, alias_error: Callable) -> Callable | None:
        """``CustomOpDef``'s eager fast path: ``f(*args)`` runs the kernel, or returns
        ``NotImplemented`` when the call needs the general path (None: no C fast path)."""
        module = _fast.MODULE.get()
        if module is None or self.plan is None:
            return None
        return functools.partial(module.call_op, self.plan, alias_error)

    def _kind(self, t: str, table: dict, what: str) -> str:
        if t not in table:
            raise EmberRuntimeError(f"[cpp_extension.load] {self.qualname}: {what} type {t!r} "
                                    f"is not supported by the stable ABI ({', '.join(table)})")
        return table[t]

    def as_function(self) -> Callable:
        def kernel(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                args = args + tuple(kwargs[n] for n in self.names[len(args):])
            return self(*args)
        kernel.__name__ = self.qualname.split("::")[1]
        kernel.__qualname__ = kernel.__name__
        kernel.stable_kernel = self  # type: ignore[attr-defined]
        return kernel

    def __call__(self, *args: Any) -> Any:
        module = _fast.MODULE.get()
        if module is not None and self.plan is not None:
            return module.call(self.plan, *args)
        return self.invoke(args, None)

    def invoke(self, args: tuple, alias_error: Callable | None) -> Any:
        """Run the kernel on ``args`` (schema order).  ``alias_error``: raised when a result
        lies over an argument's memory (the custom-op contract; results over memory the shim
        allocated are new and alias nothing)."""
        if len(args) != self.nargs:
            raise EmberTypeError(f"[{self.qualname}] takes {self.nargs} arguments "
                                 f"({self.schema}), got {len(args)}")
        meta_arr, out, stack, base = _buffers()
        if self.nargs > _STACK_SLOTS or self.nouts > _STACK_SLOTS:
            stack = self.stack_type()
            base = ctypes.addressof(stack)
        keep: list = []
        arrays: list = []
        meta: list = []
        i = 0
        for kind in self.arg_kinds:
            v = args[i]
            if kind == "T":
                a = v._data if v.__class__ is Tensor else None
                code = _CODE_OF_NP.get(a.dtype, 15) if a is not None else 15
                if code == 15 or a.base is not None:  # bfloat16, a view, not a Tensor
                    self._tensor(i, v, base + 8 * i, meta, arrays)
                else:
                    meta += (base + 8 * i, code)
                    arrays.append(a)
            elif kind == "f":
                stack[i] = _F64_BITS(_F64_PACK(v))[0]
            else:
                stack[i] = self._scalar(i, kind, v, meta, arrays, keep)
            i += 1
        n = len(meta)
        if n > 128:
            raise EmberTypeError(f"[{self.qualname}] at most 64 tensor arguments")
        meta_arr[:n] = meta
        code = self._call(self.head, stack, tuple(arrays), meta_arr, out)
        for k in range(0, n, 2):
            if meta_arr[k] > 0:  # the kernel stored a handle to this memory away
                _PINNED.append(arrays[k // 2])
        if code:
            raise_error(code, self.qualname)
        if self.one_tensor and out[2] < 0:  # one result in memory the shim allocated
            nd = out[4]
            return _wrap(owned_array(out[0], out[1], out[3], nd, out[5], out[6],
                                     out[7:7 + 2 * nd]), DTYPE_OF[out[3]])
        return self._results(stack, out, arrays, alias_error)

    def _tensor(self, i: int, t: Any, address: int, meta: list, arrays: list) -> None:
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"[{self.qualname}] argument {self.names[i]!r} must be a "
                                 f"Tensor, got {type(t).__name__}")
        a = t._data
        code = _CODE_OF_NP.get(a.dtype)
        if code is None:
            raise EmberTypeError(f"[{self.qualname}] argument {self.names[i]!r} has dtype "
                                 f"{t.dtype}, which the stable ABI does not carry")
        if a.base is not None:  # a view: the kernel sees its storage offset
            code |= storage_offset(a) << 8
        meta += (address, code)
        # bfloat16 has no buffer-protocol format: lend its bits as uint16
        arrays.append(a.view(np.uint16) if code & 0xff == 15 else a)

    def _scalar(self, i: int, kind: str, v: Any, meta: list, arrays: list, keep: list) -> int:
        if kind.endswith("?"):
            if v is None:
                return 0
            cell = c_uint64()
            keep.append(cell)
            if kind == "T?":
                self._tensor(i, v, ctypes.addressof(cell), meta, arrays)
            else:
                cell.value = self._scalar(i, kind[:-1], v, meta, arrays, keep)
            return ctypes.addressof(cell)
        if kind == "i":
            return int(v) & 0xFFFFFFFFFFFFFFFF
        if kind == "f":
            return _F64_BITS(_F64_PACK(v))[0]
        if kind == "b":
            return 1 if v else 0
        if kind == "d":
            return CODE_OF[v]
        if kind == "l":
            vals = [len(v), *(int(x) for x in v)]
            arr = (c_int64 * len(vals))(*vals)
            keep.append(arr)
            return ctypes.addressof(arr)
        if kind == "F":  # a count, then the doubles' bits
            vals = [len(v), *(_F64_BITS(_F64_PACK(float(x)))[0] for x in v)]
            arr = (c_uint64 * len(vals))(*vals)
            keep.append(arr)
            return ctypes.addressof(arr)
        if kind in ("L", "O"):  # a count, then one borrowed handle per tensor (the shim fills
            arr = (c_uint64 * (1 + len(v)))(len(v))  # them); Tensor?[]: 0 for None
            keep.append(arr)
            at = ctypes.addressof(arr)
            for j, t in enumerate(v):
                if t is not None or kind == "L":
                    self._tensor(i, t, at + 8 * (1 + j), meta, arrays)
            return at
        buf = ctypes.create_string_buffer(str(v).encode())  # "s"
        keep.append(buf)
        return ctypes.addressof(buf)

    def _results(self, stack: Any, out: Any, arrays: list,
                 alias_error: Callable | None = None) -> Any:
        rets: list = []
        pos = 0
        storages: list = []  # (argument index, storage base) of every tensor result
        for i, kind in enumerate(self.ret_kinds):
            v = stack[i]
            if kind == "T":
                nd = out[pos + 4]
                desc = out[pos + 1:pos + 7 + 2 * nd]
                rets.append(self._result(desc, out[pos], arrays, storages))
                pos += 7 + 2 * nd
            elif kind == "L":  # [list, count]: new handles, described one by one
                items = (c_uint64 * out[pos + 1]).from_address(out[pos] + 8)
                rets.append([self._result(_host.describe(h), h, arrays, storages)
                             for h in items])
                SHIM.lib.ember_stable_py_list_free(c_void_p(out[pos]))
                pos += 2
            elif kind == "i":
                rets.append(v - (1 << 64) if v >= 1 << 63 else v)
            elif kind == "f":
                rets.append(struct.unpack("<d", struct.pack("<Q", v))[0])
            else:
                rets.append(bool(v))
        if alias_error is not None:  # over an argument's memory, or another result's
            bases = [b for _, b in storages]
            if any(k >= 0 for k, _ in storages) or len(set(bases)) < len(bases):
                alias_error()
        if not self.schema.returns:
            return None
        return tuple(rets) if self.schema.returns_tuple else rets[0]

    def _result(self, desc: list, handle: int, arrays: list, storages: list) -> Tensor:
        """A tensor over a result handle (owned: released with its array)."""
        keep = arrays[desc[1]] if desc[1] >= 0 else None
        storages.append((desc[1], desc[4]))
        return _wrap(array_of(desc, handle, keep), DTYPE_OF[desc[2]])


__all__ = ["StableKernel", "check_abi", "load_library", "target_versions"]
