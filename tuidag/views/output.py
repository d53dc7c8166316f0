"""Output streams whose reader may go away: `tuidag run p.yaml | head -1`.

A closed pipe stops the printing, never the run and never the truth of the exit code: the first write that finds no
reader (EPIPE; Python ignores SIGPIPE) points the stream's descriptor at /dev/null, so every later write, the
buffered rest included and the interpreter's last flush at exit, succeeds silently and the run goes on to its end.
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


class ReaderSafe:
    """A text stream (stdout, stderr) that outlives its reader; everything but `write` and `flush` is the stream's
    own (`isatty`, `fileno`, `buffer`, ...)."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
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
