"""The scheduler's record of each task and the moves between states: `_set` is the only way a task changes (checked
against the state table in model/state.py, the event queued in the outbox); `_check_done` sees the run end.

Part of `Scheduler` (scheduler.py), which owns this state behind its one lock: every method here runs with the lock
held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model.state import TERMINAL, TaskState, can_move, ended_outcome, ended_well
from .events import RunEvent, TaskEvent, TaskSnapshot
from .executor import RunningAttempt
from .job_group import JobGroupStopper, stopped_by_group
from .outbox import EventOutbox

if TYPE_CHECKING:
    from ..model.spec import DagSpec
    from .executor import Executor
    from .slots import SlotPool

S = TaskState
WAITING = (S.PENDING, S.QUEUED, S.RETRYING)
DEAD_END = (S.FAILED, S.CANCELLED, S.SKIPPED)  # terminal states a dependent can never run after
HOLDING = (
    S.QUEUED,
    S.RUNNING,
    S.READY,
    S.CANCELLING,
)  # states a task keeps its slots in (QUEUED: admitted, not started)


class InvalidTransition(RuntimeError):
    """The scheduler tried a move the state table forbids: a bug, never a user error."""


class TaskRecord:
    """The scheduler's mutable record of one task. Only touched with the scheduler lock held."""

    __slots__ = (
        "attempts_before",
        "cancel_reason",
        "generation",
        "held",
        "round_why",
        "running",
        "snap",
        "timer",
        "unannounced",
        "why",
    )

    def __init__(self, snap: TaskSnapshot):
        self.snap = snap
        self.generation = 0  # bumped on re-run so stale pool work and timers are ignored
        self.attempts_before = 0  # attempts made before the latest re-run (retries budget is per re-run)
        self.running: RunningAttempt | None = None
        self.timer: threading.Timer | None = None
        self.cancel_reason: str | None = None
        self.unannounced: TaskState | None = None  # RUNNING not delivered yet: the state it came from (`_attempt`)
        self.held: dict[str, tuple[int, ...]] | None = None  # the slots given to it (kind -> slot numbers)
        self.why: str | None = None  # why it runs although it could be up to date (kept as its reason)
        self.round_why: str | None = None  # the watch round that runs it again ("gen 2: a.txt changed"), said first

    @property
    def state(self) -> TaskState:
        return self.snap.state


class TaskRecords(EventOutbox):
    """The task records and their transitions (the state is set in `Scheduler.__init__`)."""

    dag: DagSpec
    executor: Executor
    clock: Callable[[], float]
    _tasks: dict[str, TaskRecord]  # in topological order
    _unfinished: int  # tasks not in a terminal state, kept by `_set`
    _results: dict[str, Any]  # the values of the tasks that succeeded
    _requests: dict[str, dict[str, int]]  # kind -> count, for each task that asks for slots
    slots: SlotPool
    _slot_waiters: list[tuple[str, int]]
    _unplaced: list[tuple[str, int]]
    _unplaced_reasons: set[str]
    _held: dict[str, None]
    _group: JobGroupStopper | None
    _started: bool
    _paused: bool
    _stopping: bool
    _halted: str | None
    _done: threading.Event

    if TYPE_CHECKING:  # task_queue.py

        def _release(self, t: TaskRecord) -> None: ...

    def _check_done(self) -> None:
        if self._started and self._unfinished == 0 and not self._done.is_set():
            counts: dict[str, int] = {}
            for t in self._tasks.values():
                counts[t.state.value] = counts.get(t.state.value, 0) + 1
            ok = all(ended_well(t.state, stopped_by_group(t.snap)) for t in self._tasks.values())
            outcome = ended_outcome((t.state for t in self._tasks.values()), ok)
            detail = outcome + " " + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            if self._paused:  # everything ended while paused (cancelled): a later re-run must not be held
                self._paused = False
                self._run_event("resumed")
            self._run_event("finished", detail)
            self._done.set()

    def _set(self, t: TaskRecord, new: TaskState, announce: bool = True, **fields: Any) -> None:
        """Move `t` to `new` (or update its fields) and queue the event, or with announce=False keep the event back
        until `_announce` (the next `_set` of the task announces it first, so observers still see every step)."""
        if t.unannounced is not None:
            self._announce(t)
        old = t.state
        if new is not old and not can_move(old, new):
            raise InvalidTransition(f"{t.snap.name}: {old} -> {new}")
        now = self.clock()
        self._unfinished += (old in TERMINAL) - (new in TERMINAL)
        t.snap = t.snap.evolve(state=new, changed_at=now, **fields)
        if self._group is not None and new in TERMINAL and old not in TERMINAL:
            self._group.task_ended(t.snap.name, lambda name: self._tasks[name].state)
        if announce:
            self._seq += 1
            self._outbox.append(TaskEvent(self._seq, now, old, t.snap))
        else:
            t.unannounced = old
        if new is not old and new not in HOLDING and t.snap.name in self._requests:
            self._release(t)

    def _announce(self, t: TaskRecord) -> None:
        """Deliver the transition `_set(announce=False)` kept back, with the snapshot as it is now."""
        self._seq += 1
        self._outbox.append(TaskEvent(self._seq, t.snap.changed_at, t.unannounced, t.snap))
        t.unannounced = None

    def _run_event(self, kind: str, detail: str = "", data: dict[str, Any] | None = None) -> None:
        self._seq += 1
        self._outbox.append(RunEvent(self._seq, self.clock(), kind, detail, data))
