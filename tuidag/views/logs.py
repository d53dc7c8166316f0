"""`tuidag logs`: print a task's log from a run folder, or follow it until the task ends."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import BinaryIO

from ..store.journal import replay
from ..store.runs import RunDir

_CHUNK = 1 << 20


def copy_log(path: Path, out: BinaryIO) -> None:
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            out.write(chunk)
    out.flush()


def follow_log(run: RunDir, task: str, out: BinaryIO, poll: float = 0.1) -> None:
    """Print the log as it grows until the task is terminal (or its run's process is gone), then the rest."""
    path = run.log_path(task)
    offset = 0
    while True:
        rep = replay(run.journal)
        record = rep.tasks.get(task)
        done = (record is not None and record.state.terminal) or not run.owned()
        offset = _copy_from(path, offset, out)
        if done:
            _copy_from(path, offset, out)
            return
        time.sleep(poll)


def _copy_from(path: Path, offset: int, out: BinaryIO) -> int:
    try:
        fd = os.open(path, os.O_RDONLY)
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

