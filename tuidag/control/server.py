"""The engine's end of the control channel: a Unix socket in the run's folder that viewers and `tuidag cancel` use.

`transport.py` keeps the connections (who gets in, buffers, limits); `dispatch.py` holds what each op does. Here the
two meet the run:
- Engine events are encoded once per batch (as journal lines) and appended to each viewer's buffer, after the
  snapshot its subscription began with and only when newer than it.
- Requests are parsed with `protocol.parse_request`: a malformed, oversized or unknown one gets an error reply and a
  line in the engine's log, never an exception in the engine.
- Controls that may block (cancelling waits for kills to be sent) run one at a time on their own thread. One whose
  deadline passed before it started is dropped: a `tuidag pause` that gave up on a stopped engine must not take
  effect when the engine is continued.
- CPU and memory of the running trees go to every viewer once a second (viewers can't ask the executor), sampled by a
  thread started when the first viewer subscribes: a run nobody watches samples nothing and wakes nothing for it.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any

from ..engine.events import Event, TaskEvent
from ..store.journal import run_line, task_line
from . import dispatch, protocol
from .connection import Connection, EngineLog
from .protocol import ProtocolError
from .transport import Transport

FLUSH_WAIT = 5.0  # seconds a control waits for its `started` to reach the client's socket
USAGE_INTERVAL = 1.0


class ControlServer:
    """Serves one run. `session` is the engine side of it (launch.RunSession): scheduler, run folder, interrupt."""

    def __init__(self, session: Any):
        self.session = session
        self.scheduler = session.scheduler
        self._log = EngineLog()
        self.transport = Transport(session.run.path, self._handle, self._log)
        self._controls: queue.SimpleQueue[tuple[Connection, dict] | None] = queue.SimpleQueue()
        self._unsubscribe = self.scheduler.subscribe(self._on_events, batches=True)
        self._threads = [threading.Thread(target=self._run_controls, name="tuidag-control", daemon=True)]
        self._sampler: threading.Thread | None = None  # started with the first viewer (`stream_to`)
        self.transport.start()
        for thread in self._threads:
            thread.start()

    def close(self, timeout: float = 2.0) -> None:
        """The run has ended: stop listening, give viewers up to `timeout` to receive what is queued for them (the
        end of the run), then close every connection and remove the socket."""
        self._unsubscribe()
        # The control being carried out may be the one that ended the run (a cancel of its last tasks): it still
        # answers, before the connections close.
        self._controls.put(None)
        controls = self._threads[0]
        if controls is not threading.current_thread():
            controls.join(timeout)
        self.transport.close(timeout)
        with self.transport.lock:
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    @property
    def viewers(self) -> int:
        return self.transport.viewers

    def status(self) -> dict[str, Any]:
        return {
            "run_id": self.session.run.run_id,
            "dag": self.session.dag.name,
            "pid": os.getpid(),
            "viewers": self.viewers,
            "paused": self.scheduler.paused,
            "finished": self.scheduler.finished,
            "started": self.session.started,
        }

    # ------------------------------------------------------------------------------------------ viewers' stream
    def stream_to(self, client: Connection, rid: Any) -> None:
        """Make `client` a viewer: snapshot first, then every event newer than it (events that arrive meanwhile
        wait in `waiting`)."""
        with self.transport.lock:
            client.viewer = True
            client.waiting = []
            if self._sampler is None and not self.transport.closing:
                self._sampler = threading.Thread(target=self._sample_usage, name="tuidag-control-usage", daemon=True)
                self._threads.append(self._sampler)
                self._sampler.start()
        seq, snaps = self.scheduler.snapshot_seq()
        shape = self.scheduler.dag_shape  # read after the snapshot: it has every task the snapshot has, or more
        session = self.session
        head = protocol.encode(
            {
                "type": "snapshot",
                "seq": seq,
                "count": len(snaps),
                "run_id": session.run.run_id,
                "started": session.started,
                "paused": self.scheduler.paused,
                "finished": self.scheduler.finished,
                "watching": self.scheduler.watching,
                "interrupted_by": session.interrupted_by,
                "notice": session.store_message,
                **({"dag": shape} if shape is not None else {}),  # the DAG file was edited: the run's tasks now
            }
        )
        body = b"".join(task_line(TaskEvent(seq, snap.changed_at, snap.state, snap)) for snap in snaps.values())
        with self.transport.lock:
            waiting, client.waiting, client.after = client.waiting or [], None, seq
            later = b"".join(_event_line(e) for e in waiting if e.seq > seq)
            client.outbuf += protocol.reply(rid) + head + body + later

    def _on_events(self, batch: list[Event]) -> None:
        """Engine observer (batches, engine threads): encode once, queue for every viewer, wake the server."""
        with self.transport.lock:
            viewers = [c for c in self.transport.clients.values() if c.viewer]
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
        self.transport.wake()

    def notice(self, text: str) -> None:
        """Something every viewer must show its user (the state dir filled up)."""
        self.transport.broadcast(protocol.encode({"type": "notice", "text": text}))

    def _sample_usage(self) -> None:
        """CPU and memory of the running trees, once a second while there are viewers (they can't ask the
        executor)."""
        while not self.transport.stopped.wait(USAGE_INTERVAL):
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
            self.transport.broadcast(
                protocol.encode(
                    {
                        "type": "usage",
                        "usage": usage,
                        "slots": {k: list(v) for k, v in self.scheduler.slots_in_use().items()},
                    }
                )
            )

    # ------------------------------------------------------------------------------------------------ requests
    def _handle(self, client: Connection, line: bytes) -> None:
        """One request line (serving thread): answered at once, or queued for the control thread."""
        try:
            request = protocol.parse_request(line)
        except ProtocolError as exc:
            self.transport.refuse(client, None, str(exc))
            return
        op = request["op"]
        if _expired(request):
            self._log(f"dropped {op} from pid {client.pid}: its deadline passed before the engine read it")
            self.transport.send(client, _expired_reply(request, "its deadline passed before the engine read it"))
        elif op in dispatch.AT_ONCE:
            dispatch.AT_ONCE[op](self, client, request)
        else:
            with self.transport.lock:
                client.pending += 1
            self._controls.put((client, request))

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
            with self.transport.lock:
                client.pending -= 1
                client.outbuf += answer
            self.transport.wake()

    def _not_started(self, client: Connection, request: dict) -> str | None:
        """Tell the client its control starts; None once that is on its socket with the deadline still ahead, so a
        client that saw no `started` by its deadline can say for sure that nothing was done. Otherwise why the
        control is dropped: its deadline passed, or the client did not take the `started` within FLUSH_WAIT seconds
        (it can't hold up the controls of others)."""
        deadline = request["deadline"]
        on_the_socket = self.transport.deliver(
            client,
            protocol.encode({"type": "started", "id": request.get("id")}),
            min(FLUSH_WAIT, max(0.0, deadline - time.time())),
        )
        if time.time() > deadline:
            return "its deadline passed before the engine got to it"
        return None if on_the_socket else "the connection did not take the engine's messages in time"

    def _control(self, request: dict) -> bytes:
        """Carry out a control (control thread) and return its reply."""
        handler = dispatch.CONTROLS.get(request["op"])
        if handler is None:
            return protocol.reply(request.get("id"), False, error=f"unknown op {request['op']!r}")
        return handler(self, request)


def _expired(request: dict) -> bool:
    deadline = request.get("deadline")
    return deadline is not None and time.time() > deadline


def _expired_reply(request: dict, why: str = "its deadline passed before the engine got to it") -> bytes:
    return protocol.reply(request.get("id"), False, expired=True, error=f"{request['op']}: not done, {why}")


def _event_line(event: Event) -> bytes:
    return task_line(event) if isinstance(event, TaskEvent) else run_line(event)
