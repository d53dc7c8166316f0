"""Watch mode's rounds: `refresh` runs some tasks and everything downstream of them again, in the same run.

A round (a *generation*, numbered from 1, the first run) is a `generation` run event, journalled like any other,
followed by the moves of its tasks, as a re-run (scheduler.py `rerun`) makes them: each finished task goes back to
PENDING with its generation bumped (stale pool work and timers are ignored) and its retry budget renewed; tasks that
waited (QUEUED, RETRYING) are CANCELLED, then PENDING; a PENDING one stays so. A RUNNING task is CANCELLING (its
tree killed as a cancel kills it) and, once its attempt has ended and been recorded as CANCELLED, PENDING again; a
task that says `interruptible: false` is left to finish, and then goes back to PENDING the same way, whatever its
attempt's outcome. Either way its dependents do not start on what that attempt made (`_children_ready` skips a task
that is to restart) and the run does not end meanwhile (`_check_done` waits for it). A task starts again once its
dependencies have succeeded, so a re-run of a task whose dependency has not finished its first run waits for it.

Services (services.py) stay up between rounds (`watch_rounds`). A service of a round is restarted whatever its
`interruptible` says (it never ends by itself) and, as any task of a round, with what is downstream of it, which
waits for it to be ready again; a service that a round's task needs and that is not up (it failed, or was stopped)
joins the round. Once watch mode ends (`end_rounds`), the services are stopped when the other tasks have ended.

Part of `Scheduler` (scheduler.py): `refresh`, `watch_rounds` and `end_rounds` take the lock; the rest runs with it
held.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .executor import RunningAttempt
from .task_attempts import TaskAttempts
from .task_records import DEAD_END, S, TaskRecord

if TYPE_CHECKING:
    from .executor import AttemptResult


class Rounds(TaskAttempts):
    """Watch mode's generations (the state is set in `Scheduler.__init__`)."""

    generation_number: int  # the current round: 1 is the first run
    _restart_after: set[str]  # tasks to run again once their running attempt has ended
    _rounds_over: bool  # `end_rounds` was called: no more rounds
    _closed: bool
    _services: frozenset[str]
    _keep_services: bool
    _plain_unfinished: int

    if TYPE_CHECKING:  # services.py

        def _stop_services(self, reason: str = ..., force: bool = False) -> None: ...

    def watch_rounds(self) -> None:
        """Watch mode: services stay up once a round's other tasks have ended (before `start`, or they may not);
        a `watching` run event tells viewers that an ended round is not the run's end."""
        with self._lock:
            if not self._keep_services:
                self._keep_services = True
                self._run_event("watching")
        self._flush()

    def refresh(self, names: Iterable[str], trigger: str) -> list[str]:
        """Start a new round: `names` and everything downstream of them run again (a running one is restarted),
        because of `trigger` ("src/model.py changed"). Returns the tasks of the round, in topological order; none
        (and no round) when the run is over or stopped, or no task is left to re-run."""
        to_kill: list[RunningAttempt] = []
        with self._lock:
            if not self._rounds_open():
                return []
            order = self._round(names, trigger, to_kill)
        self._flush()
        self._kill(to_kill)
        return order

    def _rounds_open(self) -> bool:
        return self._started and not (self._halted or self._closed or self._rounds_over)

    def _kill(self, running: list[RunningAttempt]) -> None:
        for attempt in running:
            threading.Thread(target=attempt.kill, name="tuidag-kill", daemon=True).start()

    def _round(self, names: Iterable[str], trigger: str, to_kill: list[RunningAttempt], removed: str = "") -> list[str]:
        """A round of `names` and their downstream (lock held): its `generation` event (`removed`: the tasks the
        DAG file no longer has, said after them), its tasks back to PENDING or restarting, the ready ones queued;
        attempts to kill are added to `to_kill`. Its tasks in topological order; none (no round) if none is left."""
        order = self._round_tasks(names)
        if not order and not removed:
            return []
        self.generation_number += 1
        reason = f"restarted: gen {self.generation_number}: {trigger}"
        self._stopping = False
        self._done.clear()
        tasks = f" -> {', '.join(order)}" if order else ""
        self._run_event("generation", f"gen {self.generation_number}: {trigger}{tasks}{removed}")
        now = self.clock()
        for n in order:
            t = self._tasks[n]
            t.round_why = f"gen {self.generation_number}: {trigger}"  # why it runs again, whatever else it says
            if t.state in (S.RUNNING, S.READY):
                self._restart_after.add(n)
                if self.dag.tasks[n].interruptible or n in self._services:
                    t.cancel_reason = reason
                    self._set(t, S.CANCELLING, reason=reason)
                    if t.running is not None:
                        to_kill.append(t.running)
            elif t.state is S.CANCELLING:
                self._restart_after.add(n)
            elif t.state in (S.QUEUED, S.RETRYING):
                self._drop_pending_work(t)
                self._set(t, S.CANCELLED, reason=reason, finished_at=now)
                self._back_to_pending(t)
            elif t.state.terminal:
                self._back_to_pending(t)
        self._start_ready(order)
        self._check_done()
        return order

    def _round_tasks(self, names: Iterable[str]) -> list[str]:
        """`names` and their downstream, with the services they need that are not up (and their downstream), in
        topological order, leaving out the tasks outside the run's targets."""
        tasks, dag = self._tasks, self.dag
        chosen: set[str] = set()
        todo = [n for n in names if n in tasks]
        while todo:
            for name in todo:
                if name not in chosen:
                    chosen.update([name, *dag.descendants(name)])
            needed: set[str] = set()  # the ancestors of the round, to find the services that are down
            stack = [d for n in chosen for d in dag.tasks[n].depends_on]
            while stack:
                d = stack.pop()
                if d not in needed:
                    needed.add(d)
                    stack.extend(dag.tasks[d].depends_on)
            todo = [d for d in needed - chosen if d in self._services and tasks[d].state in DEAD_END]
        return [n for n in dag.topological_order if n in chosen and tasks[n].state is not S.UNTARGETED]

    def end_rounds(self) -> None:
        """No more rounds (watch mode ends): tasks waiting to restart are not started again, and the services are
        stopped once the other tasks have ended."""
        with self._lock:
            self._rounds_over = True
            if self._keep_services:
                self._keep_services = False
                self._run_event("watch-ended")
            self._restart_after.clear()
            if self._services and self._plain_unfinished == 0:
                self._stop_services()
            self._check_done()
        self._flush()

    def _back_to_pending(self, t: TaskRecord) -> None:
        t.generation += 1
        t.attempts_before = t.snap.attempt
        t.cancel_reason = None
        t.why = t.round_why
        self._set(t, S.PENDING, reason=None, exit_code=None, started_at=None, finished_at=None)

    def _start_ready(self, order: list[str]) -> None:
        """Queue the PENDING tasks of `order` whose dependencies succeeded; skip those a dependency outside the
        round can never let run (it failed, was cancelled or skipped)."""
        for n in order:
            t = self._tasks[n]
            if t.state is not S.PENDING:
                continue
            if self._deps_succeeded(n):
                self._enqueue(t)
                continue
            dead = [d for d in self.dag.tasks[n].depends_on if self._tasks[d].state in DEAD_END]
            if dead:
                self._set(
                    t, S.SKIPPED, reason=f"upstream '{dead[0]}' {self._tasks[dead[0]].state}", finished_at=self.clock()
                )

    def _finish_attempt(self, t: TaskRecord, result: AttemptResult) -> None:
        super()._finish_attempt(t, result)
        name = t.snap.name
        if name in self._restart_after and t.state.terminal:
            self._restart_after.discard(name)
            self._stopping = False  # a failure of the interrupted attempt stops nothing: the task runs again
            # ... and its dependents the failure policy skipped meanwhile wait for it again
            again = [name, *(d for d in self.dag.descendants(name) if self._tasks[d].state in DEAD_END)]
            for n in again:
                self._back_to_pending(self._tasks[n])
            self._start_ready(again)
            self._check_done()

    def _children_ready(self, name: str) -> None:
        if name not in self._restart_after:  # what an attempt to be restarted made is not for its dependents
            super()._children_ready(name)

    def _check_done(self) -> None:
        if not self._restart_after:
            super()._check_done()
