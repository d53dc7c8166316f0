"""Watch mode's reloads: the DAG file was edited, and the run goes on with what it now says (model/dag_diff.py).

`reload` takes the run's new DAG (the union of the file's tasks and those removed from it) under the lock, and:
- records it: a `dag` run event whose data is the DAG as the journal's header describes it (tasks, edges,
  definitions), so the journal, a viewer that subscribes later and `tuidag show` know the run's tasks as they are
  now; then an update event for each new task (PENDING, or UNTARGETED outside the run's targets);
- cancels the removed tasks (a running one's tree killed, as a cancel does): they end CANCELLED, REMOVED, and stay
  in the run so, never re-run;
- runs the new and the changed tasks, with what is downstream of them and the tasks `also` names (inputs changed in
  the same batch), as one round (rounds.py) whose `generation` event also names the removed tasks.
An edit that changes no task is recorded (`dag`: a viewer showing an earlier broken edit's error stops showing it)
and starts no round. A broken edit never reaches the engine but as a `dag-error` run event (`dag_error`).

Part of `Scheduler` (scheduler.py): `reload` and `dag_error` take the lock; the rest runs with it held.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from ..model.dag_diff import REMOVED, DagDiff
from ..model.resources import requests
from ..model.targets import NOT_A_TARGET, needed
from .events import TaskSnapshot
from .executor import RunningAttempt
from .rounds import Rounds
from .task_attempts import Freshness
from .task_records import S, TaskRecord


class DagReloads(Rounds):
    """The DAG file's edits, taken into the run (the state is set in `Scheduler.__init__`)."""

    dag_shape: dict[str, Any] | None  # the latest `dag` event's data (None: never reloaded), for new viewers
    targets: tuple[str, ...]
    _removed: set[str]  # tasks the DAG file no longer has
    _log_dir: str
    _log_name: Callable[[str], str]

    def reload(
        self,
        change: DagDiff,
        shape: dict[str, Any],
        note: str,
        trigger: str,
        freshness: Freshness | None,
        also: Iterable[str] = (),
    ) -> list[str] | None:
        """Go on with `change.union` (described by `shape`, the `dag` event's data; `note` is its detail: what
        changed), `freshness` deciding which of its tasks are up to date; the round of what changed and `also`,
        because of `trigger` ("dag.yaml changed"). Its
        tasks in topological order; None when the run takes no more rounds (it is over, stopped, or watch mode
        ended), and nothing changed."""
        to_kill: list[RunningAttempt] = []
        with self._lock:
            if not self._rounds_open():
                return None
            dag = self.dag = change.union
            self.dag_shape = shape
            self.freshness = freshness
            self._removed = (self._removed - set(change.added)) | set(change.removed)
            self._base_env = {**os.environ, **dag.env, "TUIDAG_RUN_ID": self.run_id}
            wanted = needed(dag, [t for t in self.targets if t in dag.tasks])
            new: list[TaskRecord] = []
            tasks: dict[str, TaskRecord] = {}
            now = self.clock()
            for name in dag.topological_order:
                t = self._tasks.get(name)
                if t is None:
                    snap = TaskSnapshot(
                        name, S.PENDING, changed_at=now, log_path=f"{self._log_dir}/{self._log_name(name)}"
                    )
                    if name not in wanted:
                        snap = snap.evolve(state=S.UNTARGETED, reason=NOT_A_TARGET)
                    t = TaskRecord(snap)
                    self._unfinished += not t.state.terminal
                    new.append(t)
                tasks[name] = t
            self._tasks = tasks
            self._requests = {name: requests(spec) for name, spec in dag.tasks.items() if spec.resources}
            self._services = frozenset(name for name, spec in dag.tasks.items() if spec.service is not None)
            self._plain_unfinished = sum(not t.state.terminal for n, t in tasks.items() if n not in self._services)
            self._run_event("dag", note, shape)
            for t in new:
                self._set(t, t.state)
            for name in change.removed:
                self._remove(self._tasks[name], to_kill)
            names = [*change.added, *change.changed, *also]
            gone = f"; removed: {', '.join(change.removed)}" if change.removed else ""
            order = self._round(names, trigger, to_kill, gone) if names or gone else []
            self._check_done()
        self._flush()
        self._kill(to_kill)
        return order

    @property
    def removed(self) -> frozenset[str]:
        """The tasks the DAG file no longer has (they stay in the run, CANCELLED)."""
        with self._lock:
            return frozenset(self._removed)

    def dag_error(self, message: str) -> None:
        """The DAG file was edited into one with errors (`message`, located): the run goes on with its DAG as it was."""
        with self._lock:
            self._run_event("dag-error", message)
        self._flush()

    def _remove(self, t: TaskRecord, to_kill: list[RunningAttempt]) -> None:
        """A task the DAG file no longer has ends CANCELLED, REMOVED (a running one once its tree is gone)."""
        self._restart_after.discard(t.snap.name)
        if self._cancel_one(t, REMOVED, to_kill):
            return
        if t.state is S.CANCELLING:
            t.cancel_reason = REMOVED
        elif t.state.terminal and t.state is not S.UNTARGETED:
            self._back_to_pending(t)
            self._set(t, S.CANCELLED, reason=REMOVED, finished_at=self.clock())
