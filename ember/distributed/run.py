"""The launcher: ``python -m ember.distributed.run --nproc-per-node 2 script.py args``
(torchrun's flags; also ``ember run``).

It starts the ranks through ``mpiexec`` (the one installed with the ``mpich`` wheel, next to the
Python interpreter, else the first on ``PATH``), giving each rank torchrun's variables (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so
``init_process_group("gloo")`` (or ``"mpi"``) in the script joins them.  If a rank fails, MPI
ends the others and the launcher exits non-zero.  One node per launch: for several nodes run
``mpiexec`` with your cluster's host list (see docs/distributed.md).

    python -m ember.distributed.run --nproc-per-node 2 train.py --epochs 3
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Sequence

from ember.errors import EmberRuntimeError, EmberValueError


def get_args_parser() -> argparse.ArgumentParser:
    """torchrun's main flags (dashes or underscores, as torchrun accepts)."""
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start N ember.distributed ranks on MPI.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", default="1")
    p.add_argument("--nnodes", default="1")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", type=int, default=29500)
    p.add_argument("--standalone", action="store_true")
    p.add_argument("--rdzv-backend", "--rdzv_backend", default="static")
    p.add_argument("--rdzv-endpoint", "--rdzv_endpoint", default="")
    p.add_argument("--max-restarts", "--max_restarts", type=int, default=0)
    p.add_argument("-m", "--module", action="store_true",
                   help="run the script as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the script as an executable, without the Python interpreter")
    p.add_argument("training_script")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def find_mpiexec() -> str:
    """``mpiexec`` next to this Python (the mpich wheel puts it there), else on ``PATH``."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.path.exists(here) else shutil.which("mpiexec")
    if not found:
        raise EmberRuntimeError("[distributed.run] mpiexec not found: install the MPI runtime "
                                "with `pip install mpi4py mpich` (the 'distributed' extra)")
    return found


def _nproc(value: str) -> int:
    if value in ("cpu", "auto"):
        return os.cpu_count() or 1
    if not value.isdigit() or int(value) < 1:
        raise EmberValueError(f"[distributed.run] --nproc-per-node must be a positive integer, "
                              f"'cpu' or 'auto'; got {value!r}")
    return int(value)


def build_command(args: argparse.Namespace) -> list[str]:
    """The ``mpiexec`` command line: one block per rank (MPMD form), each with its variables."""
    if str(args.nnodes) not in ("1", "1:1"):
        raise EmberValueError("[distributed.run] one node per launch: for several nodes start "
                              "the ranks with mpiexec and a host file (docs/distributed.md)")
    n = _nproc(str(args.nproc_per_node))
    if args.no_python:
        prog = [args.training_script]
    elif args.module:  # mpi4py's runner aborts the whole job when a rank raises
        prog = [sys.executable, "-u", "-m", "mpi4py", "-m", args.training_script]
    else:
        prog = [sys.executable, "-u", "-m", "mpi4py", args.training_script]
    prog += list(args.training_script_args)
    common = {"WORLD_SIZE": n, "LOCAL_WORLD_SIZE": n, "MASTER_ADDR": args.master_addr,
              "MASTER_PORT": args.master_port, "GROUP_RANK": 0, "NODE_RANK": 0}
    cmd = [find_mpiexec()]
    for name, value in common.items():
        cmd += ["-genv", name, str(value)]
    for rank in range(n):
        if rank:
            cmd.append(":")
        cmd += ["-n", "1", "-env", "RANK", str(rank), "-env", "LOCAL_RANK", str(rank), *prog]
    return cmd


def run(args: argparse.Namespace) -> int:
    """Start the ranks and wait for them; the exit status is mpiexec's (non-zero when a rank
    failed).  The ranks' output passes through; when a rank dies, MPI ends the others and the
    launcher says which rank it was (``ember.distributed.run: rank 1 (pid 4242) died first:
    exit code 9 (killed by signal 9); MPI ended the other ranks``)."""
    cmd = build_command(args)
    with tempfile.TemporaryDirectory(prefix="ember-run-") as run_dir:
        cmd[1:1] = ["-genv", "EMBER_RUN_DIR", run_dir]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, errors="replace",
                                bufsize=1)
        watch = _Watch(run_dir, proc, _nproc(str(args.nproc_per_node)))
        watch.start()
        reported: list[tuple[str, str]] = []  # (pid, exit code) from MPICH's report
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            pid = re.search(r"PID (\d+) RUNNING AT", line)
            code = re.search(r"EXIT CODE: (\d+)", line)
            if pid:
                reported.append((pid.group(1), "?"))
            elif code and reported:
                reported[-1] = (reported[-1][0], code.group(1))
        rc = proc.wait()
        watch.join()
        if rc != 0:
            _explain(watch, reported, rc)
    return rc


class _Watch(threading.Thread):
    """Polls the ranks' processes (pids from ``EMBER_RUN_DIR``) every few milliseconds and
    records which died first: MPICH's own report may name a rank it ended while cleaning up."""

    def __init__(self, run_dir: str, proc: subprocess.Popen, nproc: int) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.proc, self.nproc = run_dir, proc, nproc
        self.pids: dict[str, str] = {}     # pid -> rank
        self.first_dead: list[str] = []    # ranks found dead at the first poll that found any
        self.finished: set[str] = set()    # ranks that exited normally

    def _alive(self, pid: str) -> bool:
        """False once the process is exiting (PF_EXITING, set first thing in the kernel's
        do_exit, before its pipes close and MPICH notices), a zombie, or gone."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return False
        return fields[0] not in ("Z", "X") and not int(fields[6]) & 0x4

    def run(self) -> None:
        while self.proc.poll() is None and not self.first_dead:
            if len(self.pids) + len(self.finished) < self.nproc:
                self._read_pids()  # each rank writes its pid once, at init_process_group
            dead = [r for p, r in self.pids.items() if not self._alive(p)]
            if dead:
                done = {n[4:-5] for n in os.listdir(self.run_dir) if n.endswith(".done")}
                self.first_dead = sorted((r for r in dead if r not in done), key=int)
                self.finished |= {r for r in dead if r in done}  # normal exits: stop watching
                self.pids = {p: q for p, q in self.pids.items() if q not in self.finished}
            time.sleep(0.001)

    def _read_pids(self) -> None:
        for name in os.listdir(self.run_dir):
            rank = name[4:-4]
            if name.endswith(".pid") and rank not in self.pids.values() and \
                    rank not in self.finished:
                with open(os.path.join(self.run_dir, name)) as f:
                    pid = f.read().strip()
                if pid.isdigit():  # written atomically; never half a file
                    self.pids[pid] = rank


def _explain(watch: _Watch, reported: list[tuple[str, str]], rc: int) -> None:
    """Name the rank that died (the watcher's first, else the one MPICH reported)."""
    codes = dict(reported)
    by_rank = {r: p for p, r in watch.pids.items()}
    culprits = watch.first_dead or [watch.pids.get(p, "?") for p, _ in reported[:1]]
    if len(culprits) > 1:
        print(f"ember.distributed.run: ranks {culprits} died within a millisecond of each "
              "other; MPI ended the other ranks", file=sys.stderr)
        return
    for rank in culprits:
        pid = by_rank.get(rank, "?")
        code = codes.get(pid)
        how = "" if code is None else f": exit code {code}"
        if code in ("6", "9", "11", "15"):  # MPICH reports a signal's number as the code
            how += f" (killed by signal {code})"
        print(f"ember.distributed.run: rank {rank} (pid {pid}) died first{how}; MPI ended "
              "the other ranks", file=sys.stderr)
    if not culprits:
        print(f"ember.distributed.run: the job failed (mpiexec exit status {rc})",
              file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    return run(get_args_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
