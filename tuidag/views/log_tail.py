"""The last lines of a task's log, read from its end in bounded memory: the one reader of failure tails, for the
headless summary and the report.

Only the end of the file is read (`WINDOW` bytes at most), from the start of the last attempt's output on: its header
and what earlier attempts printed are left out by the byte offset tuidag recorded (a snapshot's `log_start`, which the
journal keeps), never by their text. Lines are display lines (`LineAssembler`: a `\\r` overwrites, a long line is cut
with a marker giving the true number of bytes cut); they are bytes, to be made terminal-safe by the caller. The file
must be a regular file, not a link or FIFO planted in the run folder.
"""

from __future__ import annotations

import os
from collections import deque

from .logs import open_log
from .terminal_text import LineAssembler

WINDOW = 256 << 10
"""Bytes read from the end of a log at most: the last lines must be in them (longer lines leave fewer lines)."""
LINE_CAP = 400
"""Bytes of one line shown at most; the rest is in the log file."""
_CUT_MARKER = " \u2026 [line cut, %d more bytes in the log file]".encode()
_HEAD = 4 * LINE_CAP
"""Bytes read from the start of a line that begins before the window: enough to show its first LINE_CAP bytes."""
_SCAN = 64 << 10
"""Bytes read at a time while looking back for the start of that line."""


def last_lines(path: str, start: int | None, count: int) -> list[bytes]:
    """The last `count` lines of the log at `path` from byte `start` on (where the last attempt's output starts;
    None: the whole file). A line that begins before the window shows its start, cut, with the number of bytes cut
    counted from its real start. Raises OSError (FileNotFoundError when there is no log) or `views.logs.UnsafeLog`."""
    lines = LineAssembler(LINE_CAP, _CUT_MARKER)
    fd = open_log(path)
    try:
        size = os.fstat(fd).st_size
        attempt_start = min(start or 0, size)
        begin = max(attempt_start, size - WINDOW)
        data = os.pread(fd, size - begin, begin) if size > begin else b""
        if begin > attempt_start and os.pread(fd, 1, begin - 1) != b"\n":  # the window starts inside a line
            line_start = _line_start(fd, begin, attempt_start)
            head = os.pread(fd, min(_HEAD, begin - line_start), line_start)
            lines.feed(head)
            lines.skip(begin - line_start - len(head))
    finally:
        os.close(fd)
    tail: deque[bytes] = deque(lines.feed(data), maxlen=count)
    tail.extend(lines.flush())
    return list(tail)


def _line_start(fd: int, offset: int, floor: int) -> int:
    """Where the line holding byte `offset` starts, not before `floor`: found by reading back `_SCAN` bytes at a
    time (bounded memory; a line of gigabytes is read through once)."""
    end = offset
    while end > floor:
        begin = max(floor, end - _SCAN)
        newline = os.pread(fd, end - begin, begin).rfind(b"\n")
        if newline != -1:
            return begin + newline + 1
        end = begin
    return floor
