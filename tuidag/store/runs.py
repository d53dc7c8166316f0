"""The state dir: `runs/<run_id>/` folders holding `journal.jsonl`, `summary.json` and `logs/<task>.log`.

Run ids are `YYYYMMDD-HHMMSS-mmm-xxxx` (local time, milliseconds, random suffix), so sorting them sorts by start time
and two runs started in the same millisecond by different processes still get different folders.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..engine.process import create_time
from .journal import JournalWriter

STATE_DIR_ENV = "TUIDAG_STATE_DIR"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class StateDirError(Exception):
    """The state dir can't be used (not writable, not a folder, ...). Raised before anything starts."""


def default_state_dir(dag_file: Path | None) -> Path:
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env)
    base = dag_file.resolve().parent if dag_file else Path.cwd()
    return base / ".tuidag"


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
        return self.path / "summary.json"

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
            fd = os.open(self.owner_lock, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def read_summary(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.summary.read_text())
        except (OSError, ValueError):
            return None


class RunStore:
    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        self.runs_dir = state_dir / "runs"

    def ensure_writable(self) -> None:
        """Create the state dir (0700) or explain, before any task starts, why it can't be used."""
        try:
            self.runs_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.state_dir, 0o700)
            probe = self.runs_dir / f".probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise StateDirError(f"state dir {self.state_dir} is not writable: {exc.strerror or exc}") from None

    def create_run(self, dag_name: str, source: Path | None, tasks: list[str],
                   extra: dict[str, Any] | None = None) -> tuple[RunDir, JournalWriter]:
        """A new run folder, owned by this process for as long as it lives (see `RunDir.owned`)."""
        self.ensure_writable()
        while True:
            run_id = new_run_id()
            path = self.runs_dir / run_id
            try:
                path.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        run = RunDir(run_id, path)
        run.logs.mkdir(mode=0o700)
        _hold_owner_lock(run)
        me = os.getpid()
        header = {"run_id": run_id, "dag": dag_name, "source": str(source) if source else None,
                  "host": os.uname().nodename, "pid": me, "pid_create_time": create_time(me),
                  "tasks": tasks, **(extra or {})}
        return run, JournalWriter(run.journal, header)

    def runs(self) -> list[RunDir]:
        """All runs, oldest first."""
        if not self.runs_dir.is_dir():
            return []
        return [RunDir(p.name, p) for p in sorted(self.runs_dir.iterdir()) if p.is_dir() and not p.name.startswith(".")]

    def get(self, run_id: str | None) -> RunDir | None:
        """A run by id (or unique id prefix); the latest when run_id is None."""
        runs = self.runs()
        if run_id is None:
            return runs[-1] if runs else None
        matches = [r for r in runs if r.run_id == run_id] or [r for r in runs if r.run_id.startswith(run_id)]
        return matches[0] if len(matches) == 1 else None


_owner_locks: list[int] = []  # descriptors kept open (close-on-exec) for the life of the process


def _hold_owner_lock(run: RunDir) -> None:
    fd = os.open(run.owner_lock, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()}\n".encode())
    _owner_locks.append(fd)


def write_summary(run: RunDir, summary: dict[str, Any]) -> None:
    """Written once at the end of a run (atomically), so listing runs doesn't need to replay every journal."""
    tmp = run.path / ".summary.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(summary, f)
    os.replace(tmp, run.summary)
