"""The engine's end of the control channel: a Unix socket in the run's folder that viewers and `tuidag cancel` use.

One thread multiplexes every connection with `selectors`; the engine never waits for a client:
- Only this user's processes get in: the peer's uid (SO_PEERCRED) is checked before a byte is read; the socket is
  0600 in the run's 0700 folder; there is no TCP port.
- Engine events are encoded once per batch (as journal lines) and appended to each viewer's buffer; a viewer whose
  buffer passes `MAX_BACKLOG` (it hung, or was stopped with Ctrl+Z) is dropped, and may reconnect.
- Requests are parsed with `protocol.parse_request`: a malformed, oversized or unknown one gets an error reply and a
  line in the engine's log, never an exception in the engine. Whatever else goes wrong with one connection ends that
  connection, not the channel; if the serving loop fails anyway it starts again (and says so in the engine's log).
- A connection must send its first request within `FIRST_REQUEST` seconds. At most `MAX_VIEWERS` viewers subscribe;
  `RESERVE` more connections are kept for one-off requests (`tuidag pause`), and when every place is taken the
  connection that has been idle longest (not a viewer, no request waiting) makes room: 64 connections that never
  sent a byte locked every command out for as long as they stayed open before this.
- Controls that may block (cancelling waits for kills to be sent) run one at a time on their own thread. One whose
  deadline passed before it started is dropped: a `tuidag pause` that gave up on a stopped engine must not take
  effect when the engine is continued.
"""
from __future__ import annotations

import os
import queue
import selectors
import signal
import socket
import stat
import struct
import threading
import time
from typing import Any

from ..engine.events import Event, TaskEvent
from ..engine.scheduler import RerunRefused
from ..store.journal import task_line
from . import protocol
from .connection import Connection, EngineLog, bye, idlest, silent
from .protocol import MAX_REQUEST, SOCKET_NAME, ProtocolError

MAX_BACKLOG = 32 << 20      # bytes queued for one viewer before it counts as not reading
MAX_VIEWERS = 64
RESERVE = 16                # connections beyond the viewers', for one-off requests
FIRST_REQUEST = 5.0         # seconds a new connection has to send its first request
FLUSH_WAIT = 5.0            # seconds a control waits for its `started` to reach the client's socket
USAGE_INTERVAL = 1.0
COALESCE = 0.01             # a wake-up waits this long for more events: one send per ~10 ms, not one per batch
_PEERCRED = struct.Struct("3i")


def bind_path(folder_fd: int, folder: str, name: str) -> str:
    """A path to `name` in a folder that fits in a socket address (108 bytes): through /proc/self/fd when the
    folder's own path is too long (deep state dirs, pytest's temporary folders)."""
    full = os.path.join(folder, name)
    return full if len(full.encode()) < 100 else f"/proc/self/fd/{folder_fd}/{name}"


class ControlServer:
    """Serves one run. `session` is the engine side of it (launch.RunSession): scheduler, run folder, interrupt."""

    def __init__(self, session: Any):
        self.session = session
        self.scheduler = session.scheduler
        self.path = session.run.path / SOCKET_NAME
        self._lock = threading.Lock()
        self._flushed = threading.Condition(self._lock)  # notified as bytes go out and as clients are dropped
        self._clients: dict[int, Connection] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._controls: queue.SimpleQueue[tuple[Connection, dict] | None] = queue.SimpleQueue()
        self._closing = False
        self._stopped = threading.Event()
        self._log = EngineLog()
        self._listener = self._listen()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._unsubscribe = self.scheduler.subscribe(self._on_events, batches=True)
        self._threads = [threading.Thread(target=self._serve, name="tuidag-control-server", daemon=True),
                         threading.Thread(target=self._run_controls, name="tuidag-control", daemon=True),
                         threading.Thread(target=self._sample_usage, name="tuidag-control-usage", daemon=True)]
        for thread in self._threads:
            thread.start()

    # ------------------------------------------------------------------------------------------------ lifecycle
    def _listen(self) -> socket.socket:
        """Bind under a temporary name, make it 0600, then rename it into place: the socket is never reachable
        with looser permissions, and a name planted in the folder is replaced, not connected through."""
        folder = str(self.session.run.path)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            temp = f".control-{os.getpid()}-{os.urandom(4).hex()}"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.bind(bind_path(fd, folder, temp))
                os.chmod(bind_path(fd, folder, temp), 0o600)  # our fresh name in our 0700 folder: no link to follow
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

    def close(self, timeout: float = 2.0) -> None:
        """The run has ended: stop listening, give viewers up to `timeout` to receive what is queued for them (the
        end of the run), then close every connection and remove the socket."""
        self._unsubscribe()
        # The control being carried out may be the one that ended the run (a cancel of its last tasks): it still
        # answers, before the connections close.
        self._controls.put(None)
        controls = next(thread for thread in self._threads if thread.name == "tuidag-control")
        if controls is not threading.current_thread():
            controls.join(timeout)
        self._closing = True
        self._wake()
        self._stopped.wait(timeout)
        self._stopped.set()
        self._wake()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        try:
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        except OSError:
            pass

    @property
    def viewers(self) -> int:
        with self._lock:
            return sum(client.viewer for client in self._clients.values())

    # ------------------------------------------------------------------------------------------- engine events
    def _on_events(self, batch: list[Event]) -> None:
        """Engine observer (batches, engine threads): encode once, queue for every viewer, wake the server."""
        with self._lock:
            viewers = [c for c in self._clients.values() if c.viewer]
            if not viewers:
                return
            data = b"".join(map(_event_line, batch))
            for client in viewers:
                if client.waiting is not None:
                    client.waiting.extend(batch)
                elif client.closing:
                    continue
                elif batch[0].seq > client.after:
                    client.outbuf += data
                else:  # a batch the engine delivers after the snapshot that holds it (delivery is not under its lock)
                    client.outbuf += b"".join(_event_line(e) for e in batch if e.seq > client.after)
        self._wake()

    def notice(self, text: str) -> None:
        """Something every viewer must show its user (the state dir filled up)."""
        self._broadcast(protocol.encode({"type": "notice", "text": text}))

    def _broadcast(self, data: bytes) -> None:
        with self._lock:
            for client in self._clients.values():
                if client.viewer and client.waiting is None and not client.closing:
                    client.outbuf += data
        self._wake()

    def _sample_usage(self) -> None:
        """CPU and memory of the running trees, once a second, for viewers (they can't ask the executor)."""
        while not self._stopped.wait(USAGE_INTERVAL):
            if not self.viewers:
                continue
            usage = {}
            for name, snap in self.scheduler.snapshot().items():
                if snap.state.value == "RUNNING":
                    try:
                        value = self.scheduler.usage(name)
                    except Exception:  # a tree that went away while it was measured
                        value = None
                    if value is not None:
                        usage[name] = list(value)
            self._broadcast(protocol.encode({"type": "usage", "usage": usage,
                                             "slots": {k: list(v) for k, v in self.scheduler.slots_in_use().items()}}))

    def _wake(self) -> None:
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
            while not self._stopped.is_set():
                try:
                    self._serve_until_closed()
                    return
                except Exception as exc:  # never take the run down with the channel, nor the channel with a bug
                    now = time.monotonic()
                    failures = [t for t in failures if now - t < 10.0] + [now]
                    self._log(f"control channel failed: {exc!r}; restarted", always=True)
                    self._woken = False
                    self._stopped.wait(min(1.0, 0.01 * 2 ** len(failures)))  # a failure that repeats can't spin
        finally:
            for client in list(self._clients.values()):
                self._drop(client)
            self._selector.close()
            self._listener.close()
            self._stopped.set()

    def _serve_until_closed(self) -> None:
        while not self._stopped.is_set():
            for key, mask in self._selector.select(timeout=0.5):
                sock = key.fileobj
                if sock is self._listener:
                    self._accept()
                elif sock is self._wake_r:
                    # Drained first, then cleared: cleared first, a wake-up sent in between was drained with
                    # the older one while `_woken` stayed set, and no wake-up was ever sent again (every event
                    # then waited for the select timeout, up to 0.5 s, before reaching a viewer).
                    self._stopped.wait(COALESCE)
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    self._woken = False
                else:
                    client = self._clients.get(sock.fileno())
                    if client is not None:
                        self._serve_client(client, mask)
            self._update_interest()
            if self._closing and not any(c.outbuf for c in self._clients.values()):
                return

    def _serve_client(self, client: Connection, mask: int) -> None:
        """Read from and write to one connection; whatever goes wrong with it ends it, not the channel."""
        try:
            if mask & selectors.EVENT_READ:
                self._read(client)
            if mask & selectors.EVENT_WRITE and client.sock.fileno() >= 0:
                self._write(client)
        except Exception as exc:
            self._log(f"closed the connection of pid {client.pid}: it could not be served ({exc!r})")
            self._drop(client)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: try again on the next wake-up
                self._log(f"accept failed: {exc.strerror or exc}")
                return
            try:
                self._admit(sock)
            except Exception as exc:  # a connection that can't be admitted ends there, not the channel
                self._log(f"closed a new connection: it could not be admitted ({exc!r})")
                with self._lock:
                    if sock.fileno() >= 0:
                        self._clients.pop(sock.fileno(), None)
                sock.close()

    def _admit(self, sock: socket.socket) -> None:
        """Keep a new connection, or close it saying why (another user's process is told nothing)."""
        pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        if uid != os.geteuid():
            self._log(f"refused a connection from uid {uid} (pid {pid}): not this run's user")
            sock.close()
            return
        sock.setblocking(False)
        if self._closing:
            bye(sock, "the run is ending")
            sock.close()
            return
        if len(self._clients) >= MAX_VIEWERS + RESERVE and not self._make_room():
            self._log(f"refused a connection from pid {pid}: every place is taken")
            bye(sock, f"too many connections: {self.viewers} viewers and {len(self._clients) - self.viewers} "
                      f"requests waiting for answers; try again")
            sock.close()
            return
        client = Connection(sock, pid)
        with self._lock:
            self._clients[sock.fileno()] = client
        self._selector.register(sock, selectors.EVENT_READ, None)

    def _make_room(self) -> bool:
        """Every place is taken: close the connection idle the longest (not a viewer, nothing waiting for it)."""
        with self._lock:
            oldest = idlest(list(self._clients.values()))
        if oldest is None:
            return False
        self._log(f"closed the idle connection of pid {oldest.pid} to make room for a new one")
        self._close_saying(oldest, "closed to make room for a new connection: this one was idle")
        return True

    def _close_saying(self, client: Connection, reason: str) -> None:
        bye(client.sock, reason)
        self._drop(client)

    def _drop_silent(self) -> None:
        """Close connections that sent no request within FIRST_REQUEST seconds of connecting."""
        with self._lock:
            late = silent(list(self._clients.values()), FIRST_REQUEST)
        for client in late:
            self._log(f"closed the connection of pid {client.pid}: no request within {FIRST_REQUEST:.0f} s")
            self._close_saying(client, f"no request within {FIRST_REQUEST:.0f} s of connecting")

    def _read(self, client: Connection) -> None:
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
        client.since = time.monotonic()
        client.inbuf += data
        while not client.closing:
            end = client.inbuf.find(b"\n")
            if end < 0:
                if len(client.inbuf) > MAX_REQUEST:
                    self._refuse(client, None, f"request longer than {MAX_REQUEST} bytes", close=True)
                return
            line = bytes(client.inbuf[:end])
            del client.inbuf[:end + 1]
            if len(line) > MAX_REQUEST:
                self._refuse(client, None, f"request longer than {MAX_REQUEST} bytes", close=True)
                return
            if line.strip():
                client.asked = True
                self._handle(client, line)

    def _handle(self, client: Connection, line: bytes) -> None:
        try:
            request = protocol.parse_request(line)
        except ProtocolError as exc:
            self._refuse(client, None, str(exc))
            return
        op, rid = request["op"], request.get("id")
        if _expired(request):
            self._log(f"dropped {op} from pid {client.pid}: its deadline passed before the engine read it")
            self._send(client, _expired_reply(request, "its deadline passed before the engine read it"))
        elif op == "hello":
            self._send(client, protocol.reply(rid, version=protocol.VERSION, run_id=self.session.run.run_id,
                                              pid=os.getpid()))
        elif op == "status":
            self._send(client, protocol.reply(rid, **self.status()))
        elif op == "subscribe":
            self._subscribe(client, rid)
        elif op == "branch":
            task = request["task"]
            if task not in self.session.dag.tasks:
                self._refuse(client, rid, f"no task named {task[:80]!r}")
            else:
                self._send(client, protocol.reply(rid, tasks=self.scheduler.branch(task)))
        else:
            with self._lock:
                client.pending += 1
            self._controls.put((client, request))

    def status(self) -> dict[str, Any]:
        return {"run_id": self.session.run.run_id, "dag": self.session.dag.name, "pid": os.getpid(),
                "viewers": self.viewers, "paused": self.scheduler.paused, "finished": self.scheduler.finished,
                "started": self.session.started}

    def _subscribe(self, client: Connection, rid: Any) -> None:
        """Snapshot first, then every event newer than it: events that arrive meanwhile wait in `waiting`."""
        if client.viewer:
            self._refuse(client, rid, "already subscribed")
            return
        if self.viewers >= MAX_VIEWERS:
            self._refuse(client, rid, f"too many viewers: this run has {MAX_VIEWERS} already")
            return
        with self._lock:
            client.viewer = True
            client.waiting = []
        seq, snaps = self.scheduler.snapshot_seq()
        session = self.session
        head = protocol.encode({"type": "snapshot", "seq": seq, "count": len(snaps), "run_id": session.run.run_id,
                                "started": session.started, "paused": self.scheduler.paused,
                                "finished": self.scheduler.finished, "interrupted_by": session.interrupted_by,
                                "notice": session.store_message})
        body = b"".join(task_line(TaskEvent(seq, snap.changed_at, snap.state, snap)) for snap in snaps.values())
        with self._lock:
            waiting, client.waiting, client.after = client.waiting or [], None, seq
            later = b"".join(_event_line(e) for e in waiting if e.seq > seq)
            client.outbuf += protocol.reply(rid) + head + body + later

    def _send(self, client: Connection, data: bytes) -> None:
        with self._lock:
            client.outbuf += data

    def _refuse(self, client: Connection, rid: Any, error: str, close: bool = False) -> None:
        self._log(f"bad request from pid {client.pid}: {error}")
        self._send(client, protocol.reply(rid, False, error=error))
        if close:
            client.closing = True
            client.inbuf.clear()

    def _update_interest(self) -> None:
        """Write interest for clients with something queued; drop viewers that stopped reading and connections
        that never asked anything."""
        self._drop_silent()
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            if len(client.outbuf) > MAX_BACKLOG:
                self._log(f"dropped the viewer of pid {client.pid}: it stopped reading "
                          f"({len(client.outbuf) >> 20} MiB waiting)")
                self._drop(client)
                continue
            if client.closing and not client.outbuf:
                self._drop(client)
                continue
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.outbuf else 0)
            try:
                if self._selector.get_key(client.sock).events != events:
                    self._selector.modify(client.sock, events)
            except (KeyError, ValueError):
                pass

    def _write(self, client: Connection) -> None:
        with self._lock:
            data = bytes(client.outbuf[:1 << 20])
        if not data:
            return
        try:
            sent = client.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(client)
            return
        with self._lock:
            del client.outbuf[:sent]
            client.sent += sent
            self._flushed.notify_all()

    def _drop(self, client: Connection) -> None:
        with self._lock:
            if self._clients.get(client.sock.fileno()) is not client:
                return
            del self._clients[client.sock.fileno()]
            client.gone = True
            self._flushed.notify_all()
        try:
            self._selector.unregister(client.sock)
        except (KeyError, ValueError):
            pass
        client.sock.close()

    # ------------------------------------------------------------------------------------------------ controls
    def _run_controls(self) -> None:
        while True:
            item = self._controls.get()
            if item is None:
                return
            client, request = item
            try:
                why = self._not_started(client, request) if request.get("deadline") is not None else None
                if why is not None:
                    self._log(f"dropped {request['op']} from pid {client.pid}: {why}")
                    answer = _expired_reply(request, why)
                else:
                    answer = self._control(request)
            except Exception as exc:  # a control that failed must not end the thread that runs the others
                answer = protocol.reply(request.get("id"), False, error=f"internal error: {exc!r}")
                self._log(f"control {request['op']} failed: {exc!r}")
            with self._lock:
                client.pending -= 1
                client.outbuf += answer
            self._wake()

    def _not_started(self, client: Connection, request: dict) -> str | None:
        """Tell the client its control starts; None once that is on its socket with the deadline still ahead, so a
        client that saw no `started` by its deadline can say for sure that nothing was done. Otherwise why the
        control is dropped: its deadline passed, or the client did not take the `started` within FLUSH_WAIT seconds
        (it can't hold up the controls of others)."""
        deadline = request["deadline"]
        with self._lock:
            client.outbuf += protocol.encode({"type": "started", "id": request.get("id")})
            upto = client.sent + len(client.outbuf)
        self._wake()
        with self._flushed:
            self._flushed.wait_for(lambda: client.sent >= upto or client.gone,
                                   min(FLUSH_WAIT, max(0.0, deadline - time.time())))
            on_the_socket = client.sent >= upto
        if time.time() > deadline:
            return "its deadline passed before the engine got to it"
        return None if on_the_socket else "the connection did not take the engine's messages in time"

    def _control(self, request: dict) -> bytes:
        op, rid, scheduler = request["op"], request.get("id"), self.scheduler
        if op in ("cancel", "rerun"):
            unknown = [t for t in request["tasks"] if t not in self.session.dag.tasks]
            if unknown:
                return protocol.reply(rid, False, error=f"no task named {unknown[0][:80]!r}")
        if op == "cancel":
            cancelled: dict[str, None] = {}  # an ordered set: a list's `in` made cancelling a big branch quadratic
            reason = protocol.cancel_reason(op, request.get("origin"))
            for task in request["tasks"]:
                cancelled.update(dict.fromkeys(scheduler.cancel(task, reason)))
            return protocol.reply(rid, changed=list(cancelled))
        if op in ("cancel_all", "stop"):
            return protocol.reply(rid, changed=scheduler.cancel_all(protocol.cancel_reason(op, request.get("origin"))))
        if op == "rerun":
            rerun: dict[str, None] = {}
            try:
                for task in request["tasks"]:
                    rerun.update(dict.fromkeys(scheduler.rerun(task)))
            except RerunRefused as refused:
                return protocol.reply(rid, False, error=str(refused), changed=list(rerun))
            changed = list(rerun)
            if not changed:
                states = {t: scheduler.snapshot()[t].state.value.lower() for t in request["tasks"]}
                return protocol.reply(rid, False, error="nothing to re-run: only failed, cancelled or skipped tasks "
                                                        "re-run (" + ", ".join(f"{t} is {s}" for t, s in states.items())
                                                        + ")", changed=[])
            return protocol.reply(rid, changed=changed)
        if op == "pause":
            if scheduler.paused:
                return protocol.reply(rid, changed=False)
            if not scheduler.pause():
                return protocol.reply(rid, False, error="the run is finished: nothing left to pause")
            return protocol.reply(rid, changed=True)
        if op == "resume":
            was = scheduler.paused
            scheduler.resume()
            return protocol.reply(rid, changed=was)
        if op == "interrupt":
            self.session.interrupt(getattr(signal, request["signal"]))
            return protocol.reply(rid)
        return protocol.reply(rid, False, error=f"unknown op {op!r}")


def _expired(request: dict) -> bool:
    deadline = request.get("deadline")
    return deadline is not None and time.time() > deadline


def _expired_reply(request: dict, why: str = "its deadline passed before the engine got to it") -> bytes:
    return protocol.reply(request.get("id"), False, expired=True, error=f"{request['op']}: not done, {why}")


def _event_line(event: Event) -> bytes:
    if type(event) is TaskEvent:
        return task_line(event)
    return protocol.encode({"type": "run", "event": event.kind, "seq": event.seq, "t": event.time,
                            "detail": event.detail})

