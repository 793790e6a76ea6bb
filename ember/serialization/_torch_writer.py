"""Writing PyTorch's own zip checkpoint format (what ``torch.save`` writes), without torch.

The archive is a zip of stored entries under one folder named after the file's stem
(``archive`` for file objects), each entry's data 64-byte aligned as torch aligns them:

* ``data.pkl``: the object, pickled (protocol 2 by default) so that tensors are
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())``
  and Parameters ``torch._utils._rebuild_parameter(tensor, requires_grad, OrderedDict())``; a
  storage is a persistent id ``('storage', torch.<Type>Storage, key, 'cpu', numel)``; dtypes,
  ``Size`` and devices are ``torch.float32``, ``torch.Size``, ``torch.device``: every name
  PyTorch's ``weights_only`` loader accepts.  Other objects (modules, user classes) pickle as
  Python pickles them: by their import path, loadable only with ``weights_only=False`` or an
  allowlist.
* ``.format_version``, ``.storage_alignment``, ``byteorder``, ``version``,
  ``.data/serialization_id``: the records torch writes.
* ``data/<key>``: each storage's raw little-endian bytes.

The global names are written as text by a pickler subclass; ember never imports torch.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import pickle
import secrets
import struct
import tempfile
import zipfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.device import device as _device
from ember.serialization._errors import SerializationError
from ember.tensor import Size, Tensor

_ALIGN = 64
_STORAGE_NAMES = {
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage", "int64": "LongStorage", "int32": "IntStorage",
    "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage", "qint8": "QInt8Storage", "quint8": "QUInt8Storage",
    "qint32": "QInt32Storage",
}


class _Global:
    """A global written as ``GLOBAL module\\nname\\n`` (never imported while saving)."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args: Any) -> Any:  # pickle requires a reduce function to be callable
        raise TypeError(f"{self.module}.{self.name} is a name written into a pickle")


_GLOBALS: dict[str, _Global] = {}


def _g(path: str) -> _Global:
    if path not in _GLOBALS:
        module, _, name = path.rpartition(".")
        _GLOBALS[path] = _Global(module, name)
    return _GLOBALS[path]


class _StorageRef:
    """One storage: its key, torch storage type, element count and bytes (a uint8 array)."""

    __slots__ = ("key", "type_name", "numel", "data")

    def __init__(self, key: str, type_name: str, numel: int, data: np.ndarray) -> None:
        self.key, self.type_name, self.numel, self.data = key, type_name, numel, data


class _PlainTensor:
    """A Parameter's data, pickled as a plain tensor that does not require grad."""

    __slots__ = ("t",)

    def __init__(self, t: Tensor) -> None:
        self.t = t


def root_array(arr: np.ndarray) -> np.ndarray:
    """The array owning ``arr``'s memory."""
    # follow .base through ndarrays (and array-interface wrappers) to the owning array
    while True:
        b = arr.base
        if isinstance(b, np.ndarray):
            arr = b
        elif b is not None and hasattr(b, "__array_interface__") and isinstance(
                getattr(b, "base", None), np.ndarray):
            arr = b.base
        else:
            return arr


class _Storages:
    """Finds the storage each tensor views, so views keep sharing it in the file."""

    def __init__(self) -> None:
        self.refs: list[_StorageRef] = []
        self._by_root: dict[int, _StorageRef] = {}
        self._keep: list[Any] = []  # keeps ids stable while saving

    def _new(self, type_name: str, itemsize: int, data: np.ndarray) -> _StorageRef:
        ref = _StorageRef(str(len(self.refs)), type_name, data.nbytes // itemsize, data)
        self.refs.append(ref)
        return ref

    def locate(self, t: Tensor) -> tuple[_StorageRef, int, tuple, tuple]:
        """(storage, element offset, size, element strides) of ``t``."""
        a = t._data
        type_name = _STORAGE_NAMES[t._dtype.name]
        item = a.itemsize
        root = root_array(a)
        ok = (a.size > 0 and (root.flags.c_contiguous or root.flags.f_contiguous)
              and not root.dtype.hasobject and root.nbytes % item == 0)
        if ok:
            off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            ok = off >= 0 and off % item == 0 and all(
                s >= 0 and s % item == 0 for n, s in zip(a.shape, a.strides) if n > 1)
        if ok:
            ref = self._by_root.get(id(root))
            if ref is None:
                flat = root.reshape(-1, order="A" if root.flags.f_contiguous else "C")
                ref = self._new(type_name, item, flat.view(np.uint8))
                self._by_root[id(root)] = ref
                self._keep.append(root)
            if ref.type_name == type_name:
                # a size-1 dim's stride is free: write the one ember reports (PyTorch's)
                strides = tuple(max(ts, 0) if n == 1 else s // item
                                for n, s, ts in zip(a.shape, a.strides, t.stride()))
                return ref, off // item, a.shape, strides
        # an unusual layout (negative strides, a storage viewed as another dtype, empty): a
        # private contiguous copy, as the tensor alone
        own = np.ascontiguousarray(a)
        ref = self._new(type_name, item, own.reshape(-1).view(np.uint8))
        self._keep.append(own)
        return ref, 0, a.shape, _contiguous(a.shape)


def _contiguous(shape: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


class _TorchPickler(pickle._Pickler):  # the Python implementation: GLOBAL names are written
    # as text (the C pickler would import them), and checkpoints' pickles hold only structure
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file: Any, protocol: int, storages: _Storages) -> None:
        super().__init__(file, protocol)
        self.storages = storages

    def save_torch_global(self, obj: _Global) -> None:
        memo = self.memo.get(id(obj))
        if memo is not None:  # a global written before (dtypes call this directly)
            self.write(self.get(memo[0]))
            return
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = save_torch_global

    def save_dtype(self, obj: _dt.dtype) -> None:
        self.save_torch_global(_g(f"torch.{obj.name}"))

    dispatch[_dt.dtype] = save_dtype

    def _qtensor_reduce(self, q: Any) -> tuple:
        """``torch._utils._rebuild_qtensor(storage, 0, size, stride, quantizer_params, False,
        OrderedDict())``, as ``torch.save`` writes a quantized tensor."""
        from ember._frontend.creation import tensor  # noqa: PLC0415  (layer 3)

        codes = np.ascontiguousarray(q._codes)
        ref = self.storages._new(_STORAGE_NAMES[q.dtype.name], codes.itemsize,
                                 codes.reshape(-1).view(np.uint8))
        self.storages._keep.append(codes)
        if q._axis is None:
            params: tuple = (_g("torch.per_tensor_affine"), float(q._scale), int(q._zero_point))
        else:
            params = (_g("torch.per_channel_affine"),
                      tensor(np.asarray(q._scale, np.float64)),
                      tensor(np.asarray(q._zero_point, np.int64)), int(q._axis))
        return (_g("torch._utils._rebuild_qtensor"),
                (ref, 0, tuple(codes.shape), _contiguous(codes.shape), params, False,
                 collections.OrderedDict()))

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is _StorageRef:
            return ("storage", _g(f"torch.{obj.type_name}"), obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj: Any) -> Any:
        t = type(obj)
        if t is _PlainTensor:
            return self._tensor_reduce(obj.t, False)
        if isinstance(obj, Tensor):
            if obj._is_param:
                return (_g("torch._utils._rebuild_parameter"),
                        (_PlainTensor(obj), bool(obj._requires_grad),
                         collections.OrderedDict()))
            return self._tensor_reduce(obj, bool(obj._requires_grad))
        if t.__name__ == "QuantizedTensor" and hasattr(obj, "int_repr"):  # ember.ao's
            return self._qtensor_reduce(obj)
        if t is Size:
            return (_g("torch.Size"), (tuple(int(s) for s in obj),))
        if t is _device:
            return (_g("torch.device"), (str(obj),))
        return NotImplemented

    def _tensor_reduce(self, t: Tensor, requires_grad: bool) -> tuple:
        if not isinstance(t._data, np.ndarray):
            raise SerializationError("[save] cannot save a tensor without eager data (a "
                                     "lazy/traced tensor); realize it first")
        ref, off, size, stride = self.storages.locate(t)
        return (_g("torch._utils._rebuild_tensor_v2"),
                (ref, off, tuple(int(s) for s in size), tuple(int(s) for s in stride),
                 requires_grad, collections.OrderedDict()))


def archive_name(f: Any) -> str:
    """The folder torch names its records under: the file's stem (ASCII), else ``archive``."""
    if not isinstance(f, (str, os.PathLike)):
        return "archive"
    stem = os.path.basename(os.fspath(f))
    if "." in stem:
        stem = stem[: stem.rindex(".")]
    if not stem or not stem.isascii() or "/" in stem:
        return "archive"
    return stem


def save_torch(obj: Any, f: Any, protocol: int = 2, byteorder_record: bool = True) -> None:
    """Write ``obj`` to ``f`` (a path or a writable binary file) in PyTorch's zip format."""
    storages = _Storages()
    buf = io.BytesIO()
    try:
        _TorchPickler(buf, protocol, storages).dump(obj)
    except SerializationError:
        raise
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
        raise SerializationError(f"[save] cannot pickle the object: {e}") from e
    prefix = archive_name(f) + "/"
    entries: list[tuple[str, Any]] = [
        ("data.pkl", buf.getvalue()), (".format_version", b"1"),
        (".storage_alignment", str(_ALIGN).encode())]
    if byteorder_record:
        entries.append(("byteorder", b"little"))
    entries += [(f"data/{r.key}", memoryview(r.data)) for r in storages.refs]
    sid = f"{secrets.randbits(64):020d}{secrets.randbits(64):020d}"
    entries += [("version", b"3\n"), (".data/serialization_id", sid.encode())]
    if isinstance(f, (str, os.PathLike)):
        with atomic_open(f) as fh:
            write_aligned_zip(fh, [(prefix + n, d) for n, d in entries])
    else:
        write_aligned_zip(f, [(prefix + n, d) for n, d in entries])


def _new_file_mode(path: str) -> int:
    """The mode ``open(path, "wb")`` would leave: the old file's, else 0666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
    try:  # read the umask without changing it (os.umask would race with other threads)
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[Any]:
    """A binary file to write ``path`` through: a temporary file in the same folder, flushed,
    synced and renamed over ``path`` only when the block ends without an error, so a failed
    save (a full disk, an interrupt, an unpicklable object) leaves the old file intact."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _new_file_mode(path))  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_aligned_zip(fh: Any, entries: list[tuple[str, Any]], align: int = _ALIGN) -> None:
    """A zip of stored entries whose data start ``align``-byte aligned in the file (padding in
    the local header's extra field, id ``FB`` as torch writes it), so loaders can map them."""
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            size = data.nbytes if isinstance(data, memoryview) else len(data)
            zip64 = 20 if size > 0x7FFFFFFF else 0  # zipfile adds a zip64 extra for these
            here = zf.fp.tell() + 30 + len(name.encode()) + 4 + zip64
            pad = -here % align
            info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            with zf.open(info, "w", force_zip64=bool(zip64)) as dest:
                dest.write(data)
