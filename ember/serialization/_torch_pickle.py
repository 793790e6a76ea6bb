"""Restricted unpickling: PyTorch ``.pt``/``.pth`` zip checkpoints without torch, and the user's
allowlist of extra globals (``add_safe_globals``).

A pickle can call any importable callable while it loads, so these unpicklers resolve globals only
from an explicit allowlist: torch's tensor-rebuild functions, storage types, dtypes and ``Size``
(each mapped to ember's own implementation, never imported from torch), ``OrderedDict`` and a few
builtins, and whatever the user allowed.  Anything else raises ``UnpicklingError`` before it can
be called.
"""

from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import importlib
import io
import pickle
import re
import struct
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ml_dtypes
import numpy as np

from ember import dtypes as _dt
from ember.device import device as _device
from ember.serialization import _zipcheck as _zc
from ember.serialization._errors import SerializationError, UnpicklingError
from ember.tensor import Size, Tensor, _wrap

__all__ = ["add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]

# ------------------------------------------------------------------ the user's allowlist
_USER_GLOBALS: dict[str, Any] = {}


def _qualname(obj: Any) -> str:
    mod = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if not mod or not name:
        raise SerializationError(
            f"[add_safe_globals] {obj!r} has no __module__/__qualname__; pass (obj, 'module.name')")
    return f"{mod}.{name}"


def add_safe_globals(safe_globals: Iterable[Any]) -> None:
    """Allow these functions/classes (or ``(obj, "module.name")`` pairs) in restricted loads."""
    for g in safe_globals:
        if isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], str):
            _USER_GLOBALS[g[1]] = g[0]
        else:
            _USER_GLOBALS[_qualname(g)] = g


def get_safe_globals() -> list[Any]:
    """The user-added globals currently allowed."""
    return list(_USER_GLOBALS.values())


def clear_safe_globals() -> None:
    """Forget every user-added global."""
    _USER_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(globals_: Iterable[Any]) -> Iterator[None]:
    """Allow ``globals_`` within the ``with`` block only."""
    saved = dict(_USER_GLOBALS)
    add_safe_globals(globals_)
    try:
        yield
    finally:
        _USER_GLOBALS.clear()
        _USER_GLOBALS.update(saved)


def is_safe_global(obj: Any) -> bool:
    return any(v is obj for v in _USER_GLOBALS.values())


def _denied(module: str, name: str, alias: str | None = None) -> UnpicklingError:
    also = f" ({alias}.{name} in ember)" if alias else ""
    return UnpicklingError(
        f"[load] weights_only load refused the global {module}.{name}{also}: it is not on "
        f"the allowlist. If you trust this file, allow it with "
        f"ember.serialization.add_safe_globals([{name}]) or the safe_globals([...]) context "
        f"manager, or load with weights_only=False (runs arbitrary code from the file)")


def _codecs_encode(obj: Any, encoding: str = "latin1") -> bytes:
    # protocol-2 pickles spell bytes as _codecs.encode(str, 'latin1'); allow only that form
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1"):
        raise UnpicklingError("[load] _codecs.encode is allowed only as encode(str, 'latin1')")
    return obj.encode("latin1")


_BASE_GLOBALS: dict[str, Any] = {
    "collections.OrderedDict": collections.OrderedDict,
    "builtins.set": set, "builtins.frozenset": frozenset, "builtins.slice": slice,
    "_codecs.encode": _codecs_encode,
    "ember.tensor.Size": Size,
}
_BASE_GLOBALS.update({f"ember.dtypes.{d.name}": d for d in _dt.ALL_DTYPES})


_UNSUPPORTED_TORCH = re.compile(
    r"(Complex\w*|QUInt\dx\d|ComplexHalf)Storage|complex\d*|c(half|float|double)|"
    r"uint(16|32|64)|float8\w*|quint\dx\d|bits\w*|int[1-7]|uint[1-7]|float4\w*")


class RestrictedUnpickler(pickle._Unpickler):  # the Python implementation: its opcodes can be
    # overridden (BUILD below); checkpoints' pickles hold only structure, so speed is no issue
    """An Unpickler whose ``find_class`` serves only ``extra`` globals, the base allowlist and the
    user's safe globals, and whose BUILD sets state only on instances of allowed user classes
    (never on tensors, sizes, dtypes or storages it built itself)."""

    extra: dict[str, Any] = {}
    restrict_build = True
    dispatch = dict(pickle._Unpickler.dispatch)

    def load_build(self) -> None:
        inst = self.stack[-2] if len(self.stack) >= 2 else None
        if self.restrict_build and not (
                type(inst) is collections.OrderedDict or is_safe_global(type(inst))):
            raise UnpicklingError(
                f"[load] the pickle sets state on a {type(inst).__name__}, which only allowed "
                "user classes (add_safe_globals) may receive")
        pickle._Unpickler.load_build(self)

    dispatch[pickle.BUILD[0]] = load_build

    def find_class(self, module: str, name: str) -> Any:
        module, name = py2_names(module, name, self.proto)
        key = f"{module}.{name}"
        for table in (self.extra, _BASE_GLOBALS, _USER_GLOBALS):
            if key in table:
                return table[key]
        if self.extra and module == "torch" and _UNSUPPORTED_TORCH.fullmatch(name):
            raise SerializationError(
                f"[load] the checkpoint holds torch.{name} data; ember has no such dtype "
                f"(supported: {', '.join(d.name for d in _dt.ALL_DTYPES)})")
        alias = ember_alias(module)
        if alias is not None:  # torch.nn.modules.X.Y -> ember.nn.modules.X.Y, if allowed
            found = _USER_GLOBALS.get(f"{alias}.{name}")
            # or an allowed object that ember exports under that path (torch.nn.functional.relu
            # is ember.nn.functional.relu, defined in ember.nn.functional.activation); only
            # modules already imported are looked at, so the file cannot make ember import one
            mod = sys.modules.get(alias)
            candidate = getattr(mod, name, None) if mod is not None else None
            if found is None and candidate is not None and is_safe_global(candidate):
                found = candidate
            if found is not None:
                return found
        raise _denied(module, name, alias)


def py2_names(module: str, name: str, proto: int) -> tuple[str, str]:
    """Protocol-2 pickles spell some globals the Python 2 way (``__builtin__.set``)."""
    if proto < 3:
        if (module, name) in _compat_pickle.NAME_MAPPING:
            return _compat_pickle.NAME_MAPPING[(module, name)]
        return _compat_pickle.IMPORT_MAPPING.get(module, module), name
    return module, name


def ember_alias(module: str) -> str | None:
    """``ember<path>`` for a ``torch<path>`` module (PyTorch's class paths resolve to ember's
    classes at the same paths; torch itself is never imported), else None."""
    if module == "torch" or module.startswith("torch."):
        return "ember" + module[len("torch"):]
    return None


def restricted_loads(data: bytes, persistent_load: Callable[[Any], Any] | None = None) -> Any:
    """Unpickle ``data`` with the base + user allowlist (no torch globals)."""
    up = RestrictedUnpickler(io.BytesIO(data))
    if persistent_load is not None:
        up.persistent_load = persistent_load
    return _guarded(up.load)


def _guarded(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (UnpicklingError, SerializationError):
        raise
    except pickle.UnpicklingError as e:
        raise UnpicklingError(f"[load] corrupt pickle: {e}") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError, struct.error) as e:
        raise UnpicklingError(f"[load] corrupt pickle: {type(e).__name__}: {e}") from None


# ------------------------------------------------------------------ torch's globals, mapped
class _StorageType:
    def __init__(self, name: str, np_dtype: np.dtype) -> None:
        self.name, self.np = name, np.dtype(np_dtype)

    def __repr__(self) -> str:
        return f"torch.{self.name}"


_STORAGE_TYPES = {n: _StorageType(n, d) for n, d in {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2",
    "BFloat16Storage": ml_dtypes.bfloat16, "LongStorage": "<i8", "IntStorage": "<i4",
    "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
    "QInt8Storage": "i1", "QUInt8Storage": "u1", "QInt32Storage": "<i4",
}.items()}
_UNTYPED = _StorageType("UntypedStorage", "u1")

_TORCH_DTYPE_NAMES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16", "int64": "int64",
    "long": "int64", "int32": "int32", "int": "int32", "int16": "int16", "short": "int16",
    "int8": "int8", "uint8": "uint8", "bool": "bool",
}


class _Storage:
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


def _check_ints(seq: Any, what: str) -> tuple:
    if not isinstance(seq, (tuple, list)) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seq):
        raise UnpicklingError(f"[load] tensor {what} must be a sequence of non-negative ints, "
                              f"got {seq!r}")
    return tuple(seq)


def build_view(storage: np.ndarray, dtype: np.dtype, offset: Any, shape: Any, stride: Any,
               what: str = "tensor") -> np.ndarray:
    """A NumPy view of ``storage`` (a 1-D root array) with element geometry; validated so that
    every element lies inside the storage."""
    shape = _check_ints(shape, "size")
    stride = _check_ints(stride, "stride")
    if len(shape) != len(stride):
        raise UnpicklingError(f"[load] {what}: size {shape} and stride {stride} differ in length")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise UnpicklingError(f"[load] {what}: invalid storage offset {offset!r}")
    item = dtype.itemsize
    nbytes = storage.nbytes
    if 0 in shape:
        end = offset * item
    else:
        end = (offset + sum((n - 1) * s for n, s in zip(shape, stride)) + 1) * item
    if end > nbytes:
        raise UnpicklingError(
            f"[load] {what}: size {list(shape)}, stride {list(stride)}, offset {offset} reach "
            f"byte {end} but its storage has {nbytes} bytes")
    buf = storage if storage.dtype == dtype else storage.view(np.uint8)
    if 0 in shape:
        return np.ndarray(shape, dtype, buffer=buf, offset=min(offset * item, nbytes),
                          strides=tuple(s * item for s in stride))
    return np.ndarray(shape, dtype, buffer=buf, offset=offset * item,
                      strides=tuple(s * item for s in stride))


def _rebuild_tensor_v2(storage: Any, storage_offset: Any, size: Any, stride: Any,
                       requires_grad: Any = False, backward_hooks: Any = None,
                       metadata: Any = None) -> Tensor:
    if not isinstance(storage, _Storage):
        raise UnpicklingError(f"[load] _rebuild_tensor_v2 got {type(storage).__name__}, "
                              "expected a storage")
    arr = build_view(storage.array, storage.array.dtype, storage_offset, size, stride)
    t = _wrap(arr, _dt.from_numpy_dtype(arr.dtype, "load"))
    t._requires_grad = bool(requires_grad) and t._dtype.is_floating_point
    return t


def _rebuild_tensor_v3(storage: Any, storage_offset: Any, size: Any, stride: Any,
                       requires_grad: Any, backward_hooks: Any, dtype: Any,
                       metadata: Any = None) -> Tensor:
    # the dtype travels separately from an untyped storage
    if not isinstance(storage, _Storage) or not isinstance(dtype, _dt.dtype):
        raise UnpicklingError("[load] _rebuild_tensor_v3 expects a storage and a dtype")
    arr = build_view(storage.array, dtype.np, storage_offset, size, stride)
    t = _wrap(arr, dtype)
    t._requires_grad = bool(requires_grad) and dtype.is_floating_point
    return t


def make_parameter(t: Tensor, requires_grad: bool) -> Tensor:
    try:
        from ember.nn import Parameter  # same layer; present once ember.nn grows it
    except ImportError:
        Parameter = None  # noqa: N806
    if Parameter is not None:
        return Parameter(t, requires_grad=requires_grad)
    t._requires_grad = bool(requires_grad)
    return t


def _rebuild_parameter(data: Any, requires_grad: Any, backward_hooks: Any = None,
                       *state: Any) -> Tensor:
    if not isinstance(data, Tensor):
        raise UnpicklingError("[load] _rebuild_parameter expects a tensor")
    return make_parameter(data, bool(requires_grad))


_QSCHEMES = ("per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
             "per_channel_symmetric")
_QDTYPES = {"int8": "qint8", "uint8": "quint8", "int32": "qint32"}


def _rebuild_qtensor(storage: Any, storage_offset: Any, size: Any, stride: Any,
                     quantizer_params: Any, requires_grad: Any = False,
                     backward_hooks: Any = None) -> Any:
    """A quantized tensor (``torch.quantize_per_tensor/channel``'s, a dynamic quantized
    Linear's weight) as an ``ember.ao.quantization.QuantizedTensor``."""
    from ember.ao.quantization.qtensor import QuantizedTensor  # same layer, loaded on use

    if not isinstance(storage, _Storage) or storage.array.dtype.name not in _QDTYPES:
        raise UnpicklingError("[load] _rebuild_qtensor expects a QInt8/QUInt8/QInt32 storage")
    codes = build_view(storage.array, storage.array.dtype, storage_offset, size, stride).copy()
    q = tuple(quantizer_params) if isinstance(quantizer_params, (tuple, list)) else ()
    dtype = next(d for d in _dt.QUANTIZED_DTYPES if d.name == _QDTYPES[codes.dtype.name])
    if len(q) == 3 and q[0] in ("per_tensor_affine", "per_tensor_symmetric"):
        return QuantizedTensor(codes, dtype, float(q[1]), int(q[2]))
    if len(q) == 4 and q[0] in ("per_channel_affine", "per_channel_symmetric") \
            and isinstance(q[1], Tensor) and isinstance(q[2], Tensor):
        return QuantizedTensor(codes, dtype, q[1]._data.astype(np.float64),
                               q[2]._data.astype(np.int64), int(q[3]))
    raise UnpicklingError(f"[load] unsupported quantizer parameters {quantizer_params!r}")


def _torch_size(seq: Any = ()) -> Size:
    return Size(_check_ints(list(seq), "Size"))


_TORCH_GLOBALS: dict[str, Any] = {
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
    "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
    "torch.Size": _torch_size,
    "torch.device": _device,
    "torch.storage.UntypedStorage": _UNTYPED, "torch.UntypedStorage": _UNTYPED,
    "torch._utils._rebuild_qtensor": _rebuild_qtensor,
}
_TORCH_GLOBALS.update({f"torch.{n}": n for n in _QSCHEMES})
_TORCH_GLOBALS.update({f"torch.{d.name}": d for d in _dt.QUANTIZED_DTYPES})
_TORCH_GLOBALS.update({f"torch.{n}": s for n, s in _STORAGE_TYPES.items()})
_TORCH_GLOBALS.update({f"torch.{n}": _dt.by_name(e) for n, e in _TORCH_DTYPE_NAMES.items()})


class TorchUnpickler(RestrictedUnpickler):
    extra = _TORCH_GLOBALS

    def __init__(self, file: Any, zf: zipfile.ZipFile, prefix: str,
                 mapped: Any = None) -> None:
        super().__init__(file)
        self._zf, self._prefix, self._mapped = zf, prefix, mapped
        self._storages: dict[str, _Storage] = {}

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise UnpicklingError(f"[load] unsupported persistent id {pid!r}")
        _, stype, key, _location, numel = pid
        if not isinstance(stype, _StorageType):
            raise UnpicklingError(f"[load] persistent id names storage type {stype!r}, "
                                  "expected a torch storage class")
        if not (isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_.]+", key)
                and not key.startswith(".")):
            raise UnpicklingError(f"[load] invalid storage key {key!r}: storage keys are "
                                  "names inside the archive, never paths ('/', '..')")
        if not isinstance(numel, int) or numel < 0:
            raise UnpicklingError(f"[load] storage {key!r} has invalid numel {numel!r}")
        if key in self._storages:
            st = self._storages[key]
            if st.array.dtype != stype.np:
                st = _Storage(st.array.view(np.uint8).view(stype.np))
            return st
        name = f"{self._prefix}data/{key}"
        if name not in self._zf.NameToInfo:
            raise SerializationError(f"[load] checkpoint lacks storage entry {name!r}")
        try:
            raw = (entry_view(self._zf, name, self._mapped) if self._mapped is not None
                   else _zc.read_array(self._zf, name))
        except KeyError:
            raise SerializationError(f"[load] checkpoint lacks storage entry {name!r}") from None
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise SerializationError(f"[load] storage entry {name!r} is corrupt: {e}") from None
        need = numel * stype.np.itemsize
        if len(raw) < need:
            raise SerializationError(f"[load] storage entry {name!r} has {len(raw)} bytes; "
                                     f"{numel} elements of {stype!r} need {need}")
        # read_array returns new, writable memory of the entry's size; a mapped view is a
        # private copy-on-write map
        arr = np.frombuffer(raw, dtype=stype.np, count=numel)
        st = self._storages[key] = _Storage(arr)
        return st


def find_torch_prefix(zf: zipfile.ZipFile) -> str | None:
    """The ``<archive>/`` folder of a torch zip checkpoint, or None if this is not one; two
    ``data.pkl`` records (in different folders) are ambiguous and refused."""
    found = [n for n in zf.namelist()
             if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
    if len(found) > 1:
        raise SerializationError(f"[load] the archive holds {len(found)} data.pkl records "
                                 f"({found[0]!r}, {found[1]!r}): ambiguous, refused")
    return found[0][: -len("data.pkl")] if found else None


# the record versions this reader understands (torch writes version 3, .format_version 1;
# torch itself reads versions 1 to 10 of the record format)
_TORCH_VERSIONS = range(1, 11)
_FORMAT_VERSIONS = (1,)


def _small_int_record(zf: zipfile.ZipFile, name: str) -> int | None:
    """An integer version record (``version``, ``.format_version``), or None if absent."""
    if name not in zf.NameToInfo:
        return None
    raw = _zc.read_entry(zf, name)
    text = raw[:40].decode("ascii", "replace").strip()
    if len(raw) > 32 or not re.fullmatch(r"[0-9]{1,9}", text):
        raise SerializationError(f"[load] entry {name!r}: version record {text[:32]!r} is not "
                                 "a version this ember reads (1 to 10)")
    return int(text)


def check_torch_records(zf: zipfile.ZipFile, prefix: str) -> None:
    """Refuse TorchScript archives and unknown (future) record versions."""
    for n in zf.namelist():
        rest = n[len(prefix):] if n.startswith(prefix) else n
        if rest.startswith(("code/", ".data/ts_code/")) or rest in ("constants.pkl",
                                                                    "bytecode.pkl"):
            raise SerializationError(
                f"[load] entry {n!r}: this is a TorchScript archive (torch.jit.save); "
                "TorchScript is not supported by ember. Load it in PyTorch and save its "
                "state_dict() with torch.save instead")
    version = _small_int_record(zf, f"{prefix}version")
    if version is not None and version not in _TORCH_VERSIONS:
        raise SerializationError(f"[load] entry {prefix + 'version'!r}: archive version "
                                 f"{version} is not supported (this ember reads 1 to 10)")
    fmt = _small_int_record(zf, f"{prefix}.format_version")
    if fmt is not None and fmt not in _FORMAT_VERSIONS:
        raise SerializationError(f"[load] entry {prefix + '.format_version'!r}: format "
                                 f"version {fmt} is newer than this ember reads (1)")


def entry_view(zf: zipfile.ZipFile, name: str, mapped: Any) -> memoryview:
    """The bytes of a stored (uncompressed) zip entry as a view into the mapped file, found
    through its local header; compressed entries are read (and copied) normally."""
    info = zf.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED:
        return memoryview(_zc.read_array(zf, name))
    buf = memoryview(mapped)
    h = info.header_offset
    if h < 0 or h + 30 > len(buf) or bytes(buf[h:h + 4]) != b"PK\x03\x04":
        raise SerializationError(f"[load] zip entry {name!r} has no valid local header")
    n, m = struct.unpack("<HH", bytes(buf[h + 26:h + 30]))
    start = h + 30 + n + m
    end = start + info.compress_size
    if info.compress_size != info.file_size or end > len(buf):
        raise SerializationError(f"[load] zip entry {name!r} claims {info.file_size} bytes "
                                 "beyond the end of the file")
    return buf[start:end]


def load_torch_zip(zf: zipfile.ZipFile, prefix: str, weights_only: bool,
                   mapped: Any = None) -> Any:
    """The object of a PyTorch zip checkpoint (restricted unpickler)."""
    order = zf.namelist()
    bo = f"{prefix}byteorder"
    check_torch_records(zf, prefix)
    if bo in order and _zc.read_entry(zf, bo).strip() not in (b"little", b""):
        raise SerializationError("[load] big-endian torch checkpoints are not supported")
    data = _zc.read_entry(zf, f"{prefix}data.pkl")
    if not weights_only:
        # still never import torch: the torch globals resolve to ember's own, others normally
        class _Full(TorchUnpickler):
            restrict_build = False

            def find_class(self, module: str, name: str) -> Any:
                key = ".".join(py2_names(module, name, self.proto))
                if key in _TORCH_GLOBALS:
                    return _TORCH_GLOBALS[key]
                return _import_global(module, name, self.proto)
        up: TorchUnpickler = _Full(io.BytesIO(data), zf, prefix, mapped)
        return up.load()
    up = TorchUnpickler(io.BytesIO(data), zf, prefix, mapped)
    return _guarded(up.load)


def _import_global(module: str, name: str, proto: int) -> Any:
    """A global for a full (``weights_only=False``) load: ``torch.<path>`` resolves to
    ``ember.<path>`` (ember never imports torch), anything else is imported normally."""
    mod, nm = py2_names(module, name, proto)
    alias = ember_alias(mod)
    if alias is None:
        return _attr_path(importlib.import_module(mod), nm)
    try:
        return _attr_path(importlib.import_module(alias), nm)
    except (ImportError, AttributeError):
        raise UnpicklingError(
            f"[load] the checkpoint needs {mod}.{nm}, and ember has no {alias}.{nm} (ember "
            "puts PyTorch's classes at the same paths under ember.)") from None


def _attr_path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj
