"""The state dir: `runs/<run_id>/` folders holding `journal.jsonl`, `summary.json` and `logs/<task>.log`.

Run ids are `YYYYMMDD-HHMMSS-mmm-xxxx` (local time, milliseconds, random suffix), so sorting them sorts by start time
and two runs started in the same millisecond by different processes still get different folders.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..engine.process import create_time
from .journal import DIR_FLAGS, NEW_FILE, SUMMARY, JournalWriter, place_summary

STATE_DIR_ENV = "TUIDAG_STATE_DIR"
_SAFE = re.compile(r"[^A-Za-z0-9_.,=+\[\]-]")  # a matrix instance is `train[lr=0.1,seed=2]`


class StateDirError(Exception):
    """The state dir can't be used (not writable, not a folder, not safe, ...). Raised before anything starts."""


def check_dir(fd: int, shown: Path) -> None:
    """Refuse a folder of the store that someone else could plant files in (a symlink named like one of tuidag's
    files, to make it write or show another file): it must be the invoking user's and writable by no one else.
    Never changes a folder's mode: one tuidag did not create (`--state-dir /tmp`) is refused, not locked down."""
    info = os.fstat(fd)
    me = os.geteuid()
    if info.st_uid != me:
        problem = f"it belongs to {_user(info.st_uid)}, not to you ({_user(me)})"
    elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problem = f"others can write to it (mode {stat.S_IMODE(info.st_mode):04o})"
    else:
        return
    raise StateDirError(
        f"state dir {shown} is not safe to use: {problem}; use a folder that only you can write to (--state-dir DIR)"
    )


def _user(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _problem(exc: OSError) -> str:
    """How a failed write to the state dir reads: full, or not writable and why."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"is full ({exc.strerror})"
    return f"is not writable: {exc.strerror or exc}"


def default_state_dir(dag_file: Path | None) -> Path:
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env)
    base = dag_file.resolve().parent if dag_file else Path.cwd()
    return base / ".tuidag"


def run_command(command: str, run_id: str, state_dir: Path) -> str:
    """`tuidag attach RUN` (or `stop`, ...) as the user can type it in the folder they are in: such a command looks
    in this folder's `.tuidag` (or `$TUIDAG_STATE_DIR`) unless told otherwise, so a run kept elsewhere (next to a
    DAG file in another folder) gets `--state-dir` with the absolute path."""
    import shlex

    run = run_id if command == "attach" else f"--run {run_id}"
    where = (
        ""
        if state_dir.resolve() == default_state_dir(None).resolve()
        else f" --state-dir {shlex.quote(str(state_dir.resolve()))}"
    )
    return f"tuidag {command} {run}{where}"


def new_run_id(now: float | None = None) -> str:
    now = time.time() if now is None else now
    ms = int((now % 1) * 1000)
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{ms:03d}-{os.urandom(2).hex()}"


def log_file_name(task: str) -> str:
    """A file name for a task's log that can never leave the logs folder.

    Names from the validated alphabet map to themselves; anything else is replaced character by character and
    suffixed with a hash of the original so that two different names never share a file."""
    safe = _SAFE.sub("_", task).strip(".") or "_"
    if safe != task or ".." in task:
        import hashlib  # only for names outside the validated alphabet (Python DAGs can name tasks freely)

        safe = safe.replace("..", "_") + "-" + hashlib.sha1(task.encode()).hexdigest()[:8]
    return safe + ".log"


class RunDir(NamedTuple):
    run_id: str
    path: Path

    @property
    def journal(self) -> Path:
        return self.path / "journal.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def log_path(self, task: str) -> Path:
        path = self.logs / log_file_name(task)
        assert path.parent == self.logs
        return path

    @property
    def owner_lock(self) -> Path:
        return self.path / "owner.lock"

    def owned(self) -> bool:
        """Is a live process running this run? Its creator holds an exclusive flock on owner.lock for its whole
        life; the kernel drops it when that process dies, however it dies (kill -9 included)."""
        try:
            fd = os.open(self.owner_lock, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):  # none, or a symlink: not a lock of ours
                return False
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def read_summary(self) -> dict[str, Any] | None:
        try:
            fd = os.open(self.summary, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
            with open(fd, "rb") as f:
                return json.loads(f.read())
        except (OSError, ValueError):
            return None


class RunStore:
    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self.runs_dir = state_dir / "runs"

    def check(self) -> None:
        """Refuse (StateDirError) a state dir, or its runs folder, that exists and is not safe (see `check_dir`);
        one that does not exist yet is fine. A symlinked state dir is judged by the folder it leads to."""
        try:
            fd = os.open(self.state_dir, DIR_FLAGS)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateDirError(f"state dir {self.state_dir} {_problem(exc)}") from None
        try:
            check_dir(fd, self.state_dir)
            runs_fd = os.open("runs", DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return
            raise StateDirError(f"state dir {self.state_dir} {_problem(exc)} ({self.runs_dir})") from None
        finally:
            os.close(fd)
        try:
            check_dir(runs_fd, self.runs_dir)
        finally:
            os.close(runs_fd)

    def ensure_writable(self) -> int:
        """Create the state dir and its runs folder (0700) as needed, check both (`check_dir`) and return the runs
        folder, opened; or explain, before any task starts, why the state dir can't be used."""
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # mode: of this folder, if made
            state_fd = os.open(self.state_dir, DIR_FLAGS)
            try:
                check_dir(state_fd, self.state_dir)
                try:
                    os.mkdir("runs", 0o700, dir_fd=state_fd)
                except FileExistsError:
                    pass
                runs_fd = os.open("runs", DIR_FLAGS | os.O_NOFOLLOW, dir_fd=state_fd)
            finally:
                os.close(state_fd)
            try:
                check_dir(runs_fd, self.runs_dir)
            except StateDirError:
                os.close(runs_fd)
                raise
            return runs_fd
        except OSError as exc:
            raise StateDirError(f"state dir {self.state_dir} {_problem(exc)}") from None

    def create_run(
        self, dag_name: str, source: Path | None, tasks: list[str], extra: dict[str, Any] | None = None
    ) -> tuple[RunDir, JournalWriter]:
        """A new run folder, owned by this process for as long as it lives (see `RunDir.owned`).

        The folder is made, locked and filled (journal header, reserved room for the summary) under a hidden name,
        and renamed to its run id only then: a reaper of another tuidag command lists visible folders only, so it
        can never see this run without its owner's lock (and close it as interrupted)."""
        runs_fd = self.ensure_writable()
        staging = f".new-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            os.mkdir(staging, 0o700, dir_fd=runs_fd)
            run_fd = os.open(staging, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=runs_fd)
            try:
                _hold_owner_lock(run_fd)
                os.mkdir("logs", 0o700, dir_fd=run_fd)
                me = os.getpid()
                while True:
                    run_id = new_run_id()
                    run = RunDir(run_id, self.runs_dir / run_id)
                    header = {
                        "run_id": run_id,
                        "dag": dag_name,
                        "source": str(source) if source else None,
                        "host": os.uname().nodename,
                        "pid": me,
                        "pid_create_time": create_time(me),
                        "tasks": tasks,
                        **(extra or {}),
                    }
                    journal = JournalWriter(run.journal, header, dir_fd=run_fd)
                    try:  # EEXIST/ENOTEMPTY: another process's run took that id in the same millisecond
                        os.rename(staging, run_id, src_dir_fd=runs_fd, dst_dir_fd=runs_fd)
                        return run, journal
                    except OSError as exc:
                        journal.discard()
                        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                            raise
            finally:
                os.close(run_fd)
        except OSError as exc:
            _remove_staging(runs_fd, staging)
            raise StateDirError(f"state dir {self.state_dir} {_problem(exc)}") from None
        finally:
            os.close(runs_fd)

    def runs(self) -> list[RunDir]:
        """All runs, oldest first."""
        try:
            with os.scandir(self.runs_dir) as entries:  # a symlink is not a run (nor a folder being made, ".new-")
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and e.name[0] != ".")
        except OSError:
            return []
        return [RunDir(name, self.runs_dir / name) for name in names]

    def get(self, run_id: str | None) -> RunDir | None:
        """A run by id (or unique id prefix); the latest when run_id is None."""
        runs = self.runs()
        if run_id is None:
            return runs[-1] if runs else None
        matches = [r for r in runs if r.run_id == run_id] or [r for r in runs if r.run_id.startswith(run_id)]
        return matches[0] if len(matches) == 1 else None


_owner_locks: list[int] = []  # descriptors kept open (close-on-exec) for the life of the process


def _hold_owner_lock(run_fd: int) -> None:
    fd = os.open("owner.lock", NEW_FILE, 0o600, dir_fd=run_fd)
    _owner_locks.append(fd)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())  # for people: the lock is what counts
    except OSError:
        pass


def _remove_staging(runs_fd: int, name: str) -> None:
    """Best effort: delete a run folder that failed before it became visible (only tuidag's own files are in it)."""
    try:
        fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=runs_fd)
    except OSError:
        return
    try:
        for entry in os.listdir(fd):
            try:
                if entry == "logs":
                    os.rmdir(entry, dir_fd=fd)
                else:
                    os.unlink(entry, dir_fd=fd)
            except OSError:
                pass
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=runs_fd)
    except OSError:
        pass


def write_summary(run: RunDir, summary: dict[str, Any]) -> None:
    """Close a run whose owner is gone (the reaper): its summary, atomically, over the room its owner reserved when
    there is some (see `place_summary`). Raises OSError."""
    fd = os.open(run.path, DIR_FLAGS | os.O_NOFOLLOW)
    try:
        place_summary(fd, summary)
    finally:
        os.close(fd)


def link_log(old: str | Path, new: str | Path) -> None:
    """The new run's log of a reused task is the earlier run's file (a hard link: it survives either run's folder
    being deleted), or a copy where links can't be made. Only a regular file of the user's own is taken: a symlink
    (or a link to another user's file) put in the old run's place is not a log, and would make `tuidag logs` show
    whatever it points to; the check is made on the new name, after linking, so nothing can be swapped in between."""
    try:
        os.link(old, new, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError:
        _copy_log(old, new)
        return
    if not _own_file(os.lstat(new)):
        os.unlink(new)


def _own_file(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()


def _copy_log(old: str | Path, new: str | Path) -> None:
    """Best effort: a reused task whose log can't be copied is still reused (its log stays in the old run)."""
    try:
        src = os.open(old, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if _own_file(os.fstat(src)):
            dst = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                while chunk := os.read(src, 1 << 20):
                    os.write(dst, chunk)
            except OSError:
                os.unlink(new)
            finally:
                os.close(dst)
    except OSError:
        pass
    finally:
        os.close(src)
