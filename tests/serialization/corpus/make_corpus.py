"""Generate the hostile-archive regression corpus (docs/serialization.md, "Refusal rules and
limits").  Each file breaks one rule; tests/serialization/test_corpus.py loads every one and
checks the error class, a message fragment and that the file's gadget never ran.

    PYTHONPATH=. python tests/serialization/corpus/make_corpus.py   # rewrites the files

The gadget is a protocol-2 pickle calling ``exec`` to create the file named by the
environment variable ``EMBER_CORPUS_MARKER``: if any loader ever ran it, the test sees the
marker.  Zips are built by hand (``build_zip``) because ``zipfile`` cannot write the
inconsistent headers the corpus needs.
"""

from __future__ import annotations

import io
import json
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).parent
_CODE = "import os; open(os.environ['EMBER_CORPUS_MARKER'], 'w').close()"
GADGET = (b"\x80\x02cbuiltins\nexec\nX" + struct.pack("<I", len(_CODE)) + _CODE.encode()
          + b"\x85R.")
# {'w': tensor([1., 2.])} as torch.save pickles it (storage key '0', 2 float32 elements)
BENIGN = (b"\x80\x02}q\x00X\x01\x00\x00\x00wq\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02"
          b"((X\x07\x00\x00\x00storageq\x03ctorch\nFloatStorage\nq\x04X\x01\x00\x00\x000q\x05"
          b"X\x03\x00\x00\x00cpuq\x06K\x02tq\x07QK\x00K\x02\x85q\x08K\x01\x85q\x09\x89"
          b"ccollections\nOrderedDict\nq\x0a)Rq\x0btq\x0cRq\x0ds.")
STORAGE = struct.pack("<2f", 1.0, 2.0)


def entry(name: str, data: bytes, **over: object) -> dict:
    """One zip entry; ``over`` changes what the headers say: ``method`` (8 deflates),
    ``local_name``, ``local_csize``, ``central_usize``, ``flags``, ``central_method``,
    ``offset_of`` (the central record points at another entry's local header)."""
    return {"name": name, "data": data, **over}


def build_zip(entries: list[dict]) -> bytes:
    out = io.BytesIO()
    central = []
    offsets: dict[str, int] = {}
    for e in entries:
        name = e["name"].encode()
        method = e.get("method", 0)
        raw = e["data"]
        if method == 8:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            payload = c.compress(raw) + c.flush()
        else:
            payload = raw
        crc = e.get("crc", zlib.crc32(raw))
        flags = e.get("flags", 0)
        offset = out.tell()
        offsets.setdefault(e["name"], offset)
        local_name = e.get("local_name", e["name"]).encode()
        out.write(struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, flags, method, 0, 0x21,
                              crc, e.get("local_csize", len(payload)), len(raw),
                              len(local_name), 0))
        out.write(local_name + payload)
        central.append((e, name, e.get("central_method", method), crc, len(payload),
                        e.get("central_usize", len(raw)), flags, offset))
    cd_start = out.tell()
    for e, name, method, crc, csize, usize, flags, offset in central:
        offset = offsets[e["offset_of"]] if "offset_of" in e else offset
        out.write(struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, flags, method, 0,
                              0x21, crc, csize, usize, len(name), 0, 0, 0, 0, 0, offset))
        out.write(name)
    cd_size = out.tell() - cd_start
    out.write(struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(central), len(central),
                          cd_size, cd_start, 0))
    return out.getvalue()


def torch_entries(pkl: bytes = BENIGN, version: bytes = b"3\n", prefix: str = "archive/",
                  **extra: bytes) -> list[dict]:
    """A valid torch.save archive of {'w': tensor([1., 2.])} (with ``pkl`` as data.pkl)."""
    items = [("data.pkl", pkl), (".format_version", b"1"), (".storage_alignment", b"64"),
             ("byteorder", b"little"), ("data/0", STORAGE), ("version", version)]
    items += list(extra.items())
    return [entry(prefix + n, d) for n, d in items]


def _ember_archive(manifest: bytes, object_json: bytes | None = None) -> bytes:
    st_header = b'{"s0":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}'
    st_header += b" " * (-(8 + len(st_header)) % 8)
    st = struct.pack("<Q", len(st_header)) + st_header + STORAGE
    doc = object_json or json.dumps({
        "tensors": [{"storage": "s0", "dtype": "float32", "size": [2], "stride": [1],
                     "storage_offset": 0, "requires_grad": False}],
        "storages": ["s0"], "object": {"$type": "dict", "items": [
            ["w", {"$type": "tensor", "index": 0}]]}}).encode()
    return build_zip([entry("manifest.json", manifest), entry("object.json", doc),
                      entry("data.safetensors", st)])


def _export_archive(version: bytes | None = None, dup: str | None = None,
                    bad_input: bool = False) -> bytes:
    import zipfile
    golden = HERE.parent.parent / "export" / "golden" / "golden_v1_0.ep.zip"
    zf = zipfile.ZipFile(golden)
    items = [entry(n, zf.read(n)) for n in zf.namelist()]
    for e in items:
        if e["name"] == "version" and version is not None:
            e["data"] = version
        if e["name"] == "model.json" and bad_input:  # found by fuzzing: an input named 2**64+1
            model = json.loads(e["data"])
            model["inputs"][-1]["name"] = 2**64 + 1
            e["data"] = json.dumps(model).encode()
    if dup is not None:
        items.append(entry(dup, b"{}"))
    return build_zip(items)


def _bomb() -> bytes:
    # data.pkl: 3 MiB of zeros deflated to ~3 KB, its headers declaring 3 GiB
    ents = torch_entries()
    ents[0] = entry("archive/data.pkl", b"\0" * (3 << 20), method=8, central_usize=3 << 30)
    return build_zip(ents)


def _longer_stream() -> bytes:
    # data.pkl: a deflate stream of 3 MiB whose headers declare 2 MiB (within the ratio)
    ents = torch_entries()
    # and the CRC of its first 2 MiB: zipfile alone would stop there and accept it
    ents[0] = entry("archive/data.pkl", b"\0" * (3 << 20), method=8, central_usize=2 << 20,
                    flags=8, crc=zlib.crc32(b"\0" * (2 << 20)))
    return build_zip(ents)


def _overlap() -> bytes:
    # 'archive/data/0' is stored inside the bytes of 'archive/extra' (a second view of them)
    inner = build_zip([entry("archive/data/0", STORAGE)])
    ents = torch_entries()
    ents = [e for e in ents if e["name"] != "archive/data/0"]
    blob = build_zip(ents + [entry("archive/extra", inner[:30 + 14 + 8])])
    zf_start = blob.index(b"PK\x01\x02")
    # append a central record for the inner entry pointing into 'archive/extra'
    import zipfile
    zf = zipfile.ZipFile(io.BytesIO(blob))
    extra_off = zf.getinfo("archive/extra").header_offset + 30 + len("archive/extra")
    cds = blob[zf_start:blob.index(b"PK\x05\x06")]
    name = b"archive/data/0"
    rec = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21,
                      zlib.crc32(STORAGE), 8, 8, len(name), 0, 0, 0, 0, 0, extra_off) + name
    cds += rec
    n = len(zf.infolist()) + 1
    return blob[:zf_start] + cds + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, n, n,
                                               len(cds), zf_start, 0)


def _path_key_pickle() -> bytes:
    return BENIGN.replace(b"X\x01\x00\x00\x000q\x05", b"X\x06\x00\x00\x00../../q\x05")


def _safetensors_dup() -> bytes:
    h = (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
         b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}')
    h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + STORAGE


def _patched(raw: bytes, record: bytes, offset: int, value: bytes) -> bytes:
    """``raw`` with ``value`` written at ``offset`` into its first ``record`` (found by fuzzing:
    tests/fuzz/archive_fuzz_worker.py)."""
    at = raw.index(record) + offset
    return raw[:at] + value + raw[at + len(value):]


def corpus() -> dict[str, bytes]:
    """File name -> bytes of every corpus file."""
    t = torch_entries
    dup_pkl = t() + [entry("archive/data.pkl", GADGET)]
    dup_storage = t() + [entry("archive/data/0", struct.pack("<2f", 7.0, 8.0))]
    two_prefix = t() + t(GADGET, prefix="other/")
    bad_name = t(GADGET)
    bad_name[0]["local_name"] = "archive/data.pkx"
    bad_size = t()
    bad_size[4]["local_csize"] = 4
    method = t()
    method[0]["central_method"] = 12
    return {
        "dup_data_pkl.pt": build_zip(dup_pkl),
        "dup_storage.pt": build_zip(dup_storage),
        "two_data_pkl_folders.pt": build_zip(two_prefix),
        "local_name_differs.pt": build_zip(bad_name),
        "local_size_differs.pt": build_zip(bad_size),
        "overlapping_entries.pt": _overlap(),
        "encrypted_entry.pt": build_zip([dict(e, flags=1) if e["name"].endswith("data.pkl")
                                         else e for e in t(GADGET)]),
        "bzip2_method.pt": build_zip(method),
        "future_version.pt": build_zip(t(GADGET, version=b"99\n")),
        "version_30_digits.pt": build_zip(t(GADGET, version=b"1" * 30 + b"\n")),
        "future_format_version.pt": build_zip(
            [dict(e, data=b"2") if e["name"].endswith(".format_version") else e
             for e in t(GADGET)]),
        "torchscript.pt": build_zip(t(GADGET, **{"code/__torch__.py": b"def f(): pass\n",
                                                 "constants.pkl": b"\x80\x02)."})),
        "path_entry_name.pt": build_zip(t(GADGET) + [entry("archive/../../evil", b"x")]),
        "absolute_entry_name.pt": build_zip(t(GADGET) + [entry("/tmp/evil", b"x")]),
        "path_storage_key.pt": build_zip(t(_path_key_pickle())),
        "deflate_bomb.pt": _bomb(),
        "deflate_longer_than_declared.pt": _longer_stream(),
        "zip_needs_version_25.pt": _patched(build_zip(t(GADGET)), b"PK\x01\x02", 6,
                                            b"\xff\x00"),
        "central_directory_offset_past_end.pt": _patched(build_zip(t(GADGET)), b"PK\x05\x06",
                                                         16, b"\x00\x00\x00\xff"),
        "ember_future_version.ember": _ember_archive(
            b'{"format": "ember.checkpoint", "version": 2}'),
        "ember_version_30_digits.ember": _ember_archive(
            b'{"format": "ember.checkpoint", "version": ' + b"9" * 30 + b"}"),
        "ember_dup_json_key.ember": _ember_archive(
            b'{"format": "ember.checkpoint", "version": 1, "version": 2}'),
        "safetensors_dup_key.safetensors": _safetensors_dup(),
        "export_future_version.pt2": _export_archive(version=b"99.0"),
        "export_version_30_digits.pt2": _export_archive(version=b"1" * 30 + b".0"),
        "export_dup_model_json.pt2": _export_archive(dup="model.json"),
        "export_input_name_not_a_name.pt2": _export_archive(bad_input=True),
    }


def main() -> None:
    for name, data in corpus().items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    sys.exit(main())
