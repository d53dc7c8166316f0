"""The control socket's connections: who gets in, how bytes come in and go out, and when a connection is closed.

One thread multiplexes every connection with `selectors`; the engine never waits for a client:
- Only this user's processes get in: the peer's uid (SO_PEERCRED) is checked before a byte is read; the socket is
  0600 in the run's 0700 folder; there is no TCP port.
- What is sent to a connection is appended to its buffer (under `lock`, from any thread) and written as the socket
  takes it; a viewer whose buffer passes `MAX_BACKLOG` (it hung, or was stopped with Ctrl+Z) is dropped, and may
  reconnect.
- Requests are lines of at most `protocol.MAX_REQUEST` bytes; each whole line goes to `on_line`, on this thread.
  Whatever goes wrong with one connection ends that connection, not the channel; if the serving loop fails anyway it
  starts again (and says so in the engine's log).
- A connection must send its first request within `FIRST_REQUEST` seconds. At most `MAX_VIEWERS` viewers subscribe;
  `RESERVE` more connections are kept for one-off requests (`tuidag pause`), and when every place is taken the
  connection that has been idle longest (not a viewer, no request waiting) makes room: 64 connections that never
  sent a byte locked every command out for as long as they stayed open before this.
"""

from __future__ import annotations

import os
import selectors
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import protocol
from .connection import Connection, EngineLog, bye, idlest, silent
from .protocol import MAX_REQUEST, SOCKET_NAME

MAX_BACKLOG = 32 << 20  # bytes queued for one viewer before it counts as not reading
MAX_VIEWERS = 64
RESERVE = 16  # connections beyond the viewers', for one-off requests
FIRST_REQUEST = 5.0  # seconds a new connection has to send its first request
COALESCE = 0.01  # a wake-up waits this long for more events: one send per ~10 ms, not one per batch
_PEERCRED = struct.Struct("3i")


def bind_path(folder_fd: int, folder: str, name: str) -> str:
    """A path to `name` in a folder that fits in a socket address (108 bytes): through /proc/self/fd when the
    folder's own path is too long (deep state dirs, pytest's temporary folders)."""
    full = os.path.join(folder, name)
    return full if len(full.encode()) < 100 else f"/proc/self/fd/{folder_fd}/{name}"


def listen(folder: Path) -> socket.socket:
    """Bind under a temporary name, make it 0600, then rename it into place: the socket is never reachable
    with looser permissions, and a name planted in the folder is replaced, not connected through."""
    fd = os.open(str(folder), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        temp = f".control-{os.getpid()}-{os.urandom(4).hex()}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(bind_path(fd, str(folder), temp))
            os.chmod(bind_path(fd, str(folder), temp), 0o600)  # our fresh name in our 0700 folder: no link to follow
            os.rename(temp, SOCKET_NAME, src_dir_fd=fd, dst_dir_fd=fd)
            sock.listen(128)  # a burst of connections waits for the accept, not refused (EAGAIN)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            try:
                os.unlink(temp, dir_fd=fd)
            except OSError:
                pass
            raise
        return sock
    finally:
        os.close(fd)


class Transport:
    """The connections to the control socket in `folder`. `on_line(connection, line)` gets every request line, on the
    serving thread, which `start()` starts; `close()` stops it and removes the socket."""

    def __init__(self, folder: Path, on_line: Callable[[Connection, bytes], None], log: EngineLog):
        self.path = folder / SOCKET_NAME
        self.lock = threading.Lock()  # `clients` and what every connection has queued, sent and is
        self._flushed = threading.Condition(self.lock)  # notified as bytes go out and as clients are dropped
        self.clients: dict[int, Connection] = {}
        self.closing = False
        self.stopped = threading.Event()
        self.log = log
        self._on_line = on_line
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._listener = listen(folder)
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._serve, name="tuidag-control-server", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float) -> None:
        """Stop listening, give connections up to `timeout` to receive what is queued for them, then close them all
        and remove the socket."""
        self.closing = True
        self.wake()
        self.stopped.wait(timeout)
        self.stopped.set()
        self.wake()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        try:
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        except OSError:
            pass

    @property
    def viewers(self) -> int:
        with self.lock:
            return sum(client.viewer for client in self.clients.values())

    # ------------------------------------------------------------------------------------------------ sending
    def send(self, client: Connection, data: bytes) -> None:
        """Queue `data` for `client` (any thread); `wake()` gets it written sooner than the next select timeout."""
        with self.lock:
            client.outbuf += data

    def broadcast(self, data: bytes) -> None:
        """Queue `data` for every viewer whose stream has begun, and wake the serving thread."""
        with self.lock:
            for client in self.clients.values():
                if client.viewer and client.waiting is None and not client.closing:
                    client.outbuf += data
        self.wake()

    def deliver(self, client: Connection, data: bytes, timeout: float) -> bool:
        """Queue `data` for `client` and wait up to `timeout` for all of it to be on the client's socket."""
        with self.lock:
            client.outbuf += data
            upto = client.sent + len(client.outbuf)
        self.wake()
        with self._flushed:
            self._flushed.wait_for(lambda: client.sent >= upto or client.gone, timeout)
            return client.sent >= upto

    def refuse(self, client: Connection, rid: Any, error: str, close: bool = False) -> None:
        """An error reply to a bad request, and a line in the engine's log; `close`: nothing more is read from it."""
        self.log(f"bad request from pid {client.pid}: {error}")
        self.send(client, protocol.reply(rid, False, error=error))
        if close:
            client.closing = True
            client.inbuf.clear()

    def wake(self) -> None:
        if not self._woken:
            self._woken = True
            try:
                self._wake_w.send(b"\0")
            except (BlockingIOError, OSError):
                pass

    # ------------------------------------------------------------------------------------------------ serving
    def _serve(self) -> None:
        """The serving loop, started again if it fails: the run must never lose its channel (`tuidag stop` then
        said "not running" while the engine went on running the tasks)."""
        failures: list[float] = []
        try:
            while not self.stopped.is_set():
                try:
                    self._serve_until_closed()
                    return
                except Exception as exc:  # never take the run down with the channel, nor the channel with a bug
                    now = time.monotonic()
                    failures = [t for t in failures if now - t < 10.0] + [now]
                    self.log(f"control channel failed: {exc!r}; restarted", always=True)
                    self._woken = False
                    self.stopped.wait(min(1.0, 0.01 * 2 ** len(failures)))  # a failure that repeats can't spin
        finally:
            for client in list(self.clients.values()):
                self.drop(client)
            self._selector.close()
            self._listener.close()
            self.stopped.set()

    def _serve_until_closed(self) -> None:
        while not self.stopped.is_set():
            for key, mask in self._selector.select(timeout=0.5):
                sock = key.fileobj
                if sock is self._listener:
                    self._accept()
                elif sock is self._wake_r:
                    # Drained first, then cleared: cleared first, a wake-up sent in between was drained with
                    # the older one while `_woken` stayed set, and no wake-up was ever sent again (every event
                    # then waited for the select timeout, up to 0.5 s, before reaching a viewer). No waiting for
                    # more once the run is closing: what it sent last is queued already, and the wait was 10 ms of
                    # every run's end.
                    if not self.closing:
                        self.stopped.wait(COALESCE)
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    self._woken = False
                else:
                    assert isinstance(sock, socket.socket)  # only sockets are registered
                    client = self.clients.get(sock.fileno())
                    if client is not None:
                        self._serve_client(client, mask)
            self._update_interest()
            if self.closing and not any(c.outbuf for c in self.clients.values()):
                return

    def _serve_client(self, client: Connection, mask: int) -> None:
        """Read from and write to one connection; whatever goes wrong with it ends it, not the channel."""
        try:
            if mask & selectors.EVENT_READ:
                self._read(client)
            if mask & selectors.EVENT_WRITE and client.sock.fileno() >= 0:
                self._write(client)
        except Exception as exc:
            self.log(f"closed the connection of pid {client.pid}: it could not be served ({exc!r})")
            self.drop(client)

    # ---------------------------------------------------------------------------------------------- admission
    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: try again on the next wake-up
                self.log(f"accept failed: {exc.strerror or exc}")
                return
            try:
                self._admit(sock)
            except Exception as exc:  # a connection that can't be admitted ends there, not the channel
                self.log(f"closed a new connection: it could not be admitted ({exc!r})")
                with self.lock:
                    if sock.fileno() >= 0:
                        self.clients.pop(sock.fileno(), None)
                sock.close()

    def _admit(self, sock: socket.socket) -> None:
        """Keep a new connection, or close it saying why (another user's process is told nothing)."""
        pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        if uid != os.geteuid():
            self.log(f"refused a connection from uid {uid} (pid {pid}): not this run's user")
            sock.close()
            return
        sock.setblocking(False)
        if self.closing:
            bye(sock, "the run is ending")
            sock.close()
            return
        if len(self.clients) >= MAX_VIEWERS + RESERVE and not self._make_room():
            self.log(f"refused a connection from pid {pid}: every place is taken")
            bye(
                sock,
                f"too many connections: {self.viewers} viewers and {len(self.clients) - self.viewers} "
                f"requests waiting for answers; try again",
            )
            sock.close()
            return
        client = Connection(sock, pid)
        with self.lock:
            self.clients[sock.fileno()] = client
        self._selector.register(sock, selectors.EVENT_READ, None)

    def _make_room(self) -> bool:
        """Every place is taken: close the connection idle the longest (not a viewer, nothing waiting for it)."""
        with self.lock:
            oldest = idlest(list(self.clients.values()))
        if oldest is None:
            return False
        self.log(f"closed the idle connection of pid {oldest.pid} to make room for a new one")
        self._close_saying(oldest, "closed to make room for a new connection: this one was idle")
        return True

    def _close_saying(self, client: Connection, reason: str) -> None:
        bye(client.sock, reason)
        self.drop(client)

    def _drop_silent(self) -> None:
        """Close connections that sent no request within FIRST_REQUEST seconds of connecting."""
        with self.lock:
            late = silent(list(self.clients.values()), FIRST_REQUEST)
        for client in late:
            self.log(f"closed the connection of pid {client.pid}: no request within {FIRST_REQUEST:.0f} s")
            self._close_saying(client, f"no request within {FIRST_REQUEST:.0f} s of connecting")

    # ------------------------------------------------------------------------------------------------- bytes
    def _read(self, client: Connection) -> None:
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.drop(client)
            return
        client.since = time.monotonic()
        client.inbuf += data
        while not client.closing:
            end = client.inbuf.find(b"\n")
            if end < 0:
                if len(client.inbuf) > MAX_REQUEST:
                    self.refuse(client, None, f"request longer than {MAX_REQUEST} bytes", close=True)
                return
            line = bytes(client.inbuf[:end])
            del client.inbuf[: end + 1]
            if len(line) > MAX_REQUEST:
                self.refuse(client, None, f"request longer than {MAX_REQUEST} bytes", close=True)
                return
            if line.strip():
                client.asked = True
                self._on_line(client, line)

    def _update_interest(self) -> None:
        """Write interest for clients with something queued; drop viewers that stopped reading and connections
        that never asked anything."""
        self._drop_silent()
        with self.lock:
            clients = list(self.clients.values())
        for client in clients:
            if len(client.outbuf) > MAX_BACKLOG:
                self.log(
                    f"dropped the viewer of pid {client.pid}: it stopped reading "
                    f"({len(client.outbuf) >> 20} MiB waiting)"
                )
                self.drop(client)
                continue
            if client.closing and not client.outbuf:
                self.drop(client)
                continue
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.outbuf else 0)
            try:
                if self._selector.get_key(client.sock).events != events:
                    self._selector.modify(client.sock, events)
            except (KeyError, ValueError):
                pass

    def _write(self, client: Connection) -> None:
        with self.lock:
            data = bytes(client.outbuf[: 1 << 20])
        if not data:
            return
        try:
            sent = client.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(client)
            return
        with self.lock:
            del client.outbuf[:sent]
            client.sent += sent
            self._flushed.notify_all()

    def drop(self, client: Connection) -> None:
        """Close a connection; whoever waits for bytes to reach it stops waiting."""
        with self.lock:
            if self.clients.get(client.sock.fileno()) is not client:
                return
            del self.clients[client.sock.fileno()]
            client.gone = True
            self._flushed.notify_all()
        try:
            self._selector.unregister(client.sock)
        except (KeyError, ValueError):
            pass
        client.sock.close()
