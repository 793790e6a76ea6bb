"""Bundled builds (toolchain.compile_bundle / compile_unit) and the C backend's prebuild."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import runtime, toolchain
from ember.config import config
from ember.errors import CompileError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

REPO = Path(__file__).resolve().parents[2]
PRELUDE = runtime.C_PRELUDE + "\n/* shared */\n"


def unit_source(value: int, marker: str) -> str:
    """A unit with a static helper, a macro and two entries, all named alike in every unit."""
    return PRELUDE + textwrap.dedent(f"""
        /* {marker} */
        #define SCALE {value}
        static const int64_t table[2] = {{SCALE, 2 * SCALE}};
        static int64_t helper(int64_t x) {{ return x * SCALE + table[1]; }}
        EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {{
          int64_t *out = bufs[0];
          out[0] = helper(ints[0]);
          return 0;
        }}
        EMBER_EXPORT int ember_entry_1(void **bufs, const int64_t *ints, const double *floats) {{
          int64_t *out = bufs[0];
          out[0] = -table[0];
          return 0;
        }}
        """)


def run_unit(unit: toolchain.Unit, x: int = 3) -> tuple[int, int]:
    lib = runtime.load(unit.path)
    out = np.zeros(1, np.int64)
    lib.entry(unit.symbol("ember_entry"))([out], [x])
    a = int(out[0])
    lib.entry(unit.symbol("ember_entry_1"))([out])
    return a, int(out[0])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    toolchain.CACHE.clear()
    yield tmp_path / "cache"
    toolchain.CACHE.clear()


@pytest.fixture
def logging_cc(tmp_path, monkeypatch):
    """EMBER_CC that records each invocation and runs gcc; returns a function that reads the
    compiles (``--version`` probes are not compiles)."""
    log = tmp_path / "cc.log"
    script = tmp_path / "logging-cc"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec gcc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(config, "cc", str(script))
    toolchain.CACHE.clear()

    def compiles() -> list[str]:
        lines = log.read_text().splitlines() if log.exists() else []
        return [x for x in lines if "-shared" in x]
    compiles.script = script
    return compiles


def test_bundle_equals_separate_builds(cache):
    marker = uuid.uuid4().hex
    sources = [unit_source(v, marker) for v in (2, 5, 7, 11)]
    units = toolchain.compile_bundle(sources, prelude=PRELUDE)
    assert len({u.path for u in units}) == 1 and len({u.prefix for u in units}) == 4
    bundled = [run_unit(u) for u in units]
    alone = [run_unit(toolchain.Unit(toolchain.compile_library(s))) for s in sources]
    assert bundled == alone == [(3 * v + 2 * v, -v) for v in (2, 5, 7, 11)]


def test_alias_hit_runs_no_compiler(cache, logging_cc):
    marker = uuid.uuid4().hex
    sources = [unit_source(v, marker) for v in range(1, 7)]
    units = toolchain.compile_bundle(sources, prelude=PRELUDE)
    assert len(logging_cc()) == 1  # six units, one compiler run
    toolchain.CACHE.clear()  # forget the memo: the next lookups read the aliases on disk
    again = [toolchain.compile_unit(s) for s in sources]
    assert again == units
    assert toolchain.compile_bundle(sources, prelude=PRELUDE) == units
    assert len(logging_cc()) == 1
    assert [run_unit(u)[1] for u in again] == [-v for v in range(1, 7)]
    aliases = list(cache.glob("c/*/graph-*.alias.json"))
    assert len(aliases) == 6 and not list(cache.glob("c/*/.*.tmp"))


def test_damaged_bundle_is_not_used(cache, logging_cc):
    sources = [unit_source(v, uuid.uuid4().hex) for v in (4, 9)]
    units = toolchain.compile_bundle(sources, prelude=PRELUDE)
    units[0].path.write_bytes(b"not a library")
    toolchain.CACHE.clear()
    unit = toolchain.compile_unit(sources[1])  # the alias is rejected: built alone
    assert unit.prefix == "" and unit.path != units[0].path and run_unit(unit) == (9 * 3 + 18, -9)
    assert len(logging_cc()) == 2


def test_failed_unit_is_reported_and_the_others_are_built(cache):
    marker = uuid.uuid4().hex
    good = [unit_source(v, marker) for v in (3, 4)]
    bad = PRELUDE + "EMBER_EXPORT int ember_entry(void) { return undeclared_name; }\n"
    with pytest.raises(CompileError, match="undeclared_name"):
        toolchain.compile_bundle(good + [bad], prelude=PRELUDE)
    toolchain.CACHE.clear()
    assert [run_unit(toolchain.compile_unit(s))[1] for s in good] == [-3, -4]


def test_sources_without_the_prelude_are_built_alone(cache):
    marker = uuid.uuid4().hex
    other = unit_source(8, marker).replace("/* shared */", "/* not shared */")
    units = toolchain.compile_bundle([unit_source(6, marker), other, unit_source(5, marker)],
                                     prelude=PRELUDE)
    assert units[1].prefix == "" and units[0].path == units[2].path != units[1].path
    assert [run_unit(u)[1] for u in units] == [-6, -8, -5]


CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    go = Path(sys.argv[1])
    deadline = time.time() + 60
    while not go.exists() and time.time() < deadline:
        time.sleep(0.005)
    import numpy as np
    from ember.compiler.c.build import runtime, toolchain
    prelude = runtime.C_PRELUDE + "\\n/* shared */\\n"
    sources = Path(sys.argv[2]).read_text().split("\\n//SPLIT\\n")
    units = toolchain.compile_bundle(sources, prelude=prelude, max_workers=1)
    out = np.zeros(1, np.int64)
    values = []
    for u in units:
        runtime.load(u.path).entry(u.symbol("ember_entry_1"))([out])
        values.append(int(out[0]))
    print(" ".join(map(str, values)))
    """)


def test_concurrent_processes_bundle_overlapping_sources(tmp_path):
    marker = uuid.uuid4().hex
    # big enough that the compiles overlap
    pad = "\n".join(f"static double pad{i}(double x) {{ return x * {i} + 0.5; }}"
                    for i in range(200))
    sources = [unit_source(v, marker) + pad for v in range(1, 9)]
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    (tmp_path / "child.py").write_text(CHILD)
    sets = [sources[:6], sources[2:], sources[::-1]]
    go = tmp_path / "go"
    procs = []
    for k, chosen in enumerate(sets):
        (tmp_path / f"src{k}.txt").write_text("\n//SPLIT\n".join(chosen))
        procs.append(subprocess.Popen([sys.executable, str(tmp_path / "child.py"), str(go),
                                       str(tmp_path / f"src{k}.txt")], env=env, cwd=REPO,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    go.touch()
    for p, chosen in zip(procs, sets):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert [int(x) for x in out.split()] == [-sources.index(s) - 1 for s in chosen]
    assert not list((tmp_path / "cache").glob("c/*/.*.tmp"))


def test_c_backend_hits_a_prebuilt_bundle(cache, logging_cc):
    graphs = []

    def collect(graph, example_inputs):
        graphs.append(graph)
        return cbackend._eager_runner(graph)

    def f(x, y):
        return (x * y + 1).sin()

    def g(x):
        return x.relu() - 2 * x

    x, y = ember.randn(5, 3), ember.randn(3)
    for fn, args in ((f, (x, y)), (g, (x,))):
        ember.compiler.reset()
        ember.compile(fn, backend=collect)(*args)
    sources = [cbackend.c_source(gr) for gr in graphs]
    units = cbackend.prebuild(sources)
    assert len({u.path for u in units}) == 1 and len(logging_cc()) == 1
    toolchain.CACHE.clear()
    for fn, args in ((f, (x, y)), (g, (x,))):
        ember.compiler.reset()
        got = ember.compile(fn, backend="c")(*args)
        assert cbackend.last_compiled().path == units[0].path
        np.testing.assert_allclose(got.numpy(), fn(*args).numpy(), rtol=1e-6)
    assert len(logging_cc()) == 1, "the C backend ran the compiler for a prebuilt graph"


def test_generated_units_with_gemms_and_shared_kernels_bundle_in_one_run(cache, logging_cc):
    """Real units share one bundle: GEMM helpers (a typedef'd job struct) and reduction
    kernels are renamed per unit, so the bundle compiles in one compiler run (a clash would
    rebuild every unit alone)."""
    graphs = []

    def capture(graph, example_inputs):
        graphs.append(graph)
        return cbackend._eager_runner(graph)

    def f(x, w, b):
        h = ember.nn.functional.gelu(x @ w + b)  # a GEMM with a fused epilogue
        return (h * 2 + 1).sum(-1) + (h * 2 + 1).amax(-1)  # a reduction kernel

    for m in (3, 5):
        ember.compiler.reset()
        ember.compile(f, backend=capture)(ember.randn(m, 4), ember.randn(4, 6), ember.randn(6))
    sources = [cbackend.c_source(g) for g in graphs]
    assert all(s is not None for s in sources) and len(set(sources)) == 2
    assert all("ember_gemm_job_" in s for s in sources)
    units = cbackend.prebuild(sources)
    # the C backend's builds only: the eager run above may build eager's own C kernels (GELU)
    # into this test's cache when no earlier test in the process loaded them
    backend_builds = [c for c in logging_cc() if "/cache/c/" in c]
    assert len(backend_builds) == 1, backend_builds   # one bundle, no unit built alone
    assert len({u.path for u in units}) == 1 and units[0].prefix != units[1].prefix


def test_bundle_unit_renames_attributed_statics_and_typedef_structs():
    body = ("__attribute__((noinline)) static void kernel3(float *restrict buf0) { }\n"
            "typedef struct {\n  int n;\n} job_t;\n"
            "EMBER_EXPORT int ember_entry(void **b, const int64_t *i, const double *f) {\n"
            "  job_t j; (void)j; kernel3(0); return 0;\n}\n")
    out = toolchain.bundle_unit(body, "eb7_")
    assert "static void eb7_kernel3(" in out and "eb7_kernel3(0)" in out
    assert "} eb7_job_t;" in out and "eb7_job_t j;" in out and "int eb7_ember_entry(" in out
