"""The safetensors format, read and written by ember's own code.

Layout: an 8-byte little-endian header length ``N``, ``N`` bytes of JSON (padded with spaces to a
multiple of 8 so the data that follows is aligned), then one byte buffer.  Each header entry maps a
name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` relative to the buffer; the optional
``__metadata__`` entry maps strings to strings.  The reader trusts nothing in the file.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import ml_dtypes
import numpy as np

from ember.serialization._errors import SerializationError

# safetensors dtype code -> NumPy dtype (little-endian, as the format requires)
_CODES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
_NP_TO_CODE: dict[np.dtype, str] = {v: k for k, v in _CODES.items()}
_MAX_HEADER = 100 * 1024 * 1024  # the reference implementation's limit


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook refusing duplicate keys (parsers disagree on which one counts)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise SerializationError(f"a JSON object has the key {k!r} twice: duplicate "
                                     "keys are ambiguous, refused")
        out[k] = v
    return out


def looks_like_safetensors(head: bytes | memoryview) -> bool:
    """Whether ``head`` (a file's first bytes) starts a safetensors file: an 8-byte
    little-endian header length, then a JSON object."""
    head = bytes(head[:9])
    return (len(head) == 9 and head[8:9] == b"{"
            and 2 <= struct.unpack("<Q", head[:8])[0] <= _MAX_HEADER)


def dtype_code(np_dtype: np.dtype) -> str:
    """The safetensors code of a NumPy dtype; raises SerializationError if there is none."""
    code = _NP_TO_CODE.get(np.dtype(np_dtype).newbyteorder("<")
                           if np.dtype(np_dtype).byteorder == ">" else np.dtype(np_dtype))
    if code is None:
        raise SerializationError(f"[safetensors] dtype {np_dtype} has no safetensors code")
    return code


def np_dtype(code: str) -> np.dtype:
    try:
        return _CODES[code]
    except (KeyError, TypeError):
        raise SerializationError(
            f"[safetensors] unknown dtype {code!r}; expected one of {', '.join(_CODES)}"
        ) from None


def serialize(arrays: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    """Bytes of a safetensors file holding ``arrays`` (written in name order, like the
    reference implementation, which orders by dtype alignment then name; any order is valid)."""
    header: dict[str, Any] = {}
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SerializationError("[safetensors] metadata must be a dict of str to str")
        header["__metadata__"] = dict(metadata)
    chunks: list[bytes] = []
    offset = 0
    # larger itemsizes first keeps every tensor aligned to its itemsize within the buffer
    items = sorted(arrays.items(), key=lambda kv: (-np.dtype(kv[1].dtype).itemsize, kv[0]))
    for name, arr in items:
        if not isinstance(name, str) or name == "__metadata__":
            raise SerializationError(f"[safetensors] invalid tensor name {name!r}")
        code = dtype_code(arr.dtype)
        data = np.ascontiguousarray(arr).astype(_CODES[code], copy=False).tobytes()
        header[name] = {"dtype": code, "shape": [int(s) for s in arr.shape],
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def parse_header(buf: bytes | memoryview) -> tuple[dict[str, Any], dict[str, str] | None, int]:
    """Validate the header of ``buf``: returns (entries, metadata, start of the data buffer)."""
    total = len(buf)
    if total < 8:
        raise SerializationError(f"[safetensors] file too small ({total} bytes) for a header")
    (n,) = struct.unpack("<Q", bytes(buf[:8]))
    if n > _MAX_HEADER or 8 + n > total:
        raise SerializationError(
            f"[safetensors] header length {n} points outside the file ({total} bytes)")
    try:
        header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"), object_pairs_hook=unique_keys)
    except SerializationError as e:
        raise SerializationError(f"[safetensors] header: {e}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise SerializationError(f"[safetensors] header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise SerializationError("[safetensors] header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise SerializationError("[safetensors] __metadata__ must map strings to strings")
    start = 8 + n
    size = total - start
    spans = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SerializationError(
                f"[safetensors] entry {name!r} must have exactly dtype, shape, data_offsets")
        dt = np_dtype(info["dtype"])
        shape, offs = info["shape"], info["data_offsets"]
        if not (isinstance(shape, list) and all(
                type(s) is int and s >= 0 for s in shape)):
            raise SerializationError(f"[safetensors] entry {name!r} has invalid shape {shape!r}")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs)
                and 0 <= offs[0] <= offs[1]):
            raise SerializationError(
                f"[safetensors] entry {name!r} has invalid data_offsets {offs!r}")
        if offs[1] > size:
            raise SerializationError(
                f"[safetensors] entry {name!r} data_offsets {offs} point outside the data "
                f"buffer ({size} bytes)")
        numel = 1
        for s in shape:
            numel *= s
        if offs[1] - offs[0] != numel * dt.itemsize:
            raise SerializationError(
                f"[safetensors] entry {name!r}: data_offsets span {offs[1] - offs[0]} bytes but "
                f"shape {shape} of {info['dtype']} needs {numel * dt.itemsize}")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    for (_b0, e0, n0), (b1, _e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise SerializationError(f"[safetensors] entries {n0!r} and {n1!r} overlap")
    return header, metadata, start


def deserialize(buf: bytes | bytearray | memoryview, copy: bool = True
                ) -> tuple[dict[str, np.ndarray], dict[str, str] | None]:
    """Arrays (name -> writable NumPy array) and metadata of a safetensors buffer."""
    header, metadata, start = parse_header(buf)
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = _CODES[info["dtype"]]
        arr = np.frombuffer(buf, dtype=dt, count=(e - b) // dt.itemsize, offset=start + b)
        if copy or arr.ctypes.data % dt.itemsize:
            arr = arr.copy()
        out[name] = arr.reshape(info["shape"])
    return out, metadata
