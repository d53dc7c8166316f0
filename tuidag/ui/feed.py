"""The app's event feed: the engine's events (and its usage samples) reach the UI through one inbox, drained in
batches.

The engine's observer, `engine_event`, is called on engine threads (the `RemoteRun` reader thread) and only appends
to a deque. A timer (20 per second) drains it on the UI thread, applies the whole batch to the `RunModel` and
repaints just the tiles that changed. Nothing is posted per event or per log line (measured: `call_from_thread` per
event blocks the engine, `post_message` per line stalls the loop for seconds; batching keeps the lag ~10 ms).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..control.remote import ANSWERING, ENGINE_GONE, NOT_ANSWERING, REAPED
from ..engine.events import Event, RunEvent, TaskEvent
from ..model.state import TaskState
from ..views.combined_log import CombinedLog
from ..views.run_notes import RunNotes, state_counts
from .messages import DagNews, EngineGone, EngineNews, RunFinished
from .run_model import UsageSample

S = TaskState
HEADER_INTERVAL = 0.2  # counts and progress repaint at most this often (a big run changes them on every drain)


if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class RunFeed(AppHost):
    """Part of `TuidagApp` (ui/app.py): the inbox, its drain, the combined log fed from it, the once-a-second tick,
    and the note on the terminal when the run ends or a task fails (`run_notes`, set by the viewer)."""

    run_notes: RunNotes | None = None

    # ---------------------------------------------------------------------------------------------- engine side
    def engine_event(self, event: Event) -> None:
        """Engine observer, called on engine threads: never touches the UI. The end of the run (once per run) is
        drained at once instead of at the next tick, so the final state, and with --exit-on-finish the exit, don't
        wait up to a tick for it."""
        self._inbox.append(event)
        if type(event) is RunEvent:
            if event.kind == "finished":
                self.post_message(RunFinished())  # thread-safe; once per run
            elif event.kind == ENGINE_GONE:
                self.post_message(EngineGone())
            elif event.kind in (NOT_ANSWERING, ANSWERING, REAPED):
                self.post_message(EngineNews(event.kind, event.detail))
            elif event.kind in ("dag", "dag-error"):
                self.post_message(DagNews(event.kind, event.detail))

    # ------------------------------------------------------------------------------------------ applying events
    def _drain(self) -> None:
        inbox = self._inbox
        batch = [inbox.popleft() for _ in range(len(inbox))]
        if batch:
            was_finished = self.model.finished
            changed = self.model.apply(batch)
            if self.model.reshaped:  # an edit of the DAG file (--watch): its graph anew, before what changed is drawn
                self._reshape()
            running = S.RUNNING
            if self._combined is not None:
                for event in batch:
                    if type(event) is TaskEvent and event.old is not running and event.snapshot.state is running:
                        self._combined_pending.append(event.snapshot.name)
            if self._combined is not None and self._combined_on and self._combined_pending:
                self._add_to_combined(self._combined)
            self.canvas.refresh_tasks(changed)
            self.table.refresh_tasks(changed)
            self.timeline.refresh_tasks(changed)
            if not self._first_failure_seen:
                self._select_first_failure(e.snapshot for e in batch if type(e) is TaskEvent)
            if self.run_notes is not None and self.run_notes.awaits_failure:
                for event in batch:
                    if type(event) is TaskEvent and event.snapshot.state is S.FAILED and event.old is not S.FAILED:
                        snap = event.snapshot
                        self._to_terminal(self.run_notes.task_failed(self.source.dag.name, snap.name, snap.reason))
            if not self._outlook_due:  # a task changed state, or the run was paused or resumed
                self._outlook_due = any(
                    e.old is not e.snapshot.state
                    if type(e) is TaskEvent
                    else type(e) is RunEvent and e.kind in ("paused", "resumed")
                    for e in batch
                )
            self._header_dirty = True
            if self.model.finished and not was_finished:
                self._on_finished()
        now = time.monotonic()
        if self._header_dirty and now - self._header_painted >= HEADER_INTERVAL:
            self._header_dirty, self._header_painted = False, now
            self.header.refresh()
        if self.model.stopping and self.source.finished and not self._inbox:
            self.exit()

    @property
    def combined(self) -> CombinedLog:
        """Every task's output since the run's start, interleaved (what `a` shows): built when first looked at
        from every task that has started by then, whether or not the app saw it start (the run starts before the
        app subscribes), then the tasks that start later."""
        if self._combined is None:
            self._combined = CombinedLog()
            self._combined_pending = [
                name for name, snap in self.model.snapshots.items() if snap.attempt and not snap.reused
            ]
        if self._combined_pending:
            self._add_to_combined(self._combined)
        return self._combined

    def _add_to_combined(self, combined: CombinedLog) -> None:
        """Tasks are added to the combined log when it is looked at, not as they start: a big run starts hundreds a
        second, and the log reads a task's file from its start whenever it is added. Each prefix has the task's
        colour in the headless output."""
        pending, self._combined_pending = self._combined_pending, []
        for task in pending:
            snap = self.model.snapshots[task]
            combined.add(
                task, self.source.run.log_path(task), started=snap.started_at, colour=self._prefix_colours.get(task)
            )

    def _on_finished(self) -> None:
        if self.run_notes is not None:
            notes, model = self.run_notes, self.model
            counts = state_counts(model.snapshots.values())
            duration = model.elapsed()
            self._to_terminal(notes.run_ended(self.source.dag.name, counts, duration, bool(self.source.interrupted_by)))
        self._outlook_due = True
        self._refresh_outlook()  # the finished run's path, from what happened
        if self.exit_on_finish and not self.model.stopping:
            self.exit()

    def _to_terminal(self, text: str) -> None:
        """Write escape sequences to the terminal, between frames (as Textual's bell): nothing when headless."""
        if text and not self.is_headless and self._driver is not None:
            self._driver.write(text)

    def _tick(self) -> None:
        """Once a second: elapsed times of live tasks and of the run, and the engine's latest usage sample."""
        usage = self.source.usage()
        if usage is not self._usage_seen:
            self._usage_seen = usage
            self._inbox.append(UsageSample(dict(usage)))
        live = [n for n, s in self.model.snapshots.items() if s.state in (S.RUNNING, S.READY, S.RETRYING, S.CANCELLING)]
        self.canvas.refresh_tasks(live)
        self.table.refresh_tasks(live)
        self.timeline.tick()
        self._refresh_outlook()
        self.header.refresh()
        if self.source.store_message and not self._store_error_shown:  # set once, from an engine thread
            self._store_error_shown = True
            self.notify(
                self.source.store_message.removeprefix("tuidag: error: "),
                title="Run incomplete",
                severity="error",
                timeout=24 * 3600,
            )

    def on_run_finished(self) -> None:
        """The engine's end of the run (posted by `engine_event`): drained at once."""
        self._drain()
