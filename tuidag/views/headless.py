"""The headless reporter: live `[task] line` output, state changes, and a summary table at the end.

It is an engine observer like the UI. The observer callback only appends to a deque; one printer thread drains it and
tails the log files of running tasks, so a slow terminal or pipe never stalls the engine. Output of a task is read
from its log file (the file is the source of truth, written by the task itself), and a task's remaining output is
printed before the line that says it ended.

Task output is untrusted and goes through `terminal_text` whether stdout is a terminal or not (a CI log viewer is a
terminal too): colours are kept, any other control sequence is neutralised, a `\r` overwrites only within its own line
(after the `[task]` prefix), and a line longer than `LINE_CAP` is cut with a marker. Logs are read a chunk at a time,
so memory stays bounded whatever a task prints. Attempt headers are left out by the byte ranges tuidag recorded
(`LogHeaders`), never by their text.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, TextIO

from ..engine.events import Event, RunEvent, TaskEvent, TaskSnapshot, event_counts
from ..engine.log_headers import LogHeaders
from ..model.counts import counted, states_said
from ..model.counts import number as with_commas
from ..model.durations import format_duration
from ..model.forecast import shape_of
from ..model.matrix import MatrixGroup
from ..model.spec import DagSpec
from ..model.state import TaskState
from .log_tail import last_lines
from .logs import UnsafeLog
from .run_insight import run_insight, summary_lines
from .run_notes import RunNotes
from .terminal_text import LineAssembler, terminal_line, terminal_lines

if TYPE_CHECKING:
    from .group_progress import GroupProgress  # imported by a run that has matrix groups (`start`)

S = TaskState
TASK_COLOURS = [31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96]
"""SGR colours of task prefixes, by topological index: headless and the UI's combined view use the same."""
_STATE_COLOURS = {
    S.SUCCEEDED: 32,
    S.UP_TO_DATE: 92,
    S.FAILED: 31,
    S.CANCELLED: 33,
    S.SKIPPED: 90,
    S.UNTARGETED: 90,
    S.RUNNING: 36,
    S.READY: 96,
    S.RETRYING: 35,
    S.CANCELLING: 33,
    S.QUEUED: 37,
    S.PENDING: 37,
}
_READ_CHUNK = 1 << 16
_ROUND_BYTES = 1 << 20  # read from each running task's log per round, so one flood cannot hold up the others
LINE_CAP = 1 << 20
"""Bytes of one line printed at most; the rest is in the log file."""
_EMIT_BYTES = 1 << 16  # text printed in one write at most, give or take a line: a flood is printed as it is read
_CUT_MARKER = " \u2026 [tuidag: line cut, %d more bytes in the log file]".encode()
TAIL_LINES = 20
"""Lines of each failed task's log shown under the summary table."""


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Tail:
    """Reads what a task appended to its log since the last read, as display lines, leaving out tuidag's attempt
    headers. The offset survives retries and re-runs, so output already printed is never printed again."""

    __slots__ = ("behind", "lines", "offset", "path")

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.lines = LineAssembler(LINE_CAP, _CUT_MARKER)  # holds the incomplete last line
        self.behind = False  # the last read stopped at its limit, before the end of the file

    def read(self, headers: LogHeaders, stop_at: int | None = None, limit: int | None = None) -> Iterator[list[bytes]]:
        """The lines completed since the last read, a chunk at a time, from about `limit` bytes at most. With
        `stop_at`, only up to the header of attempt `stop_at + 1` if there is one: what attempts up to `stop_at`
        wrote."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)  # a planted symlink is no log
        except OSError:
            return
        try:
            size, spans = headers.snapshot(fd, self.path)
            end = size if limit is None else min(size, self.offset + limit)
            self.behind = end < size
            for number, span in enumerate(spans):
                if span.end <= self.offset:
                    continue
                if span.start >= end:
                    break
                yield from self._read_to(fd, span.start)
                if stop_at is not None and number >= stop_at:
                    return
                yield self.lines.flush()  # a header starts a line: the text before it was a line of its own
                self.offset = span.end
            yield from self._read_to(fd, end)
        finally:
            os.close(fd)

    def _read_to(self, fd: int, end: int) -> Iterator[list[bytes]]:
        while self.offset < end and (data := os.pread(fd, min(_READ_CHUNK, end - self.offset), self.offset)):
            self.offset += len(data)
            yield self.lines.feed(data)


class HeadlessReporter:
    def __init__(
        self, out: TextIO, headers: LogHeaders, quiet: bool = False, colour: bool = False, interval: float = 0.05
    ):
        self.out = out
        self.headers = headers
        self.quiet = quiet
        self.colour = colour
        self.interval = interval
        self._events: deque[Event] = deque()
        self._tails: dict[str, _Tail] = {}
        self._live: set[str] = set()  # tasks whose log is being followed
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._width = 0
        self._task_colour: dict[str, int] = {}
        self._progress: GroupProgress | None = None
        self._idle = False  # the printer sleeps until `_wake` is set (see `_loop`)
        self.notes: tuple[RunNotes, str] | None = None  # the run's notes and its DAG's name: a note on a failure
        self._pending: list[str] = []  # what this round printed, written at its end (`_emit`)
        self._watching = False  # under --watch: the end of each of its rounds is said
        self._round = "gen 1"  # the round of --watch going on
        self._round_start: float | None = None  # when it began (the `watching` event, then its `generation` event)
        self._pending_size = 0

    # engine side: must be quick and never block
    def __call__(self, event: Event) -> None:
        self._events.append(event)
        if self._idle:
            self._wake.set()  # wake the printer from its sleep; otherwise it looks again within `interval`

    def start(self, task_names: list[str], groups: Mapping[str, MatrixGroup] | None = None) -> None:
        """Start printing; with `groups` (the DAG's matrix groups) a group's progress line as its instances end."""
        if groups:
            from .group_progress import GroupProgress

            self._progress = GroupProgress(groups)
        else:
            self._progress = None
        self._width = min(24, max((len(n) for n in task_names), default=0))
        for i, name in enumerate(task_names):
            self._task_colour[name] = TASK_COLOURS[i % len(TASK_COLOURS)]
        self._thread = threading.Thread(target=self._loop, name="tuidag-reporter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Print everything still pending (events and log output) and stop the printer thread."""
        self._stop = True
        self._wake.set()
        if self._thread:
            self._thread.join()
        self.out.flush()

    # printer thread
    def _loop(self) -> None:
        while True:
            stopping = self._stop
            busy = bool(self._events)
            behind = self._drain()
            self._emit()
            self.out.flush()
            if stopping:
                break
            if not behind:
                # While events come or a log is followed, the printer looks again every `interval`, and prints what
                # came meanwhile in one go: waking it for each event was a thread switch (and a GIL hand-off) per
                # state change, 2,000 wake-ups in a run of 5,000 quick tasks where this makes 60. With nothing to
                # follow and nothing new (a run under --watch between rounds), it sleeps until an event comes; an
                # event appended before `_idle` was set is seen by the check that follows it, one after sets `_wake`.
                self._idle = not self._live and not busy
                self._wake.wait(None if self._idle and not self._events and not self._stop else self.interval)
                self._idle = False
                self._wake.clear()
        for name in sorted(self._live):
            self._read_to_end(name)
        self._live.clear()
        self._emit()

    def _drain(self) -> bool:
        """Print the events so far, and a round of what running tasks printed; True if a log has more to read."""
        while self._events:
            event = self._events.popleft()
            if isinstance(event, RunEvent):
                if event.kind in ("paused", "resumed"):
                    self._write(f"tuidag: scheduling {event.kind}\n")
                elif event.kind in ("watching", "watch-ended"):  # (watch mode starts before the run: gen 1 begins)
                    self._watching, self._round_start = event.kind == "watching", event.time
                elif event.kind in ("finished", "settled") and self._watching:  # a round ended: the run waits
                    self._write(f"tuidag: {round_ended(self._round, event, self._round_start)}\n")
                elif event.kind in ("parallel", "generation", "dag"):  # max_parallel follows the executor (Dask
                    # workers joined or left); a round of watch mode (`gen 2: src/a.py changed -> build, test`);
                    # the DAG file reloaded (`dag.yaml reloaded: added lint; removed old`)
                    self._write(f"tuidag: {terminal_line(event.detail)}\n")
                    if event.kind == "generation":
                        self._round, self._round_start = event.detail.partition(":")[0], event.time
                elif event.kind == "dag-error":  # an edit of the DAG file with errors, each located
                    first, *more = event.detail.split("\n")
                    said = [f"{first} (keeping the DAG as it was)", *more]
                    self._write("".join(f"tuidag: {terminal_line(line)}\n" for line in said))
                continue
            self._on_task(event)
        behind = False
        for name in self._live:
            tail = self._tails[name]
            for lines in tail.read(self.headers, limit=_ROUND_BYTES):
                self._emit_lines(name, lines)
            behind |= tail.behind
        return behind

    def _on_task(self, event: TaskEvent) -> None:
        snap = event.snapshot
        name = snap.name
        if not self.quiet and snap.state is S.RUNNING:
            self._tails.setdefault(name, _Tail(snap.log_path))
            self._live.add(name)
        elif name in self._live and (snap.state.terminal or snap.state is S.RETRYING):
            self._live.discard(name)
            self._read_to_end(name, snap.attempt)
        progress = None if self._progress is None else self._progress.update(snap)
        if event.is_transition and snap.state is not S.QUEUED:
            self._write(self._prefix(name) + self._describe(snap) + "\n")
        elif snap.state is S.QUEUED and snap.reason and snap.reason.startswith("waiting: "):
            # No worker of the executor can run it (Executor.placement_problem): without a word it would look hung.
            self._write(self._prefix(name) + self._describe(snap) + "\n")
        if progress is not None:
            self._write(f"tuidag: {terminal_line(progress)}\n")
        if self.notes is not None and snap.state is S.FAILED and event.is_transition and self.notes[0].awaits_failure:
            notes, dag = self.notes
            self._write(notes.task_failed(dag, name, snap.reason))

    def _read_to_end(self, name: str, attempt: int | None = None) -> None:
        """Print the rest of a task's output, its incomplete last line included: the writer is done. Given the
        attempt that just ended, stop at the next attempt's header (when the printer is behind, it may be there)."""
        tail = self._tails[name]
        for lines in tail.read(self.headers, attempt):
            self._emit_lines(name, lines)
        self._emit_lines(name, tail.lines.flush())

    def failure_tails(self, snapshots: dict[str, TaskSnapshot]) -> str:
        """For the summary: the last lines of each failed task's log, each under a heading, as Turborepo shows them,
        so what went wrong is the last thing on the screen even after thousands of lines (and with `-q`, the only
        output of the task shown). A log that cannot be read says why, in place of its lines."""
        failed = [snap for snap in snapshots.values() if snap.state is S.FAILED]
        parts = []
        for snap in failed:
            attempt = f" attempt {snap.attempt}" if snap.attempt > 1 else ""
            reason = f" ({snap.reason})" if snap.reason else ""
            heading = f"{snap.name}{attempt} failed{reason}: "
            try:
                lines = last_lines(snap.log_path, snap.log_start, TAIL_LINES)
            except FileNotFoundError:
                heading, lines = heading + f"no log at {snap.log_path}", []
            except UnsafeLog as refused:
                heading, lines = heading + str(refused), []
            except OSError as error:
                heading, lines = heading + f"its log could not be read ({error.strerror or error})", []
            else:
                heading += (
                    "it printed nothing"
                    if not lines
                    else "the last line of its log"
                    if len(lines) == 1
                    else f"the last {with_commas(len(lines))} lines of its log"
                )
            heading = terminal_line(heading)  # the reason may be a callable's exception message, the task's text
            parts.append(f"\n\x1b[1;31m{heading}\x1b[0m\n" if self.colour else f"\n{heading}\n")
            parts.append(terminal_lines(lines, self._prefix(snap.name)))
        return "".join(parts) + "\n" if parts else ""  # a blank line before the verdict

    def _emit_lines(self, name: str, lines: list[bytes]) -> None:
        if lines:
            self._write(terminal_lines(lines, self._prefix(name)))

    def _prefix(self, name: str) -> str:
        label = f"[{name}]".ljust(self._width + 2)
        if self.colour:
            return f"\x1b[{self._task_colour.get(name, 37)}m{label}\x1b[0m "
        return label + " "

    def _describe(self, snap: TaskSnapshot) -> str:
        state = snap.state.value
        reason = snap.reason
        if snap.state is S.READY:  # a service: `--> ready (port 5432, 0.4s)`
            state, reason = "ready" + (f" ({terminal_line(reason)})" if reason else ""), None
        if snap.state is S.UP_TO_DATE:  # `up to date (run R)`, or `up to date: output x is missing: restored ...`
            state = "up to date" if not (reason or "").startswith("up to date") else reason or ""
            reason = None if state == reason else reason
        if self.colour:
            state = f"\x1b[1;{_STATE_COLOURS[snap.state]}m{state}\x1b[0m"
        text = f"--> {state}"
        if snap.state is S.RUNNING and snap.attempt > 1:
            text += f" (attempt {snap.attempt})"
        if snap.state is S.RUNNING and snap.slots:
            text += f" [slots {snap.slots}]"
        elif snap.state.terminal and snap.started_at is not None and snap.finished_at is not None:
            text += f" in {format_duration(snap.finished_at - snap.started_at)}"
        if reason and snap.state is not S.SUCCEEDED:
            text += f": {terminal_line(reason)}"  # a callable's exception message is the task's text
        return text

    def _write(self, text: str) -> None:
        """Print `text` at the end of the round (or once a round's text passes `_EMIT_BYTES`): one write() a round,
        where a write per line was a system call (and a GIL hand-off) per state change on an unbuffered stdout
        (PYTHONUNBUFFERED, or a terminal's line buffering): two per task of a DAG of quick tasks."""
        self._pending.append(text)
        self._pending_size += len(text)
        if self._pending_size >= _EMIT_BYTES:
            self._emit()

    def _emit(self) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        if not text:
            return
        try:
            self.out.write(text)
        except UnicodeEncodeError:  # stdout's encoding lacks a character: show the rest rather than nothing
            encoding = getattr(self.out, "encoding", None) or "ascii"
            try:
                self.out.write(text.encode(encoding, "replace").decode(encoding))
            except (BrokenPipeError, ValueError):
                pass
        except (BrokenPipeError, ValueError):
            pass


def summary_table(snapshots: dict[str, TaskSnapshot], colour: bool = False) -> str:
    """The final table: task, state, attempts, duration, exit code, log path. Tasks outside the run's targets are
    left out (the counts line says how many there were): a run of one target in a DAG of thousands lists one."""
    rows = [("TASK", "STATE", "ATTEMPTS", "DURATION", "EXIT", "LOG")]
    for snap in snapshots.values():
        if snap.state is S.UNTARGETED:
            continue
        duration = (
            snap.finished_at - snap.started_at if snap.started_at is not None and snap.finished_at is not None else None
        )
        rows.append(
            (
                snap.name,
                snap.state.value + (" (reused)" if snap.reused else ""),
                str(snap.attempt),
                format_duration(duration),
                "-" if snap.exit_code is None else str(snap.exit_code),
                snap.log_path
                if snap.attempt or snap.reused or (snap.state is S.UP_TO_DATE and os.path.isfile(snap.log_path))
                else "-",
            )
        )  # only a task that started has one
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for i, row in enumerate(rows):
        cells = [cell.ljust(w) for cell, w in zip(row, widths)] + [row[-1]]
        line = "  ".join(cells)
        if colour and i > 0:
            state = snapshots[row[0]].state
            line = line.replace(row[1], f"\x1b[{_STATE_COLOURS[state]}m{row[1]}\x1b[0m", 1)
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def insight_lines(dag: DagSpec, snapshots: dict[str, TaskSnapshot], started: float, max_parallel: int) -> str:
    """The critical path of the finished run and the tasks that, made faster, would shorten it most
    (views/run_insight.py), as the summary's last lines before the verdict."""
    spans = {
        name: (snap.started_at, snap.finished_at)
        for name, snap in snapshots.items()
        if snap.started_at is not None and snap.finished_at is not None and not snap.reused
    }
    reused = {name for name, snap in snapshots.items() if snap.reused}
    text = summary_lines(run_insight(shape_of(dag, max_parallel), spans, started, reused))
    return "".join(terminal_line(line) + "\n" for line in text.splitlines())  # task names are the DAG's text


def counts_line(snapshots: dict[str, TaskSnapshot], elapsed: float) -> str:
    counts: dict[str, int] = {}
    for snap in snapshots.values():
        counts[snap.state.value] = counts.get(snap.state.value, 0) + 1
    return recorded_counts_line(counts, elapsed)


def round_ended(label: str, finished: RunEvent, start: float | None) -> str:
    """`gen 2 ended in 0.4s; 3 tasks: 2 succeeded, 1 failed · watching for changes`: the run's tasks as the round
    left them (and the services up, after a `settled` round), from the event's counts."""
    counts = event_counts(finished.detail)
    up = counts.pop("up", 0)  # a `settled` round: the services that stay up between rounds
    parts = states_said(counts)
    took = f" in {format_duration(finished.time - start)}" if start is not None else ""
    tasks = counted(sum(counts.values()), "task")
    services = f" · {counted(up, 'service')} up" if up else ""
    return f"{terminal_line(label)} ended{took}; {tasks}: {parts}{services} · watching for changes"


def recorded_counts_line(counts: dict[str, int], elapsed: float) -> str:
    """`300 tasks: 211 succeeded, 1 failed, 88 cancelled in 0.2s`, from state -> count (as summary.json has it).
    Tasks outside the run's targets are not among them: a line of their own counts them (`3 tasks not targets`)."""
    counts = dict(counts)
    untargeted = counts.pop(S.UNTARGETED.value, 0)
    line = f"{counted(sum(counts.values()), 'task')}: {states_said(counts)} in {format_duration(elapsed)}\n"
    if untargeted:
        line = not_targets(untargeted) + "\n" + line
    return line


def not_targets(n: int) -> str:
    """`1 task not a target`, `3 tasks not targets`."""
    return f"{counted(n, 'task')} {'not a target' if n == 1 else 'not targets'}"
