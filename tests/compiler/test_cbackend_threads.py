"""OpenMP in the C backend: on by default, thread count from ``ember.set_num_threads``, results
bitwise equal to serial code, and never a multi-thread region in a ``fork()``ed child.

GNU libgomp keeps its worker threads in a pool that a forked child inherits without the threads:
a child that enters a multi-thread region after the parent ran one waits forever.  The runtime
sets the generated code's thread count to 1 in a forked child and every region is guarded by
``if(ember_num_threads > 1 && ...)``.  The fork tests run a 2-thread region in this process,
fork, run compiled code in the child and kill it if it has not finished in time.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import time

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import runtime
from ember.config import config

pytestmark = [
    pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None, reason="no C compiler"),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()"),
]

F = ember.nn.functional
N = 1 << 18   # far above codegen_c.OMP_MIN_ITERATIONS: the regions really split
CHILD_TIMEOUT = 60.0


@pytest.fixture(autouse=True)
def _threads(monkeypatch):
    monkeypatch.setattr(config, "c_openmp", True)
    before = ember.get_num_threads()
    ember.compiler.reset()
    yield
    ember.set_num_threads(before)
    ember.compiler.reset()


def _chain(x, w, b):
    return F.gelu(x * w + b) * ember.sigmoid(x)


def _rows(x):
    return ember.softmax(x * 0.5, -1), ember.log_softmax(x, -1)


def _inputs():
    g = np.random.default_rng(0)
    return [ember.tensor(g.standard_normal(N, dtype=np.float32)) for _ in range(3)]


def _numpy(out):
    return [t.numpy().copy() for t in (out if isinstance(out, (tuple, list)) else (out,))]


def _lib(cg):
    return runtime.load(cg.path).dll


def test_openmp_is_on_by_default_for_kernels_and_row_kernels():
    assert os.environ.get("EMBER_C_OPENMP", "1") == "0" or type(config).c_openmp is True
    x = ember.randn(64, 1024)
    src = ember.compiler.codegen(lambda a: ember.softmax(a + 1, -1) * 2, x)
    # the row kernel and the pointwise kernel (a flat loop: also `simd`, codegen_c.omp_loops)
    assert src.count("#pragma omp parallel for num_threads(ember_num_threads) "
                     "if(ember_num_threads > 1") == 1, src
    assert src.count("#pragma omp parallel for simd num_threads(ember_num_threads) "
                     "if(parallel: ember_num_threads > 1") == 1, src


def test_set_num_threads_sets_the_count_generated_code_uses():
    fc = ember.compile(_chain, backend="c")
    fc(*_inputs())
    lib = _lib(cbackend.last_compiled())
    for n in (1, 2, 1):
        ember.set_num_threads(n)
        assert lib.ember_get_num_threads() == n
    ember.set_num_threads(2)
    fc2 = ember.compile(_rows, backend="c")  # a library loaded later starts with the count
    fc2(ember.randn(8, 16))
    assert _lib(cbackend.last_compiled()).ember_get_num_threads() == 2


@pytest.mark.parametrize("fn,shape", [(_chain, None), (_rows, (512, 1000))],
                         ids=["gelu_chain", "softmax_rows"])
def test_parallel_results_are_bitwise_equal_to_serial(fn, shape, monkeypatch):
    args = _inputs() if shape is None else [ember.randn(*shape)]
    fc = ember.compile(fn, backend="c", fullgraph=True)
    ember.set_num_threads(2)
    two = _numpy(fc(*args))
    ember.set_num_threads(1)
    one = _numpy(fc(*args))
    monkeypatch.setattr(config, "c_openmp", False)
    ember.compiler.reset()
    serial = _numpy(ember.compile(fn, backend="c", fullgraph=True)(*args))
    assert "#pragma omp" not in cbackend.last_compiled().source
    for a, b, c in zip(two, one, serial):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    eager = _numpy(fn(*args))
    for a, e in zip(two, eager):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


def _layer_norm_grads(fn, x0, w0, b0, g0):
    x, w, b = (ember.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    y = fn(x, w, b)
    y.backward(ember.tensor(g0))
    return [y.detach().numpy().copy()] + [t.grad.numpy().copy() for t in (x, w, b)]


def test_layer_norm_forward_and_backward_bitwise_equal_to_serial(monkeypatch):
    """The rows of layer_norm and of its backward run on threads; the backward's column sums
    (dW, db) run in fixed row chunks, so any thread count gives the serial build's bits."""
    g = np.random.default_rng(1)
    x0, g0 = (g.standard_normal((512, 1000), dtype=np.float32) for _ in range(2))
    w0, b0 = (g.standard_normal(1000, dtype=np.float32) for _ in range(2))

    def f(x, w, b):
        return F.layer_norm(x, (1000,), w, b)

    fc = ember.compile(f, backend="c")
    ember.set_num_threads(2)
    two = _layer_norm_grads(fc, x0, w0, b0, g0)
    src = cbackend.last_compiled().source  # the backward graph's kernel
    assert "#pragma omp" in src and "ch_ < 16" in src
    ember.set_num_threads(1)
    one = _layer_norm_grads(fc, x0, w0, b0, g0)
    monkeypatch.setattr(config, "c_openmp", False)
    ember.compiler.reset()
    serial = _layer_norm_grads(ember.compile(f, backend="c"), x0, w0, b0, g0)
    assert "#pragma omp" not in cbackend.last_compiled().source
    for a, b, c in zip(two, one, serial):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    eager = _layer_norm_grads(f, x0, w0, b0, g0)
    for a, e in zip(two, eager):
        # column sums over 512 rows: eager sums float32 per row block, C in double
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5 * 512)


def _wait(pid: int, timeout: float) -> int | None:
    """The child's exit code, or None after killing it when it ran past ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def _fork_run(child, timeout=CHILD_TIMEOUT) -> int | None:
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 70
        try:
            code = child()
        finally:
            os._exit(code)
    return _wait(pid, timeout)


def _parent_ran_a_parallel_region():
    """Compile the chain and run it on 2 threads in this process (a real libgomp team)."""
    ember.set_num_threads(2)
    fc = ember.compile(_chain, backend="c", fullgraph=True)
    args = _inputs()
    want = _numpy(fc(*args))[0]
    lib = _lib(cbackend.last_compiled())
    assert lib.ember_get_num_threads() == 2
    return fc, args, want, lib


def test_forked_child_runs_compiled_code_on_one_thread():
    fc, args, want, lib = _parent_ran_a_parallel_region()

    def child():
        if lib.ember_get_num_threads() != 1 or ember.get_num_threads() != 2:
            return 3
        ember.set_num_threads(2)  # asking again does not re-enable OpenMP in the child
        if lib.ember_get_num_threads() != 1:
            return 4
        got = _numpy(fc(*args))[0]
        row = ember.compile(_rows, backend="c")(ember.randn(256, 512))  # a new library
        ok = got.tobytes() == want.tobytes() and row[0].shape == (256, 512)
        ok = ok and _lib(cbackend.last_compiled()).ember_get_num_threads() == 1
        return 0 if ok else 5

    assert _fork_run(child) == 0, "child hung (killed) or computed a different result"
    assert lib.ember_get_num_threads() == 2  # the parent keeps its threads


def _mp_child(fc, args, want):
    got = _numpy(fc(*args))[0]
    os._exit(0 if got.tobytes() == want.tobytes() else 5)


def test_multiprocessing_fork_child_finishes():
    fc, args, want, _ = _parent_ran_a_parallel_region()
    p = multiprocessing.get_context("fork").Process(target=_mp_child, args=(fc, args, want))
    p.start()
    p.join(CHILD_TIMEOUT)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail("a multiprocessing 'fork' child running compiled code hung")
    assert p.exitcode == 0


@pytest.mark.slow
def test_the_fork_hazard_is_real_without_the_guard():
    # the control: forcing 2 threads in the child reproduces libgomp's hang, so the tests
    # above exercise the case they claim to
    fc, args, _, lib = _parent_ran_a_parallel_region()

    def child():
        lib.ember_set_num_threads(2)
        fc(*args)
        return 0

    assert _fork_run(child, timeout=5.0) is None, (
        "a 2-thread OpenMP region in a forked child finished: this libgomp survives fork "
        "(the guard is then harmless but no longer needed)")
