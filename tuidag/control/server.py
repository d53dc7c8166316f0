"""The engine's end of the control channel: a Unix socket in the run's folder that viewers and `tuidag cancel` use.

One thread multiplexes every connection with `selectors`; the engine never waits for a client:
- Only this user's processes get in: the peer's uid (SO_PEERCRED) is checked before a byte is read; the socket is
  0600 in the run's 0700 folder; there is no TCP port.
- Engine events are encoded once per batch (as journal lines) and appended to each viewer's buffer; a viewer whose
  buffer passes `MAX_BACKLOG` (it hung, or was stopped with Ctrl+Z) is dropped, and may reconnect.
- Requests are parsed with `protocol.parse_request`: a malformed, oversized or unknown one gets an error reply and a
  line in the engine's log, never an exception in the engine.
- Controls that may block (cancelling waits for kills to be sent) run one at a time on their own thread.
"""
from __future__ import annotations

import os
import queue
import selectors
import signal
import socket
import stat
import struct
import sys
import threading
import time
from typing import Any

from ..engine.events import Event, TaskEvent
from ..engine.scheduler import RerunRefused
from ..store.journal import task_line
from . import protocol
from .protocol import MAX_REQUEST, SOCKET_NAME, ProtocolError

MAX_BACKLOG = 32 << 20      # bytes queued for one viewer before it counts as not reading
MAX_CLIENTS = 64
USAGE_INTERVAL = 1.0
COALESCE = 0.01             # a wake-up waits this long for more events: one send per ~10 ms, not one per batch
LOG_BURST = 20              # lines the engine's log takes about clients per `LOG_WINDOW` seconds; then one summary
LOG_WINDOW = 10.0
_PEERCRED = struct.Struct("3i")


def bind_path(folder_fd: int, folder: str, name: str) -> str:
    """A path to `name` in a folder that fits in a socket address (108 bytes): through /proc/self/fd when the
    folder's own path is too long (deep state dirs, pytest's temporary folders)."""
    full = os.path.join(folder, name)
    return full if len(full.encode()) < 100 else f"/proc/self/fd/{folder_fd}/{name}"


class _Client:
    __slots__ = ("sock", "pid", "inbuf", "outbuf", "viewer", "waiting", "after", "closing")

    def __init__(self, sock: socket.socket, pid: int):
        self.sock = sock
        self.pid = pid
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.viewer = False            # subscribed to events
        self.waiting: list[Event] | None = None  # events that arrived while its snapshot was being taken
        self.after = 0  # the number of the last event its snapshot holds: older ones, delivered late, are not news
        self.closing = False           # close once `outbuf` is sent


class ControlServer:
    """Serves one run. `session` is the engine side of it (launch.RunSession): scheduler, run folder, interrupt."""

    def __init__(self, session: Any):
        self.session = session
        self.scheduler = session.scheduler
        self.path = session.run.path / SOCKET_NAME
        self._lock = threading.Lock()
        self._clients: dict[int, _Client] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._woken = False
        self._controls: queue.SimpleQueue[tuple[_Client, dict] | None] = queue.SimpleQueue()
        self._closing = False
        self._stopped = threading.Event()
        self._log_times: list[float] = []
        self._log_dropped = 0
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
                sock.listen(16)
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
        self._closing = True
        self._wake()
        self._stopped.wait(timeout)
        self._closing = True
        self._controls.put(None)
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
        try:
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
                        if client is None:
                            continue
                        if mask & selectors.EVENT_READ:
                            self._read(client)
                        if mask & selectors.EVENT_WRITE and client.sock.fileno() >= 0:
                            self._write(client)
                self._update_interest()
                if self._closing and not any(c.outbuf for c in self._clients.values()):
                    break
        except Exception as exc:  # never take the run down with the channel
            self._log(f"control channel stopped: {exc!r}")
        finally:
            for client in list(self._clients.values()):
                self._drop(client)
            self._selector.close()
            self._listener.close()
            self._stopped.set()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors: try again on the next wake-up
                self._log(f"accept failed: {exc.strerror or exc}")
                return
            pid, uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
            if uid != os.geteuid():
                self._log(f"refused a connection from uid {uid} (pid {pid}): not this run's user")
                sock.close()
                continue
            if self._closing or len(self._clients) >= MAX_CLIENTS:
                sock.close()
                continue
            sock.setblocking(False)
            client = _Client(sock, pid)
            with self._lock:
                self._clients[sock.fileno()] = client
            self._selector.register(sock, selectors.EVENT_READ, None)

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
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
                self._handle(client, line)

    def _handle(self, client: _Client, line: bytes) -> None:
        try:
            request = protocol.parse_request(line)
        except ProtocolError as exc:
            self._refuse(client, None, str(exc))
            return
        op, rid = request["op"], request.get("id")
        if op == "hello":
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
            self._controls.put((client, request))

    def status(self) -> dict[str, Any]:
        return {"run_id": self.session.run.run_id, "dag": self.session.dag.name, "pid": os.getpid(),
                "viewers": self.viewers, "paused": self.scheduler.paused, "finished": self.scheduler.finished,
                "started": self.session.started}

    def _subscribe(self, client: _Client, rid: Any) -> None:
        """Snapshot first, then every event newer than it: events that arrive meanwhile wait in `waiting`."""
        if client.viewer:
            self._refuse(client, rid, "already subscribed")
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

    def _send(self, client: _Client, data: bytes) -> None:
        with self._lock:
            client.outbuf += data

    def _refuse(self, client: _Client, rid: Any, error: str, close: bool = False) -> None:
        self._log(f"bad request from pid {client.pid}: {error}")
        self._send(client, protocol.reply(rid, False, error=error))
        if close:
            client.closing = True
            client.inbuf.clear()

    def _update_interest(self) -> None:
        """Write interest for clients with something queued; drop viewers that stopped reading."""
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

    def _write(self, client: _Client) -> None:
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

    def _drop(self, client: _Client) -> None:
        with self._lock:
            if self._clients.get(client.sock.fileno()) is not client:
                return
            del self._clients[client.sock.fileno()]
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
                answer = self._control(request)
            except Exception as exc:  # a control that failed must not end the thread that runs the others
                answer = protocol.reply(request.get("id"), False, error=f"internal error: {exc!r}")
                self._log(f"control {request['op']} failed: {exc!r}")
            self._send(client, answer)
            self._wake()

    def _control(self, request: dict) -> bytes:
        op, rid, scheduler = request["op"], request.get("id"), self.scheduler
        if op in ("cancel", "rerun"):
            unknown = [t for t in request["tasks"] if t not in self.session.dag.tasks]
            if unknown:
                return protocol.reply(rid, False, error=f"no task named {unknown[0][:80]!r}")
        if op == "cancel":
            changed: list[str] = []
            reason = protocol.cancel_reason(op, request.get("origin"))
            for task in request["tasks"]:
                changed += [t for t in scheduler.cancel(task, reason) if t not in changed]
            return protocol.reply(rid, changed=changed)
        if op in ("cancel_all", "stop"):
            return protocol.reply(rid, changed=scheduler.cancel_all(protocol.cancel_reason(op, request.get("origin"))))
        if op == "rerun":
            changed = []
            try:
                for task in request["tasks"]:
                    changed += [t for t in scheduler.rerun(task) if t not in changed]
            except RerunRefused as refused:
                return protocol.reply(rid, False, error=str(refused), changed=changed)
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

    # -------------------------------------------------------------------------------------------------- logging
    def _log(self, text: str) -> None:
        """A line in the engine's log (the run folder's engine.log when detached), at most LOG_BURST per window: a
        client sending garbage must not fill the disk."""
        now = time.monotonic()
        self._log_times = [t for t in self._log_times if now - t < LOG_WINDOW]
        if len(self._log_times) >= LOG_BURST:
            self._log_dropped += 1
            return
        self._log_times.append(now)
        dropped, self._log_dropped = self._log_dropped, 0
        try:
            sys.stderr.write(f"tuidag: control: {text}"
                             + (f" ({dropped} more such lines not shown)" if dropped else "") + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def _event_line(event: Event) -> bytes:
    if type(event) is TaskEvent:
        return task_line(event)
    return protocol.encode({"type": "run", "event": event.kind, "seq": event.seq, "t": event.time,
                            "detail": event.detail})

