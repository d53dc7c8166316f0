"""The run journal: one JSON object per line, appended as events happen, one write() per batch the engine delivers.

Each `os.write` on an O_APPEND descriptor appends whole lines, so a crash (even kill -9) leaves a journal whose
every complete line parses; a torn last line (a crash inside a write) is ignored on replay.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from ..engine.events import Event, RunEvent, TaskEvent
from ..model.state import TaskState

_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)  # one instance: json.dumps makes one per call
_SNAPSHOT_FIELDS = ("attempt", "reason", "exit_code", "started_at", "finished_at", "pid", "create_time", "reused")


class JournalWriter:
    """Appends every event of a run to `journal.jsonl`; `record` is its engine observer (a batch one)."""

    def __init__(self, path: Path, header: dict[str, Any]):
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self.write({"type": "run", "event": "created", **header})

    def write(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (_ENCODER.encode(record) + "\n").encode())

    def record(self, events: list[Event]) -> None:
        """Append events with one write(): subscribe it with `batches=True`."""
        os.write(self._fd, b"".join(map(self._line, events)))

    @staticmethod
    def _line(event: Event) -> bytes:
        if isinstance(event, RunEvent):
            record = {"type": "run", "seq": event.seq, "t": event.time, "event": event.kind, "detail": event.detail}
            return (_ENCODER.encode(record) + "\n").encode()
        return task_line(event)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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
    line = (f'{{"type":"task","seq":{event.seq},"t":{event.time!r},"task":{name},"from":{_STATE_JSON[event.old]},'
            f'"to":{_STATE_JSON[snap.state]},"attempt":{snap.attempt!r}')
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
    if snap.value is not None and snap.state is TaskState.SUCCEEDED:
        try:
            line += f',"value":{_ENCODER.encode(json.loads(json.dumps(snap.value)))}'
        except (TypeError, ValueError):
            line += f',"value_repr":{_ENCODER.encode(repr(snap.value)[:200])}'
    return (line + "}\n").encode()


def read_journal(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record. A torn final line (crash mid-write) is skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue


def read_header(path: Path) -> dict[str, Any]:
    """The journal's first record (run id, DAG name, task names, owner pid) without reading the rest."""
    try:
        with open(path, "rb") as f:
            first = f.readline()
        record = json.loads(first)
    except (OSError, ValueError):
        return {}
    return record if record.get("event") == "created" else {}


class TaskRecord:
    """A task as the journal last saw it."""

    __slots__ = ("name", "state", *_SNAPSHOT_FIELDS, "pids")

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
        self.last_time: float | None = None


def replay(path: Path) -> Replay:
    """Fold the journal into the final state of every task."""
    result = Replay()
    for rec in read_journal(path):
        if rec.get("type") == "run":
            event = rec.get("event")
            if event == "created":
                result.header = rec
                for name in rec.get("tasks", []):
                    result.tasks[name] = TaskRecord(name)
            elif event == "started":
                result.started_at = rec.get("t")
            elif event == "finished":
                result.finished_at = rec.get("t")
            result.last_time = rec.get("t", result.last_time)
            continue
        name = rec.get("task")
        if not name:
            continue
        task = result.tasks.setdefault(name, TaskRecord(name))
        task.state = TaskState(rec["to"])
        for key in _SNAPSHOT_FIELDS:
            setattr(task, key, rec.get(key, False if key == "reused" else None))
        if task.pid is not None:
            ref = (task.pid, task.create_time)
            if ref not in task.pids:
                task.pids.append(ref)
        result.last_time = rec.get("t", result.last_time)
    return result
