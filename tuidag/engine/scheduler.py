"""The scheduler: one object owns every task's state behind one lock; pool threads run attempts and report back.

Ready-set scheduling: a task is QUEUED the moment its last dependency SUCCEEDED and submitted to a pool of
`max_parallel` worker threads right after (outside the lock), so it starts as soon as a slot frees up. The
scheduler's own record is the source of truth: a pool thread that picks up a task re-checks its state and generation
under the lock before starting it, so work submitted for a task that was cancelled meanwhile does nothing (there is
no racing `Future.cancel()`, which cannot stop work a thread already took anyway). Running attempts are stopped
through the executor's `kill()`, which ends the whole process tree.

Resource slots (slots.py): a task that asks for slots waits for them in `_slot_waiters`, outside the pool, and is
submitted to the pool once `_admit` gave it its slots; it gives them back on any move out of QUEUED/RUNNING/CANCELLING
(success, failure, timeout, cancel, a launch error, and also a retry: a task waiting out retry_delay holds nothing and
waits for its slots again, behind the tasks already waiting).

An executor whose workers are elsewhere (Dask) may say no worker can run a task yet (`placement_problem`): the task
then waits in `_unplaced`, QUEUED with that reason and holding no slot, until the executor calls
`_recheck_placement` (workers joined); tasks that can run meanwhile do. Such an executor also names the worker an
attempt started on (`Attempt.on_worker`), which becomes an update event of the RUNNING task.

Service tasks (services.py) are READY once their readiness check passes, which is when their dependents start, and
are stopped once every other task has ended. Under --watch, rounds (rounds.py) run tasks again in the same run, and
an edit of the DAG file changes its tasks (dag_reload.py).

A job group (DagSpec.job_group) is watched by a JobGroupStopper (job_group.py), which cancels the tasks that are not
primary once every primary task has ended.

Events are produced under the lock into an outbox and delivered outside it, in order, by whichever thread gets the
delivery lock first; observers therefore see a single ordered stream and may call back into the scheduler.

The one object is written in parts, each a class the next one extends, all sharing the state `__init__` sets and the
one lock: outbox.py (events on their way out, and the hand-over of ready tasks to the pool), task_records.py (the
record of each task and its state moves), task_queue.py (from ready to a pool thread: pause, placement, slots),
task_attempts.py (one attempt from launch to its end, retries, the failure policy). This module has the run's set-up,
its life cycle and the controls (cancel, re-run, pause, stop). Public methods take the lock where they read or change
state, and call `_flush` once they have let it go; a method named with `_` runs with the lock held, unless its
module's docstring names it as one that takes the lock (here: `_cancel` and `_parallelism_changed`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..model.counts import counted
from ..model.resources import requests, resolve
from ..model.spec import DagSpec, FailurePolicy
from ..model.state import TaskState, ended_outcome, ended_well
from ..model.targets import NOT_A_TARGET, needed
from .dag_reload import DagReloads
from .events import Event, TaskSnapshot
from .executor import Executor, RunningAttempt
from .job_group import JobGroupStopper, stopped_by_group
from .log_headers import LogHeaders
from .outbox import Subscription
from .services import ServiceTasks
from .slots import SlotPool
from .task_attempts import Freshness
from .task_records import DEAD_END, WAITING, S, TaskRecord
from .workers import WorkerPool

FDS_PER_ATTEMPT = 3  # what a running attempt may hold: a pidfd (timeout), a log while it starts, a callable's log...
FDS_RESERVED = 64  # tuidag's own: the terminal, the journal, the UI, psutil's reads, imports


def parallel_limit() -> tuple[int | None, int | None]:
    """(most attempts that can run at once within the open-file limit, that limit), or (None, None) for no limit.
    More would fail to start (or, worse, fail half-way) with EMFILE."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None, None
    return max(1, (soft - FDS_RESERVED) // FDS_PER_ATTEMPT), soft


class RerunRefused(ValueError):
    """`rerun()` of a task whose dependency can't succeed without being re-run itself."""


def default_parallel(dag: DagSpec, max_parallel: int | None, executor: Executor | None) -> tuple[int, str]:
    """max_parallel, and what it follows ("" when it is fixed): `max_parallel` (the command line), else the DAG's
    when it sets one, else the executor's parallelism (a Dask cluster's worker threads), else the CPU count."""
    if max_parallel is None and not dag.max_parallel_given and executor is not None:
        threads = executor.parallelism()
        if threads:
            return max(1, threads), executor.parallelism_source
    return max(1, max_parallel or dag.max_parallel), ""


class RunSummary(NamedTuple):
    """How a run ended."""

    snapshots: dict[str, TaskSnapshot]
    interrupted_by: str | None = None  # "SIGINT" / "SIGTERM" when a signal stopped the run

    @property
    def counts(self) -> dict[TaskState, int]:
        counts = {s: 0 for s in TaskState}
        for snap in self.snapshots.values():
            counts[snap.state] += 1
        return counts

    @property
    def ok(self) -> bool:
        """Every task succeeded (or, in a job group, was stopped once the primary tasks had ended), leaving aside the
        tasks outside the run's targets."""
        return all(ended_well(s.state, stopped_by_group(s)) for s in self.snapshots.values())

    @property
    def outcome(self) -> str:
        if self.interrupted_by:
            return "interrupted"
        return ended_outcome((s.state for s in self.snapshots.values()), self.ok)


class Scheduler(ServiceTasks, DagReloads):
    def __init__(
        self,
        dag: DagSpec,
        executor: Executor,
        run_id: str,
        log_dir: Path,
        *,
        log_name: Callable[[str], str] = lambda task: f"{task}.log",
        max_parallel: int | None = None,
        kill_grace: float | None = None,
        clock: Callable[[], float] = time.time,
        reused: Iterable[str] | Mapping[str, Any] = (),
        freshness: Freshness | None = None,
        targets: Sequence[str] = (),
    ):
        """`reused`: tasks SUCCEEDED from the start (carried over by --resume); a mapping gives their return
        values, which their dependents get in `ctx.results` as if they had just run. `freshness`: asked whether each
        task needs to run when it is about to start (store/freshness.py); without it every task runs. `targets`: the
        tasks asked for (none: every task); the others, unless a target needs them, are UNTARGETED from the start and
        never start."""
        dag = resolve(dag)  # requests checked against capacities (front ends did it already, with their locations)
        self.dag = dag
        self.executor = executor
        self.freshness = freshness
        self.run_id = run_id
        wanted, self.parallel_source = default_parallel(dag, max_parallel, executor)
        if dag.job_group is not None:
            # Every task of a job group runs at once: with fewer slots, a task could wait for a server that never ends.
            wanted = max(wanted, len(dag.tasks))
        limit, fds = parallel_limit()
        self.max_parallel = min(wanted, limit) if limit else wanted
        # Why fewer tasks run at once than asked, for the views and the journal to say (None: as asked).
        self.parallel_note = (
            f"max_parallel {wanted} capped to {self.max_parallel} by the open-file limit "
            f"({fds}; raise it with `ulimit -n`)"
            if self.max_parallel < wanted
            else None
        )
        self.kill_grace = dag.kill_grace if kill_grace is None else kill_grace
        self.clock = clock
        self.log_headers = LogHeaders()  # which bytes of the task logs are attempt headers
        self._lock = threading.Lock()
        self._deliver_lock = threading.Lock()
        self._outbox: deque[Event] = deque()
        self._ready: deque[tuple[str, int]] = deque()  # (task, generation) to submit to the pool
        self._observers: list[Subscription] = []  # (observer, wants batches)
        self._seq = 0
        self._pool = WorkerPool(self.max_parallel, "tuidag-task")
        self._paused = False
        self._stopping = False  # finish-running / cancel-all: start nothing new
        self._halted: str | None = None  # why `stop()` stopped the run for good
        self._closed = False  # `close()` began: the run is over for good
        self.generation_number = 1  # watch mode's rounds (rounds.py): the first run is generation 1
        self._restart_after: set[str] = set()
        self._rounds_over = False
        self.dag_shape: dict[str, Any] | None = None  # the DAG file's latest reload (dag_reload.py)
        self._removed: set[str] = set()
        #: Called (on a pool thread, no lock held) when a task's log can't be written for lack of space; it is expected
        #: to `stop` the run with the reason to show. Without it the scheduler stops the run itself.
        self.on_log_full: Callable[[OSError], None] | None = None
        self._held: dict[str, None] = {}  # QUEUED or due-to-retry tasks held back while paused (an ordered set:
        # cancelling all of a paused run's held tasks one by one was quadratic as a list)
        self._started = False
        self._done = threading.Event()
        self._results: dict[str, Any] = {}
        self._base_env = {**os.environ, **dag.env, "TUIDAG_RUN_ID": run_id}
        self.slots = SlotPool(dag.resources)
        self._requests = {name: requests(spec) for name, spec in dag.tasks.items() if spec.resources}
        self._slot_waiters: list[tuple[str, int]] = []  # (task, generation) waiting for slots, in order
        self._unplaced: list[tuple[str, int]] = []  # (task, generation) no worker can run yet (placement_problem)
        self._unplaced_reasons: set[str] = set()  # QUEUED tasks whose reason says why no worker can run them
        self._group = None if dag.job_group is None else JobGroupStopper(dag.job_group, list(dag.tasks), self._cancel)
        now = clock()
        reused = dict(reused) if isinstance(reused, Mapping) else dict.fromkeys(reused)
        self._results.update(reused)
        self.targets = tuple(targets)
        wanted_tasks = needed(dag, self.targets)
        self._tasks: dict[str, TaskRecord] = {}
        logs = self._log_dir = str(log_dir)  # joined as strings: a Path per task was a third of setting up a big run
        self._log_name = log_name
        for name in dag.topological_order:
            snap = TaskSnapshot(name, S.PENDING, changed_at=now, log_path=f"{logs}/{log_name(name)}")
            if name not in wanted_tasks:
                snap = snap.evolve(state=S.UNTARGETED, reason=NOT_A_TARGET)
            elif name in reused:
                snap = snap.evolve(
                    state=S.SUCCEEDED, reused=True, reason="reused from an earlier run", value=reused[name]
                )  # journalled again: a run resumed from this one gets it too
            self._tasks[name] = TaskRecord(snap)
        self._unfinished = sum(not t.state.terminal for t in self._tasks.values())  # kept current by _set()
        self._init_services()
        executor.watch_placement(self._recheck_placement)
        if self.parallel_source and dag.job_group is None:
            executor.watch_parallelism(self._parallelism_changed)

    # ------------------------------------------------------------------------------------------------ observers
    def snapshot(self) -> dict[str, TaskSnapshot]:
        with self._lock:
            return {name: t.snap for name, t in self._tasks.items()}

    def snapshot_seq(self) -> tuple[int, dict[str, TaskSnapshot]]:
        """Every task now, with the number of the last event that went into it: an observer that subscribed
        earlier skips the events up to that number (they are older than the snapshot, not news)."""
        with self._lock:
            return self._seq, {name: t.snap for name, t in self._tasks.items()}

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def watching(self) -> bool:
        """Watch mode is on: once its tasks have ended the run waits for a change (`watching` and `watch-ended` run
        events say when this changes)."""
        return self._keep_services  # (services.py: set and cleared by rounds.py's watch_rounds and end_rounds)

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    # ------------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Queue every task whose dependencies are met and return; work continues on pool threads."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self._run_event(
                "started",
                f"{counted(len(self._tasks), 'task')}, max_parallel {self.max_parallel}"
                + (f" ({self.parallel_note})" if self.parallel_note else "")
                + (f" ({self.parallel_source})" if self.parallel_source else ""),
            )
            for t in self._tasks.values():
                if t.snap.reused:  # journal and observers learn which results were carried over
                    self._set(t, S.SUCCEEDED)
                elif t.state is S.UNTARGETED:  # ... and which tasks are outside the targets
                    self._set(t, S.UNTARGETED)
            for name, t in self._tasks.items():
                if t.state is S.PENDING and self._deps_succeeded(name):
                    self._enqueue(t)
            if self._group is not None:  # resumed with every primary task reused: the others have nothing to serve
                self._group.started(lambda name: self._tasks[name].state)
            if self._services and self._plain_unfinished == 0:  # likewise: the services have no task to serve
                self._stop_services()
            self._check_done()
        self._flush()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every task is terminal. True if so, False on timeout."""
        return self._done.wait(timeout)

    def run(self) -> RunSummary:
        self.start()
        self.wait()
        self.close()
        return RunSummary(self.snapshot())

    def close(self) -> None:
        """Wait for pool threads, release the executor and deliver every remaining event. From here on the run's
        record is being closed: a re-run (a control that arrives as the run ends) is refused, not started on a
        closed journal and a pool that takes no more work."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True)
        if self._group is not None:
            self._group.close()
        self.executor.close()
        with self._deliver_lock:  # a thread still delivering finishes first
            pass
        self._flush()

    # ------------------------------------------------------------------------------------------------ controls
    def branch(self, name: str) -> list[str]:
        """The unfinished tasks that `cancel(name)` would cancel: the task and its descendants."""
        with self._lock:
            return [n for n in [name, *self.dag.descendants(name)] if not self._tasks[n].state.terminal]

    def cancel(self, name: str, reason: str = "cancelled by user") -> list[str]:
        """Cancel a branch: `name` and all its descendants. Returns the tasks that were affected."""
        if name not in self._tasks:
            raise KeyError(name)
        return self._cancel([name, *self.dag.descendants(name)], reason)

    def cancel_all(self, reason: str = "cancelled by user") -> list[str]:
        """Cancel every task: services in order (services.py: each once the tasks that use it have ended), the others
        at once. Returns the tasks that were affected (the services that are still to be stopped included)."""
        with self._lock:
            services = [n for n in self._services if not self._tasks[n].state.terminal]
            self._stop_services(reason, force=True)
            plain = [n for n in self._tasks if n not in self._services]
        affected = set(self._cancel(plain, reason)) | set(services)
        return [n for n in self._tasks if n in affected]

    def stop(self, reason: str) -> list[str]:
        """Start nothing more, for a reason outside the DAG (the run's journal can no longer be written): as when a
        task fails under the DAG's failure policy, waiting tasks are CANCELLED with `reason`, running ones finish
        (cancelled under cancel-all); and nothing re-runs afterwards. Returns the tasks that were affected."""
        with self._lock:
            self._halted = reason
            affected = self._stop_starting(reason)
            self._check_done()
        self._flush()
        return affected

    def rerun(self, name: str) -> list[str]:
        """Run a finished-but-not-succeeded task again, with its non-succeeded descendants, in this same run.

        A task can only run once all its dependencies can succeed, so a descendant that also waits on another
        failed, cancelled or skipped task stays as it is, and re-running a task whose own dependency is in that state
        is refused with RerunRefused naming the dependency to re-run first."""
        with self._lock:
            if self._halted:
                raise RerunRefused(f"the run was stopped: {self._halted}")
            if self._closed:
                raise RerunRefused("the run has ended")
            t = self._tasks[name]
            if t.state is S.UNTARGETED:
                raise RerunRefused(f"'{name}' is not a target of this run: start a run with it as a target to run it")
            if name in self._removed:
                raise RerunRefused(f"'{name}' was removed from the DAG file")
            if t.state not in (S.FAILED, S.CANCELLED, S.SKIPPED):
                return []
            blocked = [d for d in self.dag.tasks[name].depends_on if self._tasks[d].state in DEAD_END]
            if blocked:
                raise RerunRefused(
                    f"'{name}' needs '{blocked[0]}', which is {self._tasks[blocked[0]].state}: "
                    f"re-run '{blocked[0]}' first"
                )
            chosen = {name}
            for d in self.dag.descendants(name):  # topological order: a task's deps are decided before it
                state = self._tasks[d].state
                if state in DEAD_END and all(
                    dep in chosen or self._tasks[dep].state not in DEAD_END for dep in self.dag.tasks[d].depends_on
                ):
                    chosen.add(d)
            names = [n for n in self.dag.topological_order if n in chosen]
            self._stopping = False
            self._done.clear()
            for n in names:
                rt = self._tasks[n]
                rt.round_why = None  # run again by the user, not by a watch round
                self._back_to_pending(rt)
            for n in names:
                rt = self._tasks[n]
                if rt.state is S.PENDING and self._deps_succeeded(n):
                    self._enqueue(rt)
            self._check_done()
        self._flush()
        return names

    def pause(self) -> bool:
        """Hold back every task that has not started. Refused (False) once the run is finished: there is nothing to
        hold, and a pause kept past the end would silently hold a later re-run."""
        with self._lock:
            if self._done.is_set():
                return False
            if not self._paused:
                self._paused = True
                self._run_event("paused")
        self._flush()
        return True

    def resume(self) -> None:
        with self._lock:
            if self._paused:
                self._paused = False
                self._run_event("resumed")
                held, self._held = self._held, {}
                for name in held:
                    self._submit(self._tasks[name])
                self._admit()
        self._flush()

    def _parallelism_changed(self, threads: int) -> None:
        """The executor's parallelism changed (Dask workers joined or left) and max_parallel follows it: a run
        event says so (the journal and the headless output)."""
        limit, _ = parallel_limit()
        new = max(1, min(threads, limit) if limit else threads)
        with self._lock:
            if new == self.max_parallel or self._done.is_set():
                return
            self.max_parallel = new
            self._pool.resize(new)
            self._run_event("parallel", f"max_parallel {new} ({self.parallel_source})")
        self._flush()

    def slots_in_use(self) -> dict[str, tuple[int, int]]:
        """kind -> (slots held, capacity), for the views."""
        with self._lock:
            return self.slots.in_use()

    def usage(self, name: str) -> tuple[float, int] | None:
        """Live (CPU %, RSS bytes) of a running task's process tree."""
        running = self._tasks[name].running
        return running.usage() if running else None

    # ------------------------------------------------------------------------------------------------ internals
    def _cancel(self, names: list[str], reason: str) -> list[str]:
        to_kill: list[RunningAttempt] = []
        affected: list[str] = []
        with self._lock:
            self._restart_after.difference_update(names)  # a task cancelled while it restarts stays cancelled
            for n in names:
                if self._cancel_one(self._tasks[n], reason, to_kill):
                    affected.append(n)
            self._check_done()
        self._flush()
        for running in to_kill:
            running.kill()
        return affected

    def _stop_starting(self, reason: str) -> list[str]:
        """Start nothing new: waiting tasks CANCELLED; running ones too under cancel-all, else left to finish."""
        self._stopping = True
        now = self.clock()
        to_kill: list[RunningAttempt] = []
        affected = []
        for t in self._tasks.values():
            if t.state in WAITING:
                self._drop_pending_work(t)
                self._set(t, S.CANCELLED, reason=reason, finished_at=now)
            elif t.state in (S.RUNNING, S.READY) and self.dag.on_failure is FailurePolicy.CANCEL_ALL:
                t.cancel_reason = reason
                self._set(t, S.CANCELLING, reason=reason)
                if t.running is not None:
                    to_kill.append(t.running)
            else:
                continue
            affected.append(t.snap.name)
        for running in to_kill:
            # kill() only records the request and sends SIGTERM; the waiting pool thread does the rest.
            threading.Thread(target=running.kill, name="tuidag-kill", daemon=True).start()
        return affected
