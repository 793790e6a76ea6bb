"""Threads kept awake across one C call (``codegen/awake.py``, ``csrc/ember_pool.h``): a unit
whose products have at most 4 rows brackets its entries with the pool's begin and end and
splits those products over their columns on the pool's threads.  Checked: which units get it,
results at 1 and 2 threads (the same bits for one-row products: each part is one BLAS gemv over
whole columns), that the split path runs at 2 threads and not at 1, no thread started at 1
thread, no CPU spent between calls, a fork()ed child, and two Python threads calling one
library at once.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest

import ember
from ember.compiler.c import backend as cbackend
from ember.compiler.c.build import blas, runtime
from ember.compiler.c.codegen import awake
from ember.config import config

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.skipif(shutil.which(config.cc.split()[-1]) is None, reason="no C compiler"),
    pytest.mark.skipif(blas.load_blas() is None, reason="the split runs on the BLAS path"),
]


@pytest.fixture(autouse=True)
def _threads(monkeypatch):
    monkeypatch.setattr(config, "c_gemm", "auto")
    before = ember.get_num_threads()
    ember.compiler.reset()
    yield
    ember.set_num_threads(before)
    ember.compiler.reset()


def _weights(n: int = 1152, k: int = 384, seed: int = 0) -> tuple:
    g = np.random.default_rng(seed)
    return (g.standard_normal((n, k), dtype=np.float32),
            g.standard_normal(n, dtype=np.float32))


def _linear(x, w, b):
    return ember.nn.functional.gelu(ember.nn.functional.linear(x, w, b))


def _compiled(rows: int, n: int = 1152, k: int = 384):
    w, b = _weights(n, k)
    x = np.random.default_rng(1).standard_normal((rows, k), dtype=np.float32)
    fc = ember.compile(_linear, backend="c", fullgraph=True)
    args = [ember.tensor(a) for a in (x, w, b)]
    fc(*args)
    return fc, args, (x, w, b)


def _stats(cg) -> list:
    out = (ctypes.c_int64 * 3)()
    runtime.load(cg.path).dll.ember_pool_stats(out)
    return list(out)


def test_units_with_one_row_products_get_the_pool_and_others_do_not(monkeypatch):
    w, b = (ember.tensor(a) for a in _weights())
    one = ember.compiler.codegen(_linear, ember.randn(1, 384), w, b)
    assert "ember_pool_begin_();" in one and "static int ember_entry_body_(" in one
    assert "EMBER_POOL_TAKES_(m) ((m) <= EMBER_POOL_SMALL_M" in one
    many = ember.compiler.codegen(_linear, ember.randn(64, 384), w, b)
    assert "ember_pool_begin_" not in many and "#define EMBER_POOL_SMALL_M" not in many
    tiny = ember.compiler.codegen(_linear, ember.randn(1, 16), ember.randn(256, 16),
                                  ember.randn(256))   # 4096 multiply-adds: not worth a split
    assert "ember_pool_begin_" not in tiny
    monkeypatch.setattr(awake, "ENABLED", False)
    ember.compiler.reset()
    off = ember.compiler.codegen(_linear, ember.randn(1, 384), w, b)
    assert "ember_pool_begin_" not in off


@pytest.mark.parametrize("rows", [1, 3])
def test_results_at_one_and_two_threads(rows):
    fc, args, (x, w, b) = _compiled(rows)
    cg = cbackend.last_compiled()
    ember.set_num_threads(1)
    one = fc(*args).numpy().copy()
    ember.set_num_threads(2)
    twos = [fc(*args).numpy().copy() for _ in range(20)]
    want = torch.nn.functional.gelu(torch.nn.functional.linear(
        torch.tensor(x), torch.tensor(w), torch.tensor(b))).numpy()
    for two in twos:
        np.testing.assert_allclose(two, want, rtol=1e-5, atol=1e-5)
        if rows == 1:   # each part is one gemv over whole columns: the one-thread sums
            assert two.tobytes() == one.tobytes()
    np.testing.assert_allclose(one, want, rtol=1e-5, atol=1e-5)
    split, alone, _ = _stats(cg)
    # the pool's path ran: split, or alone (a busy machine: then later entries skip it)
    assert split + alone >= 1


def test_one_thread_starts_no_worker_and_skips_the_pool():
    ember.set_num_threads(1)
    before = set(os.listdir("/proc/self/task"))
    fc, args, _ = _compiled(1, n=1088)   # a shape (a library) of this test only
    cg = cbackend.last_compiled()
    for _ in range(20):
        fc(*args)
    assert _stats(cg) == [0, 0, 0]
    assert set(os.listdir("/proc/self/task")) - before == set()
    ember.set_num_threads(2)
    for _ in range(5):
        fc(*args)
    split, alone, _ = _stats(cg)
    assert split + alone >= 1 and set(os.listdir("/proc/self/task")) - before


def _cpu_of_threads(tids: set) -> int:
    total = 0
    for t in tids:
        try:
            with open(f"/proc/self/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])   # utime + stime, clock ticks
    return total


def test_workers_do_not_spin_after_the_call_returns():
    ember.set_num_threads(2)
    before = set(os.listdir("/proc/self/task"))
    fc, args, _ = _compiled(1, n=1024)   # a library of this test only: its pool starts here
    for _ in range(200):
        fc(*args)
    workers = set(os.listdir("/proc/self/task")) - before
    assert workers, "no pool thread was started at 2 threads"
    time.sleep(0.05)
    t0 = _cpu_of_threads(workers)
    time.sleep(0.5)
    ticks = _cpu_of_threads(workers) - t0
    # a spinning worker would use ~50 ticks (100 Hz) in 0.5 s
    assert ticks <= 2, f"pool threads used {ticks} clock ticks while no call ran"


def test_idle_workers_end_and_start_again(monkeypatch):
    monkeypatch.setattr(awake, "EXIT_S", 1)   # (part of the plan digest: a library of its own)
    ember.set_num_threads(2)
    before = set(os.listdir("/proc/self/task"))
    fc, args, _ = _compiled(1, n=1216)
    want = fc(*args).numpy().copy()
    for _ in range(10):
        fc(*args)
    assert set(os.listdir("/proc/self/task")) - before, "no pool thread was started"
    deadline = time.time() + 30
    while set(os.listdir("/proc/self/task")) - before and time.time() < deadline:
        time.sleep(0.2)
    assert not set(os.listdir("/proc/self/task")) - before, "the idle worker did not end"
    assert fc(*args).numpy().tobytes() == want.tobytes()
    assert set(os.listdir("/proc/self/task")) - before, "the next call started no worker"


def test_forked_child_runs_the_product_on_one_thread():
    if not hasattr(os, "fork"):
        pytest.skip("needs fork()")
    ember.set_num_threads(2)
    fc, args, _ = _compiled(1)
    want = fc(*args).numpy().copy()   # the parent's pool is awake during this call
    pid = os.fork()
    if pid == 0:   # pragma: no cover - the child
        code = 5
        try:
            got = fc(*args).numpy()
            code = 0 if got.tobytes() == want.tobytes() else 6
        finally:
            os._exit(code)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("a fork()ed child running a one-row product hung")


def test_two_python_threads_call_one_library_at_once():
    ember.set_num_threads(2)
    _, args, _ = _compiled(1)
    fc = ember.compile(_linear, backend="c", fullgraph=True, mode="reduce-overhead")
    fc(*args)
    want = fc(*args).numpy().copy()
    bad: list = []

    def run() -> None:
        for _ in range(200):
            if fc(*args).numpy().tobytes() != want.tobytes():
                bad.append(1)

    ts = [threading.Thread(target=run) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts) and not bad
