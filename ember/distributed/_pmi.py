"""``env://`` with plain processes: a tiny PMI-1 server joins them into one MPI world.

MPI learns its world (size, rank, peers' addresses) from a process manager through PMI; a
process started on its own is a "singleton" world of one, and MPICH 5.0's singletons cannot
join each other with ``MPI_Comm_connect``/``accept`` (docs/distributed.md).  So, when
``init_process_group`` finds ``WORLD_SIZE > 1`` but no process manager (no ``PMI_*``
variables) and MPI not yet started, it plays the process manager itself: rank 0 starts this
module as a small server process (``python -m ember.distributed._pmi SIZE KVSNAME``; a thread
would block while rank 0's own ``MPI_Init`` holds the GIL), publishes its port in the
``TCPStore`` at ``MASTER_ADDR:MASTER_PORT``, every rank connects to it and hands the socket to
MPICH's PMI client (``PMI_FD``, ``PMI_RANK``, ``PMI_SIZE``), then ``MPI_Init`` runs as under
``mpiexec``.  The server speaks PMI-1's wire protocol (``cmd=init``, ``get_maxes``,
``get_my_kvsname``, ``put``/``get``, ``barrier_in``/``barrier_out``, ``finalize``) and exits
once every rank has disconnected.  One host only (the process mapping says one node).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from datetime import timedelta

from ember.errors import EmberRuntimeError

_KEEP: list = []  # rank 0's PMI server process (alive until every rank disconnects)


class PMIServer:
    """PMI-1 over TCP for ``size`` ranks on this host (one thread per connection)."""

    def __init__(self, size: int, kvsname: str, host: str = "127.0.0.1") -> None:
        self.size, self.kvsname = size, kvsname
        self.kvs = {"PMI_process_mapping": f"(vector,(0,1,{size}))"}
        self.lock = threading.Lock()
        self.waiting: list = []
        self.closed = 0
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(size)
        self.port = self.sock.getsockname()[1]

    def run(self) -> None:
        threads = []
        for _ in range(self.size):
            conn, _ = self.sock.accept()
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()

    def _serve(self, conn: socket.socket) -> None:
        lines = conn.makefile("rb")
        for line in lines:
            fields = dict(kv.split("=", 1) for kv in line.decode().split() if "=" in kv)
            reply = self._answer(conn, fields)
            if reply:
                conn.sendall((reply + "\n").encode())
            if fields.get("cmd") == "finalize":
                break
        conn.close()

    def _answer(self, conn: socket.socket, m: dict) -> str:
        cmd = m.get("cmd")
        if cmd == "barrier_in":
            with self.lock:
                self.waiting.append(conn)
                if len(self.waiting) == self.size:
                    for c in self.waiting:
                        c.sendall(b"cmd=barrier_out rc=0\n")
                    self.waiting = []
            return ""
        if cmd == "put":
            with self.lock:
                self.kvs[m["key"]] = m.get("value", "")
            return "cmd=put_result rc=0"
        if cmd == "get":
            with self.lock:
                value = self.kvs.get(m.get("key", ""))
            return (f"cmd=get_result rc=0 found=TRUE value={value}" if value is not None else
                    "cmd=get_result rc=-1 found=FALSE msg=key_not_found")
        if cmd == "abort":
            os._exit(1)
        return {
            "init": "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1",
            "get_maxes": "cmd=maxes rc=0 kvsname_max=256 keylen_max=256 vallen_max=1024",
            "get_appnum": "cmd=appnum rc=0 appnum=0",
            "get_my_kvsname": f"cmd=my_kvsname rc=0 kvsname={self.kvsname}",
            "get_universe_size": f"cmd=universe_size rc=0 size={self.size}",
            "finalize": "cmd=finalize_ack rc=0",
        }.get(cmd, f"cmd={cmd}_result rc=-1 msg=unsupported_by_ember_pmi")


def needed(world_size: int) -> bool:
    """True when this plain process must join its peers through ember's PMI server: more than
    one rank wanted, no process manager's variables, MPI not started yet."""
    pm_vars = ("PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
               "OMPI_COMM_WORLD_SIZE", "HYDRA_CONTROL_FD")
    from ember import config

    env = config.dist_env()
    return (world_size > 1 and not any(v in env for v in pm_vars)
            and "mpi4py.MPI" not in sys.modules)


def join(rank: int, size: int, addr: str, port: int, timeout: timedelta) -> None:
    """Make this process rank ``rank`` of ``size`` in the MPI world that ``MPI_Init`` (the
    first ``mpi4py.MPI`` import) will build; see the module docstring."""
    from ember.distributed._store import DistStoreError, TCPStore

    op = "[distributed.init_process_group]"
    proc = None
    try:
        store = TCPStore(addr, port, None, rank == 0, timeout, wait_for_workers=False)
        if rank == 0:
            proc = subprocess.Popen([sys.executable, "-m", "ember.distributed._pmi", str(size),
                                     f"ember-{os.getpid()}-{port}", addr,
                                     str(timeout.total_seconds())],
                                    stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, text=True)
            pmi_port = int(proc.stdout.readline())
            _KEEP.append(proc)
            store.set("ember/pmi_port", str(pmi_port))
            # every peer must have the port before rank 0's MPI_Init holds the GIL (and with
            # it the store's server thread)
            store.wait([f"ember/pmi_joined/{r}" for r in range(1, size)], timeout)
        else:
            pmi_port = int(store.get("ember/pmi_port"))
            store.set(f"ember/pmi_joined/{rank}", "1")
        # done with the store: shut its server down now, while its thread runs (a shutdown
        # left to the interpreter's exit waits for a thread that no longer runs)
        store.__del__()
        conn = socket.create_connection((addr, pmi_port), timeout=timeout.total_seconds())
        conn.settimeout(None)
    except (OSError, ValueError, DistStoreError) as e:
        if proc is not None:
            proc.kill()
        raise EmberRuntimeError(f"{op} rank {rank} could not join the other {size - 1} rank(s) "
                                f"through MASTER_ADDR={addr} MASTER_PORT={port} (a rank not "
                                f"started, or another job on that port): {e}") from None
    os.environ.update(PMI_FD=str(conn.detach()), PMI_RANK=str(rank), PMI_SIZE=str(size))


def main(argv: list[str]) -> None:
    """``SIZE KVSNAME HOST TIMEOUT_S``: print the port, serve, exit when every rank has gone
    (or not every rank connected within the timeout)."""
    server = PMIServer(int(argv[0]), argv[1], argv[2])
    server.sock.settimeout(float(argv[3]))
    print(server.port, flush=True)
    try:
        server.run()
    except OSError:  # a rank never connected
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
