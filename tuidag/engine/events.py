"""Immutable events the engine publishes to its observers (the journal, the headless reporter, the UI)."""
from __future__ import annotations

from dataclasses import dataclass, field
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
    create_time: float | None = None # its create time, so a recycled pid is never mistaken for it
    log_path: str = ""
    reused: bool = False             # SUCCEEDED carried over from an earlier run (--resume)
    value: Any = field(default=None, compare=False)  # a callable task's return value

    def duration(self, now: float) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at if self.finished_at is not None else now) - self.started_at


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
