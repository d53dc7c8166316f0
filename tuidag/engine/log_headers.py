"""The header line that starts each attempt in a task's log, and a record of where tuidag wrote each one.

A task can print any text, `=== tuidag: … ===` included, so a reader must not tell tuidag's headers from task output
by their text (the headless reporter once hid every task line starting that way). Instead tuidag notes the byte
range of each header as it writes it, and a reader that treats headers differently asks `LogHeaders` which bytes are
headers. Writing and asking share one lock, so a reader never sees header bytes before their range is known.

A header starts on a line of its own: when the log does not end with a newline (the last attempt stopped mid-line),
a newline is written first, inside the header's range, so the next attempt never runs on from the last one's text.
"""

from __future__ import annotations

import os
import threading
import time
from typing import NamedTuple


class HeaderSpan(NamedTuple):
    """Bytes `[start, end)` of a log file are a header of tuidag's (with the newline before it, if one was needed)."""

    start: int
    end: int


def header_text(task: str, attempt: int) -> bytes:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")  # local time, to the second
    return f"=== tuidag: {task} attempt {attempt} started at {stamp} ===\n".encode()


class LogHeaders:
    """The headers written into a run's task logs, by log path. One per scheduler; executors write through it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[str, list[HeaderSpan]] = {}

    def write(self, fd: int, path: str, header: bytes, new: bool = False) -> HeaderSpan:
        """Append `header` to the log open as `fd` (O_APPEND) at `path`, starting a new line if needed. `new`: the
        caller created the file (O_EXCL) and wrote nothing to it, so the header is its first bytes, with nothing to
        check (a first attempt's log; three system calls fewer).

        A new log's header goes on record before it is written, and the write is made without the lock: no one else
        writes to a file this attempt just created, so its header is exactly `[0, len(header))`, and a reader that
        sees the range before the bytes skips them when they come. Held across the write, the lock kept every
        attempt that started meanwhile (and `output_start`) waiting for a thread that, back from the write, first
        waits for the GIL: 2-3% of a profile of 1,000 quick tasks on eight threads was threads waiting there."""
        if new:
            span = HeaderSpan(0, len(header))
            with self._lock:
                spans = self._spans.setdefault(path, [])
                spans.append(span)
            written = -1
            try:
                written = os.write(fd, header)
            finally:
                if written != span.end:  # failed (no header) or short (a full disk: the part that is there)
                    with self._lock:
                        spans.pop()  # still the last: one attempt of a task at a time writes to its log
                        if written >= 0:
                            span = HeaderSpan(0, written)
                            spans.append(span)
            return span
        with self._lock:
            header = own_line(fd, path, header)
            written = os.write(fd, header)
            end = os.lseek(fd, 0, os.SEEK_CUR)  # after an O_APPEND write: the end of exactly these bytes
            span = HeaderSpan(end - written, end)
            self._spans.setdefault(path, []).append(span)
        return span

    def output_start(self, path: str) -> int | None:
        """Where the last attempt's output starts in the log at `path`: the end of its header (None: no header)."""
        with self._lock:
            spans = self._spans.get(path)
            return spans[-1].end if spans else None

    def snapshot(self, fd: int, path: str) -> tuple[int, list[HeaderSpan]]:
        """The size of the log open as `fd` and the headers in it, taken together: every header that lies (even
        partly) below that size is in the list."""
        with self._lock:
            return os.fstat(fd).st_size, list(self._spans.get(path, ()))


def own_line(fd: int, path: str, text: bytes) -> bytes:
    """`text`, after a newline if the log open as `fd` (at `path`) ends mid-line, so that it starts a line."""
    return b"\n" + text if _ends_mid_line(fd, path) else text


def _ends_mid_line(fd: int, path: str) -> bool:
    """The log open as `fd` is not empty and its last byte is not a newline. The write descriptor cannot be read
    (a task gets it as its stdout), so the file is opened again, and ignored unless it is the same file."""
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    try:
        reader = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        same = os.path.samestat(os.fstat(reader), os.fstat(fd))
        return same and os.pread(reader, 1, size - 1) != b"\n"
    finally:
        os.close(reader)
