"""The hostile-archive corpus (tests/serialization/corpus/, made by make_corpus.py): every file
is refused with the exact error class and a message naming the rule, and its gadget (a pickle
that would create a marker file) never runs, not even with weights_only=False."""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

import ember
import ember.export
from ember.serialization import (
    SerializationError,
    UnpicklingError,
    archive_limits,
    load,
    save,
)

CORPUS = Path(__file__).parent / "corpus"
sys.path.insert(0, str(CORPUS))
import make_corpus  # noqa: E402

# file -> (error class, message fragment, refused before any pickle is read)
EXPECTED = {
    "dup_data_pkl.pt": (SerializationError, "'archive/data.pkl': appears twice", True),
    "dup_storage.pt": (SerializationError, "'archive/data/0': appears twice", True),
    "two_data_pkl_folders.pt": (SerializationError, "2 data.pkl records", True),
    "local_name_differs.pt": (SerializationError, "local and central headers disagree", True),
    "local_size_differs.pt": (SerializationError, "local header gives compressed size 4", True),
    "overlapping_entries.pt": (SerializationError, "overlaps entry 'archive/extra'", True),
    "encrypted_entry.pt": (SerializationError, "is encrypted", True),
    "bzip2_method.pt": (SerializationError, "compression method 12", True),
    "future_version.pt": (SerializationError, "archive version 99 is not supported", True),
    "version_30_digits.pt": (SerializationError, "1" * 30, True),
    "future_format_version.pt": (SerializationError, "format version 2 is newer", True),
    "torchscript.pt": (SerializationError, "TorchScript is not supported", True),
    "path_entry_name.pt": (SerializationError, "'archive/../../evil': is a path", True),
    "absolute_entry_name.pt": (SerializationError, "'/tmp/evil': is a path", True),
    "path_storage_key.pt": (UnpicklingError, "invalid storage key '../../'", False),
    "deflate_bomb.pt": (SerializationError, "declares 3221225472 bytes from", True),
    "deflate_longer_than_declared.pt": (SerializationError, "more bytes than its header", True),
    "zip_needs_version_25.pt": (SerializationError, "zip file version 25.5", True),
    "central_directory_offset_past_end.pt": (SerializationError, "lies outside the file", True),
    "ember_future_version.ember": (SerializationError, "checkpoint version 2 is not", True),
    "ember_version_30_digits.ember": (SerializationError, "9" * 30, True),
    "ember_dup_json_key.ember": (SerializationError, "key 'version' twice", True),
    "safetensors_dup_key.safetensors": (SerializationError, "key 'a' twice", True),
    "export_future_version.pt2": (SerializationError, "format version 99.0", True),
    "export_version_30_digits.pt2": (SerializationError, "1" * 30, True),
    "export_dup_model_json.pt2": (SerializationError, "'model.json': appears twice", True),
    "export_input_name_not_a_name.pt2": (SerializationError, "model.json is malformed", True),
}


@pytest.fixture
def marker(tmp_path, monkeypatch):
    path = tmp_path / "gadget_ran"
    monkeypatch.setenv("EMBER_CORPUS_MARKER", str(path))
    return path


def test_the_gadget_would_be_seen(marker):
    """The marker check can fail: the gadget does create the marker when unpickled."""
    pickle.loads(make_corpus.GADGET)
    assert marker.exists()


def test_corpus_is_complete_and_small():
    files = {p.name for p in CORPUS.iterdir() if p.suffix in (".pt", ".ember", ".safetensors",
                                                               ".pt2")}
    assert files == set(EXPECTED) == set(make_corpus.corpus())
    assert all((CORPUS / n).stat().st_size < 8192 for n in files)


def _load(path: Path, weights_only: bool):
    if path.suffix == ".pt2":
        return ember.export.load(path)
    return load(path, weights_only=weights_only)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_is_refused(name, marker):
    cls, fragment, before_pickle = EXPECTED[name]
    modes = [True, False] if before_pickle and not name.endswith(".pt2") else [True]
    for weights_only in modes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with pytest.raises(cls) as info:
                _load(CORPUS / name, weights_only)
        assert type(info.value) is cls
        assert fragment in str(info.value), str(info.value)
        assert str(info.value).startswith("[load]") or str(info.value).startswith(
            "[export.load]")
        assert not marker.exists(), f"{name}: code from the file ran"


def test_mmap_load_applies_the_same_rules(marker):
    for name in ("dup_data_pkl.pt", "deflate_bomb.pt", "torchscript.pt"):
        with pytest.raises(SerializationError, match=EXPECTED[name][1]):
            load(CORPUS / name, mmap=True)
    assert not marker.exists()


def test_the_valid_bases_load():
    """The corpus files are one change away from files that load (so each refusal is due to
    its rule, not to a broken base)."""
    ok = make_corpus.build_zip(make_corpus.torch_entries())
    assert load(io.BytesIO(ok))["w"].tolist() == [1.0, 2.0]
    ok = make_corpus._ember_archive(b'{"format": "ember.checkpoint", "version": 1}')
    assert load(io.BytesIO(ok))["w"].tolist() == [1.0, 2.0]
    assert isinstance(ember.export.load(io.BytesIO(make_corpus._export_archive())),
                      ember.export.ExportedProgram)


def test_metadata_and_inflated_budgets(tmp_path):
    buf = io.BytesIO()
    save({"w": ember.arange(1000.0)}, buf)
    raw = buf.getvalue()
    with archive_limits(max_metadata_bytes=16):
        with pytest.raises(SerializationError, match=r"data.pkl'.*over the metadata limit"):
            load(io.BytesIO(raw))
    zin = zipfile.ZipFile(io.BytesIO(raw))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in zin.namelist():
            zf.writestr(n, zin.read(n))
    with archive_limits(max_inflated_bytes=1000):
        with pytest.raises(SerializationError, match="over the budget of 1000"):
            load(io.BytesIO(out.getvalue()))
    with archive_limits(chunk_bytes=1):  # read in many small pieces: same result
        assert load(io.BytesIO(out.getvalue()))["w"].tolist() == list(range(1000))


def test_load_sniffs_safetensors(tmp_path):
    w = ember.arange(6.0).reshape(2, 3)
    path = tmp_path / "model.safetensors"
    ember.utils.safetensors.save_file({"w": w, "b": ember.ones(2, dtype=ember.bfloat16)}, path)
    for kw in ({}, {"mmap": True}):
        got = load(path, **kw)
        assert sorted(got) == ["b", "w"]
        assert got["w"].tolist() == w.tolist() and got["b"].dtype == ember.bfloat16
    with open(path, "rb") as fh:
        assert load(fh)["w"].shape == (2, 3)
    bad = path.read_bytes()[:8] + b"{" + path.read_bytes()[9:-4]  # truncated data
    with pytest.raises(SerializationError, match="safetensors"):
        load(io.BytesIO(bad))


def test_storage_key_dotdot_variants():
    for key in (b"..", b".", b"../x"):
        pkl = make_corpus.BENIGN.replace(b"X\x01\x00\x00\x000q\x05",
                                         b"X" + struct.pack("<I", len(key)) + key + b"q\x05")
        raw = make_corpus.build_zip(make_corpus.torch_entries(pkl))
        with pytest.raises(UnpicklingError, match="invalid storage key"):
            load(io.BytesIO(raw))


def test_torch_reads_the_base_and_corpus_refusals_hold_for_real_torch_files(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "t.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    assert load(path)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    zin = zipfile.ZipFile(path)
    dup = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns on the duplicate
        with zipfile.ZipFile(dup, "w") as zf:
            for n in zin.namelist():
                zf.writestr(n, zin.read(n))
            zf.writestr("t/data.pkl", zin.read("t/data.pkl"))
    with pytest.raises(SerializationError, match="appears twice"):
        load(io.BytesIO(dup.getvalue()))
    assert os.listdir(tmp_path) == ["t.pt"]


def test_real_torchscript_archive_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), path)
    with pytest.raises(SerializationError, match="TorchScript is not supported"):
        load(path)
