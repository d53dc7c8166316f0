"""An attempt's output on its worker: the worker's own copy of the log (`worker_log_dir`, kept for LOG_RETENTION after
its last write), where the attempt's output is in it (`Output`), and the client's reads of it (`read_output`, a
request handler the worker's guard installs: `guard.HostGuard`).

Output never passes through the scheduler, which would keep it (it stores every event of a topic) and let any client
of the cluster read it: the client reads it from the worker directly. A chunk is read exactly as it is in the file,
so the client's copy is byte for byte the same.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import registry
from .wire import READ_WAIT

if TYPE_CHECKING:
    from ..shell_attempt import ShellAttempt

READ_CHUNK = 1 << 20  # bytes of output one read by the client returns at most
READ_POLL = 0.01  # seconds between a waiting read's looks for new output
USAGE_INTERVAL = 0.5  # seconds between samples of a running attempt's CPU and memory
KEPT_OUTPUTS = 10_000  # ended attempts whose output the client may still read (the oldest are forgotten first)
LOG_RETENTION = 24 * 3600.0  # seconds a worker keeps a run's log copies after their last write

_lock = threading.Lock()
_outputs: dict[str, Output] = {}  # attempt key -> where its output is, while the client may read it


def worker_log_dir() -> Path:
    """Where a worker keeps its copy of task logs: $TUIDAG_WORKER_LOG_DIR, or tuidag-worker-logs in the temp dir."""
    return Path(os.environ.get("TUIDAG_WORKER_LOG_DIR") or Path(tempfile.gettempdir()) / "tuidag-worker-logs")


class Output:
    """Where an attempt's output is in the worker's copy of its log (from the end of its header on), for the
    client's reads (`read_output`), kept after the attempt's end until the client has read it all."""

    def __init__(self):
        self.path: str | None = None
        self.start = 0
        self.size: int | None = None  # set at the end: the bytes of output the attempt wrote
        self.note_bytes = b""  # what the worker itself says when the attempt could not start (no log of its own)

    def follow(self, key: str, path: str, start: int | None) -> None:
        self.path = path
        self.start = start if start is not None else os.stat(path).st_size
        with _lock:
            _outputs[key] = self

    def note(self, key: str, text: bytes) -> None:
        self.note_bytes = text
        with _lock:
            _outputs[key] = self

    def end(self, key: str) -> int:
        if self.path is not None:
            try:
                self.size = max(0, os.stat(self.path).st_size - self.start)
            except OSError:
                self.size = 0
        else:
            self.size = len(self.note_bytes)
        with _lock:
            if not self.size:
                _outputs.pop(key, None)  # nothing to read
            while len(_outputs) > KEPT_OUTPUTS:
                _outputs.pop(next(iter(_outputs)))
        return self.size

    _sampled = 0.0
    _usage: tuple[float, int] | None = None

    def usage(self, running: ShellAttempt | None) -> tuple[float, int] | None:
        now = time.monotonic()
        if running is not None and now - self._sampled >= USAGE_INTERVAL:
            self._sampled = now
            try:
                self._usage = running.usage()
            except Exception:
                self._usage = None
        return self._usage

    def read(self, offset: int) -> bytes:
        if self.path is None:
            return self.note_bytes[offset : offset + READ_CHUNK]
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            limit = READ_CHUNK if self.size is None else min(READ_CHUNK, self.size - offset)
            return os.pread(fd, limit, self.start + offset) if limit > 0 else b""
        finally:
            os.close(fd)


async def read_output(key: str, offset: int, wait: float = READ_WAIT) -> dict[str, Any]:
    """Request handler on the worker (`guard.HostGuard` installs it): the attempt's output from `offset` on,
    as soon as there is some, or none after `wait` seconds; `end` is the attempt's output size once it has ended
    (None while it runs, -1 when this worker knows nothing of the attempt); `usage` the CPU % and RSS of its tree
    while it runs (sampled at most every USAGE_INTERVAL, as the views ask locally). The file is read on the worker's
    event loop: a read of at most READ_CHUNK from the page cache takes well under a millisecond."""
    import asyncio

    deadline = time.monotonic() + wait
    while True:
        with _lock:
            output = _outputs.get(key)
        running = registry.running_attempt(key)
        if output is None:
            return {"data": b"", "end": -1, "usage": None}
        end = output.size
        try:
            data = output.read(offset)
        except OSError:
            data = b""
        if end is not None and offset + len(data) >= end:
            with _lock:
                if _outputs.get(key) is output:
                    del _outputs[key]  # all read
        if data or end is not None or time.monotonic() >= deadline:
            return {"data": data, "end": end, "usage": output.usage(running) if end is None else None}
        await asyncio.sleep(READ_POLL)


def prune_logs(folder, retention: float) -> None:
    """Remove the runs' log copies (one folder per run) last written more than `retention` seconds ago."""
    import shutil

    now = time.time()
    try:
        runs = list(os.scandir(folder))
    except OSError:
        return
    for run in runs:
        try:
            if run.is_dir(follow_symlinks=False) and now - _last_write(run.path) > retention:
                shutil.rmtree(run.path, ignore_errors=True)
        except OSError:
            pass


def _last_write(path: str) -> float:
    latest = os.stat(path).st_mtime
    for entry in os.scandir(path):
        try:
            latest = max(latest, entry.stat(follow_symlinks=False).st_mtime)
        except OSError:
            pass
    return latest
