"""The run journal: one JSON object per line, appended as events happen, one write() per batch the engine delivers.

Each `os.write` on an O_APPEND descriptor appends whole lines, so a crash (even kill -9) leaves a journal whose
every complete line parses; a torn last line (a crash inside a write, or a disk that filled up) is ignored on replay.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..engine.events import Event, RunEvent, TaskEvent
from ..model.state import TaskState
from .journal_records import record_problem, with_dag

_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)  # one instance: json.dumps makes one per call
_SNAPSHOT_FIELDS = (
    "attempt",
    "reason",
    "exit_code",
    "started_at",
    "finished_at",
    "pid",
    "create_time",
    "reused",
    "slots",
    "worker",
    "value",
    "log_start",
)
_SNAPSHOT_DEFAULTS = {"attempt": 0, "reused": False}  # the others default to None

SUMMARY = "summary.json"
SUMMARY_RESERVE = ".summary.reserve"  # room set aside at the start for the summary (see `JournalWriter`)
RESERVE_BYTES = 16 << 10  # a summary is well under 1 KiB; a reaper's list of reaped processes more
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC  # never through a planted link


class JournalWriter:
    """Writes a run's record: every event appended to `journal.jsonl` (`record` is its engine observer, a batch one),
    and `summary.json` at the end (`write_summary`).

    Files are created with O_EXCL | O_NOFOLLOW relative to the run folder's descriptor, so a name planted in the
    folder (a symlink to someone else's file) is never written through. A full disk (or quota) must not turn into
    tracebacks and a record that says something untrue: the first failed write is kept in `error`, reported once to
    `on_error`, and nothing more is appended, so the journal is right up to where it stops (a torn last line is
    ignored by readers). The summary is written over room reserved when the run was created, so the run's outcome
    can still be recorded on a disk that filled up during the run."""

    def __init__(
        self,
        path: Path,
        header: dict[str, Any],
        *,
        dir_fd: int | None = None,
        on_error: Callable[[OSError], None] | None = None,
    ):
        """Create `path` (a new file: OSError if it exists) and write `header`; with `dir_fd`, `path`'s name is
        created in that folder (the caller may rename the folder later). Raises OSError, a full disk included."""
        self.path = path
        self.on_error = on_error
        self.error: OSError | None = None
        self._fd = self._reserve_fd = -1
        self._dir_fd = (
            os.open(path.parent, DIR_FLAGS | os.O_NOFOLLOW) if dir_fd is None else os.dup(dir_fd)
        )  # kept: the summary goes into the same folder, wherever it is by then
        try:
            self._fd = os.open(path.name, NEW_FILE | os.O_APPEND, 0o600, dir_fd=self._dir_fd)
            self._reserve_fd = os.open(SUMMARY_RESERVE, NEW_FILE, 0o600, dir_fd=self._dir_fd)
            os.posix_fallocate(self._reserve_fd, 0, RESERVE_BYTES)
            write_all(self._fd, (_ENCODER.encode({"type": "run", "event": "created", **header}) + "\n").encode())
        except BaseException:
            self.close()
            raise

    def write(self, record: dict[str, Any]) -> None:
        self._append((_ENCODER.encode(record) + "\n").encode())

    def record(self, events: list[Event]) -> None:
        """Append events with one write(): subscribe it with `batches=True`."""
        if self.error is None:
            self._append(b"".join(map(self._line, events)))

    def _append(self, data: bytes) -> None:
        if self.error is not None:
            return  # appending after a gap would make the journal lie about what happened
        try:
            write_all(self._fd, data)
        except OSError as exc:
            self.error = exc
            if self.on_error is not None:
                self.on_error(exc)

    @staticmethod
    def _line(event: Event) -> bytes:
        if isinstance(event, RunEvent):
            return run_line(event)
        return task_line(event)

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Record the run's outcome as `summary.json`, over the reserved room (again, after `close`, as a new file).
        Raises OSError."""
        if self._dir_fd < 0:
            self._dir_fd = os.open(self.path.parent, DIR_FLAGS | os.O_NOFOLLOW)
        place_summary(self._dir_fd, summary, self._reserve_fd)
        if self._reserve_fd >= 0:
            os.close(self._reserve_fd)
            self._reserve_fd = -1

    def discard(self) -> None:
        """Close and delete what this writer created (a run folder that never became visible)."""
        for name in (self.path.name, SUMMARY_RESERVE):
            try:
                os.unlink(name, dir_fd=self._dir_fd)
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        for attr in ("_fd", "_reserve_fd", "_dir_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                os.close(fd)
                setattr(self, attr, -1)


def write_all(fd: int, data: bytes) -> None:
    """`os.write` until all of `data` is written (a write may be short when the disk fills up). Raises OSError."""
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def place_summary(dir_fd: int, summary: dict[str, Any], reserve_fd: int = -1) -> None:
    """Write `summary` as `summary.json` in the folder `dir_fd`, atomically (readers see no summary or all of it).

    The reserved file (`reserve_fd`, or the folder's reserve by name when -1: a run left by a crash) is written in
    place and renamed, which needs no new room; only a folder without one (made by an older tuidag) gets a new file.
    Raises OSError."""
    data = _ENCODER.encode(summary).encode()
    own = reserve_fd >= 0
    if not own:
        try:
            reserve_fd = os.open(
                SUMMARY_RESERVE, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd
            )
        except OSError:
            reserve_fd = -1
    try:
        if reserve_fd >= 0 and _still_named(dir_fd, SUMMARY_RESERVE, reserve_fd):
            _pwrite_all(reserve_fd, data)
            os.ftruncate(reserve_fd, len(data))
            os.rename(SUMMARY_RESERVE, SUMMARY, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
    finally:
        if not own and reserve_fd >= 0:
            os.close(reserve_fd)
    tmp = f".summary.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, NEW_FILE, 0o600, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        os.rename(tmp, SUMMARY, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)


def _still_named(dir_fd: int, name: str, fd: int) -> bool:
    """Is `name` in the folder still the regular file open as `fd` (and not, say, a symlink put in its place)?"""
    try:
        named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return stat.S_ISREG(named.st_mode) and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _pwrite_all(fd: int, data: bytes) -> None:
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)


def run_line(event: RunEvent) -> bytes:
    """The journal line of a run event (a `dag` event's data are fields of the record: see `current_header`)."""
    record = {"type": "run", "seq": event.seq, "t": event.time, "event": event.kind, "detail": event.detail}
    if event.data:
        record = {**event.data, **record}
    return (_ENCODER.encode(record) + "\n").encode()


_STATE_JSON = {state: f'"{state.value}"' for state in TaskState} | {None: "null"}
_name_json: dict[str, str] = {}  # task name -> its JSON string; the same few names recur in every line


def task_line(event: TaskEvent) -> bytes:
    """The journal line of a task event: what `_ENCODER` would write for the record, formatted directly because it
    runs for every event (the generic encoder was a fifth of the engine's time on a DAG of quick tasks). An int's or
    float's repr is its JSON."""
    snap = event.snapshot
    name = _name_json.get(snap.name)
    if name is None:
        name = _name_json[snap.name] = _ENCODER.encode(snap.name)
    line = (
        f'{{"type":"task","seq":{event.seq},"t":{event.time!r},"task":{name},"from":{_STATE_JSON[event.old]},'
        f'"to":{_STATE_JSON[snap.state]},"attempt":{snap.attempt!r}'
    )
    if snap.exit_code is not None:
        line += f',"exit_code":{snap.exit_code!r}'
    if snap.started_at is not None:
        line += f',"started_at":{snap.started_at!r}'
    if snap.finished_at is not None:
        line += f',"finished_at":{snap.finished_at!r}'
    if snap.pid is not None:
        line += f',"pid":{snap.pid!r}'
    if snap.create_time is not None:
        line += f',"create_time":{snap.create_time!r}'
    if snap.reason is not None:
        line += f',"reason":{_ENCODER.encode(snap.reason)}'
    if snap.reused:
        line += ',"reused":true'
    if snap.slots is not None:  # the slots of the current or last attempt
        line += f',"slots":{_ENCODER.encode(snap.slots)}'
    if snap.worker is not None:
        line += f',"worker":{_ENCODER.encode(snap.worker)}'
    if snap.log_start is not None:
        line += f',"log_start":{snap.log_start!r}'
    if snap.value is not None and snap.state is TaskState.SUCCEEDED:
        kept = kept_value(snap.value)
        if kept is not None:
            line += f',"value":{kept}'
        else:
            line += f',"value_repr":{_ENCODER.encode(repr(snap.value)[:200])}'
    return (line + "}\n").encode()


def kept_value(value: Any) -> str | None:
    """A return value's JSON, when reading it back gives the same value: that is what `--resume` hands the task's
    dependents in place of running it again. None for a value JSON can't hold, or holds only approximately (a tuple
    reads back as a list, a dict's int keys as strings, NaN is not equal to itself): such a value is journalled as its
    `value_repr` only, and the task runs again when resumed."""
    try:
        text = json.dumps(value, allow_nan=False)
        return text if json.loads(text) == value else None
    except (TypeError, ValueError, RecursionError):
        return None


def read_journal(path: Path, containing: bytes | None = None) -> Iterator[dict[str, Any]]:
    """Every complete, well-formed record (with `containing`, only of the lines that hold those bytes: the others are
    not parsed). A torn final line (crash mid-write) is skipped quietly; any other line that is not a record tuidag
    writes (not JSON, a field of the wrong type, an unknown state) is skipped with a warning naming the file and line,
    so one bad line never makes the rest of the run unreadable."""
    try:
        with open_stored(path) as f:
            data = f.read()
    except FileNotFoundError:
        return
    except OSError as exc:
        warn_unreadable(path, exc)
        return
    lines = data.split(b"\n")
    last = len(lines) - 1  # the text after the final newline: empty, or a line still being (or never fully) written
    for number, line in enumerate(lines, start=1):
        if not line.strip() or (containing is not None and containing not in line):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if number <= last:
                warn_bad_record(path, number, "not a JSON object")
            continue
        problem = record_problem(record)
        if problem:
            warn_bad_record(path, number, problem)
            continue
        yield record


def read_header(path: Path) -> dict[str, Any]:
    """The journal's first record (run id, DAG name, task names, owner pid) without reading the rest; {} when it
    is missing or not a well-formed header (warned about as in `read_journal`)."""
    try:
        with open_stored(path) as f:
            first = f.readline(_MAX_HEADER)
        record = json.loads(first)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        warn_unreadable(path, exc)
        return {}
    except ValueError:
        return {}
    if not isinstance(record, dict) or record.get("type") != "run" or record.get("event") != "created":
        return {}
    problem = record_problem(record)
    if problem:
        warn_bad_record(path, 1, problem)
        return {}
    return record


_MAX_HEADER = 64 << 20  # a header lists every task name: generous, but a file without newlines is not read whole
_warned: set[tuple[str, int]] = set()  # (file, line) already reported: `logs -f` replays the journal many times


def open_stored(path: Path) -> BinaryIO:
    """A file of the store, opened for reading only if it is a regular file and not a symbolic link: a link planted
    in a state dir others can write would make tuidag read (and quote, in warnings) a file of the planter's choice,
    and a FIFO would block the reader forever. FileNotFoundError when it is missing; OSError when refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def warn_unreadable(path: Path, exc: OSError) -> None:
    why = "a symbolic link, not followed" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
    if (str(path), 0) not in _warned:
        _warned.add((str(path), 0))
        print(f"tuidag: warning: {path}: skipped: {why}", file=sys.stderr)


def warn_bad_record(path: Path | str, line: int, problem: str) -> None:
    """Say once per process which record of which file was skipped, and why."""
    key = (str(path), line)
    if key not in _warned:
        _warned.add(key)
        print(f"tuidag: warning: {path}:{line}: skipped a bad record: {problem}", file=sys.stderr)


class TaskRecord:
    """A task as the journal last saw it."""

    __slots__ = ("name", "state", *_SNAPSHOT_FIELDS, "value_kept", "pids")

    def __init__(self, name: str):
        self.name = name
        self.state = TaskState.PENDING
        self.attempt = 0
        self.reason: str | None = None
        self.exit_code: int | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.pid: int | None = None
        self.create_time: float | None = None
        self.reused = False
        self.slots: str | None = None
        self.worker: str | None = None  # the Dask worker that ran the last attempt
        self.value: Any = None  # a callable's return value, as journalled when it succeeded (see `kept_value`)
        self.value_kept = True  # False: it returned a value JSON can't hold exactly (only its repr is journalled)
        self.log_start: int | None = None  # where the last attempt's output starts in its log
        self.pids: list[tuple[int, float | None]] = []  # every attempt leader: (pid, create time)

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class Replay:
    """What a journal says about a run."""

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.tasks: dict[str, TaskRecord] = {}
        self.started_at: float | None = None
        self.finished_at: float | None = None
        #: The last moment the run was known alive: its last event, or the owner's last heartbeat when later (a run
        #: that crashed while its tasks ran quietly lived longer than its last event says).
        self.last_time: float | None = None
        #: The signal whose second coming made tuidag kill everything and exit at once (no summary then).
        self.forced_by: str | None = None


def replay(path: Path, records: Iterable[dict[str, Any]] | None = None) -> Replay:
    """Fold the journal into the final state of every task. `records`: the journal's, read already (`read_journal`),
    for a reader that folds them another way too (the report's timeline) and should not parse the file twice."""
    result = Replay()
    for rec in read_journal(path) if records is None else records:
        if rec.get("type") == "run":
            event = rec.get("event")
            if event == "created":
                if result.header:
                    continue  # one header per journal: a second one is not the owner's
                result.header = rec
                for name in rec.get("tasks", []):
                    result.tasks[name] = TaskRecord(name)
            elif event == "started":
                result.started_at = rec.get("t")
            elif event == "finished":
                result.finished_at = rec.get("t")
            elif event == "forced-exit":
                result.forced_by = rec.get("signal")
            elif event == "dag":  # the DAG file was edited under --watch: its new tasks
                result.header = with_dag(result.header, rec)
                for name in rec.get("tasks", []):
                    result.tasks.setdefault(name, TaskRecord(name))
            result.last_time = rec.get("t", result.last_time)
            continue
        name = rec["task"]
        task = result.tasks.setdefault(name, TaskRecord(name))
        task.state = TaskState(rec["to"])
        for key in _SNAPSHOT_FIELDS:
            setattr(task, key, rec.get(key, _SNAPSHOT_DEFAULTS.get(key)))
        task.value_kept = "value_repr" not in rec
        if task.pid is not None:
            ref = (task.pid, task.create_time)
            if ref not in task.pids:
                task.pids.append(ref)
        result.last_time = rec.get("t", result.last_time)
    alive = _touched_at(path)  # the owner touches its journal while it lives (see store/heartbeat.py)
    if alive is not None and result.last_time is not None and alive > result.last_time:
        result.last_time = alive
    return result


def _touched_at(path: Path) -> float | None:
    try:
        touched = os.stat(path).st_mtime
    except OSError:
        return None
    return touched if 0 <= touched < 1e11 else None
