"""Structure-aware fuzzing of ember's loaders, run by tests/fuzz/test_archive_fuzz.py in a
subprocess under an address-space limit (``RLIMIT_AS``) and a timeout.

    python tests/fuzz/archive_fuzz_worker.py TARGET EXAMPLES SEED

TARGET is one of ``zip`` (zip header fields of a torch or ember-format checkpoint, loaded from
memory or with ``mmap=True``), ``pickle`` (data.pkl opcodes), ``json`` (ember-format
object.json/manifest.json), ``safetensors`` (its header) or ``export`` (an ember.export
archive's version/model.json/zip) or ``aot`` (an AOT package's zip headers, metadata values and
bytes, loaded and run by the Python loader and the C runner). Each example mutates a valid file
and loads it (``weights_only=True``); the outcome must be a ``SerializationError`` or
``UnpicklingError``, or a result equal to the original, or (for mutations that change the data
itself: pickle arguments, JSON values, safetensors shapes) a well-formed result. Any other
exception, a crash or a hang fails; a gadget opcode must never run.
"""

from __future__ import annotations

import io
import json
import os
import pickletools
import resource
import signal
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import ember  # noqa: E402
import ember.export  # noqa: E402
from ember.serialization import SerializationError, UnpicklingError  # noqa: E402

ALLOWED = (SerializationError, UnpicklingError)
_CODE = "import os; open(os.environ['EMBER_FUZZ_MARKER'], 'w').close()"
GADGET_OPS = [b"cbuiltins\nexec\n", b"cos\nsystem\n", b"cposix\nsystem\n",
              b"X" + struct.pack("<I", len(_CODE)) + _CODE.encode() + b"\x85R",
              b"R", b"b", b"(", b"t", b"}", b"]", b"N", b"\x88", b"K\xff", b"J\xff\xff\xff\x7f",
              b"Q", b"s", b"u", b"e", b"0", b"2", b"h\x00", b"h\xff", b"\x85", b"\x86", b"."]
INTERESTING = [0, 1, 2, 7, 8, 63, 64, 0x7F, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**31 + 5]
JSON_VALUES = [None, True, -1, 0, 1, 2**63, 2**64 + 1, 1e308, "x", "float32", "s0", "..",
               "/etc/passwd", [], [0], [-1], [2**40, 2**40], {}, {"$type": "tensor", "index": 0},
               {"$type": "tensor", "index": 99}, {"$type": "pickle", "entry": "pickles/0.pkl"},
               {"$type": "size", "value": [-1]}, {"$type": "bytes", "hex": "zz"}]


def _base_object() -> dict:
    w = ember.arange(6.0).reshape(2, 3)
    return {"w": w, "v": w[1], "b": ember.ones(3, dtype=ember.bfloat16),
            "i": ember.tensor([1, 2], dtype=ember.int64), "n": 3, "s": "x", "t": (1, 2.5),
            "size": ember.Size([2, 3]), "dt": ember.float16}


def _saved(fmt: str) -> bytes:
    buf = io.BytesIO()
    ember.save(_base_object(), buf, format=fmt)
    return buf.getvalue()


def _equal(a, b) -> bool:
    if isinstance(a, ember.Tensor) or isinstance(b, ember.Tensor):
        return (isinstance(a, ember.Tensor) and isinstance(b, ember.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape
                and a.float().tolist() == b.float().tolist())
    if isinstance(a, dict):
        return (isinstance(b, dict) and list(a) == list(b)
                and all(_equal(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_equal(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and a == b


def _well_formed(obj, depth: int = 0) -> None:
    """Touch every tensor's data (a tensor over invalid memory would crash here)."""
    assert depth < 2000
    if isinstance(obj, ember.Tensor):
        obj.float().tolist() if obj.dtype != ember.bool else obj.tolist()
    elif isinstance(obj, dict):
        for v in obj.values():
            _well_formed(v, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            _well_formed(v, depth + 1)


def _rezip(raw: bytes, changes: dict[str, bytes]) -> bytes:
    zin = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for n in zin.namelist():
            zf.writestr(n, changes.get(n, zin.read(n)))
    return out.getvalue()


def _records(raw: bytes) -> list[int]:
    """Offsets of every local header, central record and the end record."""
    out, i = [], 0
    while True:
        i = raw.find(b"PK", i)
        if i < 0:
            return out
        if raw[i + 2:i + 4] in (b"\x03\x04", b"\x01\x02", b"\x05\x06"):
            out.append(i)
        i += 2


def _ep_loader(f):
    ep = ember.export.load(f)
    assert isinstance(ep, ember.export.ExportedProgram)
    return ep


def check(data: bytes, original, semantic: bool, loader=ember.load) -> None:
    marker = Path(os.environ["EMBER_FUZZ_MARKER"])
    try:
        got = loader(io.BytesIO(data))
    except ALLOWED as e:
        assert str(e).startswith("["), f"error without the [op] tag: {e!r}"
        got = None
    assert not marker.exists(), "a gadget ran"
    if got is None:
        return
    if loader is not _ep_loader and not _equal(got, original):
        assert semantic, f"a header-only mutation loaded as a different object: {got!r}"
        _well_formed(got)


# ------------------------------------------------------------------ targets
def _load_mapped(f: io.BytesIO):
    """``ember.load(mmap=True)`` of the bytes (through a temp file, removed after)."""
    fd, path = tempfile.mkstemp(suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(f.getvalue())
        return ember.load(path, mmap=True)
    finally:
        os.unlink(path)


def target_zip(n: int) -> None:
    bases = {fmt: _saved(fmt) for fmt in ("torch", "ember")}
    original = ember.load(io.BytesIO(bases["torch"]))
    recs = {fmt: _records(b) for fmt, b in bases.items()}

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(["torch", "ember"]), st.booleans(), st.data())
    def run(fmt, mapped, data):
        base = bases[fmt]
        edits = data.draw(st.lists(st.tuples(
            st.sampled_from(recs[fmt]), st.integers(4, 45), st.sampled_from([1, 2, 4]),
            st.sampled_from(INTERESTING)), min_size=1, max_size=3))
        cut = data.draw(st.one_of(st.none(), st.integers(0, len(base))))
        b = bytearray(base)
        for rec, off, width, value in edits:
            pos = rec + off
            if pos + width <= len(b):
                b[pos:pos + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
        if cut is not None:
            del b[cut:]
        check(bytes(b), original, semantic=False,
              loader=_load_mapped if mapped else ember.load)

    seed(SEED)(run)()


def _pickle_ops(pkl: bytes) -> list[int]:
    return [pos for _op, _arg, pos in pickletools.genops(pkl)]


def target_pickle(n: int) -> None:
    base = _saved("torch")
    original = ember.load(io.BytesIO(base))
    name = next(x for x in zipfile.ZipFile(io.BytesIO(base)).namelist()
                if x.endswith("data.pkl"))
    pkl = zipfile.ZipFile(io.BytesIO(base)).read(name)
    ops = _pickle_ops(pkl) + [len(pkl) - 1]

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.sampled_from(ops), st.sampled_from(["insert", "delete",
                                                                      "byte"]),
                              st.sampled_from(GADGET_OPS), st.integers(0, 255)),
                    min_size=1, max_size=4))
    def run(edits):
        p = bytearray(pkl)
        for pos, kind, op, byte in sorted(edits, reverse=True):
            if kind == "insert":
                p[pos:pos] = op
            elif kind == "delete":
                del p[pos:pos + 1]
            elif pos + 1 < len(p):
                p[pos + 1] = byte  # the opcode's first argument byte
        check(_rezip(base, {name: bytes(p)}), original, semantic=True)

    seed(SEED)(run)()


def _mutate_json(doc, path: list[int], value):
    """Replace the node reached by ``path`` (indices into children) with ``value``."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
    k = keys[path[0] % len(keys)]
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[k] = _mutate_json(doc[k], path[1:], value)
    return out


def target_json(n: int) -> None:
    base = _saved("ember")
    original = ember.load(io.BytesIO(base))
    zf = zipfile.ZipFile(io.BytesIO(base))
    docs = {m: json.loads(zf.read(m)) for m in ("object.json", "manifest.json")}

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(docs)), st.lists(st.integers(0, 50), max_size=8),
           st.sampled_from(JSON_VALUES), st.booleans())
    def run(member, path, value, deep):
        text = json.dumps(_mutate_json(docs[member], path, "@@deep@@" if deep else value))
        text = text.replace('"@@deep@@"', "[" * 5000 + "]" * 5000)  # deeper than Python nests
        check(_rezip(base, {member: text.encode()}), original, semantic=True)

    seed(SEED)(run)()


def target_safetensors(n: int) -> None:
    tensors = {"w": ember.arange(6.0).reshape(2, 3), "b": ember.ones(3, dtype=ember.bfloat16)}
    base = ember.utils.safetensors.save(tensors)
    (hlen,) = struct.unpack("<Q", base[:8])
    header = json.loads(base[8:8 + hlen])
    body = base[8 + hlen:]

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.integers(0, 50), max_size=4), st.sampled_from(JSON_VALUES + [
        "F64", "BF16", "BOOL", "I8", [0, 2**62], [8, 4]]), st.sampled_from(INTERESTING + [None]))
    def run(path, value, length):
        text = json.dumps(_mutate_json(header, path, value)).encode()
        prefix = struct.pack("<Q", len(text) if length is None else length)
        check(prefix + text + body, tensors, semantic=True)

    seed(SEED)(run)()


def target_export(n: int) -> None:
    golden = ROOT / "tests" / "export" / "golden" / "golden_v1_0.ep.zip"
    base = golden.read_bytes()
    model = json.loads(zipfile.ZipFile(io.BytesIO(base)).read("model.json"))
    recs = _records(base)

    load_ep = _ep_loader

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(["json", "version", "zip"]), st.lists(st.integers(0, 50),
                                                                  max_size=6),
           st.sampled_from(JSON_VALUES), st.sampled_from(recs), st.integers(4, 45),
           st.sampled_from(INTERESTING), st.sampled_from(["1.0", "1.9", "2.0", "0.1", "1",
                                                          "9" * 30 + ".0", "1.0.0", ""]))
    def run(kind, path, value, rec, off, num, version):
        if kind == "json":
            data = _rezip(base, {"model.json": json.dumps(_mutate_json(model, path, value))
                                 .encode()})
        elif kind == "version":
            data = _rezip(base, {"version": version.encode()})
        else:
            b = bytearray(base)
            b[rec + off:rec + off + 4] = (num % (1 << 32)).to_bytes(4, "little")
            data = bytes(b)
        check(data, None, semantic=True, loader=load_ep)

    seed(SEED)(run)()


def _aot_load_both(data: bytes, c_runner) -> None:
    """Load (and run) a mutated AOT package with the Python loader and the C runner: a clean
    ember error / error code, or a model that runs and gives a (3, 6) float32 result."""
    import numpy as np

    from ember.aot import IncompatiblePackageError, PackageError
    fd, path = tempfile.mkstemp(suffix=".pt2")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            y = ember.aot.load_package(path)(ember.ones(3, 4))
            assert tuple(y.shape) == (3, 6)
        except (PackageError, IncompatiblePackageError) as e:
            assert str(e).startswith("["), f"error without the [op] tag: {e!r}"
        rc, h, err = c_runner.load(path)
        if rc == 0:
            rc, outs = c_runner.run(h, [np.ones((3, 4), np.float32)])
            assert rc != 0 or outs[0].shape == (3, 6)
            c_runner.lib.ember_aot_unload(h)
        else:
            assert 1 <= rc <= 9 and err, (rc, err)
    finally:
        os.unlink(path)


def target_aot(n: int) -> None:
    from tests.aot.helpers import CRunner
    golden = ROOT / "tests" / "aot" / "golden" / "golden_v1.pt2"
    base = golden.read_bytes()
    recs = _records(base)
    zin = zipfile.ZipFile(io.BytesIO(base))
    meta_name = next(m for m in zin.namelist() if m.endswith("metadata.json"))
    meta = json.loads(zin.read(meta_name))
    keys = sorted(meta)
    c_runner = CRunner()

    @settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(["zip", "meta", "bytes"]), st.sampled_from(recs), st.integers(4, 45),
           st.sampled_from([1, 2, 4]), st.sampled_from(INTERESTING), st.sampled_from(keys),
           st.sampled_from([v for v in JSON_VALUES if isinstance(v, str)] + ["", "{", "9" * 40]),
           st.integers(0, len(base) - 1), st.one_of(st.none(), st.integers(0, len(base))))
    def run(kind, rec, off, width, num, key, value, pos, cut):
        if kind == "meta":
            data = _rezip(base, {meta_name: json.dumps({**meta, key: value}).encode()})
        else:
            b = bytearray(base)
            at = rec + off if kind == "zip" else pos
            if at + width <= len(b):
                b[at:at + width] = (num % (1 << (8 * width))).to_bytes(width, "little")
            if cut is not None:
                del b[cut:]
            data = bytes(b)
        _aot_load_both(data, c_runner)

    seed(SEED)(run)()


SEED = 0
TARGETS = {"zip": target_zip, "pickle": target_pickle, "json": target_json,
           "safetensors": target_safetensors, "export": target_export, "aot": target_aot}


def main() -> None:
    target, examples, rng_seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    limit = int(os.environ.get("EMBER_FUZZ_RLIMIT_AS", str(1 << 30)))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.alarm(int(os.environ.get("EMBER_FUZZ_ALARM", "600")))  # a hang dies loudly
    sys.setrecursionlimit(5000)
    global SEED
    SEED = rng_seed
    TARGETS[target](examples)
    print(f"ok {target} {examples}")


if __name__ == "__main__":
    main()
