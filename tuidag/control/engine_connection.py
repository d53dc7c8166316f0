"""The connection of a viewer to a run's engine: the socket, its read buffer, the requests waiting for their reply.

`EngineConnection` dials the run's control socket and sends the subscription (status, then subscribe), waits for
the engine's first bytes (an engine that holds the run but does not answer is told apart from one that is gone),
reads whole messages while subscribing, and sends requests that each wait for their own reply (answered by the
reader, `RemoteRun._follow`, through `PendingRequests`). What the messages mean to the run is `RemoteRun`'s
(control/remote.py): this module holds only the transport.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from ..store.runs import RunDir
from . import protocol
from .client import NotAnswered, NotLive, Refused, connect, peer_pid
from .pending import PendingRequests
from .protocol import MAX_MESSAGE

REQUEST_TIMEOUT = 30.0  # a cancel waits for the kills to be sent


class EngineConnection:
    """One connection to the engine of `run` (replaced by a new one when the engine dropped it)."""

    def __init__(self, run: RunDir):
        self.run = run
        self.engine_pid: int | None = None
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._send_lock = threading.Lock()
        self._pending = PendingRequests()
        self._closed = threading.Event()

    def _dial(self) -> None:
        """Connect, name the engine (before it answers: a stopped engine is named too) and ask for its status and
        the subscription."""
        sock = connect(self.run)
        if self.engine_pid is None:
            self.engine_pid = peer_pid(sock)
        try:
            self._sock, self._buf = sock, bytearray()
            sock.sendall(
                protocol.encode({"v": protocol.VERSION, "op": "status", "id": 0})
                + protocol.encode({"v": protocol.VERSION, "op": "subscribe", "id": 0})
            )
        except OSError as exc:
            self._drop_socket()
            raise NotLive(
                f"run {self.run.run_id}: the engine did not take the request ({exc.strerror or exc})"
            ) from None

    def _await_answer(self, patience: float) -> None:
        """Wait up to `patience` seconds for the engine's first bytes on the connection; NotAnswered if none came
        (the connection is kept: its request is still there for the engine to answer)."""
        if self._buf:
            return
        sock = self._sock
        assert sock is not None  # dialled: `_dial` raised otherwise
        try:
            sock.settimeout(patience)
            data = sock.recv(1 << 20)
        except TimeoutError:
            pid = f" (pid {self.engine_pid})" if self.engine_pid else ""
            raise NotAnswered(f"the engine{pid} holds run {self.run.run_id} but is not answering (stopped?)") from None
        except OSError as exc:
            self._drop_socket()
            raise NotLive(f"run {self.run.run_id}: the connection broke ({exc.strerror or exc})") from None
        if not data:
            self._drop_socket()
            raise NotLive(f"run {self.run.run_id} closed the connection")
        self._buf += data

    def _drop_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _next_message(self) -> dict[str, Any]:
        """The next JSON object on the socket (used while subscribing, before the reader thread runs)."""
        sock = self._sock
        assert sock is not None  # dialled: `_dial` raised otherwise
        while True:
            end = self._buf.find(b"\n")
            while end < 0:
                data = sock.recv(1 << 20)
                if not data:
                    raise NotLive(f"run {self.run.run_id} closed the connection")
                self._buf += data
                if len(self._buf) > MAX_MESSAGE:
                    raise NotLive("the engine sent a line longer than any it writes")
                end = self._buf.find(b"\n")
            line = bytes(self._buf[:end])
            del self._buf[: end + 1]
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if type(message) is dict and message.get("type") == "bye":
                raise NotLive(f"run {self.run.run_id} closed the connection: {str(message.get('reason'))[:200]}")
            if type(message) is dict:
                return message

    def _ask(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Send `op` and wait for its reply: Refused when the engine says no, NotLive when it is gone."""
        sock = self._sock
        if sock is None:  # dropped: a new subscription failed, the run is about to be read from its journal
            raise NotLive("the engine is gone (the connection to it was dropped)")
        rid, waiter = self._pending.new()
        deadline = time.time() + REQUEST_TIMEOUT
        try:
            with self._send_lock:
                sock.sendall(
                    protocol.encode({"v": protocol.VERSION, "op": op, "id": rid, "deadline": deadline, **fields})
                )
            if not self._pending.wait(waiter, deadline):
                engine = f"the engine (pid {self.engine_pid})" if self.engine_pid else "the engine"
                raise NotAnswered(self._pending.unanswered(op, waiter, deadline, engine, REQUEST_TIMEOUT))
        except OSError as exc:
            raise NotLive(f"the engine is gone ({exc.strerror or exc})") from None
        finally:
            self._pending.forget(rid)
        reply = waiter.reply
        assert reply is not None  # set before `answered` is
        if isinstance(reply, str):
            raise NotLive(reply)
        if not reply.get("ok"):
            raise Refused(str(reply.get("error") or "refused"), reply.get("changed"))
        return reply

    def _hang_up(self) -> None:
        """Close the connection for good (a reader blocked on it wakes up)."""
        self._closed.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
