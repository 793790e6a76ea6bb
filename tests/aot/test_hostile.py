"""Truncated, corrupted and hostile packages: clear ember errors from Python, error codes with
messages from the C runner, no code from the archive run unless its hash matches, and nothing
written outside the loader's private temporary folder (which is removed)."""

import json
import shutil
import struct
import tempfile
import zipfile
from pathlib import Path

import pytest

import ember
from ember.errors import EmberRuntimeError
from tests.aot.helpers import edit_metadata, rewrite

GOLDEN = Path(__file__).parent / "golden" / "golden_v1.pt2"
EFORMAT, ENOTFOUND, EHASH, ECOMPAT, EIO = 2, 3, 4, 5, 1


def _truncated(src, dst):
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])


def _garbage(src, dst):
    dst.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 40)


def _empty(src, dst):
    dst.write_bytes(b"")


def _traversal(src, dst):
    def edit(name, data):
        return ("golden_v1/../../evil.so" if name.endswith(".wrapper.so") else name), data
    rewrite(src, dst, edit)


def _absolute(src, dst):
    rewrite(src, dst, lambda n, d: (("/tmp/evil" if n.endswith("byteorder") else n), d))


def _zip_bomb(src, dst):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info), zipfile.ZIP_STORED)
        zout.writestr("golden_v1/extra/bomb", b"\0" * (64 << 20), zipfile.ZIP_DEFLATED)


def _lying_size(src, dst):
    data = bytearray(src.read_bytes())
    zf = zipfile.ZipFile(src)
    info = zf.getinfo("golden_v1/data/weights/model/weight_0")
    cd = data.find(b"PK\x01\x02" + data[data.find(b"PK\x01\x02") + 4:][:0])
    while cd >= 0:  # the central directory record of weight_0
        n = struct.unpack_from("<H", data, cd + 28)[0]
        if data[cd + 46:cd + 46 + n] == info.filename.encode():
            struct.pack_into("<II", data, cd + 20, 1 << 30, 1 << 30)
            break
        cd = data.find(b"PK\x01\x02", cd + 4)
    dst.write_bytes(bytes(data))


def _wrong_hash(src, dst):
    def edit(name, data):
        if name.endswith(".wrapper.so"):
            data = bytearray(data)
            data[len(data) // 2] ^= 0xFF
        return name, bytes(data)
    rewrite(src, dst, edit)


def _short_weight(src, dst):
    rewrite(src, dst, lambda n, d: (n, d[:8] if n.endswith("weight_0") else d))


def _bad_json(src, dst):
    rewrite(src, dst, lambda n, d: (n, b"{not json" if n.endswith("metadata.json") else d))


def _no_format(src, dst):
    rewrite(src, dst, lambda n, d: None if n.endswith("archive_format") else (n, d))


def _duplicate(src, dst):
    import warnings
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
        so = next(n for n in zin.namelist() if n.endswith(".wrapper.so"))
        zout.writestr(so, b"\x7fELF not the hashed library")


def _other_machine(src, dst):
    edit_metadata(src, dst, {"AOTI_MACHINE": "aarch64"})


def _other_isa(src, dst):
    edit_metadata(src, dst, {"ember.cpu_features": "avx512f,avx512_fake", "AOTI_CPU_ISA":
                             "sapphirerapids"})


def _newer_runtime(src, dst):
    edit_metadata(src, dst, {"ember.runtime_abi": "99"})


CASES = {  # name: (maker, Python message, C code, C message)
    "truncated": (_truncated, "truncated", EFORMAT, "truncated"),
    "garbage": (_garbage, "not a zip", EFORMAT, "not a zip"),
    "empty": (_empty, "empty", EFORMAT, "empty"),
    "traversal": (_traversal, "unsafe entry name", EFORMAT, "unsafe entry name"),
    "absolute": (_absolute, "unsafe entry name", EFORMAT, "unsafe entry name"),
    "zip_bomb": (_zip_bomb, "compressed", EFORMAT, "compressed"),
    "lying_size": (_lying_size, "past the end", EFORMAT, "past the end"),
    "wrong_hash": (_wrong_hash, "sha256", EHASH, "sha256"),
    "duplicate": (_duplicate, "duplicate entry", EFORMAT, "duplicate entry"),
    "short_weight": (_short_weight, "bytes", EFORMAT, "bytes"),
    "bad_json": (_bad_json, "JSON", EFORMAT, "JSON"),
    "no_format": (_no_format, "archive_format", EFORMAT, "archive_format"),
    "other_machine": (_other_machine, "AOTI_MACHINE='aarch64'", ECOMPAT, "aarch64"),
    "other_isa": (_other_isa, "lacks: avx512_fake", ECOMPAT, "avx512_fake"),
    "newer_runtime": (_newer_runtime, "runtime abi version 99", ECOMPAT, "runtime_abi"),
}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """A fresh TMPDIR for both loaders; the test checks it is empty afterwards."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_package_python(case, tmp_path, private_tmp):
    maker, msg, _, _ = CASES[case]
    pkg_dir = tmp_path / "pkg"
    pkg_dir.mkdir()
    bad = pkg_dir / f"{case}.pt2"
    maker(GOLDEN, bad)
    before = sorted(pkg_dir.iterdir())
    with pytest.raises(EmberRuntimeError, match=msg) as e:
        ember.aot.load_package(bad)
    assert "[aoti_load_package]" in str(e.value)
    assert sorted(pkg_dir.iterdir()) == before
    assert list(private_tmp.iterdir()) == []


@pytest.mark.skipif(shutil.which("gcc") is None, reason="builds libember_aot with gcc")
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_package_c(case, tmp_path, private_tmp):
    from tests.aot.helpers import CRunner
    maker, _, code, msg = CASES[case]
    bad = tmp_path / f"{case}.pt2"
    maker(GOLDEN, bad)
    rc, h, err = CRunner().load(bad)
    assert (rc, h.value) == (code, None), err
    assert msg in err
    assert list(private_tmp.iterdir()) == []


def test_missing_file_and_model(tmp_path):
    from tests.aot.helpers import CRunner
    with pytest.raises(EmberRuntimeError, match="cannot read"):
        ember.aot.load_package(tmp_path / "nope.pt2")
    with pytest.raises(EmberRuntimeError, match="no model 'other'"):
        ember.aot.load_package(GOLDEN, "other")
    c = CRunner()
    assert c.load(tmp_path / "nope.pt2")[0] == EIO
    rc, _, err = c.load(GOLDEN, "other")
    assert rc == ENOTFOUND and "no model 'other'" in err
    rc, _, err = c.load(GOLDEN, "../model")
    assert rc == 7 and "bad model name" in err


def test_metadata_json_stays_flat(tmp_path):
    bad = tmp_path / "nested.pt2"
    edit_metadata(GOLDEN, bad, {"nested": {"a": 1}})
    with pytest.raises(EmberRuntimeError, match="flat string map"):
        ember.aot.load_package(bad)
    meta = json.loads(zipfile.ZipFile(bad).read(
        [n for n in zipfile.ZipFile(bad).namelist() if n.endswith("metadata.json")][0]))
    assert meta["nested"] == {"a": 1}


def test_a_package_not_built_by_ember_is_named(tmp_path):
    """A PyTorch AOTInductor package (its metadata has no ember keys) is refused by name."""
    from tests.aot.helpers import CRunner

    def edit(name, data):
        if name.endswith(".wrapper_metadata.json"):
            data = json.dumps({"AOTI_DEVICE_KEY": "cpu"}).encode()
        return name, data
    bad = rewrite(GOLDEN, tmp_path / "torch.pt2", edit)
    with pytest.raises(EmberRuntimeError, match="not built by ember.aot"):
        ember.aot.load_package(bad)
    rc, _, err = CRunner().load(bad)
    assert rc == ECOMPAT and "not built by ember.aot" in err
