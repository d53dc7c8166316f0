"""The last lines of a task's log, read from its end in bounded memory (for the headless summary of failures).

Only the end of the file is read (`WINDOW` bytes at most), from the start of the last attempt on: its header and what
earlier attempts printed are left out, by the byte ranges tuidag recorded (`LogHeaders`), never by their text. Lines
are display lines (`LineAssembler`: a `\\r` overwrites, a long line is cut with a marker); they are bytes, to be made
terminal-safe by the caller. The file must be a regular file, not a link or FIFO planted in the run folder.
"""
from __future__ import annotations

import os
from collections import deque

from ..engine.log_headers import LogHeaders
from .logs import open_log
from .terminal_text import LineAssembler

WINDOW = 256 << 10
"""Bytes read from the end of a log at most: the last lines must be in them (longer lines leave fewer lines)."""
LINE_CAP = 400
"""Bytes of one line shown at most; the rest is in the log file."""
_CUT_MARKER = " \u2026 [line cut, %d more bytes in the log file]".encode()


def last_lines(path: str, headers: LogHeaders, count: int) -> list[bytes]:
    """The last `count` lines the last attempt wrote to the log at `path`. Raises OSError (FileNotFoundError when there
    is no log) or `views.logs.UnsafeLog`."""
    fd = open_log(path)
    try:
        size, spans = headers.snapshot(fd, path)
        attempt_start = spans[-1].end if spans else 0
        begin = max(attempt_start, size - WINDOW)
        data = os.pread(fd, size - begin, begin) if size > begin else b""
    finally:
        os.close(fd)
    if begin > attempt_start and b"\n" in data:  # the window starts inside a line: leave that line's end out
        data = data[data.index(b"\n") + 1:]
    lines = LineAssembler(LINE_CAP, _CUT_MARKER)
    tail: deque[bytes] = deque(lines.feed(data), maxlen=count)
    tail.extend(lines.flush())
    return list(tail)
