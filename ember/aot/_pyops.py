"""The Python loader's side of Python custom ops in a package (``_externs`` is the build
side): check that every op the package calls is registered in this process, and install the
callback through which the model library runs them (``ember_aot_set_extern_v1``)."""

from __future__ import annotations

import ctypes
import json
import math
import threading
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.aot._archive import PackageError
from ember.errors import EmberRuntimeError

_P = ctypes.POINTER
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, _P(ctypes.c_void_p),
                             _P(ctypes.c_void_p), _P(ctypes.c_int64), _P(ctypes.c_int64))


def _array(ptr: int, shape: tuple, dt: np.dtype) -> np.ndarray:
    n = math.prod(shape) * dt.itemsize
    if n == 0 or not ptr:
        return np.empty(shape, dt)
    return np.frombuffer((ctypes.c_char * n).from_address(ptr), dt).reshape(shape)


def decode(j: Any, ints: Any) -> Any:
    """the inverse of ``_externs.encode``; ``ints`` are the call's runtime ints."""
    from ember.export.serde import _dec
    if isinstance(j, dict):
        if "sym" in j:
            return int(ints[int(j["sym"])])
        for k, t in (("tuple", tuple), ("list", list)):
            if k in j:
                return t(decode(v, ints) for v in j[k])
        if "dict" in j:
            return {k: decode(v, ints) for k, v in j["dict"]}
    return _dec(j, {"nodes": {}, "syms": {}, "env": None})


class PythonOps:
    """The custom ops of one loaded model (metadata ``ember.python_ops``/``ember.externs``).

    >>> ops = PythonOps(lib, meta, "model.pt2")   # raises when an op is not registered
    """

    def __init__(self, lib: Any, meta: dict, path: str) -> None:
        from ember.ops.registry import REGISTRY
        try:
            names = json.loads(meta.get("ember.python_ops", "[]"))
            self.specs = json.loads(meta.get("ember.externs", "[]"))
        except ValueError as e:
            raise PackageError(f"[aoti_load_package] {path}: bad ember.externs ({e})") from None
        missing = [q for q in names if REGISTRY.get(q.replace("::", ".", 1) + ".default")
                   is None]
        if missing:
            raise PackageError(
                f"[aoti_load_package] {path} calls the Python custom op(s) "
                f"{', '.join(missing)}, not registered in this process: import the module that "
                f"defines them (ember.library.custom_op) before loading the package")
        self.ops = [REGISTRY[s["op"]] for s in self.specs]
        setter = getattr(lib, "ember_aot_set_extern_v1", None)
        if setter is None:
            raise PackageError(f"[aoti_load_package] {path}: the library calls Python ops but "
                               f"exports no ember_aot_set_extern_v1")
        self._tls = threading.local()
        self._cb = _CALLBACK(self._call)  # kept alive as long as the model
        setter.argtypes = [_CALLBACK, ctypes.c_void_p]
        setter.restype = None
        setter(self._cb, None)

    def _call(self, ctx: Any, k: int, ins: Any, outs: Any, dims: Any, ints: Any) -> int:
        try:
            self._run(k, ins, outs, dims, ints)
            return 0
        except BaseException as e:  # noqa: BLE001 - re-raised by raise_pending after the call
            self._tls.error = e
            return 1

    def _run(self, k: int, ins: Any, outs: Any, dims: Any, ints: Any) -> None:
        spec, op = self.specs[k], self.ops[k]
        pos, arrays = 0, []
        for j, (dt, nd) in enumerate(spec["ins"]):
            shape = tuple(dims[pos:pos + nd])
            pos += nd
            a = _array(ins[j], shape, _dt.by_name(dt).np)
            a.flags.writeable = False  # constants live in a read-only map
            arrays.append(a)
        args = [arrays[v] if kind == "t" else decode(v, ints) for kind, v in spec["args"]]
        out = op.eager(*args, **decode(spec["params"], ints))
        res = (out,) if op.num_outputs == 1 and len(spec["outs"]) == 1 else tuple(out)
        for j, (dt, nd) in enumerate(spec["outs"]):
            shape = tuple(dims[pos:pos + nd])
            pos += nd
            r = np.asarray(res[j])
            want = _dt.by_name(dt).np
            if r.shape != shape or r.dtype != want:
                raise EmberRuntimeError(
                    f"[AOTIModel] custom op {spec['qualname']} returned {r.dtype}{list(r.shape)}"
                    f" for output {j}; the package expects {want}{list(shape)} (its fake "
                    f"implementation at export)")
            _array(outs[j], shape, want)[...] = r

    def raise_pending(self) -> None:
        """Raise the exception a custom op raised during the last call on this thread."""
        e = getattr(self._tls, "error", None)
        if e is not None:
            self._tls.error = None
            raise e


__all__ = ["PythonOps", "decode"]
