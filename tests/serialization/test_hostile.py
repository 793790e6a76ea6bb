"""Hostile and corrupt files: every one raises a clear error and nothing from the file runs."""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import struct
import zipfile

import pytest

import ember
from ember.errors import EmberError
from ember.serialization import SerializationError, UnpicklingError, load, save


class _System:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class _Eval:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (builtins.eval, (f"open({str(self.path)!r}, 'w').close()",))


class _Exec:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (builtins.exec, (f"open({str(self.path)!r}, 'w').close()",))


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for k, v in entries.items():
            zf.writestr(k, v)
    return buf.getvalue()


def _ember_bytes(obj, fmt="ember", **kw) -> bytes:
    buf = io.BytesIO()
    save(obj, buf, format=fmt, **kw)
    return buf.getvalue()


def _entries(raw: bytes) -> dict[str, bytes]:
    zf = zipfile.ZipFile(io.BytesIO(raw))
    return {n: zf.read(n) for n in zf.namelist()}


def test_error_types():
    assert issubclass(UnpicklingError, pickle.UnpicklingError)
    assert issubclass(UnpicklingError, EmberError)
    assert issubclass(SerializationError, EmberError)
    assert issubclass(SerializationError, RuntimeError)


@pytest.mark.parametrize("evil", [_System, _Eval, _Exec])
def test_torch_style_pickle_with_code_globals(tmp_path, evil):
    marker = tmp_path / "pwned"
    payload = pickle.dumps({"w": evil(marker)}, protocol=2)
    raw = _zip({"archive/data.pkl": payload, "archive/byteorder": b"little"})
    with pytest.raises(UnpicklingError, match=r"(system|eval|exec).*add_safe_globals"):
        load(io.BytesIO(raw))
    assert not marker.exists()


@pytest.mark.parametrize("evil", [_System, _Eval])
def test_ember_pickle_entry_with_code_globals(tmp_path, evil):
    marker = tmp_path / "pwned"
    entries = _entries(_ember_bytes({"a": 1}))
    doc = json.loads(entries["object.json"])
    doc["object"] = {"$type": "pickle", "entry": "pickles/0.pkl"}
    entries["object.json"] = json.dumps(doc).encode()
    entries["pickles/0.pkl"] = pickle.dumps(evil(marker))
    with pytest.raises(UnpicklingError, match="not on the allowlist"):
        load(io.BytesIO(_zip(entries)))
    assert not marker.exists()


def test_storage_type_that_is_not_a_storage(tmp_path):
    # a persistent id whose "storage type" is an arbitrary object must not be trusted
    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", 5, "0", "cpu", 1) if obj == "S" else None
    buf = io.BytesIO()
    P(buf, protocol=2).dump(["S"])
    raw = _zip({"archive/data.pkl": buf.getvalue(), "archive/data/0": b"\0" * 4})
    with pytest.raises(UnpicklingError, match="storage type"):
        load(io.BytesIO(raw))


def test_torch_storage_entry_missing_or_short():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"w": torch.ones(4)}, buf)
    entries = _entries(buf.getvalue())
    prefix = next(n for n in entries if n.endswith("data.pkl"))[: -len("data.pkl")]
    short = dict(entries)
    short[f"{prefix}data/0"] = b"\0" * 3
    with pytest.raises(SerializationError, match="need 16"):
        load(io.BytesIO(_zip(short)))
    missing = {k: v for k, v in entries.items() if k != f"{prefix}data/0"}
    with pytest.raises(SerializationError, match="lacks storage entry"):
        load(io.BytesIO(_zip(missing)))


def test_torch_tensor_outside_its_storage():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"w": torch.ones(4)}, buf)
    entries = _entries(buf.getvalue())
    prefix = next(n for n in entries if n.endswith("data.pkl"))[: -len("data.pkl")]
    entries[f"{prefix}data/0"] = b"\0" * 16
    # claim the storage holds 4 floats but make the tensor reach element 40
    pkl = entries[f"{prefix}data.pkl"]
    evil = pkl.replace(b"K\x04\x85", b"K\x28\x85", 1)  # size (4,) -> (40,)
    assert evil != pkl
    entries[f"{prefix}data.pkl"] = evil
    with pytest.raises(UnpicklingError, match="storage has 16 bytes"):
        load(io.BytesIO(_zip(entries)))


@pytest.mark.parametrize("fmt", ["torch", "ember"])
def test_truncated_files(tmp_path, fmt):
    raw = _ember_bytes({"w": ember.randn(64, 64)}, fmt)
    for n in (0, 10, len(raw) // 2, len(raw) - 5):
        with pytest.raises(SerializationError):
            load(io.BytesIO(raw[:n]))


def test_not_a_checkpoint():
    with pytest.raises(SerializationError, match="not an ember or PyTorch checkpoint"):
        load(io.BytesIO(b"hello world" * 10))
    with pytest.raises(SerializationError, match="neither"):
        load(io.BytesIO(_zip({"x.txt": b"1"})))
    with pytest.raises(SerializationError, match="legacy"):
        load(io.BytesIO(pickle.dumps([1], protocol=2)))


def _patch_central_size(raw: bytes, name: bytes, delta: int) -> bytes:
    """Make the central directory lie about ``name``'s sizes."""
    b = bytearray(raw)
    i = b.find(b"PK\x01\x02")
    while i >= 0:
        n = struct.unpack_from("<H", b, i + 28)[0]
        if bytes(b[i + 46:i + 46 + n]) == name:
            csize, usize = struct.unpack_from("<II", b, i + 20)
            struct.pack_into("<II", b, i + 20, csize + delta, usize + delta)
            return bytes(b)
        i = b.find(b"PK\x01\x02", i + 4)
    raise AssertionError("entry not found")


@pytest.mark.parametrize("delta", [-8, 8, 10 ** 6])
@pytest.mark.parametrize("fmt, entry", [("ember", b"data.safetensors"),
                                        ("torch", b"archive/data/0")])
def test_zip_entry_lies_about_size(delta, fmt, entry):
    raw = _ember_bytes({"w": ember.randn(16, 16)}, fmt)
    bad = _patch_central_size(raw, entry, delta)
    with pytest.raises(SerializationError):
        load(io.BytesIO(bad))


def test_safetensors_header_outside_file():
    entries = _entries(_ember_bytes({"w": ember.ones(4)}))
    data = bytearray(entries["data.safetensors"])
    struct.pack_into("<Q", data, 0, len(data) * 100)
    entries["data.safetensors"] = bytes(data)
    with pytest.raises(SerializationError, match="header length .* outside the file"):
        load(io.BytesIO(_zip(entries)))


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["tensors"][0].update(storage="s9"), "storage 's9'"),
    (lambda d: d.update(object={"$type": "tensor", "index": 5}), "missing tensor 5"),
    (lambda d: d["tensors"][0].update(size=[1000]), "storage has 16 bytes"),
    (lambda d: d["tensors"][0].update(stride=[-1]), "non-negative"),
    (lambda d: d["tensors"][0].update(storage_offset=-3), "storage offset"),
    (lambda d: d["tensors"][0].update(dtype="complex64"), "unknown dtype"),
    (lambda d: d.update(object={"$type": "os.system"}), "unknown node type"),
    (lambda d: d.update(object={"$type": "float", "value": "__import__('os')"}),
     "malformed float"),
    (lambda d: d.update(object={"$type": "pickle", "entry": "../etc/passwd"}),
     "invalid pickle entry"),
    (lambda d: d.update(object={"$type": "pickle", "entry": "pickles/9.pkl"}), "lacks"),
    (lambda d: d.pop("tensors"), "tensor table"),
])
def test_corrupt_object_description(mutate, match):
    entries = _entries(_ember_bytes({"w": ember.ones(4)}))
    doc = json.loads(entries["object.json"])
    mutate(doc)
    entries["object.json"] = json.dumps(doc).encode()
    with pytest.raises(SerializationError, match=match):
        load(io.BytesIO(_zip(entries)))


def test_bad_manifest():
    entries = _entries(_ember_bytes([1]))
    entries["manifest.json"] = json.dumps({"format": "ember.checkpoint", "version": 99}).encode()
    with pytest.raises(SerializationError, match="newer"):
        load(io.BytesIO(_zip(entries)))
    entries["manifest.json"] = b"{not json"
    with pytest.raises(SerializationError, match="not valid JSON"):
        load(io.BytesIO(_zip(entries)))


def test_build_cannot_overwrite_tensor_state():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)
    entries = _entries(buf.getvalue())
    prefix = next(n for n in entries if n.endswith("data.pkl"))[: -len("data.pkl")]
    pkl = entries[f"{prefix}data.pkl"]
    # after the tensor's REDUCE, push a state dict and BUILD it onto the tensor
    inner = pkl.index(b")R", pkl.index(b"OrderedDict"))  # OrderedDict() = backward hooks
    i = pkl.index(b"R", inner + 2)  # the tensor's own REDUCE
    evil = pkl[:i + 1] + b"}X\x05\x00\x00\x00_dataK\x01sb" + pkl[i + 1:]
    entries[f"{prefix}data.pkl"] = evil
    with pytest.raises(UnpicklingError, match="sets state on a Tensor"):
        load(io.BytesIO(_zip(entries)))


# ------------------------------------------------------------------ whole-module pickles
def test_module_pickle_needs_its_classes_allowed():
    torch = pytest.importorskip("torch")
    buf = io.BytesIO()
    torch.save(torch.nn.Linear(2, 3), buf)
    with pytest.raises(UnpicklingError, match=r"refused the global torch\.nn\.modules\.linear"
                                              r"\.Linear \(ember\.nn\.modules\.linear\.Linear"):
        load(io.BytesIO(buf.getvalue()))
    buf = io.BytesIO()
    save(ember.nn.Linear(2, 3), buf)
    with pytest.raises(UnpicklingError, match=r"refused the global ember\.nn\.modules\.linear"
                                              r"\.Linear"):
        load(io.BytesIO(buf.getvalue()))


@pytest.mark.parametrize("writer", ["torch", "ember"])
def test_allowed_module_class_with_a_hostile_attribute(tmp_path, writer):
    # allowing the module's class does not allow what its attributes name
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    if writer == "torch":
        torch = pytest.importorskip("torch")
        m = torch.nn.Linear(2, 3)
        m.evil = _System(marker)
        torch.save(m, buf)
    else:
        m = ember.nn.Linear(2, 3)
        m.__dict__["evil"] = _System(marker)
        save(m, buf)
    with ember.serialization.safe_globals([ember.nn.Linear]):
        with pytest.raises(UnpicklingError, match=r"refused the global (posix|os|nt)\.system"):
            load(io.BytesIO(buf.getvalue()))
    assert not marker.exists()


@pytest.mark.parametrize("module, name", [("torch", "load"), ("torch.serialization", "load"),
                                          ("torch.nn.modules.module", "Module")])
def test_torch_aliases_reach_only_allowed_ember_globals(module, name):
    # torch.<path> names resolve to ember.<path> only when the user allowed that ember global
    payload = (b"\x80\x02c" + f"{module}\n{name}\n".encode() + b")R.")
    raw = _zip({"archive/data.pkl": payload, "archive/byteorder": b"little"})
    with pytest.raises(UnpicklingError, match=f"refused the global {module}.{name}"):
        load(io.BytesIO(raw))
