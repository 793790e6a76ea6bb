"""TCPStore (ember.distributed._store) against torch.distributed.TCPStore: the same sequence of
operations gives the same results; workers check in; get/wait block and time out."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

import ember.distributed as dist

torch_dist = pytest.importorskip("torch.distributed")


def _sequence(store) -> list:
    out = []
    store.set("a", "1")
    store.set("b", b"\x00\xff")
    out.append(store.get("a"))
    out.append(store.get("b"))
    out.append(store.add("n", 5))
    out.append(store.add("n", -2))
    out.append(store.get("n"))
    out.append(store.compare_set("a", "1", "2"))
    out.append(store.compare_set("a", "x", "3"))
    out.append(store.compare_set("fresh", "", "new"))
    out.append(store.check(["a", "b"]))
    out.append(store.check(["a", "missing"]))
    store.append("log", "x")
    store.append("log", "y")
    out.append(store.get("log"))
    store.multi_set(["m1", "m2"], ["u", "v"])
    out.append(store.multi_get(["m1", "m2"]))
    out.append(store.num_keys())
    out.append(store.delete_key("m1"))
    out.append(store.delete_key("m1"))
    out.append(store.num_keys())
    return out


def test_same_results_as_torch():
    ours = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timedelta(seconds=5))
    theirs = torch_dist.TCPStore("127.0.0.1", 0, 1, is_master=True,
                                 timeout=timedelta(seconds=5))
    assert _sequence(ours) == _sequence(theirs)


def test_workers_check_in_and_get_blocks_until_set():
    master = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=10))
    got = []

    def worker():
        w = dist.TCPStore("127.0.0.1", master.port, 2, timeout=timedelta(seconds=10))
        got.append(w.get("from_master"))   # blocks until the master sets it
        w.set("from_worker", "hi")

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.2)
    master.set("from_master", "go")
    assert master.get("from_worker") == b"hi"
    t.join(10)
    assert got == [b"go"]


def test_get_times_out_with_the_key_named():
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timedelta(seconds=0.3))
    with pytest.raises(dist.DistStoreError, match="missing") as info:
        store.get("missing")
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(ValueError, match="str or bytes"):
        store.set("k", 3)
    with pytest.raises(dist.DistStoreError, match="cannot reach"):
        dist.TCPStore("127.0.0.1", 1, 1, timeout=timedelta(seconds=0.2))
