"""Fuzz ember's loaders (tests/fuzz/archive_fuzz_worker.py) in a subprocess per target, under an
address-space limit and a timeout: no crash, no hang, no memory blow-up, no file written
outside the worker's temp dir, no gadget run; every mutated file either loads as the original
(or, for data mutations, as a well-formed object) or raises SerializationError /
UnpicklingError.

CI runs EMBER_FUZZ_EXAMPLES examples per target (default 100, a few seconds each); raise it
for a longer campaign, e.g. ``EMBER_FUZZ_EXAMPLES=20000 EMBER_FUZZ_SEED=$RANDOM pytest
tests/fuzz``.  A failure prints hypothesis's (shrunk) failing mutation: turn it into a corpus
file in tests/serialization/corpus/make_corpus.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

WORKER = Path(__file__).with_name("archive_fuzz_worker.py")
ROOT = WORKER.parents[2]
EXAMPLES = int(os.environ.get("EMBER_FUZZ_EXAMPLES", "100"))
SEED = int(os.environ.get("EMBER_FUZZ_SEED", "0"))
MEMORY_LIMIT = 1 << 30  # RLIMIT_AS of the worker: a 3 GiB bomb cannot fit


@pytest.mark.parametrize("target", ["zip", "pickle", "json", "safetensors", "export", "aot"])
def test_fuzz_loaders(target, tmp_path):
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), EMBER_FUZZ_MARKER=str(tmp_path / "ran"),
               EMBER_FUZZ_RLIMIT_AS=str(MEMORY_LIMIT), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", TMPDIR=str(work / "tmp"), HOME=str(work),
               EMBER_CACHE_DIR=str(tmp_path / "cache"))  # libember_aot is built there
    timeout = 120 + EXAMPLES // 5
    env["EMBER_FUZZ_ALARM"] = str(timeout - 10)
    try:
        proc = subprocess.run([sys.executable, str(WORKER), target, str(EXAMPLES), str(SEED)],
                              cwd=work, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"fuzzing {target} hung (> {timeout} s): {e.stdout!r} {e.stderr!r}")
    assert proc.returncode == 0, (f"fuzzing {target} failed (rc {proc.returncode}):\n"
                                  f"{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")
    assert f"ok {target} {EXAMPLES}" in proc.stdout
    assert not (tmp_path / "ran").exists(), "a gadget ran"
    left = sorted(str(p.relative_to(work)) for p in work.rglob("*")
                  if not p.name.startswith(".hypothesis") and ".hypothesis" not in p.parts)
    assert left == ["tmp"], f"files written while loading: {left}"


def test_memory_limit_is_enforced(tmp_path):
    """The harness's limit is real: the worker's process cannot allocate 3 GiB."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, "
            f"({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
            "try:\n    bytearray(3 << 30)\nexcept MemoryError:\n    print('refused')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "refused"


def test_bomb_is_refused_under_the_memory_limit(tmp_path):
    """The 3 GiB deflate bomb of the corpus is refused inside a 1 GiB address space."""
    bomb = ROOT / "tests" / "serialization" / "corpus" / "deflate_bomb.pt"
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, "
            f"({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
            "import ember\n"
            "try:\n    ember.load(sys.argv[1])\n"
            "except ember.serialization.SerializationError as e:\n    print('refused', e)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code, str(bomb)], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.stdout.startswith("refused"), out.stderr[-4000:]
    assert "zip bomb" in out.stdout
