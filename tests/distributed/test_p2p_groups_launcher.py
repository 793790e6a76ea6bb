"""Point-to-point, groups, cross-rank errors and the launcher, on 2 real ranks."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("mpi4py")

from tests.distributed._launch import launch  # noqa: E402


@pytest.fixture(scope="module")
def lines():
    proc = launch("p2p_groups_errors.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("R") and ": " in line:
            key, value = line.split(": ", 1)
            out[key] = value
    return out


def test_init_and_point_to_point(lines):
    assert lines["R0 backend"] == lines["R1 backend"] == "mpi"
    assert lines["R0 initialized"] == "True"
    assert lines["R1 recv_from"] == "0"
    assert lines["R1 recv"] == "[0.0, 1.0, 2.0, 3.0]"
    assert lines["R0 isend"] == "True"
    assert lines["R1 irecv"] == "[1.5, -2.0]"


def test_groups(lines):
    assert lines["R0 solo_rank"] == "-100"  # GroupMember.NON_GROUP_MEMBER, as in PyTorch
    assert lines["R1 solo_rank"] == "0"
    assert lines["R0 group_sum"] == lines["R1 group_sum"] == "[3.0]"


def test_mismatches_raise_on_every_rank(lines):
    for r in (0, 1):
        assert lines[f"R{r} shape_error"].startswith(
            "EmberRuntimeError: [distributed.all_reduce] the ranks passed different shapes: "
            "rank 0: all_reduce ember.float32 (1,); rank 1: all_reduce ember.float32 (2,)")
        assert "different dtypes" in lines[f"R{r} dtype_error"]
        assert lines[f"R{r} avg_int_error"].startswith("DTypeError: [distributed.all_reduce]")
        assert lines[f"R{r} after_errors"] == "no error"  # the group still works afterwards
        assert "Default process group has not been initialized" in lines[f"R{r} destroyed"]
    assert lines["R0 list_error"].startswith(
        "EmberValueError: [distributed.all_gather] tensor_list must hold world_size=2 tensors")
    assert "rank(s) [0] passed invalid arguments" in lines["R1 list_error"]


def test_launcher_sets_torchrun_variables():
    proc = launch("env_and_fail.py", "--lr", "0.1")
    assert proc.returncode == 0, proc.stderr
    got = sorted(line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("ENV"))
    assert got == [[str(r), "undefined", str(r), str(r), "2", "2", "127.0.0.1", "29500", "--lr",
                    "0.1"] for r in range(2)]


def test_launcher_fails_fast_when_a_rank_dies():
    start = time.monotonic()
    proc = launch("env_and_fail.py", "--fail", timeout=60)
    assert proc.returncode != 0
    assert time.monotonic() - start < 30
