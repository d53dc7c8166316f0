"""Task states and the transitions the scheduler is allowed to make.

The set of legal transitions lives here, beside the states, so the engine, the journal replay and the property tests
all check against one table instead of each keeping their own idea of what may follow what.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class TaskState(str, Enum):
    PENDING = "PENDING"  # waiting on dependencies
    QUEUED = "QUEUED"  # all dependencies succeeded; waiting for a free slot
    RUNNING = "RUNNING"  # an attempt is executing
    READY = "READY"  # a service whose attempt runs and passed its readiness check: its dependents may start
    RETRYING = "RETRYING"  # an attempt failed; waiting out retry_delay before the next one
    CANCELLING = "CANCELLING"  # signals sent; waiting for the process tree to exit
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"  # an upstream task failed or was cancelled
    UP_TO_DATE = "UP_TO_DATE"  # not run: an earlier success had the same definition, inputs and outputs
    UNTARGETED = "UNTARGETED"  # outside the run's targets (`tuidag run FILE TASK...`): never started

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def active(self) -> bool:
        """True while a process (or callable) of this task may be alive."""
        return self in (TaskState.RUNNING, TaskState.READY, TaskState.CANCELLING)

    def __str__(self) -> str:  # keeps f-strings and tables readable
        return self.value


TERMINAL = frozenset(
    {
        TaskState.SUCCEEDED,
        TaskState.FAILED,
        TaskState.CANCELLED,
        TaskState.SKIPPED,
        TaskState.UP_TO_DATE,
        TaskState.UNTARGETED,
    }
)
#: The states a dependent runs after, and that count as success in a run's outcome and exit code: an up-to-date task
#: (its outputs are what its last success made, or were restored from the cache) counts as succeeded.
SUCCESSFUL = frozenset({TaskState.SUCCEEDED, TaskState.UP_TO_DATE})
#: The states a dependent may start after: a successful end, or a service that is ready (`depends_on` a service
#: means "once it is ready": it never ends by itself).
MET = SUCCESSFUL | {TaskState.READY}

_S = TaskState
#: state -> states it may move to (a service's attempt: RUNNING, READY once its check passed, and never SUCCEEDED).
#: Re-running a finished task (the UI's `r`) re-enters PENDING from a terminal state;
#: a task outside the run's targets is one from the start and stays one (re-running it is refused).
TRANSITIONS: dict[TaskState, frozenset[TaskState]] = {
    _S.PENDING: frozenset({_S.QUEUED, _S.CANCELLED, _S.SKIPPED}),
    _S.QUEUED: frozenset({_S.RUNNING, _S.CANCELLED, _S.SKIPPED, _S.UP_TO_DATE}),
    _S.RUNNING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.RETRYING, _S.CANCELLING, _S.READY}),
    _S.READY: frozenset({_S.FAILED, _S.RETRYING, _S.CANCELLING}),  # a service: it exited, or the run stopped it
    _S.RETRYING: frozenset({_S.RUNNING, _S.CANCELLED}),
    _S.CANCELLING: frozenset({_S.CANCELLED}),
    _S.SUCCEEDED: frozenset({_S.PENDING}),
    _S.FAILED: frozenset({_S.PENDING}),
    _S.CANCELLED: frozenset({_S.PENDING}),
    _S.SKIPPED: frozenset({_S.PENDING}),
    _S.UP_TO_DATE: frozenset({_S.PENDING}),
    _S.UNTARGETED: frozenset(),
}


def ended_outcome(states: Iterable[TaskState], ok: bool) -> str:
    """How a run whose every task ended went: `succeeded` when `ok` (every task ended well: `ended_well`),
    `failed` when a task failed (or was skipped after a failure), else `cancelled`: tasks were cancelled and none
    failed, which is no failure of the DAG."""
    if ok:
        return "succeeded"
    return "failed" if not {TaskState.FAILED, TaskState.SKIPPED}.isdisjoint(states) else "cancelled"


def ended_well(state: TaskState, stopped_by_group: bool) -> bool:
    """Whether a task that ended leaves its run a success: it succeeded or was up to date, its job group stopped it
    once the primary tasks had ended (or, a service, the run stopped it once its other tasks had ended), or it was
    outside the run's targets (the run's exit code is decided by its targets alone)."""
    return state in SUCCESSFUL or state is TaskState.UNTARGETED or stopped_by_group


#: Outcomes of runs that ran to their end by themselves: only these say how long the DAG and its tasks take (trends,
#: expected durations). Not: running, interrupted, cancelled, `incomplete: ...` (the record stopped early).
COMPLETE_OUTCOMES = frozenset({"succeeded", "failed"})


def can_move(src: TaskState, dst: TaskState) -> bool:
    return dst in TRANSITIONS[src]
