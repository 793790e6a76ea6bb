"""Rewriting packages for the compatibility and hostile tests."""

import json
import zipfile


def rewrite(src, dst, edit):
    """Copy the zip ``src`` to ``dst`` (entries stored), passing ``(name, data)`` through
    ``edit``, which returns the new ``(name, data)`` or None to drop the entry."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            got = edit(info.filename, zin.read(info))
            if got is not None:
                zout.writestr(zipfile.ZipInfo(got[0], date_time=(1980, 1, 1, 0, 0, 0)), got[1])
    return str(dst)


def edit_metadata(src, dst, changes):
    """``src`` with its models' metadata updated by ``changes``."""
    def edit(name, data):
        if name.endswith(".wrapper_metadata.json"):
            meta = json.loads(data)
            meta.update(changes)
            data = json.dumps(meta).encode()
        return name, data
    return rewrite(src, dst, edit)


# ------------------------------------------------------------------ the C runner via ctypes
import ctypes  # noqa: E402

import numpy as np  # noqa: E402


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_NP_DL = {"float32": (2, 32), "float16": (2, 16), "bfloat16": (4, 16), "int64": (0, 64),
          "int32": (0, 32), "bool": (6, 8)}


def _dl_np(code, bits):
    import ml_dtypes
    name = next(k for k, v in _NP_DL.items() if v == (code, bits))
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


class CRunner:
    """libember_aot loaded with ctypes: ``load`` gives (code, handle, last error)."""

    def __init__(self):
        from ember.aot._clib import build_runtime_library
        lib = self.lib = ctypes.CDLL(str(build_runtime_library()))
        lib.ember_aot_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.POINTER(ctypes.c_void_p)]
        lib.ember_aot_last_error.restype = ctypes.c_char_p
        lib.ember_aot_metadata.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.ember_aot_metadata.restype = ctypes.c_char_p
        lib.ember_aot_unload.argtypes = [ctypes.c_void_p]
        lib.ember_aot_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_void_p, ctypes.c_int64]
        lib.ember_aot_free_output.argtypes = [ctypes.c_void_p]
        lib.ember_aot_num_outputs.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)]

    def error(self):
        return self.lib.ember_aot_last_error().decode()

    def load(self, path, model="model"):
        h = ctypes.c_void_p()
        rc = self.lib.ember_aot_load(str(path).encode(), model.encode(), ctypes.byref(h))
        return rc, h, self.error() if rc else ""

    def metadata(self, h, key):
        v = self.lib.ember_aot_metadata(h, key.encode())
        return None if v is None else v.decode()

    def run(self, h, arrays):
        """(code, outputs as NumPy arrays or None) for input arrays: float64 (and Python
        floats) go in as float32; int64, int32, bool, float16 and bfloat16 (ml_dtypes) as
        they are.  Outputs come back in their own dtypes (float32 for the float32 models)."""
        keep, ins = [], []
        for a in arrays:
            a = np.asarray(a)
            if a.dtype.name not in _NP_DL:
                a = a.astype(np.float32)
            a = np.ascontiguousarray(a)
            shape = (ctypes.c_int64 * a.ndim)(*a.shape)
            t = DLTensor(a.ctypes.data, DLDevice(1, 0), a.ndim, DLDataType(*_NP_DL[a.dtype.name],
                                                                           1), shape, None, 0)
            keep += [a, shape, t]
            ins.append(ctypes.pointer(t))
        n = ctypes.c_int64()
        self.lib.ember_aot_num_outputs(h, ctypes.byref(n))
        inp = (ctypes.POINTER(DLTensor) * max(1, len(ins)))(*ins)
        outp = (ctypes.POINTER(DLTensor) * max(1, n.value))()
        rc = self.lib.ember_aot_run(h, inp, len(ins), outp, n.value)
        if rc:
            return rc, None
        outs = []
        for k in range(n.value):
            t = outp[k].contents
            shape = tuple(t.shape[d] for d in range(t.ndim))
            dtype = _dl_np(t.dtype.code, t.dtype.bits)
            buf = (ctypes.c_uint8 * (int(np.prod(shape)) * dtype.itemsize)).from_address(t.data)
            outs.append(np.frombuffer(bytes(buf), dtype).reshape(shape).copy())
            self.lib.ember_aot_free_output(outp[k])
        return 0, outs
