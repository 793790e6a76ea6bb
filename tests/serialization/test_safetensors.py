"""The safetensors reader/writer (ember's own code)."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.serialization import SerializationError
from ember.serialization import safetensors as st

CODES = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
         "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
         "bool": "BOOL"}


def _tensors(rng):
    out = {}
    for name in CODES:
        d = getattr(ember, name)
        a = rng.standard_normal((2, 3)) * 4
        out[name] = ember.tensor((a > 0) if name == "bool" else a.astype(d.np))
    out["scalar"] = ember.tensor(1.5)
    out["empty"] = ember.zeros(0, 4)
    out["noncontig"] = ember.arange(12.0).reshape(3, 4).t()
    return out


def _raw(header: dict, data: bytes, pad: bool = True) -> bytes:
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def test_roundtrip_all_dtypes(rng, tmp_path):
    ts = _tensors(rng)
    p = tmp_path / "m.safetensors"
    st.save_file(ts, p, metadata={"format": "pt"})
    out = st.load_file(p)
    assert set(out) == set(ts)
    for k, v in ts.items():
        assert out[k].dtype is v.dtype and out[k].shape == v.shape
        np.testing.assert_array_equal(np.asarray(out[k]._data, np.float64),
                                      np.asarray(v._data, np.float64))
    assert st.load_metadata(p) == {"format": "pt"}
    assert st.load(st.save(ts))["bfloat16"].dtype is ember.bfloat16


def test_writer_layout(rng):
    ts = _tensors(rng)
    raw = st.save(ts, metadata={"k": "v"})
    n = struct.unpack("<Q", raw[:8])[0]
    assert (8 + n) % 8 == 0  # data starts 8-byte aligned
    header = json.loads(raw[8:8 + n])
    assert header.pop("__metadata__") == {"k": "v"}
    body = raw[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for v in header.values())
    assert spans[0][0] == 0 and spans[-1][1] == len(body)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # packed, no gaps
    for name, code in CODES.items():
        h = header[name]
        assert h["dtype"] == code and h["shape"] == [2, 3]
        b, e = h["data_offsets"]
        assert body[b:e] == np.ascontiguousarray(ts[name]._data).tobytes()
    assert header["noncontig"]["shape"] == [4, 3]
    b, e = header["noncontig"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(body[b:e], "<f4").reshape(4, 3),
                                  np.arange(12.0).reshape(3, 4).T)


def test_reads_hand_built_file():
    f32 = np.array([1.0, -2.0, 3.5], "<f4").tobytes()
    bf = np.array([[0.5, 2.0]], ml_dtypes.bfloat16).tobytes()
    i8 = np.array([-1, 7], "i1").tobytes()
    header = {"b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [12, 16]},
              "a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
              "c": {"dtype": "I8", "shape": [2], "data_offsets": [16, 18]},
              "__metadata__": {"x": "y"}}
    out = st.load(_raw(header, f32 + bf + i8, pad=False))  # the reader does not need padding
    assert out["a"].tolist() == [1.0, -2.0, 3.5] and out["a"].dtype is ember.float32
    assert out["b"].dtype is ember.bfloat16 and out["b"].float().tolist() == [[0.5, 2.0]]
    assert out["c"].tolist() == [-1, 7] and out["c"].dtype is ember.int8
    out["a"][0] = 9.0  # loaded tensors are writable


def test_matches_safetensors_package(rng, tmp_path):
    sft = pytest.importorskip("safetensors.numpy")
    ts = {k: v for k, v in _tensors(rng).items() if k != "bfloat16"}
    arrays = {k: np.ascontiguousarray(v._data) for k, v in ts.items()}
    ours = st.load(sft.save(arrays))
    for k in arrays:
        np.testing.assert_array_equal(np.asarray(ours[k]._data), arrays[k])
    theirs = sft.load(st.save(ts))
    for k in arrays:
        np.testing.assert_array_equal(theirs[k], arrays[k])


@pytest.mark.parametrize("raw, match", [
    (b"\x01\x02", "too small"),
    (struct.pack("<Q", 10 ** 6) + b"{}", "outside the file"),
    (struct.pack("<Q", 4) + b"{{{{", "not valid JSON"),
    (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
    (_raw({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8),
     "outside the data buffer"),
    (_raw({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8),
     "needs 12"),
    (_raw({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
     "unknown dtype"),
    (_raw({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}}, b"\0" * 8), "overlap"),
    (_raw({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 8),
     "invalid shape"),
    (_raw({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"\0" * 8),
     "invalid data_offsets"),
    (_raw({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 8), "exactly dtype"),
    (_raw({"__metadata__": {"a": 1}}, b""), "__metadata__"),
])
def test_reader_rejects_corrupt_files(raw, match):
    with pytest.raises(SerializationError, match=match):
        st.load(raw)


def test_writer_rejects_bad_input():
    with pytest.raises(SerializationError, match="not a str"):
        st.save({1: ember.ones(1)})
    with pytest.raises(SerializationError, match="expected a Tensor"):
        st.save({"a": [1.0]})
    with pytest.raises(SerializationError, match="metadata"):
        st.save({"a": ember.ones(1)}, metadata={"a": 1})
