"""Writing a report where the user asked, safely in a folder others can write to (a shared 1777 folder).

A report holds the run's log tails, which may hold secrets a task printed, so it is created 0600 unless the user asks
for another mode. It is written to a new temporary file in the destination's folder (`O_EXCL | O_NOFOLLOW`, relative
to the folder's descriptor) and renamed into place: a symlink planted under the destination's name is replaced, never
written through, and readers never see half a report. A destination that exists must be a regular file of the
user's own: another user's file, a link, a device or a FIFO is refused and left as it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DEFAULT_MODE = 0o600


class ReportFileError(Exception):
    """Why the report can't be written there (shown after `cannot write the report to PATH: `)."""


def parse_mode(text: str) -> int:
    """`--mode 644`: octal permission bits, 0 to 777. Raises ValueError saying what is expected."""
    if not 1 <= len(text) <= 4 or any(c not in "01234567" for c in text) or int(text, 8) > 0o777:
        raise ValueError(f"expected octal permissions such as 600 or 644, got {text[:20]!r}")
    return int(text, 8)


def write_report(path: Path, data: bytes, mode: int = DEFAULT_MODE) -> None:
    """Write `data` to `path` with permissions `mode` (exactly: the umask does not apply). Raises ReportFileError."""
    folder, name = os.path.split(os.path.abspath(path))
    if not name:
        raise ReportFileError("not a file name")
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ReportFileError(exc.strerror or str(exc)) from None
    try:
        _check_destination(dir_fd, name)
        temp = _write_temp(dir_fd, name, data, mode)
        try:
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            _unlink(temp, dir_fd)
            raise ReportFileError(exc.strerror or str(exc)) from None
    finally:
        os.close(dir_fd)


def _check_destination(dir_fd: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ReportFileError(exc.strerror or str(exc)) from None
    if stat.S_ISLNK(info.st_mode):
        raise ReportFileError("it is a symbolic link (a report replaces only a regular file of your own)")
    if not stat.S_ISREG(info.st_mode):
        raise ReportFileError("it is not a regular file")
    if info.st_uid != os.geteuid():
        raise ReportFileError(f"it belongs to another user (uid {info.st_uid})")


def _write_temp(dir_fd: int, name: str, data: bytes, mode: int) -> str:
    temp = f".{name[:200]}.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise ReportFileError(exc.strerror or str(exc)) from None
    try:
        with open(fd, "wb") as file:
            file.write(data)
            os.fchmod(file.fileno(), mode)
    except OSError as exc:
        _unlink(temp, dir_fd)
        raise ReportFileError(exc.strerror or str(exc)) from None
    return temp


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
