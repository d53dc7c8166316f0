"""The headless reporter: live `[task] line` output, state changes, and a summary table at the end.

It is an engine observer like the UI. The observer callback only appends to a deque; one printer thread drains it and
tails the log files of running tasks, so a slow terminal or pipe never stalls the engine. Output of a task is read
from its log file (the file is the source of truth, written by the task itself), and a task's remaining output is
printed before the line that says it ended.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from typing import TextIO

from ..engine.events import Event, RunEvent, TaskEvent, TaskSnapshot
from ..model.durations import format_duration
from ..model.state import TaskState

S = TaskState
_COLOURS = [31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96]
_STATE_COLOURS = {S.SUCCEEDED: 32, S.FAILED: 31, S.CANCELLED: 33, S.SKIPPED: 90, S.RUNNING: 36, S.RETRYING: 35,
                  S.CANCELLING: 33, S.QUEUED: 37, S.PENDING: 37}
_HEADER_PREFIX = b"=== tuidag: "
_READ_CHUNK = 1 << 16


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Tail:
    """Reads what a task appended to its log since the last read. The offset survives retries and re-runs, so
    output already printed is never printed again."""

    __slots__ = ("path", "offset", "pending")

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.pending = b""  # an incomplete last line

    def read(self) -> list[bytes]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return []
        chunks = [self.pending]
        try:
            while data := os.pread(fd, _READ_CHUNK, self.offset):
                chunks.append(data)
                self.offset += len(data)
        finally:
            os.close(fd)
        lines = b"".join(chunks).split(b"\n")
        self.pending = lines.pop()
        return lines

    def read_all(self) -> list[bytes]:
        """Everything up to the end, the incomplete last line included: the writer is done."""
        lines = self.read()
        if self.pending:
            lines.append(self.pending)
            self.pending = b""
        return lines


class HeadlessReporter:
    def __init__(self, out: TextIO, quiet: bool = False, colour: bool = False, interval: float = 0.05):
        self.out = out
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

    # engine side: must be quick and never block
    def __call__(self, event: Event) -> None:
        self._events.append(event)
        if not self.quiet and isinstance(event, TaskEvent) and event.new.terminal:
            self._wake.set()  # print the task's last output promptly

    def start(self, task_names: list[str]) -> None:
        self._width = min(24, max((len(n) for n in task_names), default=0))
        for i, name in enumerate(task_names):
            self._task_colour[name] = _COLOURS[i % len(_COLOURS)]
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
            self._drain()
            self.out.flush()
            if stopping:
                break
            self._wake.wait(self.interval)
            self._wake.clear()
        for name in sorted(self._live):
            self._emit_lines(name, self._tails[name].read_all())
        self._live.clear()

    def _drain(self) -> None:
        while self._events:
            event = self._events.popleft()
            if isinstance(event, RunEvent):
                if event.kind in ("paused", "resumed"):
                    self._write(f"tuidag: scheduling {event.kind}\n")
                continue
            self._on_task(event)
        for name in self._live:
            self._emit_lines(name, self._tails[name].read())

    def _on_task(self, event: TaskEvent) -> None:
        snap = event.snapshot
        name = snap.name
        if not self.quiet and snap.state is S.RUNNING:
            self._tails.setdefault(name, _Tail(snap.log_path))
            self._live.add(name)
        elif name in self._live and (snap.state.terminal or snap.state is S.RETRYING):
            self._live.discard(name)
            self._emit_lines(name, self._tails[name].read_all())
        if event.is_transition and snap.state is not S.QUEUED:
            self._write(self._prefix(name) + self._describe(snap) + "\n")

    def _emit_lines(self, name: str, lines: list[bytes]) -> None:
        if not lines:
            return
        prefix = self._prefix(name)
        text = "".join(prefix + line.decode("utf-8", "replace").rstrip("\r") + "\n"
                       for line in lines if not line.startswith(_HEADER_PREFIX))
        self._write(text)

    def _prefix(self, name: str) -> str:
        label = f"[{name}]".ljust(self._width + 2)
        if self.colour:
            return f"\x1b[{self._task_colour.get(name, 37)}m{label}\x1b[0m "
        return label + " "

    def _describe(self, snap: TaskSnapshot) -> str:
        state = snap.state.value
        if self.colour:
            state = f"\x1b[1;{_STATE_COLOURS[snap.state]}m{state}\x1b[0m"
        text = f"--> {state}"
        if snap.state is S.RUNNING and snap.attempt > 1:
            text += f" (attempt {snap.attempt})"
        elif snap.state.terminal and snap.started_at is not None and snap.finished_at is not None:
            text += f" in {format_duration(snap.finished_at - snap.started_at)}"
        if snap.reason and snap.state is not S.SUCCEEDED:
            text += f": {snap.reason}"
        return text

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
        except (BrokenPipeError, ValueError):
            pass


def summary_table(snapshots: dict[str, TaskSnapshot], colour: bool = False) -> str:
    """The final table: task, state, attempts, duration, exit code, log path."""
    rows = [("TASK", "STATE", "ATTEMPTS", "DURATION", "EXIT", "LOG")]
    for snap in snapshots.values():
        duration = (snap.finished_at - snap.started_at
                    if snap.started_at is not None and snap.finished_at is not None else None)
        rows.append((snap.name, snap.state.value + (" (reused)" if snap.reused else ""), str(snap.attempt),
                     format_duration(duration), "-" if snap.exit_code is None else str(snap.exit_code),
                     snap.log_path if snap.attempt or snap.reused else "-"))  # only a task that started has one
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


def counts_line(snapshots: dict[str, TaskSnapshot], elapsed: float) -> str:
    counts: dict[str, int] = {}
    for snap in snapshots.values():
        counts[snap.state.value.lower()] = counts.get(snap.state.value.lower(), 0) + 1
    parts = ", ".join(f"{n} {state}" for state, n in counts.items())
    return f"{len(snapshots)} tasks: {parts} in {format_duration(elapsed)}\n"

