"""Faults the compiler cache survives (issue 22, "Faults survived"; docs/reliability.md).

Each test injects one fault into a private cache directory: Ctrl-C while gcc runs, a full disk
while an entry is written, a damaged library, a cache directory that cannot be written, two
processes (spawn start method) compiling the same graph at once.  After each, no temporary file
or half-written library is left for a later call to use, and the next call compiles and
returns what eager returns.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import shutil
import signal
import stat
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.compiler.c.build import runtime, toolchain
from ember.config import config
from ember.errors import CompileError
from tests.compiler.test_toolchain import (
    _env,
    _spawn,
    constant_source,
    invocations,
    run_constant,
)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory and a process state as fresh as a new process's."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    monkeypatch.setattr(toolchain, "_ROOTS", {})
    _fresh()
    yield tmp_path / "cache"
    _fresh()


@pytest.fixture
def logging_cc(tmp_path, monkeypatch):
    log = tmp_path / "cc.log"
    script = tmp_path / "logging-cc"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec gcc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(config, "cc", str(script))
    return log


def _fresh():
    ember.compiler.reset()
    toolchain.CACHE.clear()
    runtime.LIBRARIES.clear()


def _model(x, w):
    return ember.softmax((x @ w) * 0.5 + 1, -1).sum(0)


def _inputs():
    rng = np.random.default_rng(0)
    return (ember.tensor(rng.standard_normal((6, 5)).astype(np.float32)),
            ember.tensor(rng.standard_normal((5, 7)).astype(np.float32)))


def _check_compiles(fn=_model):
    x, w = _inputs()
    got = ember.compile(fn, backend="c")(x, w).numpy()
    # the row kernel and the sum accumulate in double, eager in float32: a few ulp apart
    np.testing.assert_allclose(got, fn(x, w).numpy(), rtol=1e-6, atol=1e-7)


def _leftovers(root: Path) -> list:
    return sorted(p.name for p in root.rglob("*.tmp"))


def _builds(log: Path) -> int:
    return sum("-shared" in line for line in invocations(log))


# ------------------------------------------------------------------------------ Ctrl-C
def test_keyboard_interrupt_while_gcc_runs_leaves_no_entry(cache, monkeypatch):
    real_run = toolchain.subprocess.run

    def interrupted(cmd, *a, **k):
        if "-o" in cmd:  # gcc is writing its output when Ctrl-C arrives
            Path(cmd[cmd.index("-o") + 1]).write_bytes(b"\x7fELF partial")
            raise KeyboardInterrupt
        return real_run(cmd, *a, **k)

    monkeypatch.setattr(toolchain.subprocess, "run", interrupted)
    x, w = _inputs()
    f = ember.compile(_model, backend="c")
    with pytest.raises(KeyboardInterrupt):
        f(x, w)
    assert not ember.compiler.is_compiling()  # the trace state was restored
    assert _leftovers(cache) == [] and list(cache.rglob("*.so")) == []
    assert toolchain.CACHE._paths == {}
    monkeypatch.setattr(toolchain.subprocess, "run", real_run)
    np.testing.assert_allclose(f(x, w).numpy(), _model(x, w).numpy(), rtol=1e-6, atol=1e-7)
    assert list(cache.rglob("*.so"))


def test_sigterm_mid_gcc_leaves_no_entry(tmp_path, monkeypatch):
    """A process terminated while gcc runs: no library under the final name, and the next
    process (here: this one) builds the entry."""
    mark = tmp_path / "gcc-started"
    slow = tmp_path / "slow-cc"
    # "gcc" records its pid and sleeps (exec keeps the pid) until the test kills it
    slow.write_text(f'#!/bin/sh\ncase "$*" in *-shared*) echo $$ > "{mark}.tmp"; '
                    f'mv "{mark}.tmp" "{mark}"; exec sleep 60;; esac\nexec gcc "$@"\n')
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    cache = tmp_path / "cache"
    src = constant_source(12, uuid.uuid4().hex)
    go = tmp_path / "go"
    go.touch()
    [p] = _spawn(tmp_path, _env(cache, slow), src, 1, go)
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), p.communicate()[1]
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == -signal.SIGTERM
    finally:
        if mark.exists():  # the orphaned "gcc", by its pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(mark.read_text()), signal.SIGKILL)
    assert list(cache.rglob("*.so")) == []  # only the temporary file the build was writing
    monkeypatch.setattr(config, "cache_dir", str(cache))
    monkeypatch.setattr(toolchain, "_ROOTS", {})
    _fresh()
    try:
        assert run_constant(toolchain.compile_library(src, name="shared")) == 12
    finally:
        _fresh()


# ------------------------------------------------------------------------------ full disk
def _enospc_on(suffix: str, monkeypatch):
    real = toolchain._atomic_write

    def full(path, data):
        if Path(path).suffix == suffix:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, data)

    monkeypatch.setattr(toolchain, "_atomic_write", full)
    return real


@pytest.mark.parametrize("suffix", [".c", ".json"])
def test_full_disk_is_a_clear_error_and_no_entry_is_used_later(cache, logging_cc, monkeypatch,
                                                               suffix):
    src = constant_source(5, uuid.uuid4().hex)
    real = _enospc_on(suffix, monkeypatch)
    with pytest.raises(CompileError, match=r"cannot write the compiler cache .*disk is full"):
        toolchain.compile_library(src)
    assert _leftovers(cache) == []
    monkeypatch.setattr(toolchain, "_atomic_write", real)
    before = _builds(logging_cc)
    path = toolchain.compile_library(src)
    assert _builds(logging_cc) == before + 1  # rebuilt: a library without manifest is not used
    assert run_constant(path) == 5
    assert toolchain._valid(path, path.with_suffix(".json"))


def test_full_disk_during_ember_compile(cache, monkeypatch):
    real = _enospc_on(".json", monkeypatch)
    with pytest.raises(CompileError, match="disk is full"):
        _check_compiles()
    monkeypatch.setattr(toolchain, "_atomic_write", real)
    _fresh()
    _check_compiles()


# ------------------------------------------------------------------------------ damage
@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage manifest"])
def test_damaged_entry_is_detected_and_rebuilt(cache, logging_cc, damage):
    src = constant_source(6, uuid.uuid4().hex)
    path = toolchain.compile_library(src)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:100])
    elif damage == "flipped":  # same length, one byte changed: only the checksum sees it
        path.write_bytes(data[:-64] + bytes([data[-64] ^ 0xFF]) + data[-63:])
    else:
        path.with_suffix(".json").write_text("{not json")
    toolchain.CACHE.clear()
    before = _builds(logging_cc)
    assert run_constant(toolchain.compile_library(src)) == 6
    assert _builds(logging_cc) == before + 1
    assert path.read_bytes() == data


# ------------------------------------------------------------------------------ read-only
def test_read_only_cache_dir_compiles_in_a_temp_dir_with_a_warning(cache, monkeypatch):
    def read_only(d):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(d))

    monkeypatch.setattr(toolchain, "_probe", read_only)
    src = constant_source(4, uuid.uuid4().hex)
    with pytest.warns(RuntimeWarning, match=r"cannot be written \(Read-only file system\)"):
        path = toolchain.compile_library(src)
    assert run_constant(path) == 4
    assert cache not in path.parents and not cache.exists()
    _check_compiles()  # a whole ember.compile too


def test_cache_dir_that_is_a_file(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setattr(config, "cache_dir", str(blocker / "cache"))
    monkeypatch.setattr(toolchain, "_ROOTS", {})
    _fresh()
    try:
        with pytest.warns(RuntimeWarning, match="cannot be written"):
            _check_compiles()
    finally:
        _fresh()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_chmod_read_only_cache_dir(cache):
    cache.mkdir(parents=True)
    cache.chmod(0o555)
    try:
        with pytest.warns(RuntimeWarning, match="cannot be written"):
            _check_compiles()
    finally:
        cache.chmod(0o755)


# ------------------------------------------------------------------------------ processes
def _compile_in_child(cache_dir: str, go: str, q) -> None:
    import time

    config.cache_dir = cache_dir
    x, w = _inputs()
    while not os.path.exists(go):
        time.sleep(0.01)
    try:
        got = ember.compile(_model, backend="c")(x, w).numpy()
        q.put(("ok", got.tolist()))
    except BaseException as e:  # noqa: BLE001 (reported to the parent)
        q.put(("error", repr(e)))


def test_two_spawned_processes_compile_the_same_graph(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    go = tmp_path / "go"
    procs = [ctx.Process(target=_compile_in_child, args=(str(tmp_path / "cache"), str(go), q))
             for _ in range(2)]
    for p in procs:
        p.start()
    go.touch()
    results = [q.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    x, w = _inputs()
    for status, got in results:
        assert status == "ok", got
        np.testing.assert_allclose(np.array(got, np.float32), _model(x, w).numpy(),
                                   rtol=1e-6, atol=1e-7)
    assert _leftovers(tmp_path / "cache") == []
