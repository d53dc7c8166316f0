"""Immutable events the engine publishes to its observers (the journal, the headless reporter, the UI).

They are NamedTuples: immutable, and built in a fraction of the time a frozen dataclass takes, which matters because
the engine makes several per task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..model.state import TaskState


class TaskSnapshot(NamedTuple):
    name: str
    state: TaskState
    attempt: int = 0  # attempts started so far (cumulative across re-runs)
    reason: str | None = None  # why it failed / was skipped / was cancelled / is retrying
    exit_code: int | None = None
    started_at: float | None = None  # wall clock of the first RUNNING since the task was (re)queued
    finished_at: float | None = None
    changed_at: float = 0.0  # wall clock of the last change
    pid: int | None = None  # leader of the current or last attempt
    create_time: float | None = None  # set when the leader is identified by create time (callables in a child process)
    log_path: str = ""
    reused: bool = False  # SUCCEEDED carried over from an earlier run (--resume)
    value: Any = None  # a callable task's return value
    slots: str | None = None  # resource slots of the current or last attempt, `gpu:0,1 db:0`
    worker: str | None = None  # the Dask worker that ran the last attempt (None: this machine)
    log_start: int | None = None  # where the current or last attempt's output starts in the log (after its header)

    def duration(self, now: float) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at if self.finished_at is not None else now) - self.started_at

    def evolve(self, **changes: Any) -> TaskSnapshot:
        """A copy with `changes` applied (NamedTuple's `_replace`)."""
        return self._replace(**changes)


class TaskEvent(NamedTuple):
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


class RunEvent(NamedTuple):
    """A run-level change: started, paused, resumed, finished (with the run's outcome); under --watch a round
    (`generation`), the DAG file reloaded (`dag`, whose `data` is the run's DAG as the journal's header describes it:
    tasks, edges, definitions) or not (`dag-error`, the located errors)."""

    seq: int
    time: float
    kind: str
    detail: str = ""
    data: Mapping[str, Any] | None = None  # fields of the journal record beyond these (only `dag` has any)


Event = TaskEvent | RunEvent


def event_counts(detail: str) -> dict[str, int]:
    """The counts a `finished` or `settled` run event's detail carries (`OUTCOME K=V ...`): a state's value -> its
    tasks, and `up` -> the services up; the tasks outside the run's targets (`UNTARGETED`) left out."""
    pairs = (part.partition("=") for part in detail.split()[1:])
    return {key: int(value) for key, _, value in pairs if value.isdigit() and key != "UNTARGETED"}
