"""Reading DAG files: the one place where OS and encoding failures become located errors, shared by every loader."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import DagError, DagErrors, Location

#: The largest DAG file read. A 100,000-task DAG is about 5 MiB of YAML; composing a file takes about 30 times its
#: size in memory, so a bigger one is refused before it is read rather than run out of memory (or, for a device such
#: as /dev/zero, never end).
MAX_SOURCE_BYTES = 32 * 1024 * 1024

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def read_source(path: Path) -> str:
    """The file's text, or DagErrors pointing at the file itself, so a bad path reads like any other DAG error."""
    data = read_source_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    raise DagErrors([DagError(f"cannot read file: {problem}", Location(str(path), 1, 1))])


def read_source_bytes(path: Path) -> bytes:
    """The file's bytes. Only a regular file of at most MAX_SOURCE_BYTES is read: what it is and how big is checked
    on the open descriptor before reading (opened without blocking, so a pipe with no writer doesn't hang here)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            kind = next((name for test, name in _KINDS if test(info.st_mode)), None)
            if stat.S_ISDIR(info.st_mode):
                problem = os.strerror(errno.EISDIR)
            elif not stat.S_ISREG(info.st_mode):
                problem = f"it is {kind or 'not a regular file'}: a DAG file must be a regular file"
            elif info.st_size > MAX_SOURCE_BYTES:
                problem = f"it is {info.st_size:,} bytes: a DAG file may be at most {_mib(MAX_SOURCE_BYTES)}"
            else:
                with open(fd, "rb", closefd=False) as file:
                    data = file.read(MAX_SOURCE_BYTES + 1)  # it may have grown since fstat
                if len(data) <= MAX_SOURCE_BYTES:
                    return data
                problem = f"it is over {_mib(MAX_SOURCE_BYTES)}: a DAG file may be at most that"
        finally:
            os.close(fd)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    raise DagErrors([DagError(f"cannot read file: {problem}", Location(str(path), 1, 1))])


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"
