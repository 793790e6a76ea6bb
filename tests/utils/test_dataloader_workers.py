"""DataLoader with worker processes (spawn).  Each loader start costs about a second per worker,
so these tests are few and small; every loader has a ``timeout`` so that a broken worker fails
the test instead of hanging it."""

from __future__ import annotations

import gc
import time

import pytest

import ember
from ember.utils.data import DataLoader
from tests.utils._compare import assert_same
from tests.utils._datasets import (
    DyingDataset,
    FailingDataset,
    RangeIterable,
    SlowDataset,
    SquaresDataset,
    WorkerInfoDataset,
    record_init,
)

TIMEOUT = 60  # seconds a worker may take for one batch (spawn start-up included)


def _wait_dead(workers, limit=10.0):
    end = time.monotonic() + limit
    while any(w.is_alive() for w in workers) and time.monotonic() < end:
        time.sleep(0.05)
    return not any(w.is_alive() for w in workers)


def test_map_style_workers_match_main_process_in_order_and_persist():
    ds = SquaresDataset(10)
    expected = list(DataLoader(ds, batch_size=3))
    dl = DataLoader(ds, batch_size=3, num_workers=2, timeout=TIMEOUT, persistent_workers=True)
    assert len(dl) == 4
    first = list(dl)
    workers = list(dl._iterator._workers)
    second = list(dl)   # the same workers serve the second epoch
    assert_same(first, expected)
    assert_same(second, expected)
    assert all(w.is_alive() for w in workers) and dl._iterator._workers == workers
    dl._iterator._shutdown_workers()
    assert _wait_dead(workers)


def test_iterable_dataset_two_workers_yield_every_item_once():
    dl = DataLoader(RangeIterable(0, 11), batch_size=2, num_workers=2, timeout=TIMEOUT,
                    persistent_workers=True)
    for _epoch in range(2):   # persistent workers restart their dataset iterators
        items = [x for batch in dl for x in batch.tolist()]
        assert sorted(items) == list(range(11))
    dl._iterator._shutdown_workers()


def test_worker_exception_is_reraised_with_traceback_and_workers_stop():
    dl = DataLoader(FailingDataset(8, bad=3), batch_size=2, num_workers=2, timeout=TIMEOUT)
    it = iter(dl)
    workers = list(it._workers)
    assert next(it).tolist() == [0, 1]
    with pytest.raises(ValueError) as info:
        next(it)
    msg = str(info.value)
    assert "Caught ValueError in DataLoader worker process 1." in msg
    assert "Traceback (most recent call last)" in msg and "bad sample 3" in msg
    assert "_datasets.py" in msg   # the worker's own frames are in the text
    assert next(it).tolist() == [4, 5]   # like torch, the iterator goes on after an error
    it.self_ref = it   # a reference cycle: only the cycle collector frees the iterator
    del it, info
    gc.collect()
    assert _wait_dead(workers)   # deleting the iterator early shuts the workers down


def test_worker_info_seeding_and_shuffle_determinism():
    ds = WorkerInfoDataset(6)

    def run(num_workers):
        g = ember.Generator().manual_seed(7)
        kw = {"num_workers": num_workers, "timeout": TIMEOUT} if num_workers else {}
        if num_workers:
            kw["worker_init_fn"] = record_init
        return list(DataLoader(ds, batch_size=2, shuffle=True, generator=g, **kw))

    a = run(2)
    b = run(2)
    ref = run(0)
    # Same sample order as in the main process with the same generator seed.
    assert [x["i"].tolist() for x in a] == [x["i"].tolist() for x in ref]
    assert sorted(i for x in a for i in x["i"].tolist()) == list(range(6))
    # Batches go round-robin to the workers; each knows its id, the worker count, its dataset.
    assert [x["id"].tolist() for x in a] == [[0, 0], [1, 1], [0, 0]]
    assert all(x["num_workers"].tolist() == [2, 2] for x in a)
    assert all(x["same_dataset"].tolist() == [True, True] for x in a)
    assert [x["init"] for x in a] == [["0", "0"], ["1", "1"], ["0", "0"]]
    # Worker w is seeded with base_seed + w, and ember's default generator with that seed.
    seeds = {x["id"][0].item(): x["seed"][0].item() for x in a}
    assert seeds[1] == seeds[0] + 1
    assert all(x["initial_seed"].tolist() == x["seed"].tolist() for x in a)
    # The base seed comes from the loader's generator, so a rerun draws the same numbers.
    assert [x["draw"].tolist() for x in a] == [x["draw"].tolist() for x in b]
    assert [x["seed"].tolist() for x in a] == [x["seed"].tolist() for x in b]


def test_timeout_and_dead_worker_errors():
    it = iter(DataLoader(SlowDataset(2, delay=3.0), num_workers=1, timeout=1))
    workers = list(it._workers)
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 1 seconds"):
        next(it)
    del it
    gc.collect()
    assert _wait_dead(workers)
    it = iter(DataLoader(DyingDataset(), num_workers=1, timeout=TIMEOUT))
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited "
                                           r"unexpectedly"):
        next(it)


def test_crashed_or_killed_worker_is_named_and_the_others_stop():
    """Issue 22: a worker that crashes (exit code) or is killed (SIGKILL from outside) is named
    in the error with how it ended, the call returns within seconds (no hang), and the other
    workers are stopped (no orphan processes)."""
    import os
    import signal

    it = iter(DataLoader(DyingDataset(), num_workers=2, timeout=TIMEOUT))
    workers = list(it._workers)
    with pytest.raises(RuntimeError, match=r"exited unexpectedly \(worker \d: exit code 3"):
        next(it)
    assert _wait_dead(workers)  # without deleting the iterator: the error stopped them
    it = iter(DataLoader(SlowDataset(8, delay=2.0), num_workers=2, timeout=TIMEOUT))
    workers = list(it._workers)
    time.sleep(0.5)
    os.kill(workers[1].pid, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid\(s\) {workers[1].pid}\) "
                                           r"exited unexpectedly \(worker 1: killed by signal "
                                           r"SIGKILL\)"):
        while True:
            next(it)
    assert time.monotonic() - t0 < 30
    assert _wait_dead(workers)
