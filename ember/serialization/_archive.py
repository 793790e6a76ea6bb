"""The ``save``/``load`` entry points and ember's own checkpoint format (``format="ember"``;
the default is PyTorch's zip format, written by ``_torch_writer``).

An ember checkpoint is a zip (stored entries) holding

* ``manifest.json``: ``{"format": "ember.checkpoint", "version": 1}``;
* ``object.json``: the saved object as tagged JSON (``{"$type": ...}`` nodes for everything but
  str/int/finite float/bool/None/list), plus the table of tensors (storage name, dtype, size,
  stride, storage offset, requires_grad) and of storages;
* ``data.safetensors``: each storage's bytes, one 1-D entry per storage;
* ``pickles/<n>.pkl``: only for objects saved with ``allow_pickle=True`` (or whose type is a
  safe global); tensors inside them are persistent references into the tensor table.

Loading never runs code from the file: JSON builds only the listed types, and pickled entries
go through the restricted unpickler unless the caller passes ``weights_only=False``.
"""

from __future__ import annotations

import collections
import io
import json
import math
import mmap as _mmap
import os
import pickle
import struct
import warnings
import zipfile
from typing import Any

import numpy as np

from ember import dtypes as _dt
from ember.serialization import _safetensors as _st
from ember.serialization import _torch_pickle as _tp
from ember.serialization import _torch_writer as _tw
from ember.serialization import _zipcheck as _zc
from ember.serialization._errors import SerializationError, UnpicklingError
from ember.tensor import Size, Tensor, _wrap

FORMAT = "ember.checkpoint"
VERSION = 1


# ------------------------------------------------------------------ saving
class _Writer:
    def __init__(self, allow_pickle: bool) -> None:
        self.allow_pickle = allow_pickle
        self.tensors: list[dict] = []
        self.tensor_ids: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps ids stable while saving
        self.storages: dict[str, np.ndarray] = {}
        self.storage_ids: dict[int, str] = {}
        self.pickles: list[bytes] = []

    # -- tensors
    def _storage_of(self, t: Tensor) -> tuple[str, int, tuple] | None:
        a = t._data
        root = _tw.root_array(a)
        if not (root.flags.c_contiguous or root.flags.f_contiguous) or root.dtype.hasobject:
            return None
        low = root.__array_interface__["data"][0]  # contiguous: the first byte is the lowest
        item = a.itemsize
        off_bytes = a.__array_interface__["data"][0] - low
        if off_bytes < 0 or off_bytes % item or any(s < 0 or s % item for s in a.strides):
            return None
        if id(root) not in self.storage_ids:
            name = f"s{len(self.storages)}"
            flat = root.reshape(-1, order="A" if root.flags.f_contiguous else "C")
            if _st._NP_TO_CODE.get(flat.dtype) is None:
                return None
            self.storage_ids[id(root)] = name
            self.storages[name] = flat
            self.keep.append(root)
        name = self.storage_ids[id(root)]
        return name, off_bytes // item, tuple(s // item for s in a.strides)

    def tensor(self, t: Tensor, path: str) -> int:
        if id(t) in self.tensor_ids:
            return self.tensor_ids[id(t)]
        if not isinstance(t._data, np.ndarray):
            raise SerializationError(f"[save] {path}: cannot save a tensor without eager data "
                                     "(a lazy/traced tensor); realize it first")
        loc = self._storage_of(t)
        if loc is None:  # an unusual layout: save a private contiguous copy
            arr = np.ascontiguousarray(t._data)
            name = f"s{len(self.storages)}"
            self.storages[name] = arr.reshape(-1)
            loc = (name, 0, tuple(s // arr.itemsize for s in arr.strides))
        name, off, stride = loc
        desc = {"storage": name, "dtype": t._dtype.name, "size": list(t._data.shape),
                "stride": list(stride), "storage_offset": off,
                "requires_grad": bool(t._requires_grad)}
        if t._is_param:
            desc["parameter"] = True
        idx = len(self.tensors)
        self.tensors.append(desc)
        self.tensor_ids[id(t)] = idx
        self.keep.append(t)
        return idx

    # -- objects
    def encode(self, obj: Any, path: str) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        t = type(obj)
        if t is int:
            return obj
        if t is float:
            if math.isfinite(obj):
                return obj
            return {"$type": "float", "value": repr(obj)}
        if isinstance(obj, Tensor):
            return {"$type": "tensor", "index": self.tensor(obj, path)}
        if isinstance(obj, _dt.dtype):
            return {"$type": "dtype", "name": obj.name}
        if t is Size:
            return {"$type": "size", "value": [int(s) for s in obj]}
        if t is list:
            return [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        if t is tuple:
            return {"$type": "tuple",
                    "items": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if t is dict or t is collections.OrderedDict:
            items = []
            for k, v in obj.items():
                if type(k) not in (str, int):
                    if self.allow_pickle:
                        return self.pickle(obj, path)
                    raise SerializationError(
                        f"[save] {path} has key {k!r} of type {type(k).__name__}; ember's "
                        "format stores str and int keys (pass allow_pickle=True to pickle it)")
                items.append([k, self.encode(v, f"{path}[{k!r}]")])
            return {"$type": "odict" if t is collections.OrderedDict else "dict",
                    "items": items}
        if t is bytes:
            return {"$type": "bytes", "hex": obj.hex()}
        if self.allow_pickle or _tp.is_safe_global(t):
            return self.pickle(obj, path)
        raise SerializationError(
            f"[save] cannot save {path}: objects of type {t.__module__}.{t.__qualname__} have "
            "no safe representation (tensors, dtypes, Size, dict/OrderedDict, list, tuple, str, "
            "int, float, bool, bytes and None do). Pass allow_pickle=True to pickle it; it will "
            "then only load with weights_only=False or after add_safe_globals")

    def pickle(self, obj: Any, path: str) -> dict:
        buf = io.BytesIO()
        writer = self

        class _P(pickle.Pickler):
            def persistent_id(self, o: Any) -> Any:
                if isinstance(o, Tensor):
                    return ("tensor", writer.tensor(o, path))
                return None

        try:
            _P(buf, protocol=4).dump(obj)
        except Exception as e:  # noqa: BLE001 - report any pickling failure with the path
            raise SerializationError(f"[save] cannot pickle {path}: {e}") from e
        self.pickles.append(buf.getvalue())
        return {"$type": "pickle", "entry": f"pickles/{len(self.pickles) - 1}.pkl"}


def save(obj: Any, f: Any, pickle_module: Any = pickle, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False,
         *, format: str = "torch", allow_pickle: bool = False) -> None:
    """Save ``obj`` to ``f`` (a path or a writable binary file).

    ``format="torch"`` (the default) writes PyTorch's zip checkpoint format: ``torch.load``
    reads the file (with its default ``weights_only=True`` for tensors, Parameters, dtypes,
    ``Size`` and containers of them), and any picklable object, a whole module included, is
    pickled as ``torch.save`` pickles it.  ``format="ember"`` writes ember's JSON + safetensors
    archive: only data (tensors, dtypes, ``Size``, dicts with str/int keys, OrderedDicts,
    lists, tuples, Python scalars) unless ``allow_pickle=True``.  ``ember.load`` reads both.

    >>> ember.save({"w": ember.ones(2)}, "ckpt.pt")        # torch.load("ckpt.pt") reads it
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise SerializationError("[save] only the standard pickle module is supported "
                                 f"(got pickle_module={pickle_module!r})")
    if not _use_new_zipfile_serialization:
        raise SerializationError("[save] ember writes only the zip checkpoint format; the "
                                 "legacy format (_use_new_zipfile_serialization=False) is not "
                                 "supported")
    if format == "torch":
        _tw.save_torch(obj, f, pickle_protocol, not _disable_byteorder_record)
        return
    if format != "ember":
        raise SerializationError(f"[save] unknown format {format!r}; expected 'torch' or "
                                 "'ember'")
    w = _Writer(allow_pickle)
    root = w.encode(obj, "obj")
    doc = {"tensors": w.tensors, "storages": sorted(w.storages), "object": root}
    payload = _st.serialize(w.storages, {"format": FORMAT})
    entries = [
        ("manifest.json", json.dumps({"format": FORMAT, "version": VERSION}).encode()),
        ("object.json", json.dumps(doc, allow_nan=False).encode()),
        ("data.safetensors", payload),
    ] + [(f"pickles/{i}.pkl", p) for i, p in enumerate(w.pickles)]
    if isinstance(f, (str, os.PathLike)):
        with _tw.atomic_open(f) as fh:
            _write_zip(fh, entries)
    else:
        _write_zip(f, entries)


def _load_safetensors(f: Any, data: Any) -> dict[str, Tensor]:
    """``ember.load`` of a safetensors file: its tensors as a dict (metadata dropped)."""
    where = os.fspath(f) if isinstance(f, (str, os.PathLike)) else "the file"
    try:
        arrays, _meta = _st.deserialize(memoryview(data))
    except SerializationError as e:
        raise SerializationError(f"[load] {where} looks like a safetensors file but is not "
                                 f"valid: {e}") from None
    return {k: _wrap(a, _dt.from_numpy_dtype(a.dtype)) for k, a in arrays.items()}


def _write_zip(fh: Any, entries: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            if name == "data.safetensors":
                # pad the local header's extra field so the data starts 64-byte aligned in the
                # file (tensors then map in place with load(mmap=True))
                here = zf.fp.tell() + 30 + len(name.encode()) + 4
                pad = -here % 64
                info.extra = struct.pack("<HH", 0xE4BE, pad) + b"\0" * pad
            zf.writestr(info, data)


# ------------------------------------------------------------------ loading
class _Reader:
    def __init__(self, zf: zipfile.ZipFile, doc: dict, weights_only: bool,
                 mapped: Any = None) -> None:
        self.zf, self.weights_only, self.mapped = zf, weights_only, mapped
        if not isinstance(doc, dict) or not isinstance(doc.get("tensors"), list):
            raise SerializationError("[load] object.json lacks its tensor table")
        self.descs = doc["tensors"]
        self.tensors: dict[int, Tensor] = {}
        self._storages: dict[str, np.ndarray] | None = None

    def storages(self) -> dict[str, np.ndarray]:
        if self._storages is None:
            if self.mapped is not None:
                if "data.safetensors" not in self.zf.namelist():
                    raise SerializationError("[load] the archive lacks 'data.safetensors'")
                view = _tp.entry_view(self.zf, "data.safetensors", self.mapped)
                arrays, _meta = _st.deserialize(view, copy=False)
            else:
                arrays, _meta = _st.deserialize(_read(self.zf, "data.safetensors", False))
            for name, a in arrays.items():
                if a.ndim != 1:
                    raise SerializationError(f"[load] storage {name!r} is not 1-D")
            self._storages = arrays
        return self._storages

    def tensor(self, idx: Any) -> Tensor:
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(self.descs):
            raise SerializationError(f"[load] object.json references missing tensor {idx!r}")
        if idx in self.tensors:
            return self.tensors[idx]
        d = self.descs[idx]
        if not isinstance(d, dict):
            raise SerializationError(f"[load] tensor {idx} has an invalid description")
        name = d.get("storage")
        stores = self.storages()
        if not isinstance(name, str) or name not in stores:
            raise SerializationError(
                f"[load] tensor {idx} references storage {name!r}, which data.safetensors "
                "lacks")
        try:
            dtype = _dt.by_name(d.get("dtype"))
        except (KeyError, TypeError):
            raise SerializationError(f"[load] tensor {idx} has unknown dtype "
                                     f"{d.get('dtype')!r}") from None
        try:
            arr = _tp.build_view(stores[name], dtype.np, d.get("storage_offset"),
                                 d.get("size"), d.get("stride"), f"tensor {idx}")
        except UnpicklingError as e:
            raise SerializationError(str(e)) from None
        t = _wrap(arr, dtype)
        if d.get("parameter"):
            t = _tp.make_parameter(t, bool(d.get("requires_grad")))
        elif d.get("requires_grad"):
            if not dtype.is_floating_point:
                raise SerializationError(f"[load] tensor {idx}: requires_grad on {dtype.name}")
            t._requires_grad = True
        self.tensors[idx] = t
        return t

    def decode(self, node: Any, depth: int = 0) -> Any:
        if depth > 900:
            raise SerializationError("[load] object.json nests too deeply")
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v, depth + 1) for v in node]
        if not isinstance(node, dict):
            raise SerializationError(f"[load] unexpected JSON node {node!r}")
        kind = node.get("$type")
        if kind == "tensor":
            return self.tensor(node.get("index"))
        if kind in ("dict", "odict"):
            items = node.get("items")
            if not isinstance(items, list) or not all(
                    isinstance(kv, list) and len(kv) == 2 and type(kv[0]) in (str, int)
                    for kv in items):
                raise SerializationError("[load] malformed dict in object.json")
            cls = dict if kind == "dict" else collections.OrderedDict
            return cls((k, self.decode(v, depth + 1)) for k, v in items)
        if kind == "tuple":
            items = node.get("items")
            if not isinstance(items, list):
                raise SerializationError("[load] malformed tuple in object.json")
            return tuple(self.decode(v, depth + 1) for v in items)
        if kind == "float":
            v = node.get("value")
            if v not in ("nan", "inf", "-inf"):
                raise SerializationError(f"[load] malformed float {v!r} in object.json")
            return float(v)
        if kind == "dtype":
            try:
                return _dt.by_name(node.get("name"))
            except (KeyError, TypeError):
                raise SerializationError(f"[load] unknown dtype {node.get('name')!r}") from None
        if kind == "size":
            v = node.get("value")
            if not isinstance(v, list) or not all(type(s) is int and s >= 0 for s in v):
                raise SerializationError("[load] malformed Size in object.json")
            return Size(v)
        if kind == "bytes":
            try:
                return bytes.fromhex(node.get("hex"))
            except (TypeError, ValueError):
                raise SerializationError("[load] malformed bytes in object.json") from None
        if kind == "pickle":
            return self.unpickle(node.get("entry"))
        raise SerializationError(f"[load] unknown node type {kind!r} in object.json")

    def unpickle(self, entry: Any) -> Any:
        if not (isinstance(entry, str) and entry.startswith("pickles/")):
            raise SerializationError(f"[load] invalid pickle entry {entry!r}")
        data = _read(self.zf, entry)

        def persistent_load(pid: Any) -> Any:
            if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "tensor":
                return self.tensor(pid[1])
            raise UnpicklingError(f"[load] unsupported persistent id {pid!r}")

        if self.weights_only:
            return _tp.restricted_loads(data, persistent_load)
        return _PersistentUnpickler(io.BytesIO(data), persistent_load).load()


class _PersistentUnpickler(pickle.Unpickler):
    """A plain unpickler (``weights_only=False``) resolving tensor references; a subclass
    because Python 3.13 makes ``persistent_load`` read-only on instances."""

    def __init__(self, f: Any, resolve: Any) -> None:
        super().__init__(f)
        self._resolve = resolve

    def persistent_load(self, pid: Any) -> Any:
        return self._resolve(pid)


def _read(zf: zipfile.ZipFile, name: str, metadata: bool = True) -> bytes:
    if name not in zf.NameToInfo:
        raise SerializationError(f"[load] the archive lacks {name!r}")
    return _zc.read_entry(zf, name, metadata=metadata)


def load(f: Any, map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool | None = True, mmap: bool | None = None, **pickle_load_args: Any
         ) -> Any:
    """Load an object saved by ``ember.save`` or a PyTorch zip checkpoint (``torch.save``).

    With ``weights_only=True`` (the default) no code from the file runs: pickles go through an
    allowlist (extend it with ``add_safe_globals``).  ``weights_only=False`` unpickles anything
    and must only be used on trusted files.  Everything loads onto the CPU, so ``map_location``
    ('cpu', a device, a dict or a callable) has no effect.  ``mmap=True`` (``f`` a path) maps the
    file privately (copy-on-write) and builds tensors over the mapping instead of reading it.
    """
    if weights_only is None:
        weights_only = True
    if not weights_only:
        warnings.warn(
            "ember.load(weights_only=False) unpickles arbitrary objects and can run arbitrary "
            "code from the file; only use it on files you trust", FutureWarning, stacklevel=2)
    _check_map_location(map_location)
    mapped = None
    if mmap:
        if not isinstance(f, (str, os.PathLike)):
            raise SerializationError("[load] mmap=True needs a file path")
        with open(f, "rb") as fh:
            data = fh.read(16)
            try:
                mapped = _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_COPY)
            except ValueError:  # an empty file cannot be mapped
                mapped = None
        source: Any = _MappedFile(mapped) if mapped is not None else io.BytesIO(b"")
    else:
        if isinstance(f, (str, os.PathLike)):
            with open(f, "rb") as fh:
                data = fh.read()
        else:
            data = f.read()
        if not isinstance(data, (bytes, bytearray)):
            raise SerializationError("[load] expected a path or a binary file object")
        source = io.BytesIO(data)
    if _st.looks_like_safetensors(data[:16] if mapped is None else mapped[:16]):
        return _load_safetensors(f, data if mapped is None else mapped)
    try:
        zf = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
        if data[:2] == b"\x80\x02" or data[:1] == b"\x80":
            raise SerializationError("[load] legacy (non-zip) torch checkpoints are not "
                                     "supported; re-save with torch.save's default") from None
        raise SerializationError(f"[load] not an ember or PyTorch checkpoint, nor a "
                                 f"safetensors file (bad zip: {e})") from None
    with zf:
        _zc.check_archive(zf)
        names = set(zf.namelist())
        if "manifest.json" in names:
            return _load_ember(zf, weights_only, mapped)
        prefix = _tp.find_torch_prefix(zf)
        if prefix is not None:
            try:
                return _tp.load_torch_zip(zf, prefix, weights_only, mapped)
            except KeyError as e:
                raise SerializationError(f"[load] torch checkpoint lacks {e}") from None
            except (zipfile.BadZipFile, OSError, EOFError) as e:
                raise SerializationError(f"[load] corrupt torch checkpoint: {e}") from None
        raise SerializationError("[load] the zip holds neither manifest.json (ember) nor "
                                 "<archive>/data.pkl (PyTorch)")


class _MappedFile(io.RawIOBase):
    """A read-only, seekable file over a mapping (zipfile reads its directory through it)."""

    def __init__(self, mapped: Any) -> None:
        self._m, self._pos = mapped, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = [pos, self._pos + pos, len(self._m) + pos][whence]
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b: Any) -> int:
        chunk = self._m[self._pos:self._pos + len(b)]
        b[:len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


def _json_entry(zf: zipfile.ZipFile, name: str) -> Any:
    try:
        return json.loads(_read(zf, name), object_pairs_hook=_st.unique_keys)
    except SerializationError as e:
        raise SerializationError(f"[load] entry {name!r}: {e}") from None
    except (ValueError, RecursionError) as e:
        raise SerializationError(f"[load] {name} is not valid JSON: {e}") from None


def _load_ember(zf: zipfile.ZipFile, weights_only: bool, mapped: Any = None) -> Any:
    manifest = _json_entry(zf, "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise SerializationError(f"[load] manifest names format {manifest!r}, expected {FORMAT}")
    version = manifest.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        shown = repr(version)[:64]
        raise SerializationError(f"[load] entry 'manifest.json': checkpoint version {shown} is "
                                 f"not one this ember reads (1 to {VERSION}; a newer ember "
                                 "wrote it, or it is corrupt)")
    doc = _json_entry(zf, "object.json")
    r = _Reader(zf, doc, weights_only, mapped)
    if "object" not in doc:
        raise SerializationError("[load] object.json lacks 'object'")
    try:
        return r.decode(doc["object"])
    except RecursionError:
        raise SerializationError("[load] object.json nests too deeply") from None


def _check_map_location(ml: Any) -> None:
    if ml is None or callable(ml) or isinstance(ml, dict):
        return  # all storages live on the CPU; a callable/dict would only move them
    name = str(ml)
    if not (name == "cpu" or name.startswith("cpu:") or name == "meta"):
        from ember.device import check_device
        check_device(ml, "load")
