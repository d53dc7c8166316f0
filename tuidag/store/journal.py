"""The run journal: one JSON object per line, appended as events happen, one write() per batch the engine delivers.

Each `os.write` on an O_APPEND descriptor appends whole lines, so a crash (even kill -9) leaves a journal whose
every complete line parses; a torn last line (a crash inside a write) is ignored on replay.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
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
_NUMBER_FIELDS = ("attempt", "exit_code", "started_at", "finished_at", "pid", "create_time")


def task_line(event: TaskEvent) -> bytes:
    """The journal line of a task event: what `_ENCODER` would write for the record, formatted directly because it
    runs several times per task (the generic encoder was a fifth of the engine's time on a DAG of quick tasks)."""
    snap = event.snapshot
    enc = _ENCODER.encode
    parts = [f'{{"type":"task","seq":{event.seq},"t":{event.time!r},"task":{enc(snap.name)},'
             f'"from":{_STATE_JSON[event.old]},"to":{_STATE_JSON[snap.state]}']
    for name in _NUMBER_FIELDS:
        value = getattr(snap, name)
        if value is not None:
            parts.append(f',"{name}":{value!r}')  # an int's or float's repr is its JSON
    if snap.reason is not None:
        parts.append(f',"reason":{enc(snap.reason)}')
    if snap.reused:
        parts.append(',"reused":true')
    if snap.value is not None and snap.state is TaskState.SUCCEEDED:
        try:
            parts.append(f',"value":{enc(json.loads(json.dumps(snap.value)))}')
        except (TypeError, ValueError):
            parts.append(f',"value_repr":{enc(repr(snap.value)[:200])}')
    parts.append("}\n")
    return "".join(parts).encode()


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


@dataclass
class TaskRecord:
    """A task as the journal last saw it."""

    name: str
    state: TaskState = TaskState.PENDING
    attempt: int = 0
    reason: str | None = None
    exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    pid: int | None = None
    create_time: float | None = None
    reused: bool = False
    pids: list[tuple[int, float | None]] = field(default_factory=list)  # every attempt leader: (pid, create time)

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


@dataclass
class Replay:
    """What a journal says about a run."""

    header: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    started_at: float | None = None
    finished_at: float | None = None
    last_time: float | None = None


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
