"""Loading and calling compiled libraries (ember/compiler/c/build/runtime.py) and BLAS from C."""

from __future__ import annotations

import ast
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import timeit
import uuid
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.compiler.c.build import blas, runtime, toolchain
from ember.config import config
from ember.errors import EmberRuntimeError, EmberTypeError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

REPO = Path(__file__).resolve().parents[2]

ADD = textwrap.dedent("""
    EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
      const float *a = bufs[0], *b = bufs[1];
      float *out = bufs[2];
      const float alpha = (float)floats[0];
      for (int64_t i = 0; i < ints[0]; i++) out[i] = a[i] + alpha * b[i];
      return 0;
    }
    """)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path / "cache"))
    toolchain.CACHE.clear()
    yield tmp_path / "cache"
    toolchain.CACHE.clear()


def build(src: str, name: str = "t", **kw) -> runtime.Library:
    return runtime.load(toolchain.compile_library(src, name=name, **kw))


def _per_call_us(fn, number: int = 20000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def test_add_round_trip_and_call_overhead(cache):
    entry = build(runtime.C_PRELUDE + ADD, "add").entry()
    rng = np.random.default_rng(0)
    for n in (0, 1, 17, 1000):
        a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        out = np.full(n, np.nan, np.float32)
        entry([a, b, out], [n], [0.5])
        np.testing.assert_array_equal(out, a + np.float32(0.5) * b)
    a = b = out = np.ones(16, np.float32)
    args, ints, floats = (a, b, out), [16], [1.0]
    fast = _per_call_us(lambda: entry(args, ints, floats))
    bufs = (ctypes.c_void_p * 3)(*(x.ctypes.data for x in args))
    pb = ctypes.addressof(bufs)
    bare = _per_call_us(lambda: entry._fn(pb, entry._pi, entry._pf))
    numpy_add = _per_call_us(lambda: np.add(a, b, out=out))
    slow_entry = runtime.Library(entry.library.path).entry()
    slow_entry._tramp = None  # the path for libraries without the prelude
    slow = _per_call_us(lambda: slow_entry(args, ints, floats))
    many = tuple(np.ones(16, np.float32) for _ in range(32))
    wide = _per_call_us(lambda: entry(many, ints, floats))
    print(f"\nper-call overhead (3 arrays, 16 floats): entry {fast:.2f} us, bare ctypes call "
          f"{bare:.2f} us, entry without the prelude {slow:.2f} us, np.add {numpy_add:.2f} us; "
          f"32 arrays: {wide:.2f} us")


def test_arguments_are_repacked_when_they_change(cache):
    entry = build(runtime.C_PRELUDE + ADD, "add").entry()
    a, b = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    out = np.zeros(8, np.float32)
    entry([a, b, out], [8], [1.0])
    np.testing.assert_array_equal(out, a + 1)
    ints = [4]
    entry([a, b, out], ints, (3.0,))
    np.testing.assert_array_equal(out, np.r_[a[:4] + 3, a[4:] + 1])
    ints[0] = 8  # a mutated list is noticed
    entry([b, a, out], ints, (3.0,))
    np.testing.assert_array_equal(out, 1 + 3 * a)
    entry([a, b, out, out], [8, 99], [2.0, 0.0])  # different arity: new argument buffers
    np.testing.assert_array_equal(out, a + 2)


def test_views_subclasses_and_non_arrays(cache):
    entry = build(runtime.C_PRELUDE + ADD, "add").entry()
    base = np.arange(20, dtype=np.float32)
    out = np.zeros(10, np.float32)
    entry([base[10:], base[:10], out], [10], [1.0])  # views start at their own data pointer
    np.testing.assert_array_equal(out, base[10:] + base[:10])

    class Sub(np.ndarray):
        pass

    sub = base[:10].view(Sub)
    entry([sub, sub, out], [10], [1.0])  # not a plain ndarray: the slow path packs it
    np.testing.assert_array_equal(out, 2 * base[:10])
    with pytest.raises(EmberTypeError, match=r"argument 1 is list"):
        entry([out, [1.0] * 10, out], [10], [1.0])


def test_library_without_prelude(cache):
    lib = build("#include <stdint.h>\n" + ADD.replace("EMBER_EXPORT ", ""), "plain")
    assert lib.abi_version is None and lib._call_arrays is None
    a = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    lib.entry()([a, a, out], [5], [2.0])
    np.testing.assert_array_equal(out, 3 * a)


def test_error_codes_and_messages(cache):
    src = runtime.C_PRELUDE + textwrap.dedent("""
        EMBER_EXPORT const char *ember_error_message(int code) {
          return code == 7 ? "size mismatch in kernel 2" : 0;
        }
        EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
          return (int)ints[0];
        }
        EMBER_EXPORT int other(void **bufs, const int64_t *ints, const double *floats) {
          return 0;
        }
        """)
    lib = build(src, "errors")
    with pytest.raises(EmberRuntimeError, match=r"returned error code 7: size mismatch"):
        lib.entry()([], [7], [])
    with pytest.raises(EmberRuntimeError, match=r"returned error code 3$"):
        lib.entry()([], [3], [])
    lib.entry("other")([], [], [])
    with pytest.raises(EmberRuntimeError, match=r"has no function 'missing'"):
        lib.entry("missing")
    assert lib.entry() is lib.entry() and runtime.load(lib.path) is lib


def test_abi_mismatch_and_unloadable_files(cache, tmp_path):
    path = toolchain.compile_library("int ember_abi_version(void) { return 99; }\n", name="abi")
    with pytest.raises(EmberRuntimeError, match="ABI 99"):
        runtime.load(path)
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF not really")
    with pytest.raises(EmberRuntimeError, match="cannot load"):
        runtime.load(junk)


def test_concurrent_calls_from_threads(cache):
    entry = build(runtime.C_PRELUDE + ADD, "add").entry()
    n = 100_000
    errors = []

    def work(k: int) -> None:
        a = np.full(n, k, np.float32)
        out = np.empty(n, np.float32)
        for _ in range(50):
            entry([a, a, out], [n], [float(k)])
            if not (out == k + k * k).all():
                errors.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_num_threads_reaches_generated_code(cache):
    src = runtime.C_PRELUDE + "EMBER_EXPORT int threads(void) { return ember_num_threads; }\n"
    lib = build(src, "threads")
    fn = lib.dll.threads
    before = ember.get_num_threads()
    assert fn() == before
    try:
        ember.set_num_threads(1)
        assert fn() == 1
        ember.set_num_threads(3)
        assert fn() == 3
    finally:
        ember.set_num_threads(before)
    assert fn() == before


OPENMP_CHILD = textwrap.dedent("""
    import ember
    from ember.compiler.c.build import runtime, toolchain
    src = runtime.C_PRELUDE + '''
    #include <omp.h>
    EMBER_EXPORT int threads(void) {
      int n = 0;
      #pragma omp parallel num_threads(ember_num_threads)
      {
        #pragma omp single
        n = omp_get_num_threads();
      }
      return n;
    }
    '''
    fn = runtime.load(toolchain.compile_library(src, name="omp", openmp=True)).dll.threads
    seen = [ember.get_num_threads(), fn()]
    ember.set_num_threads(1)
    seen.append(fn())
    ember.set_num_threads(2)
    seen.append(fn())
    print(seen)
    """)


def test_openmp_uses_embers_thread_count(tmp_path):
    # in a child process: GNU OpenMP must not run in a process that forks later (pytest does)
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", OPENMP_CHILD], capture_output=True, text=True,
                         timeout=180, env=env, cwd=REPO)
    assert out.returncode == 0, out.stderr
    default, *seen = eval(out.stdout)
    assert seen == [default, 1, 2]


def test_runtime_imports_nothing_from_the_compiler():
    """ARCHITECTURE.md §1: AOT packages load with runtime.py alone."""
    path = REPO / "ember" / "compiler" / "c" / "build" / "runtime.py"
    allowed_ember = {"ember.errors", "ember.config", "ember.dtypes", "ember.device",
                     "ember.ops", "ember.ops._parallel", "ember.tensor", "ember._lazy"}
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import in runtime.py"
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            if top == "ember":
                assert name in allowed_ember, f"runtime.py imports {name}"
            else:
                assert top in sys.stdlib_module_names or top in ("numpy", "threadpoolctl") or \
                    top.startswith("scipy_openblas"), f"runtime.py imports {name}"


# --- BLAS ------------------------------------------------------------------------------------

GEMM = textwrap.dedent("""
    EMBER_EXPORT int ember_entry(void **bufs, const int64_t *ints, const double *floats) {
      const int64_t m = ints[0], n = ints[1], k = ints[2];
      ember_sgemm(EMBER_CBLAS_ROW_MAJOR, EMBER_CBLAS_NO_TRANS, EMBER_CBLAS_NO_TRANS, m, n, k,
                  1.0f, (const float *)bufs[0], k, (const float *)bufs[1], n, 0.0f,
                  (float *)bufs[2], n);
      ember_dgemm(EMBER_CBLAS_ROW_MAJOR, EMBER_CBLAS_NO_TRANS, EMBER_CBLAS_TRANS, m, n, k,
                  1.0, (const double *)bufs[3], k, (const double *)bufs[4], k, 0.0,
                  (double *)bufs[5], n);
      return 0;
    }
    """)


def test_numpy_openblas_is_found():
    info = runtime.load_blas()
    if info is None:
        pytest.skip("this NumPy does not bundle OpenBLAS")
    assert os.path.exists(info.path) and "openblas" in os.path.basename(info.path)
    assert info.sgemm is not None and info.dgemm is not None
    assert info.sgemm.endswith("64_") == info.int64 or "USE64BITINT" in info.config
    decl = blas.c_declarations(info)
    assert f"#define ember_sgemm {info.sgemm}" in decl and "ember_blas_int" in decl


def test_sgemm_and_dgemm_from_generated_c(cache):
    if runtime.load_blas() is None:
        pytest.skip("this NumPy does not bundle OpenBLAS")
    lib = build(runtime.C_PRELUDE + blas.c_declarations() + GEMM, "gemm")
    rng = np.random.default_rng(1)
    m, n, k = 37, 53, 29
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    a64, bt64 = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    c, c64 = np.zeros((m, n), np.float32), np.zeros((m, n))
    lib.entry()([a, b, c, a64, bt64, c64], [m, n, k], [])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(c64, a64 @ bt64.T, rtol=1e-12, atol=1e-12)


BLAS_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from ember.compiler.c.build import runtime
    # runtime.load alone (as an AOT package would) finds BLAS for the undefined symbols
    lib = runtime.load(sys.argv[1])
    a = np.arange(6, dtype=np.float32).reshape(2, 3); b = np.ones((3, 2), np.float32)
    c = np.zeros((2, 2), np.float32)
    z = np.zeros((2, 3)); c64 = np.zeros((2, 2))
    lib.entry()([a, b, c, z, z, c64], [2, 2, 3], [])
    assert (c == a @ b).all(), c
    print("ok")
    """)


def test_a_fresh_process_loads_a_blas_library_without_the_toolchain(cache, tmp_path):
    if runtime.load_blas() is None:
        pytest.skip("this NumPy does not bundle OpenBLAS")
    path = toolchain.compile_library(runtime.C_PRELUDE + blas.c_declarations() + GEMM,
                                     name=f"gemm_{uuid.uuid4().hex[:8]}")
    env = dict(os.environ, EMBER_CC="/nonexistent/cc")  # no compiler needed to run it
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", BLAS_CHILD, str(path)], capture_output=True,
                         text=True, timeout=120, env=env, cwd=REPO)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
