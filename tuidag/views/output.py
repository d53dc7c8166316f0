"""Output streams whose reader may go away: `tuidag run p.yaml | head -1`, `tuidag runs > /dev/full`.

A closed pipe stops the printing, never the run and never the truth of the exit code: the first write that finds no
reader (EPIPE; Python ignores SIGPIPE) points the stream's descriptor at /dev/null, so every later write, the
buffered rest included and the interpreter's last flush at exit, succeeds silently and the run goes on to its end.
Any other stream that can't be written any more is the same to the run: stdout on a full device (`> /dev/full`,
ENOSPC) or a terminal that went away (EIO), and a descriptor that was closed before tuidag started (`>&-`: Python
then has no `sys.stdout` at all, and the next file tuidag opened would get the descriptor's number).

The other commands print a result (`runs`, `logs`, `graph`, ...): for them the first write that fails ends the
command (`CommandOutput` raises `OutputLost`), which then exits 0 for a reader that had enough (EPIPE) and 1, with
a line on stderr, for output that was lost (a full device, a terminal gone): never a traceback.
"""

from __future__ import annotations

import os
from typing import Any, TextIO


def discard_output(stream: Any) -> None:
    """Send what `stream` writes from now on (and what it holds buffered) to /dev/null."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


def keep_standard_descriptors() -> None:
    """Put /dev/null on any of descriptors 0-2 that is closed, so no file tuidag opens (a journal, a log) gets one of
    those numbers, and what is written to it by number (a Dask worker tuidag forks prints to 1 and 2) goes nowhere."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # gets the lowest free number: this one, as the lower ones are open now


class ReaderSafe:
    """A text stream (stdout, stderr) that outlives its reader; everything but `write` and `flush` is the stream's
    own (`isatty`, `fileno`, `buffer`, ...)."""

    def __init__(self, stream: TextIO | None):
        self.reader_gone = stream is None  # closed before Python started: nothing reads what is written
        # Open as long as the process writes to it: no `with` block could hold it.
        self.stream = open(os.devnull, "w") if stream is None else stream  # noqa: SIM115

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        self.reader_gone = True
        discard_output(self.stream)
        try:
            self.stream.flush()  # what stayed buffered goes to /dev/null now
        except OSError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class OutputLost(Exception):
    """The command's output could not be written (`error`); what was buffered is discarded."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))
        self.error = error


class CommandOutput:
    """stdout for a command that prints a result: text and bytes (`buffer`) written as by the stream, the first
    failure raised as `OutputLost` with the stream pointed at /dev/null (so the interpreter's last flush is quiet)."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    @property
    def buffer(self) -> _BufferOutput:
        return _BufferOutput(self, self.stream.buffer)

    def write(self, text: str) -> int:
        return self.guarded(self.stream.write, text)

    def flush(self) -> None:
        self.guarded(self.stream.flush)

    def guarded(self, call, *args: Any) -> Any:
        try:
            return call(*args)
        except OSError as exc:
            discard_output(self.stream)
            raise OutputLost(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class _BufferOutput:
    def __init__(self, owner: CommandOutput, buffer: Any):
        self._owner = owner
        self._buffer = buffer

    def write(self, data: bytes) -> int:
        return self._owner.guarded(self._buffer.write, data)

    def flush(self) -> None:
        self._owner.guarded(self._buffer.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._buffer, name)
