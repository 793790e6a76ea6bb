"""Point-to-point, groups, cross-rank errors and the launcher, on 2 real ranks."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("mpi4py")

from tests.distributed._launch import launch  # noqa: E402


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("p2p")
    proc = launch("p2p_groups_errors.py", str(tmp))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {}
    text = (tmp / "rank0.txt").read_text() + (tmp / "rank1.txt").read_text()
    for line in text.splitlines():
        if ": " in line:
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


def test_async_collectives(lines):
    for r in (0, 1):
        assert lines[f"R{r} async_returned_fast"] == "True"
        assert lines[f"R{r} async_wait"] == "True"
        assert lines[f"R{r} async_done"] == "(True, 3.0, 3.0)"
        assert lines[f"R{r} async_others"] == "([0.0, 0.5, 1.0, 1.5], [7.0])"
    assert lines["R0 async_pending"] == "True"  # posted, not finished: rank 1 is asleep


def test_object_collectives(lines):
    for r in (0, 1):
        assert lines[f"R{r} bcast_objects"] == "(0.1, [0.0, 1.0, 2.0], ('a', 2), None)"
        assert lines[f"R{r} all_gather_object"] == ("[{'rank': 0, 'name': 'r0'}, "
                                                    "{'rank': 1, 'name': 'r1'}]")
        assert lines[f"R{r} objects_after"] == "no error"
    assert lines["R0 gather_object"] == "[[0], [1, 1]]"
    assert lines["R1 gather_object"] == "None"
    # an object the receivers' safe load would refuse: every rank raises, nobody hangs
    assert lines["R0 unsafe_object"].startswith(
        "EmberRuntimeError: [distributed.all_gather_object] this rank's object cannot be sent "
        "with ember's safe serialization: [load] weights_only load refused the global "
        "__main__.Unsafe")
    assert lines["R1 unsafe_object"] == (
        "EmberRuntimeError: [distributed.all_gather_object] rank(s) [0] passed objects that "
        "ember's safe serialization cannot send (their error says which)")
    assert "safe serialization cannot send" in lines["R1 unsafe_bcast"]
    assert "refused the global __main__.Unsafe" in lines["R0 unsafe_bcast"]
    assert lines["R0 short_list"] == ("EmberValueError: [distributed.gather_object] "
                                      "object_gather_list must hold world_size=2 items, got 1")
    assert "rank(s) [0] passed invalid arguments" in lines["R1 short_list"]


def test_launcher_sets_torchrun_variables(tmp_path):
    proc = launch("env_and_fail.py", str(tmp_path), "--lr", "0.1")
    assert proc.returncode == 0, proc.stderr
    got = [(tmp_path / f"rank{r}.txt").read_text().split() for r in range(2)]
    assert got == [[str(r), "undefined", str(r), str(r), "2", "2", "127.0.0.1", "29500", "--lr",
                    "0.1"] for r in range(2)]


def test_launcher_fails_fast_when_a_rank_dies(tmp_path):
    start = time.monotonic()
    proc = launch("env_and_fail.py", str(tmp_path), "--fail", timeout=60)
    assert proc.returncode != 0
    assert time.monotonic() - start < 30


def _plain(env: dict) -> str:
    import os
    import subprocess
    import sys

    from tests.distributed._launch import HERE, ROOT
    full = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    full.update(env, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "scripts", "single.py")],
                          env=full, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_one_process_without_a_launcher():
    out = _plain({})
    assert "ONE 0 1 gloo [2.0, 3.0]" in out
    assert "TWICE [distributed.init_process_group] trying to initialize the default process " \
           "group twice!" in out
    assert "AGAIN mpi" in out


def _plain_ranks(n: int, started: int, timeout_s: float = 60) -> list[str]:
    """Start ``started`` of ``n`` ranks of scripts/plain.py as plain processes (env:// only);
    their outputs."""
    import os
    import subprocess
    import sys

    from tests.distributed._launch import HERE, ROOT, free_port
    port = str(free_port())
    procs = []
    for r in range(started):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port, PYTHONPATH=ROOT)
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "scripts", "plain.py"),
                                       str(timeout_s)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out)
    return outs


@pytest.mark.parametrize("n", [2, 3])
def test_env_plain_processes_join_one_world(n):
    outs = _plain_ranks(n, n)
    objs = str([{"rank": r} for r in range(n)])
    for r, out in enumerate(outs):
        total = float(sum(range(1, n + 1)))
        assert f"PLAIN {r} {n} {[total] * 3} {float(n)} {objs}" in out, out


def test_env_plain_process_without_its_peers_times_out_clearly():
    start = time.monotonic()
    (out,) = _plain_ranks(2, 1, timeout_s=3)
    assert time.monotonic() - start < 60
    assert ("ERROR [distributed.init_process_group] rank 0 could not join the other 1 rank(s) "
            "through MASTER_ADDR=127.0.0.1 MASTER_PORT=") in out, out


def test_batch_isend_irecv_and_all_to_all_lists(lines):
    """Checked against what torch.distributed gives for the same calls (gloo): the ring
    exchange delivers the peer's tensor; all_to_all's output j on rank r is rank j's
    input r."""
    assert lines["R0 batch_waits"] == lines["R1 batch_waits"] == "[True, True]"
    assert lines["R0 batch_got"] == "[2.0, 2.0, 2.0]"
    assert lines["R1 batch_got"] == "[1.0, 1.0, 1.0]"
    assert lines["R0 all_to_all"] == "[[0.0], [10.0, 10.0]]"
    assert lines["R1 all_to_all"] == "[[1.0, 1.0], [11.0, 11.0, 11.0]]"
    # all_gather_single / reduce_scatter_single: torch 2.13's names of the *_tensor forms
    assert lines["R0 single_forms"] == "([0.0, 0.0, 1.0, 1.0], [1.0, 3.0])"
    assert lines["R1 single_forms"] == "([0.0, 0.0, 1.0, 1.0], [5.0, 7.0])"
    for r in (0, 1):
        assert "Invalid ``op``" in lines[f"R{r} p2pop_error"]
        assert "non-empty list of P2POp" in lines[f"R{r} batch_error"]
        assert lines[f"R{r} a2a_after"] == "no error"
    assert "output_tensor_list must hold world_size=2" in lines["R0 a2a_list_error"]
    assert "rank(s) [0] passed invalid arguments" in lines["R1 a2a_list_error"]
    assert "expects tensors of [4, 8] bytes from the ranks, which send [4, 4]" in lines[
        "R1 a2a_size_error"]
    assert "do not pair up" in lines["R0 a2a_size_error"]
