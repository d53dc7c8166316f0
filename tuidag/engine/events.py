"""Immutable events the engine publishes to its observers (the journal, the headless reporter, the UI)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..model.state import TaskState


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    name: str
    state: TaskState
    attempt: int = 0                 # attempts started so far (cumulative across re-runs)
    reason: str | None = None        # why it failed / was skipped / was cancelled / is retrying
    exit_code: int | None = None
    started_at: float | None = None  # wall clock of the first RUNNING since the task was (re)queued
    finished_at: float | None = None
    changed_at: float = 0.0          # wall clock of the last change
    pid: int | None = None           # leader of the current or last attempt
    create_time: float | None = None # set when the leader is identified by create time (callables in a child process)
    log_path: str = ""
    reused: bool = False             # SUCCEEDED carried over from an earlier run (--resume)
    value: Any = field(default=None, compare=False)  # a callable task's return value

    def duration(self, now: float) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at if self.finished_at is not None else now) - self.started_at

    def evolve(self, **changes: Any) -> "TaskSnapshot":
        """`dataclasses.replace(self, **changes)`, written out: it runs for every event and the generic one is twice
        as slow."""
        if not changes.keys() <= _FIELD_NAMES:
            raise TypeError(f"TaskSnapshot has no field {sorted(changes.keys() - _FIELD_NAMES)[0]!r}")
        get = changes.get
        return TaskSnapshot(
            get("name", self.name), get("state", self.state), get("attempt", self.attempt),
            get("reason", self.reason), get("exit_code", self.exit_code), get("started_at", self.started_at),
            get("finished_at", self.finished_at), get("changed_at", self.changed_at), get("pid", self.pid),
            get("create_time", self.create_time), get("log_path", self.log_path), get("reused", self.reused),
            get("value", self.value))


_FIELD_NAMES = frozenset(f.name for f in fields(TaskSnapshot))
assert len(_FIELD_NAMES) == 13, "TaskSnapshot.evolve lists every field"


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """A task changed. `old == snapshot.state` for updates that are not transitions (e.g. the pid became known)."""

    seq: int
    time: float
    old: TaskState | None
    snapshot: TaskSnapshot

    @property
    def task(self) -> str:
        return self.snapshot.name

    @property
    def new(self) -> TaskState:
        return self.snapshot.state

    @property
    def is_transition(self) -> bool:
        return self.old != self.snapshot.state


@dataclass(frozen=True, slots=True)
class RunEvent:
    """A run-level change: started, paused, resumed, finished (with the run's outcome)."""

    seq: int
    time: float
    kind: str
    detail: str = ""


Event = TaskEvent | RunEvent
