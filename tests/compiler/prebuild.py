"""Prebuilding the C libraries a test module will need, in bundles (docs/compiler.md, "Bundled
builds").

A conformance test compiles hundreds of small graphs; built one by one, each costs a gcc run of
~0.1-0.2 s (most of it the 48 KB prelude).  ``prebuild(request, tmp_path_factory, trace)`` runs
before the module's tests: it calls ``trace(item, backend)`` for every selected test item of the
module with a backend that only records each graph's C source (``cbackend.c_source``) and runs
the graph eagerly, then builds the sources with ``cbackend.prebuild`` (``toolchain.compile_bundle``:
~100 graphs a gcc run).  The tests then compile with ``backend="c"`` and find every library in
the cache.

Under pytest-xdist the items are cut into ``SHARDS`` shards; each worker claims shards (an
exclusive file create in the run's shared temporary directory), traces and builds them, then
waits until every shard is built, so the workers share the work and no library is built twice.
A worker that never runs the module leaves its shards to the others.  EMBER_TEST_PREBUILD=0
turns the prebuild off; EMBER_TEST_PREBUILD_REPORT=<file> appends what it did (JSON lines).
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Callable

import pytest

import ember
from ember.compiler.c import backend as cbackend

SHARDS = 8
WAIT_SECONDS = 900.0

# what a traced test may raise: its failures and skips surface when the test itself runs
_OUTCOMES = (Exception, pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception)

STATS: dict = {}  # module name -> what the last prebuild did (for the timing report)


def collecting_backend(sources: list) -> Callable:
    """A backend that appends each graph's C source to ``sources`` and runs the graph eagerly."""
    def backend(graph, example_inputs):
        src = cbackend.c_source(graph)
        if src is not None:
            sources.append(src)
        return cbackend._eager_runner(graph)
    return backend


def _claim(path: Path) -> bool:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def prebuild(request, tmp_path_factory, trace: Callable) -> None:
    """Trace and bundle-build every selected item of ``request.module`` (see the module doc)."""
    if os.environ.get("EMBER_TEST_PREBUILD", "1") == "0":
        return
    t0 = time.perf_counter()
    module = request.module.__name__
    items = [i for i in request.session.items if getattr(i, "module", None) is request.module]
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # one process: build everything here with every core
        root, start, jobs = None, 0, None
    else:
        root = tmp_path_factory.getbasetemp().parent / f"prebuild-{module}"
        root.mkdir(exist_ok=True)
        n = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        start, jobs = int(worker.lstrip("gw") or 0) * SHARDS // max(n, 1), 1
    built = traced = 0
    trace_cpu = 0.0
    gcc0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    for k in [(start + j) % SHARDS for j in range(SHARDS)]:
        if root is not None and not _claim(root / f"claim-{k}"):
            continue
        try:
            sources: list = []
            backend = collecting_backend(sources)
            c0 = time.process_time()
            for item in items[k::SHARDS]:
                try:
                    trace(item, backend)
                except _OUTCOMES:  # the test itself reports its failures and skips
                    pass
                traced += 1
            trace_cpu += time.process_time() - c0
            ember.compiler.reset()
            try:
                units = cbackend.prebuild(sources, max_workers=jobs)
                built += len(units)
            except Exception:  # noqa: BLE001 - a unit that fails to build fails its own test
                pass
        finally:  # even when interrupted: the other workers must not wait for this shard
            if root is not None:
                (root / f"done-{k}").touch()
    waited = time.perf_counter()
    if root is not None:
        deadline = time.time() + WAIT_SECONDS
        while time.time() < deadline and not all((root / f"done-{k}").exists()
                                                  for k in range(SHARDS)):
            time.sleep(0.05)
    gcc1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    STATS[module] = {"module": module, "worker": worker, "items": traced, "units": built,
                     "trace_cpu": round(trace_cpu, 2),
                     "compiler_cpu": round(gcc1.ru_utime + gcc1.ru_stime - gcc0.ru_utime
                                           - gcc0.ru_stime, 2),
                     "seconds": round(time.perf_counter() - t0, 2),
                     "waited": round(time.perf_counter() - waited, 2)}
    report = os.environ.get("EMBER_TEST_PREBUILD_REPORT")
    if report:  # one JSON line per worker and module (timing measurements)
        with open(report, "a") as f:
            f.write(json.dumps(STATS[module]) + "\n")
