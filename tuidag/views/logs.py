"""`tuidag logs`: print a task's log from a run folder, or follow it until the task ends; a matrix task's instances
one after another, or followed together, each under a `==> name <==` heading as `tail` prints several files.

The bytes go out as they are, unless they go to a terminal: then they are made safe (`terminal_text`: colours kept,
other control sequences neutralised, a `\\r` overwrites within its line, a line cut at `LINE_CAP` with a marker), since
a log holds whatever a task printed. `--raw` asks for the bytes on a terminal too.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..store.journal import replay
from ..store.runs import RunDir
from .terminal_text import LineAssembler, terminal_lines

_CHUNK = 1 << 20
LINE_CAP = 1 << 20
"""Bytes of one line shown on a terminal at most; `--raw` prints the rest."""
_CUT_MARKER = " \u2026 [tuidag: line cut, %d more bytes; --raw prints them]".encode()


class Sink(Protocol):
    """Where a LogPrinter writes: a binary stream (stdout's buffer), or a `Headed` one of several logs."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...


class LogPrinter:
    """Where log bytes go: to `out` as they are, or (`sanitize`) as terminal-safe lines."""

    def __init__(self, out: Sink, sanitize: bool, encoding: str = "utf-8"):
        self.out = out
        self.encoding = encoding  # the terminal's, for sanitized lines
        self._lines = LineAssembler(LINE_CAP, _CUT_MARKER) if sanitize else None

    def write(self, data: bytes) -> None:
        if self._lines is None:
            self.out.write(data)
        elif lines := self._lines.feed(data):
            self.out.write(terminal_lines(lines).encode(self.encoding, "replace"))

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        """The log is over: print its incomplete last line too."""
        if self._lines is not None and (lines := self._lines.flush()):
            self.out.write(terminal_lines(lines).encode(self.encoding, "replace"))
        self.out.flush()


class UnsafeLog(Exception):
    """A task's log that is not a regular file: a link or FIFO planted in the run folder is never read through."""


def open_log(path: str | Path) -> int:
    """A read descriptor on the log at `path`, which must be a regular file and not a symbolic link (FileNotFoundError
    when there is none yet)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeLog(f"{path} is a symbolic link, not a log tuidag wrote: not shown") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeLog(f"{path} is not a regular file, not a log tuidag wrote: not shown")
    return fd


def copy_log(path: Path, out: LogPrinter) -> None:
    fd = open_log(path)
    try:
        while chunk := os.read(fd, _CHUNK):
            out.write(chunk)
    finally:
        os.close(fd)
    out.close()


class Headed:
    """The output of one of several logs: the `==> name <==` heading goes out before its bytes whenever the previous
    bytes were another log's. A sanitizing LogPrinter writes whole lines only, so on a terminal a heading never
    splits a line; raw bytes switch where they come, as with `tail -f`."""

    def __init__(self, out: Sink, name: str, last: list[str | None], heading: Callable[[str, bool], bytes]):
        self.out, self.name, self._last, self._heading = out, name, last, heading

    def write(self, data: bytes) -> None:
        if self._last[0] != self.name:
            self.out.write(self._heading(self.name, self._last[0] is not None))
            self._last[0] = self.name
        self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def follow_logs(run: RunDir, printers: dict[str, LogPrinter], poll: float = 0.1) -> str | None:
    """Print each task's log (`printers`: task -> where its bytes go; a matrix task's instances each under its
    heading) as it grows until every one is terminal (or the run's process is gone), then the rest. None when they
    ended; otherwise why the logs stop before their end (the run's engine died: `logs -f` once just stopped there,
    exit 0, as if the task had ended)."""
    offsets = dict.fromkeys(printers, 0)
    while True:
        rep = replay(run.journal)
        records = {task: rep.tasks.get(task) for task in printers}
        ended = all(record is not None and record.state.terminal for record in records.values())
        done = ended or not run.owned()
        for task, out in printers.items():
            offsets[task] = _copy_from(run.log_path(task), offsets[task], out)
        if done:
            for task, out in printers.items():
                _copy_from(run.log_path(task), offsets[task], out)
                out.close()
            if ended:
                return None
            cut = [task for task, record in records.items() if record is not None and not record.state.terminal]
            return _why_cut(run, cut[0]) if cut else None
        time.sleep(poll)


def _why_cut(run: RunDir, task: str) -> str | None:
    """The run has no owner and its journal never recorded the task's end: its engine died, unless the run ended
    as runs do and only its journal stopped early (a full state dir: the summary holds how the tasks ended)."""
    summary = run.read_summary()
    if summary is not None and summary.get("interrupted_by") != "crash":
        return None
    return (
        f"the engine of run {run.run_id} died before {task} ended: its log stops here "
        f"(`tuidag runs` ends what the run's tasks left)"
    )


def _copy_from(path: Path, offset: int, out: LogPrinter) -> int:
    try:
        fd = open_log(path)
    except FileNotFoundError:
        return offset
    try:
        while True:
            data = os.pread(fd, _CHUNK, offset)
            if not data:
                break
            out.write(data)
            offset += len(data)
    finally:
        os.close(fd)
    out.flush()
    return offset
