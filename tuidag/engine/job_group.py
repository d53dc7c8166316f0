"""Job groups (SkyPilot's `execution: parallel`): tasks that run side by side, such as a trainer beside the servers it
uses. Every task starts at once; once every primary task has ended, the others (which may never end on their own)
are stopped, each after its termination delay. A task stopped that way ends CANCELLED with reason JOB_GROUP_STOPPED,
and does not make the run fail: stopping it is how the group is meant to end."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..model.dag_diff import REMOVED
from ..model.service import SERVICE_STOPPED
from ..model.spec import JOB_GROUP_STOPPED, JobGroup
from ..model.state import TERMINAL, TaskState
from .events import TaskSnapshot


def stopped_by_group(snap: TaskSnapshot) -> bool:
    """Whether a task ended because its job group's primary tasks had (or, a service, because the run's other tasks
    had; or because an edit of the DAG file under --watch removed it): an ending that counts as a success."""
    return snap.state is TaskState.CANCELLED and snap.reason in (JOB_GROUP_STOPPED, SERVICE_STOPPED, REMOVED)


class JobGroupStopper:
    """Watches a job group's primary tasks and stops the others once they have all ended. `stop(names, reason)`
    cancels tasks (those already ended are left alone); it is called on a timer thread, never under the caller's
    lock."""

    def __init__(self, group: JobGroup, tasks: list[str], stop: Callable[[list[str], str], object]):
        self.primary = frozenset(group.primary)
        self.others = [name for name in tasks if name not in self.primary]
        self.delay = group.termination_delay
        self._stop = stop
        self._timers: list[threading.Timer] = []

    def started(self, state_of: Callable[[str], TaskState]) -> None:
        """The run started (called with the scheduler's lock held): with every primary task ended already (reused
        by --resume), the others are stopped as when the primary tasks end, or they would run on with nothing to
        serve."""
        if all(state_of(task) in TERMINAL for task in self.primary):
            self._stop_others(state_of)

    def task_ended(self, name: str, state_of: Callable[[str], TaskState]) -> None:
        """A task reached a terminal state (called with the scheduler's lock held): when it was the last primary
        task still going, the others still going are stopped after their delays."""
        if name in self.primary and all(state_of(task) in TERMINAL for task in self.primary):
            self._stop_others(state_of)

    def _stop_others(self, state_of: Callable[[str], TaskState]) -> None:
        by_delay: dict[float, list[str]] = {}
        for task in self.others:
            if state_of(task) not in TERMINAL:
                by_delay.setdefault(self.delay.get(task, 0.0), []).append(task)
        for delay, names in sorted(by_delay.items()):
            timer = threading.Timer(delay, self._stop, (names, JOB_GROUP_STOPPED))
            timer.daemon = True
            self._timers.append(timer)
            timer.start()

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
