"""The C toolchain and its on-disk cache (ember/compiler/c/build/toolchain.py)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from ember.compiler.c.build import runtime, toolchain
from ember.config import config
from ember.errors import CompileError, EmberValueError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

REPO = Path(__file__).resolve().parents[2]


def constant_source(value: int, extra: str = "") -> str:
    """A library whose entry writes ``value`` (and a per-test marker) into an int64 buffer."""
    return runtime.C_PRELUDE + textwrap.dedent(f"""
        /* {extra} */
        EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {{
          int64_t *out = bufs[0];
          out[0] = {value};
          return 0;
        }}
        """)


def run_constant(path: Path) -> int:
    out = np.zeros(1, np.int64)
    runtime.load(path).entry()([out])
    return int(out[0])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory and a fresh in-process memo."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    toolchain.CACHE.clear()
    yield tmp_path / "cache"
    toolchain.CACHE.clear()


@pytest.fixture
def logging_cc(tmp_path):
    """A compiler wrapper that records every invocation (one line each) and runs gcc."""
    log = tmp_path / "cc.log"
    script = tmp_path / "logging-cc"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec gcc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def invocations(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_builds_loads_and_caches(cache):
    src = constant_source(41, uuid.uuid4().hex)
    path = toolchain.compile_library(src, name="const")
    assert path.suffix == ".so" and path.exists() and path.parent.parent.parent == cache
    assert path.with_suffix(".c").read_text() == src  # the source is kept next to the library
    assert run_constant(path) == 41
    assert toolchain.compile_library(src, name="const") == path


def test_a_memo_hit_touches_no_file(cache, monkeypatch):
    src = constant_source(1, uuid.uuid4().hex)
    path = toolchain.compile_library(src)

    def no_disk(*args, **kwargs):
        raise AssertionError("a memo hit must not touch the disk")

    monkeypatch.setattr(toolchain, "_build", no_disk)
    monkeypatch.setattr(os, "stat", no_disk)
    assert toolchain.compile_library(src) == path


def test_fixed_flags_and_forbidden_flags(cache):
    assert toolchain.FLAGS == ("-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off")
    for bad in ("-ffast-math", "-Ofast", "-funsafe-math-optimizations"):
        with pytest.raises(EmberValueError, match="floating-point"):
            toolchain.compile_library(constant_source(0), extra_flags=[bad])


def test_machine_flags_follow_the_cpu_and_enter_the_build_flags(monkeypatch):
    """-mprefer-vector-width=512 exactly on x86-64 with AVX-512F; the flags of every build
    (hence its cache key) include it."""
    import platform
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(toolchain.CACHE, "_cpu", "x86_64:avx,avx2,fma")
    assert toolchain.machine_flags() == ()
    assert "-mprefer-vector-width=512" not in toolchain._flags((), True)
    monkeypatch.setattr(toolchain.CACHE, "_cpu", "x86_64:avx,avx2,avx512bw,avx512f,fma")
    assert toolchain.machine_flags() == ("-mprefer-vector-width=512",)
    assert toolchain._flags((), True) == (toolchain.FLAGS + ("-mprefer-vector-width=512",
                                                              "-fopenmp"))
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert toolchain.machine_flags() == ()


def test_no_fma_contraction(cache):
    """-ffp-contract=off: a*b+c rounds twice, like NumPy (with FMA ~1/4 of results differ)."""
    src = runtime.C_PRELUDE + textwrap.dedent("""
        EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
          const float *a = bufs[0], *b = bufs[1], *c = bufs[2]; float *o = bufs[3];
          for (int64_t i = 0; i < ints[0]; i++) o[i] = a[i] * b[i] + c[i];
          return 0;
        }
        """)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(100_000).astype(np.float32) for _ in range(3))
    out = np.empty_like(a)
    runtime.load(toolchain.compile_library(src, name="muladd")).entry()((a, b, c, out), [a.size])
    np.testing.assert_array_equal(out, a * b + c)


def test_key_covers_flags_compiler_cpu_and_version():
    base = ("int x;", ("-O3",), "gcc 12", "x86_64:avx2", "0.1.0")
    key = toolchain.cache_key(*base)
    for i, other in enumerate(("int y;", ("-O2",), "gcc 13", "x86_64:avx512f", "0.2.0")):
        changed = list(base)
        changed[i] = other
        assert toolchain.cache_key(*changed) != key
    assert toolchain.cpu_features().startswith(os.uname().machine)


def test_version_is_part_of_the_key(cache):
    src = constant_source(3, uuid.uuid4().hex)
    a = toolchain.compile_library(src, version="1.0")
    b = toolchain.compile_library(src, version="2.0")
    assert a != b and run_constant(a) == run_constant(b) == 3
    assert toolchain.ember_version() == __import__("ember").__version__


def test_compile_error_has_path_and_log(cache):
    src = runtime.C_PRELUDE + "int ember_entry(void **b) { return undefined_name + ; }\n"
    with pytest.raises(CompileError) as info:
        toolchain.compile_library(src, name="broken")
    err = info.value
    assert isinstance(err, RuntimeError)
    assert err.c_path is not None and Path(err.c_path).read_text() == src
    assert err.c_path in str(err) and "error" in err.log
    assert 0 < len(err.log.splitlines()) <= 20
    assert Path(err.c_path).with_suffix(".log").exists()  # the whole log stays next to it
    assert not list(Path(err.c_path).parent.glob(".*tmp"))  # no temporary file left behind


def test_missing_compiler_is_a_clear_error(cache, monkeypatch):
    monkeypatch.setattr(config, "cc", "/nonexistent/ember-test-cc")
    with pytest.raises(CompileError, match=r"C compiler '/nonexistent/ember-test-cc' not found"
                                           r".*EMBER_CC") as info:
        toolchain.compile_library(constant_source(0, uuid.uuid4().hex))
    assert info.value.c_path is None


def test_compiler_that_does_not_work(cache, tmp_path, monkeypatch):
    fake = tmp_path / "fake-cc"
    fake.write_text("#!/bin/sh\necho 'fake: broken' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(config, "cc", str(fake))
    with pytest.raises(CompileError, match="--version` failed"):
        toolchain.compile_library(constant_source(0, uuid.uuid4().hex))


def test_compile_many_in_parallel(cache, logging_cc, monkeypatch):
    script, log = logging_cc
    monkeypatch.setattr(config, "cc", str(script))
    tag = uuid.uuid4().hex
    sources = [(constant_source(i, tag), f"k{i}") for i in range(4)]
    t0 = time.perf_counter()
    paths = toolchain.compile_many(sources)
    elapsed = time.perf_counter() - t0
    assert [run_constant(p) for p in paths] == [0, 1, 2, 3]
    assert len([line for line in invocations(log) if "-shared" in line]) == 4
    print(f"\ncompile_many: 4 small libraries in {elapsed:.3f}s")
    assert toolchain.compile_many(sources) == paths  # all memo hits now


def test_compile_many_raises_after_building_the_rest(cache):
    tag = uuid.uuid4().hex
    good = constant_source(5, tag)
    with pytest.raises(CompileError):
        toolchain.compile_many([good, "this is not C;"])
    toolchain.CACHE.clear()
    so = toolchain.compile_library(good)  # built by compile_many: found on disk
    assert run_constant(so) == 5


def test_debug_level_5_prints_commands(cache, monkeypatch, capsys):
    monkeypatch.setattr(config, "debug", 5)
    toolchain.compile_library(constant_source(2, uuid.uuid4().hex), name="dbg")
    err = capsys.readouterr().err
    assert "[ember.toolchain] compile: " in err and "-ffp-contract=off" in err
    assert "built " in err


def test_corrupted_library_is_rebuilt(cache, logging_cc, monkeypatch):
    script, log = logging_cc
    monkeypatch.setattr(config, "cc", str(script))
    src = constant_source(7, uuid.uuid4().hex)
    path = toolchain.compile_library(src)  # not loaded: it is damaged below
    builds = len(invocations(log))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a truncated library under the final name
    toolchain.CACHE.clear()
    assert toolchain.compile_library(src) == path
    assert len(invocations(log)) == builds + 1  # the checksum caught it: rebuilt
    assert path.read_bytes() == data  # gcc's output is deterministic
    assert run_constant(path) == 7


def test_stale_temporaries_are_removed(cache):
    src = constant_source(9, uuid.uuid4().hex)
    path = toolchain.compile_library(src)
    folder = path.parent
    old, fresh = folder / ".killed.abc.so.tmp", folder / ".running.abc.so.tmp"
    old.write_bytes(b"partial")
    fresh.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * toolchain.STALE_SECONDS,) * 2)
    path.unlink()  # force a rebuild in this folder
    toolchain.CACHE.clear()
    assert run_constant(toolchain.compile_library(src)) == 9
    assert not old.exists() and fresh.exists()


def test_library_without_manifest_is_rebuilt(cache, logging_cc, monkeypatch):
    script, log = logging_cc
    monkeypatch.setattr(config, "cc", str(script))
    src = constant_source(8, uuid.uuid4().hex)
    path = toolchain.compile_library(src)
    builds = len(invocations(log))
    path.with_suffix(".json").unlink()  # e.g. a process died between the two renames
    toolchain.CACHE.clear()
    toolchain.compile_library(src)
    assert len(invocations(log)) == builds + 1
    assert run_constant(path) == 8


SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    go = Path(sys.argv[2])
    deadline = time.time() + 60
    while not go.exists() and time.time() < deadline:  # start compiling together
        time.sleep(0.005)
    import numpy as np
    from ember.compiler.c.build import runtime, toolchain
    src = Path(sys.argv[1]).read_text()
    t0 = time.perf_counter()
    path = toolchain.compile_library(src, name="shared")
    out = np.zeros(1, np.int64)
    runtime.load(path).entry()([out])
    print(int(out[0]), path, f"{time.perf_counter() - t0:.4f}")
    """)


def _spawn(tmp_path: Path, env: dict, src: str, n: int, go: Path) -> list[subprocess.Popen]:
    (tmp_path / "src.c").write_text(src)
    (tmp_path / "child.py").write_text(SCRIPT)
    return [subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(tmp_path / "src.c"),
                              str(go)], env=env, cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(n)]


def _env(cache_dir: Path, cc: Path | None = None) -> dict:
    env = dict(os.environ, EMBER_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    if cc is not None:
        env["EMBER_CC"] = str(cc)
    return env


def _results(procs: list[subprocess.Popen]) -> list[tuple[int, str, float]]:
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        value, path, seconds = out.split()
        results.append((int(value), path, float(seconds)))
    return results


def test_second_process_starts_warm_without_running_the_compiler(tmp_path, logging_cc):
    script, log = logging_cc
    env = _env(tmp_path / "cache", script)
    src = constant_source(11, uuid.uuid4().hex)
    go = tmp_path / "go"
    go.touch()
    [(v1, p1, cold)] = _results(_spawn(tmp_path, env, src, 1, go))
    calls = invocations(log)
    assert v1 == 11 and any("-shared" in line for line in calls)
    [(v2, p2, warm)] = _results(_spawn(tmp_path, env, src, 1, go))
    assert (v2, p2) == (11, p1)
    assert invocations(log) == calls, "the warm process ran the compiler"
    print(f"\ncold compile+load {cold * 1e3:.1f} ms, warm (second process) {warm * 1e3:.2f} ms")


def test_concurrent_processes_compile_the_same_source(tmp_path):
    # big enough that the compiles overlap in time
    body = "\n".join(f"double f{i}(double x) {{ return x * {i} + {i}.5; }}" for i in range(300))
    src = constant_source(13, uuid.uuid4().hex) + body
    go = tmp_path / "go"
    procs = _spawn(tmp_path, _env(tmp_path / "cache"), src, 3, go)
    time.sleep(0.3)
    go.touch()
    results = _results(procs)
    assert {(v, p) for v, p, _ in results} == {(13, results[0][1])}
    folder = Path(results[0][1]).parent
    assert sorted(p.suffix for p in folder.iterdir()) == [".c", ".json", ".so"]  # no temps


def test_ember_info_shows_the_toolchain(tmp_path):
    env = _env(tmp_path / "cache-info")
    out = subprocess.run([sys.executable, "-m", "ember", "info"], capture_output=True, text=True,
                         timeout=120, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert str(tmp_path / "cache-info") in lines["cache"]
    assert "gcc" in lines["compiler"] and "-ffp-contract=off" in out.stdout
    assert lines["cpu"].split()[1].startswith(os.uname().machine)


def test_describe_with_missing_compiler(monkeypatch, cache):
    monkeypatch.setattr(config, "cc", "/nonexistent/cc")
    assert "not found" in toolchain.describe()["compiler"]
