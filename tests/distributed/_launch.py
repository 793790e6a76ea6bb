"""Start a script on N ranks through ember's launcher (mpiexec from the mpich wheel)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script: str, *args: str, nproc: int = 2, timeout: float = 90,
           master_port: int = 29500, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run tests/distributed/scripts/<script> on ``nproc`` ranks (with extra environment
    variables ``env``); returns the finished process."""
    env = dict(os.environ, **(env or {}),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "ember.distributed.run", "--nproc-per-node", str(nproc),
           "--master-port", str(master_port),
           os.path.join(HERE, "scripts", script), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
