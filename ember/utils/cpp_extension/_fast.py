"""The C fast path of a stable-kernel call (``fastcall.c``, a CPython extension module built by
the system compiler on first use, cached like the shim).

``StableKernel.invoke`` in Python marshals arguments, makes one ``ctypes`` call and wraps the
result; ``fastcall.call`` does the same for the common call (tensor, int, float and bool
arguments; one tensor, one scalar or no result) in C and hands every other call to ``invoke``,
so the two paths give the same results and errors.  When the module cannot be built (no
``Python.h``, no compiler) ``MODULE.get()`` is None and calls take ``invoke``.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import struct
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
_NAME = "_ember_stable_fastcall"
# Plan: head[6] (StableKernel.head), nargs, ret (int64 each), then 64 argument kind characters
_PLAN = struct.Struct("<8q64s")
RET_NONE, RET_TENSOR, RET_INT, RET_FLOAT, RET_BOOL, RET_OTHER = 0, 1, 2, 3, 4, -1


class FastModule:
    """The loaded module, built once per process (``get()``; None when it cannot be built,
    or after ``disable()``, which tests use to run the ctypes path)."""

    def __init__(self) -> None:
        self._module: Any = None
        self._tried = False
        self._lock = threading.Lock()
        self.error: str | None = None  # why the module is not available

    def get(self) -> Any:
        if not self._tried:
            with self._lock:
                if not self._tried:
                    self._module = self._load()
                    self._tried = True
        return self._module

    def disable(self) -> None:
        self._module, self._tried = None, True

    def reset(self) -> None:
        self._module, self._tried = None, False

    def _load(self) -> Any:
        include = sysconfig.get_paths().get("include")
        if not include or not (Path(include) / "Python.h").exists():
            self.error = "Python.h not found"
            return None
        from ember.compiler.c.build import toolchain
        from ember.errors import CompileError
        try:
            path = toolchain.compile_library(
                (HERE / "fastcall.c").read_text(), name=_NAME,
                extra_flags=("-I", include, "-I", np.get_include()),
                version=f"{toolchain.ember_version()}+py{sys.version}+np{np.__version__}")
        except CompileError as e:
            self.error = str(e)
            return None
        spec = importlib.util.spec_from_file_location(
            _NAME, str(path), loader=importlib.machinery.ExtensionFileLoader(_NAME, str(path)))
        assert spec is not None and spec.loader is not None
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except (ImportError, OSError) as e:  # e.g. built for another interpreter
            self.error = f"{type(e).__name__}: {e}"
            return None
        assert module.plan_size() == _PLAN.size, (module.plan_size(), _PLAN.size)
        self._init(module)
        return module

    @staticmethod
    def _init(module: Any) -> None:
        from ember.tensor import Tensor, _wrap
        from ember.utils.cpp_extension import _host, _ops
        lib = _host.SHIM.lib
        call = ctypes.cast(lib.ember_stable_py_call, ctypes.c_void_p).value
        release = ctypes.cast(lib.ember_stable_tensor_release, ctypes.c_void_p).value
        dtype_of = tuple(_host.DTYPE_OF.get(c) for c in range(16))
        np_dtypes = tuple(_host._NP_OF.get(c) for c in range(16))
        module.init(call, release, Tensor, _wrap, dtype_of, np_dtypes, _ops._PINNED,
                    _host.raise_error)


MODULE = FastModule()


def plan(head: Any, kinds: tuple, ret: int, sk: Any, qualname: str) -> tuple | None:
    """What ``fastcall.call`` reads about one kernel; None for more than 64 arguments."""
    if len(kinds) > 64:
        return None
    packed = _PLAN.pack(*head[:6], len(kinds), ret,
                        "".join(k if len(k) == 1 else "?" for k in kinds).encode())
    return (packed, sk, qualname)


__all__ = ["MODULE", "plan"]
