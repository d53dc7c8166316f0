"""A run seen from another process: the `RunSource` (control/run_source.py) the terminal UI uses, over the run's
control socket (a live run) or from its journal (a run that is over).

`RemoteRun.attach` subscribes to a live run: a reader thread decodes the engine's stream and calls observers from
that thread, as the scheduler calls its observers from engine threads, and keeps the latest snapshot of every
task and the engine's latest CPU/memory sample. Controls (cancel, re-run, pause, interrupt, ...: remote_controls.py)
are requests on the same connection (control/engine_connection.py: the transport); each waits for its own reply, so
callers must not be the UI thread.

The engine may go away: the run ended (it closes the channel after writing summary.json), the viewer was dropped
for reading too slowly (it reconnects), or the engine died (kill -9, OOM). The reader notices within
`CHECK_INTERVAL` (EOF, or the engine's pid gone while the socket stays silent) and switches to what the journal
says: observers get the journal's final state of every task that differs from what they saw, then one run event
`ENGINE_GONE`. From then on the run is read-only (`live` is False) — the post-mortem view, which
`RemoteRun.stored` opens directly on a run that is over. An engine that died leaves its tasks running: the viewer
kills what they left (as `tuidag runs` would) and says what it ended (run event `REAPED`).

An engine that holds its run's owner lock but does not answer (stopped with SIGSTOP, or swapped out) is alive, not
gone: the view says it is "not answering" (run events `NOT_ANSWERING`, then `ANSWERING`), keeps the journal's record
on screen and its request on the socket, and goes on live when the engine answers. It once opened such a run as a
finished post-mortem and never looked again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..engine.events import Event, RunEvent, TaskEvent, TaskSnapshot
from ..model.state import TaskState
from ..store.journal import replay
from ..store.journal_records import with_dag
from ..store.reaper import REAP_GRACE
from ..store.run_dag import current_header, dag_from_header
from ..store.runs import RunDir, RunStore
from ..store.task_story import TaskDefinition, TaskStory, definition_from_header, task_story
from .client import NotAnswered, NotLive, decode_event
from .protocol import MAX_MESSAGE
from .remote_controls import RemoteControls
from .run_record import differs, journal_snapshots, process_alive, reap_dead_run, reaped_text
from .run_source import Observer, Usage

CHECK_INTERVAL = 0.25  # how often a silent connection checks that the engine is still alive
SUBSCRIBE_TIMEOUT = 5.0
SILENCE = 5.0  # a live engine sends viewers its usage every second: this long without a byte, it is stopped
ENGINE_GONE = "engine-gone"  # the run event a RemoteRun adds once its engine is gone (detail: why)
NOT_ANSWERING = "not-answering"  # ... when its engine holds the run but does not answer (detail: why)
ANSWERING = "answering"  # ... when it answers again
REAPED = "reaped"  # ... once it killed what a dead engine's tasks left (detail: what it ended)

S = TaskState


class RemoteRun(RemoteControls):
    """A run in another process (or over): the `RunSource` the terminal UI views every run through."""

    def __init__(self, run: RunDir, store: RunStore, *, foreground: bool = False):
        header = current_header(run.journal)  # the run's DAG as it is now (the DAG file may be edited under --watch)
        if not header:
            raise NotLive(f"run {run.run_id} has no readable journal")
        super().__init__(run)
        self._header = header
        self.dag = dag_from_header(header)
        # the tasks the run was asked for (`tuidag run FILE TASK...`; none: every task), as its header recorded them
        self.targets: list[str] = [name for name in header.get("targets") or () if isinstance(name, str)]
        # the command-line options that shaped it (`--env`, `-j`, ...): a run resuming it repeats them
        self.options: list[str] = [option for option in header.get("options") or () if isinstance(option, str)]
        self.store = store
        self.foreground = foreground  # the viewer of the terminal that started the run
        self.started: float = float(header.get("t") or time.time())
        self.interrupted_by: str | None = None
        self.store_message: str | None = None
        self.lost: str | None = None  # why the engine went away without ending the run (it died)
        self.reaped: str | None = None  # what this viewer ended of the tasks a dead engine left
        self.not_answering: str | None = None  # why the engine that holds the run is taken as stopped, while it is
        self._live = False
        self._heard = time.monotonic()  # the last time the engine sent something
        self._reaping = False
        self._lock = threading.Lock()
        self._observers: list[Observer] = []
        self._snaps: dict[str, TaskSnapshot] = {}
        self._seq = 0
        self._paused = False
        self._watching = False
        self._finished = False
        self._usage: Usage = {}
        self._reader: threading.Thread | None = None

    # ---------------------------------------------------------------------------------------------- opening
    @classmethod
    def attach(
        cls, run: RunDir, store: RunStore, *, foreground: bool = False, engine_pid: int | None = None
    ) -> RemoteRun:
        """Subscribe to the live run; NotLive when no engine answers (the caller may open it `stored` instead)."""
        remote = cls(run, store, foreground=foreground)
        remote.engine_pid = engine_pid
        try:
            remote._subscribe()
        except NotAnswered as silent:
            if not run.owned():  # nothing holds the run: it is over, or its engine died
                remote._drop_socket()
                raise NotLive(str(silent)) from None
            remote._snaps = journal_snapshots(run, remote.dag.topological_order)  # until the engine answers
            remote.not_answering = str(silent)
            remote._live = True
        remote._reader = threading.Thread(target=remote._read_forever, name="tuidag-viewer", daemon=True)
        remote._reader.start()
        return remote

    @classmethod
    def stored(cls, run: RunDir, store: RunStore) -> RemoteRun:
        """The run as its journal recorded it: the post-mortem view (read-only)."""
        remote = cls(run, store)
        remote._snaps = journal_snapshots(run, remote.dag.topological_order)
        remote._finished = True
        summary = run.read_summary() or {}
        started = summary.get("started_at")
        if type(started) is not int and type(started) is not float:
            started = replay(run.journal).started_at
        if type(started) is int or type(started) is float:
            remote.started = float(started)
        remote.interrupted_by = summary.get("interrupted_by") if type(summary.get("interrupted_by")) is str else None
        return remote

    def _subscribe(self) -> None:
        """Connect, ask for the engine's pid, subscribe and read the snapshot (blocking: before any thread).
        NotAnswered, with the connection kept, when the engine does not answer in SUBSCRIBE_TIMEOUT seconds."""
        self._dial()
        self._await_answer(SUBSCRIBE_TIMEOUT)
        self._take_snapshot()

    def _take_snapshot(self) -> None:
        """Read the answers to status and subscribe, and the snapshot; the engine has started answering."""
        sock = self._sock
        assert sock is not None  # dialled and answered: `_subscribe` raised otherwise
        sock.settimeout(SUBSCRIBE_TIMEOUT)
        try:
            status = self._next_message()
            if status.get("ok") and type(status.get("pid")) is int:
                self.engine_pid = status["pid"]
            subscribed = self._next_message()
            if not subscribed.get("ok"):
                raise NotLive(
                    f"run {self.run.run_id} refused the subscription: "
                    f"{str(subscribed.get('error') or 'no reason given')[:200]}"
                )
            head = self._next_message()
            if head.get("type") != "snapshot" or type(head.get("count")) is not int:
                raise NotLive(f"run {self.run.run_id} answered with something else than a snapshot")
            if type(head.get("dag")) is dict:  # the DAG file was edited: the run's tasks now
                self._adopt_dag(head["dag"])
            snaps = {}
            for _ in range(head["count"]):
                event = decode_event(self._next_message())
                if type(event) is TaskEvent and event.task in self.dag.tasks:
                    snaps[event.task] = event.snapshot
        except OSError as exc:  # a timeout included: an engine stopped in the middle of the snapshot
            self._drop_socket()
            raise NotLive(f"run {self.run.run_id}: the engine did not answer ({exc.strerror or exc})") from None
        except BaseException:
            self._drop_socket()
            raise
        with self._lock:
            self._snaps = {
                name: snaps.get(name, self._snaps.get(name) or TaskSnapshot(name, S.PENDING))
                for name in self.dag.topological_order
            }
            seq = head.get("seq")
            self._seq = seq if type(seq) is int else 0
            self._paused = head.get("paused") is True
            self._watching = head.get("watching") is True
            self._finished = head.get("finished") is True
            if type(head.get("started")) in (int, float):
                self.started = float(head["started"])
            if type(head.get("interrupted_by")) is str:
                self.interrupted_by = head["interrupted_by"]
            if type(head.get("notice")) is str:
                self.store_message = head["notice"]
            self._live = True
        self._heard = time.monotonic()

    # ----------------------------------------------------------------------------------------------- reading
    def _read_forever(self) -> None:
        """The reader thread: events until the engine is gone, then the journal's word on how the run ended. A
        viewer the engine dropped (it read too slowly) while the run goes on subscribes again."""
        if self.not_answering is not None:
            self._publish([RunEvent(self._seq, time.time(), NOT_ANSWERING, self.not_answering)])
            if not self._until_answered():
                if not self._closed.is_set():
                    self._gone(self._why_gone())
                return
        while not self._closed.is_set():
            self._follow()
            if self._closed.is_set():
                return
            if self._engine_alive() and not self._finished and self.run.read_summary() is None:
                try:
                    self._resubscribe()
                    continue
                except (NotLive, OSError):
                    pass
            break
        self._gone(self._why_gone())

    def _until_answered(self) -> bool:
        """Wait for the engine that holds the run to answer the subscription waiting on the socket, then go on
        live (True); False when it let go of the run first (it ended or died) or the view closed."""
        while not self._closed.is_set():
            before = dict(self._snaps)
            try:
                self._await_answer(CHECK_INTERVAL)
                self._take_snapshot()
            except NotAnswered:
                if self.run.owned():
                    continue
                return False
            except (NotLive, OSError):
                if self._closed.is_set() or not self.run.owned():
                    return False
                try:  # the connection broke while the engine was stopped halfway through answering: ask again
                    self._subscribe()
                except NotAnswered:
                    continue
                except (NotLive, OSError):
                    return False
            self.not_answering = None
            self._publish_changes(before)
            self._publish([RunEvent(self._seq, time.time(), ANSWERING, "")])
            return True
        return False

    def _follow(self) -> None:
        """Read and deliver until EOF, or until the engine's pid is gone while the connection stays silent. An
        engine silent for SILENCE seconds is not answering (stopped) until it sends something again."""
        sock = self._sock
        assert sock is not None  # subscribed: `_read_forever` follows only after a subscription went through
        try:
            sock.settimeout(CHECK_INTERVAL)
        except OSError:  # closed meanwhile (`close`)
            return
        buf = self._buf
        while not self._closed.is_set():
            try:
                data = sock.recv(1 << 20)
            except TimeoutError:
                self._pending.drained = time.time()
                if not self._engine_alive():
                    return
                if self.not_answering is None and time.monotonic() - self._heard > SILENCE:
                    pid = f" (pid {self.engine_pid})" if self.engine_pid else ""
                    self.not_answering = f"the engine{pid} is not answering (stopped?)"
                    self._publish([RunEvent(self._seq, time.time(), NOT_ANSWERING, self.not_answering)])
                continue
            except OSError:
                return
            if not data:
                return
            self._heard = time.monotonic()
            if self.not_answering is not None:
                self.not_answering = None
                self._publish([RunEvent(self._seq, time.time(), ANSWERING, "")])
            buf += data
            end = buf.rfind(b"\n")
            if end < 0:
                if len(buf) > MAX_MESSAGE:
                    return
                continue
            lines = bytes(buf[:end]).split(b"\n")
            del buf[: end + 1]
            self._deliver(lines)

    def _deliver(self, lines: list[bytes]) -> None:
        events: list[Event] = []
        loads = json.loads
        for line in lines:
            try:
                message = loads(line)
            except ValueError:
                continue
            if type(message) is not dict:
                continue
            kind = message.get("type")
            if kind == "task" or kind == "run":
                event = decode_event(message)
                if event is not None and (isinstance(event, RunEvent) or event.task in self.dag.tasks):
                    events.append(event)
                    if type(event) is RunEvent and event.data:  # a `dag` event: the tasks of the events after it
                        self._adopt_dag(event.data)
            elif kind == "reply":
                self._pending.answer(message)
            elif kind == "started":
                self._pending.started(message)
            elif kind == "usage":
                self._take_usage(message)
            elif kind == "notice" and type(message.get("text")) is str:
                self.store_message = message["text"]
        if events:
            self._publish(events)

    def _publish(self, events: list[Event]) -> None:
        """Fold events into the snapshots, then hand them to the observers subscribed at that moment (so an
        observer that subscribes and then reads `snapshot()` misses nothing)."""
        with self._lock:
            snaps = self._snaps
            for event in events:
                if isinstance(event, TaskEvent):
                    snaps[event.task] = event.snapshot
                    if not event.snapshot.state.terminal:
                        self._finished = False
                else:
                    if event.kind == "paused" or event.kind == "resumed":
                        self._paused = event.kind == "paused"
                    elif event.kind == "watching" or event.kind == "watch-ended":
                        self._watching = event.kind == "watching"
                    elif event.kind == "finished":
                        self._finished = True
                    elif event.kind == "dag":  # new tasks are PENDING until their first event
                        for name in self.dag.topological_order:
                            if name not in snaps:
                                snaps[name] = TaskSnapshot(name, S.PENDING)
                if event.seq > self._seq:
                    self._seq = event.seq
            observers = self._observers
        for observer in observers:
            for event in events:
                observer(event)

    def _adopt_dag(self, fields: Mapping[str, Any]) -> None:
        """The run's DAG is now as `fields` (a `dag` event's, a journal header's) say, if they are well formed."""
        header = with_dag(self._header, {**fields, "type": "run", "event": "dag"})
        if header is not self._header:
            self._header = header
            self.dag = dag_from_header(header)

    def _take_usage(self, message: dict[str, Any]) -> None:
        usage = message.get("usage")
        if type(usage) is dict:
            self._usage = {
                name: (float(v[0]), int(v[1]))
                for name, v in usage.items()
                if type(v) is list and len(v) == 2 and all(type(x) in (int, float) for x in v)
            }

    def _resubscribe(self) -> None:
        """The engine dropped this viewer (it read too slowly): subscribe again and publish what changed."""
        before = dict(self._snaps)
        old = self._sock
        assert old is not None  # the connection `_follow` read until the engine dropped it
        self._pending.fail_all("the engine dropped this viewer's connection before it answered: try again")
        try:
            self._subscribe()
        finally:
            old.close()
        self._publish_changes(before)

    def _publish_changes(self, before: dict[str, TaskSnapshot]) -> None:
        self._publish(
            [
                TaskEvent(self._seq, snap.changed_at, before[name].state if name in before else None, snap)
                for name, snap in self._snaps.items()
                if before.get(name) != snap
            ]
        )

    def _engine_alive(self) -> bool:
        return self.engine_pid is None or process_alive(self.engine_pid)

    def _why_gone(self) -> str | None:
        """None when the run ended as runs do (its summary is written); otherwise what happened to the engine."""
        deadline = time.monotonic() + 0.5
        while True:  # the engine writes the summary before closing the channel; allow a moment for the rename
            if self.run.read_summary() is not None:
                return None
            if not self._engine_alive() or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return f"the engine (pid {self.engine_pid}) died" if self.engine_pid else "the engine died"

    def _gone(self, why: str | None) -> None:
        """Switch to the journal's record: the final state of each task observers have not seen, then ENGINE_GONE."""
        with self._lock:
            self._live = False
            self.lost = why
            self._finished = True
        self._pending.fail_all(why or "the run is over")
        summary = self.run.read_summary() or {}
        if type(summary.get("interrupted_by")) is str:
            self.interrupted_by = summary["interrupted_by"]
        final = journal_snapshots(self.run, self.dag.topological_order)
        changed = [
            TaskEvent(self._seq, snap.changed_at, self._snaps[name].state, snap)
            for name, snap in final.items()
            if name in self._snaps and differs(self._snaps[name], snap)
        ]
        finished_at = summary.get("finished_at")
        end = finished_at if type(finished_at) is int or type(finished_at) is float else time.time()
        self._publish(
            [*changed, RunEvent(self._seq, end, "finished"), RunEvent(self._seq, time.time(), ENGINE_GONE, why or "")]
        )
        if why is not None:  # after telling: killing what the tasks left takes up to the kill grace period
            self._reaping = True
            try:
                reaped = reap_dead_run(self.store, self.run)
            finally:
                self._reaping = False
            if reaped is not None:
                self.reaped = reaped_text(reaped)
                self._publish([RunEvent(self._seq, time.time(), REAPED, self.reaped)])

    # ------------------------------------------------------------------------------------------ the surface
    @property
    def max_parallel(self) -> int:
        """Tasks the run lets run at once, as its journal's header recorded it."""
        return self.dag.max_parallel

    @property
    def live(self) -> bool:
        """Whether the engine is there to take controls; False for the post-mortem view."""
        return self._live

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` for every event from now on, from the reader thread (as Scheduler.subscribe)."""
        with self._lock:
            self._observers = [*self._observers, observer]

        def unsubscribe() -> None:
            with self._lock:
                self._observers = [o for o in self._observers if o is not observer]

        return unsubscribe

    @property
    def ended_at(self) -> float:
        """When the run ended (the post-mortem view's clock stops there)."""
        summary = self.run.read_summary() or {}
        if type(summary.get("finished_at")) in (int, float):
            return float(summary["finished_at"])
        return max((s.finished_at for s in self._snaps.values() if s.finished_at is not None), default=self.started)

    def snapshot(self) -> dict[str, TaskSnapshot]:
        with self._lock:
            return dict(self._snaps)

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def watching(self) -> bool:
        return self._watching and self._live

    @property
    def finished(self) -> bool:
        """Every task ended, or the engine is gone (nothing more will happen)."""
        return self._finished or not self._live

    def usage(self) -> Usage:
        """The engine's latest sample (it sends one a second): replaced as a whole, never changed in place."""
        return self._usage

    def definition(self, name: str) -> TaskDefinition | None:
        """What `name` was asked to do, as the run's header recorded it."""
        return definition_from_header(self._header, name)

    def story(self, name: str) -> TaskStory:
        """`name`'s attempts and return value, from the run's journal (this viewer is on the run's machine: it reads
        the journal as the post-mortem view does)."""
        return task_story(self.run.journal, name)

    def branch(self, name: str) -> list[str]:
        """What cancelling `name` would cancel, from the latest snapshots (no round trip: the UI asks on its thread)."""
        with self._lock:
            return [n for n in [name, *self.dag.descendants(name)] if not self._snaps[n].state.terminal]

    def close(self) -> None:
        """Stop following the run (it goes on)."""
        self._hang_up()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(2)
            if self._reaping:  # killing what a dead engine's tasks left: a viewer must not exit halfway through it
                self._reader.join(REAP_GRACE + 10)
