"""The client end of the control channel: connecting to a live run, asking it something, following its events.

`ControlClient` is for one-off requests (`tuidag cancel`, `tuidag runs`); a viewer uses `RemoteRun`
(control/remote.py), built on the same connection code. The run's folder is treated as hostile: only a socket owned
by this user is connected to, and the process answering must be this user's too (SO_PEERCRED).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import stat
import struct
import time
from typing import Any

from ..engine.events import RunEvent, TaskEvent, TaskSnapshot
from ..model.state import TaskState
from ..store.journal_records import with_dag
from ..store.runs import RunDir
from . import protocol
from .protocol import MAX_MESSAGE, SOCKET_NAME
from .transport import bind_path

_PEERCRED = struct.Struct("3i")


class NotLive(Exception):
    """No engine answers for this run (it ended, crashed, or the folder holds something else)."""


class NotAnswered(NotLive):
    """The engine did not answer before the request's deadline; the text says whether the request may still take
    effect (the engine had started it) or surely won't (it never did: the engine drops a request past its
    deadline)."""


class Refused(Exception):
    """The engine answered a request with an error: the text says why (e.g. a re-run blocked by a failed dependency);
    `changed` is what it did before refusing."""

    def __init__(self, error: str, changed: list[str] | None = None):
        super().__init__(error)
        self.changed = changed or []


def connect(run: RunDir, timeout: float = 5.0) -> socket.socket:
    """A connection to the engine of `run`. Raises NotLive when there is none to make."""
    folder = str(run.path)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        raise NotLive(f"run {run.run_id} can't be read: {exc.strerror or exc}") from None
    try:
        try:
            info = os.stat(SOCKET_NAME, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            raise NotLive(f"run {run.run_id} is not running (no control socket)") from None
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.geteuid():
            raise NotLive(f"run {run.run_id}: {SOCKET_NAME} is not a socket of yours; not connecting")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(timeout)
        try:
            sock.connect(bind_path(fd, folder, SOCKET_NAME))
            _pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
            if uid != os.geteuid():
                raise NotLive(f"run {run.run_id}: the process behind its socket is not yours; not talking to it")
        except OSError as exc:
            sock.close()
            raise NotLive(f"run {run.run_id} is not running ({exc.strerror or exc})") from None
        except NotLive:
            sock.close()
            raise
        return sock
    finally:
        os.close(fd)


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process that listens at the other end (the engine), from the kernel (SO_PEERCRED)."""
    return _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))[0]


class LineReader:
    """Lines from a socket, one at a time, with a bound on their length."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = bytearray()

    def readline(self, deadline: float | None = None) -> bytes | None:
        """The next line without its newline; None at the end of the stream. Past `deadline` (time.time()), or
        after the socket's timeout, NotAnswered; `drain` then gives what had arrived by then."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                return line
            if len(self._buf) > MAX_MESSAGE:
                raise NotLive("the engine sent a line longer than any it writes")
            try:
                if deadline is not None:
                    left = deadline - time.time()
                    if left <= 0:
                        raise TimeoutError
                    self.sock.settimeout(left)
                data = self.sock.recv(1 << 20)
            except TimeoutError:
                raise NotAnswered("the engine did not answer in time") from None
            except OSError as exc:
                raise NotLive(f"the connection to the engine broke ({exc.strerror or exc})") from None
            if not data:
                return None
            self._buf += data

    def drain(self) -> list[bytes]:
        """Every whole line that has arrived, without waiting."""
        try:
            self.sock.setblocking(False)
            while len(self._buf) <= MAX_MESSAGE and (data := self.sock.recv(1 << 20)):
                self._buf += data
        except OSError:  # nothing more now (BlockingIOError), or a broken connection
            pass
        lines = bytes(self._buf).split(b"\n")
        self._buf = bytearray(lines.pop())
        return lines


class ControlClient:
    """Requests to a live run, one at a time, each waiting for its reply until its deadline."""

    def __init__(self, run: RunDir, timeout: float = 30.0):
        self.run = run
        self.timeout = timeout  # a cancel waits for the kills to be sent
        self.sock = connect(run)
        self.engine_pid = peer_pid(self.sock)
        self._lines = LineReader(self.sock)
        self._ids = itertools.count(1)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """The engine's reply to `op`; Refused when it says no, NotLive when it is gone, NotAnswered when it did not
        answer before the request's deadline (`timeout` seconds from now)."""
        rid = next(self._ids)
        deadline = time.time() + self.timeout
        try:
            self.sock.sendall(
                protocol.encode({"v": protocol.VERSION, "op": op, "id": rid, "deadline": deadline, **fields})
            )
        except OSError as exc:  # the engine closed the connection: maybe saying why first
            raise NotLive(self._bye() or f"run {self.run.run_id} is not running ({exc.strerror or exc})") from None
        started = False
        while True:
            try:
                line = self._lines.readline(deadline)
            except NotAnswered:
                while time.time() <= deadline:  # a socket timeout may end a hair early
                    time.sleep(0.01)
                # Whatever the engine wrote before the deadline is here now: its reply, or its `started`.
                for line in self._lines.drain():
                    message = _message(line)
                    if message.get("id") == rid and message.get("type") == "reply":
                        return self._answer(message)
                    started = started or (message.get("id") == rid and message.get("type") == "started")
                raise NotAnswered(self._unanswered(op, started)) from None
            if line is None:
                raise NotLive(f"run {self.run.run_id} ended before it answered")
            message = _message(line)
            if message.get("type") == "bye" and type(message.get("reason")) is str:
                raise NotLive(self._said_bye(message))
            if message.get("id") != rid:
                continue
            if message.get("type") == "started":
                started = True
            elif message.get("type") == "reply":
                return self._answer(message)

    def _bye(self) -> str | None:
        """Why the engine closed this connection, if it said so before closing it."""
        for line in self._lines.drain():
            message = _message(line)
            if message.get("type") == "bye" and type(message.get("reason")) is str:
                return self._said_bye(message)
        return None

    def _said_bye(self, message: dict[str, Any]) -> str:
        return f"run {self.run.run_id} closed the connection: {message['reason']}"

    @staticmethod
    def _answer(message: dict[str, Any]) -> dict[str, Any]:
        if not message.get("ok"):
            raise Refused(str(message.get("error") or "refused"), message.get("changed"))
        return message

    def _unanswered(self, op: str, started: bool) -> str:
        engine = f"the engine of run {self.run.run_id} (pid {self.engine_pid})"
        if started:
            return (
                f"{engine} started the {op} but did not answer in {self.timeout:.0f} s: it may or may not "
                f"have taken effect"
            )
        return (
            f"{engine} did not answer in {self.timeout:.0f} s (stopped, or too busy): {op} not done, and it "
            f"won't be (the engine drops a request whose deadline passed)"
        )

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def live_status(run: RunDir, timeout: float = 1.0) -> dict[str, Any] | None:
    """The engine's status of a live run (pid, viewers, paused), or None when nothing answers."""
    try:
        with ControlClient(run, timeout=timeout) as client:
            return client.request("status")
    except (NotLive, Refused):
        return None


def _message(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if type(message) is dict else {}


# ------------------------------------------------------------------------------------------------------ decoding
_STATES = {state.value: state for state in TaskState}


def decode_event(message: dict[str, Any], log_path: str = "") -> TaskEvent | RunEvent | None:
    """A task or run event as the engine sent it (journal format), or None for a record that isn't one. A hostile
    or newer engine's odd fields are ignored rather than trusted."""
    kind = message.get("type")
    if kind == "task":
        name, new = message.get("task"), _state(message.get("to"))
        if type(name) is not str or new is None:
            return None
        old = _state(message.get("from")) if message.get("from") is not None else None
        snap = TaskSnapshot(
            name,
            new,
            attempt=_int(message.get("attempt")) or 0,
            reason=_str(message.get("reason")),
            exit_code=_int(message.get("exit_code")),
            started_at=_num(message.get("started_at")),
            finished_at=_num(message.get("finished_at")),
            changed_at=_num(message.get("t")) or 0.0,
            pid=_int(message.get("pid")),
            create_time=_num(message.get("create_time")),
            log_path=log_path,
            reused=message.get("reused") is True,
            slots=_str(message.get("slots")),
            worker=_str(message.get("worker")),
            log_start=_offset(message.get("log_start")),
        )
        return TaskEvent(_int(message.get("seq")) or 0, snap.changed_at, old, snap)
    if kind == "run" and type(message.get("event")) is str:
        dag = with_dag({}, message) if message["event"] == "dag" else None  # checked as the journal's reader checks it
        return RunEvent(
            _int(message.get("seq")) or 0,
            _num(message.get("t")) or 0.0,
            message["event"],
            _str(message.get("detail")) or "",
            dag or None,
        )
    return None


def _state(value: Any) -> TaskState | None:
    return _STATES.get(value) if type(value) is str else None  # (a list or a mapping can't even be looked up)


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _offset(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _num(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _str(value: Any) -> str | None:
    return value if type(value) is str else None
