"""examples/ddp_char_gpt.py: 2 ranks with DDP follow 1 rank with the doubled batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("mpi4py")

from tests.distributed._launch import ROOT, free_port  # noqa: E402

TINY = ["--steps", "6", "--batch", "4", "--block", "16", "--d", "16", "--layers", "1",
        "--heads", "2", "--log-every", "1"]
EXAMPLE = os.path.join(ROOT, "examples", "ddp_char_gpt.py")


def _run(cmd: list, out: str) -> list:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([*cmd, EXAMPLE, *TINY, "--losses", out], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out) as f:
        return json.load(f)


def test_two_ranks_match_one_rank_with_the_doubled_batch(tmp_path):
    two = _run([sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", "2",
                "--master-port", str(free_port())], str(tmp_path / "two.json"))
    one = _run([sys.executable], str(tmp_path / "one.json"))
    assert len(two) == len(one) == 6
    assert one[-1] < one[0]  # it trains
    assert two == pytest.approx(one, rel=1e-5)
