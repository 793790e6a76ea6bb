"""``TCPStore``: PyTorch's key-value store for rendezvous and small coordination, over TCP.

The master (``is_master=True``) serves the keys from a thread; every instance, the master's
too, is a client of it.  Keys are strings, values bytes (a ``str`` is stored as UTF-8); the
wire format is length-prefixed frames, nothing is unpickled.  ``get`` and ``wait`` block until
the keys exist or the store's timeout passes (``DistStoreError``, a ``RuntimeError``).

>>> store = TCPStore("127.0.0.1", 29512, 2, is_master=True)   # doctest: +SKIP
>>> store.set("first", "ready"); store.get("first")           # doctest: +SKIP
b'ready'
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from datetime import timedelta
from typing import Any

from ember.errors import EmberRuntimeError, EmberValueError


class DistStoreError(EmberRuntimeError):
    """A store operation that timed out or failed (PyTorch's ``DistStoreError``)."""


_MAX_FRAME = 1 << 30


def _send(sock: socket.socket, *parts: bytes) -> None:
    sock.sendall(struct.pack("<I", len(parts)) + b"".join(
        struct.pack("<Q", len(p)) + p for p in parts))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("the store's peer closed the connection")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> list[bytes]:
    (count,) = struct.unpack("<I", _recv_exact(sock, 4))
    if count > 1 << 16:
        raise ConnectionError(f"a store frame with {count} parts")
    parts = []
    for _ in range(count):
        (size,) = struct.unpack("<Q", _recv_exact(sock, 8))
        if size > _MAX_FRAME:
            raise ConnectionError(f"a store value of {size} bytes")
        parts.append(_recv_exact(sock, size))
    return parts


class _State:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.cond = threading.Condition()


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        state: _State = self.server.state  # type: ignore[attr-defined]
        while True:
            try:
                parts = _recv(self.request)
            except (ConnectionError, OSError, struct.error):
                return
            try:
                reply = self._do(state, parts[0].decode(), [p for p in parts[1:]])
                _send(self.request, b"ok", *reply)
            except Exception as e:  # noqa: BLE001 - reported to the client, the server goes on
                _send(self.request, b"err", str(e).encode())

    @staticmethod
    def _do(state: _State, op: str, args: list[bytes]) -> list[bytes]:
        with state.cond:
            d = state.data
            if op == "set":
                d[args[0].decode()] = args[1]
                state.cond.notify_all()
                return []
            if op == "get":
                return [d[args[0].decode()]] if args[0].decode() in d else []
            if op == "add":
                key = args[0].decode()
                value = int(d.get(key, b"0")) + int(args[1])
                d[key] = str(value).encode()
                state.cond.notify_all()
                return [str(value).encode()]
            if op == "cas":
                key = args[0].decode()
                cur = d.get(key)
                if (cur is None and args[1] == b"") or cur == args[1]:
                    d[key] = args[2]
                    state.cond.notify_all()
                    return [args[2]]
                return [args[1] if cur is None else cur]
            if op == "check":
                return [b"1" if all(a.decode() in d for a in args) else b"0"]
            if op == "delete":
                return [b"1" if d.pop(args[0].decode(), None) is not None else b"0"]
            if op == "num":
                return [str(len(d)).encode()]
            if op == "append":
                key = args[0].decode()
                d[key] = d.get(key, b"") + args[1]
                state.cond.notify_all()
                return []
        raise EmberValueError(f"unknown store operation {op!r}")


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise EmberValueError(f"[TCPStore] values are str or bytes, got {type(value).__name__}")


class TCPStore:
    """PyTorch's ``torch.distributed.TCPStore``: ``set``, ``get``, ``add``, ``compare_set``,
    ``append``, ``multi_set``/``multi_get``, ``wait``, ``check``, ``delete_key``,
    ``num_keys``, ``set_timeout``; ``host``, ``port``, ``timeout``, ``world_size``.
    ``port=0`` on the master picks a free port (read it back from ``store.port``)."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout: timedelta = timedelta(seconds=300),
                 wait_for_workers: bool = True, multi_tenant: bool = False,
                 master_listen_fd: int | None = None, use_libuv: bool = True) -> None:
        self.host, self.world_size = host_name, world_size
        self._timeout = timeout
        self._server = None
        if is_master:
            self._server = _Server((host_name, port), _Handler)
            self._server.state = _State()  # type: ignore[attr-defined]
            port = self._server.server_address[1]
            threading.Thread(target=self._server.serve_forever, name="ember-TCPStore",
                             daemon=True).start()
        self.port = port
        self._lock = threading.Lock()
        self._sock = self._connect()
        if is_master and wait_for_workers and world_size:
            self.add("__ember_workers__", 1)
            self.wait_value("__ember_workers__", world_size)
        elif world_size and not is_master:
            self.add("__ember_workers__", 1)

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self._timeout.total_seconds()
        while True:
            try:
                return socket.create_connection((self.host, self.port), timeout=None)
            except OSError as e:
                if time.monotonic() > deadline:
                    raise DistStoreError(f"[TCPStore] cannot reach {self.host}:{self.port} "
                                         f"within {self._timeout}: {e}") from None
                time.sleep(0.05)

    def _call(self, op: str, *args: bytes) -> list[bytes]:
        with self._lock:
            _send(self._sock, op.encode(), *args)
            status, *reply = _recv(self._sock)
        if status != b"ok":
            raise DistStoreError(f"[TCPStore.{op}] {reply[0].decode(errors='replace')}")
        return reply

    # ------------------------------------------------------------------ PyTorch's methods
    @property
    def timeout(self) -> timedelta:
        return self._timeout

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = timeout

    def set(self, key: str, value: Any) -> None:
        self._call("set", key.encode(), _as_bytes(value))

    def get(self, key: str) -> bytes:
        self.wait([key])
        got = self._call("get", key.encode())
        if not got:
            raise DistStoreError(f"[TCPStore.get] key {key!r} was deleted while waiting")
        return got[0]

    def add(self, key: str, amount: int) -> int:
        return int(self._call("add", key.encode(), str(int(amount)).encode())[0])

    def compare_set(self, key: str, expected_value: Any, desired_value: Any) -> bytes:
        return self._call("cas", key.encode(), _as_bytes(expected_value),
                          _as_bytes(desired_value))[0]

    def append(self, key: str, value: Any) -> None:
        self._call("append", key.encode(), _as_bytes(value))

    def multi_set(self, keys: list[str], values: list[Any]) -> None:
        for k, v in zip(keys, values, strict=True):
            self.set(k, v)

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return [self.get(k) for k in keys]

    def check(self, keys: list[str]) -> bool:
        return self._call("check", *(k.encode() for k in keys))[0] == b"1"

    def delete_key(self, key: str) -> bool:
        return self._call("delete", key.encode())[0] == b"1"

    def num_keys(self) -> int:
        return int(self._call("num")[0])  # as PyTorch's: the workers' check-in key counts

    def wait(self, keys: list[str], timeout: timedelta | None = None) -> None:
        limit = (timeout or self._timeout).total_seconds()
        deadline = time.monotonic() + limit
        pause = 0.001
        while not self.check(keys):
            if time.monotonic() > deadline:
                raise DistStoreError(f"[TCPStore.wait] timed out after {limit:g} s waiting for "
                                     f"keys {keys}")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def wait_value(self, key: str, at_least: int) -> None:
        """Wait until the counter ``key`` reaches ``at_least`` (the workers' check-in)."""
        deadline = time.monotonic() + self._timeout.total_seconds()
        while self.add(key, 0) < at_least:
            if time.monotonic() > deadline:
                raise DistStoreError(f"[TCPStore] timed out after {self._timeout} waiting for "
                                     f"{at_least} workers")
            time.sleep(0.01)

    def __del__(self) -> None:
        try:
            self._sock.close()
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
