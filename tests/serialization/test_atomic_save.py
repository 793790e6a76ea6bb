"""``ember.save`` (both formats) and ``ember.export.save`` write a path atomically: a temp file
in the same folder, renamed over the target only once complete, so a failure mid-write (a full
disk, an interrupt) leaves the old file intact and no temp file behind."""

from __future__ import annotations

import errno
import io
import os

import pytest

import ember
import ember.export
from ember.serialization import _torch_writer

_real_fdopen = os.fdopen


class _FullDisk:
    """A file that accepts ``budget`` bytes, then fails like a full disk."""

    def __init__(self, fh, budget):
        self._fh, self._left = fh, budget

    def write(self, data):
        n = len(memoryview(data).cast("B"))
        if n > self._left:
            raise OSError(errno.ENOSPC, "No space left on device")
        self._left -= n
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def _full_disk_after(budget):
    return lambda fd, *a, **k: _FullDisk(_real_fdopen(fd, *a, **k), budget)


def _save_export(obj, path):
    ember.export.save(obj, path)


@pytest.mark.parametrize("fmt", ["torch", "ember"])
@pytest.mark.parametrize("budget", [0, 100, 2000])
def test_full_disk_keeps_the_old_checkpoint(tmp_path, monkeypatch, fmt, budget):
    path = tmp_path / "ckpt.pt"
    ember.save({"w": ember.arange(4.0)}, path, format=fmt)
    before = path.read_bytes()
    monkeypatch.setattr(_torch_writer.os, "fdopen", _full_disk_after(budget))
    with pytest.raises(OSError) as info:
        ember.save({"w": ember.zeros(1000)}, path, format=fmt)
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert ember.load(path)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # the temp file is gone


def test_interrupt_while_pickling_keeps_the_old_checkpoint(tmp_path):
    class Interrupt:
        def __reduce__(self):
            raise KeyboardInterrupt

    path = tmp_path / "ckpt.pt"
    ember.save({"step": 1}, path)
    before = path.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        ember.save({"step": 2, "x": Interrupt()}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.pt"]


def test_export_save_is_atomic(tmp_path, monkeypatch):
    ep = ember.export.export(ember.nn.Linear(2, 2), (ember.ones(1, 2),))
    path = tmp_path / "m.pt2"
    ember.export.save(ep, path)
    before = path.read_bytes()
    monkeypatch.setattr(_torch_writer.os, "fdopen", _full_disk_after(10))
    with pytest.raises(OSError):
        ember.export.save(ep, path)
    monkeypatch.undo()
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["m.pt2"]


def test_save_succeeds_and_keeps_permissions(tmp_path):
    path = tmp_path / "new.pt"
    ember.save({"a": 1}, path)
    mask = os.umask(0o022)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
    os.chmod(path, 0o640)
    ember.save({"a": 2}, path)
    assert path.stat().st_mode & 0o777 == 0o640
    assert ember.load(path) == {"a": 2} and os.listdir(tmp_path) == ["new.pt"]


def test_file_object_errors_propagate():
    class Failing(io.BytesIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        ember.save({"w": ember.ones(2)}, Failing())
