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

A job group (DagSpec.job_group) is watched by a JobGroupStopper (job_group.py), which cancels the tasks that are not
primary once every primary task has ended.

Events are produced under the lock into an outbox and delivered outside it, in order, by whichever thread gets the
delivery lock first; observers therefore see a single ordered stream and may call back into the scheduler.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from ..model.counts import counted
from ..model.resources import cuda_kind, format_slots, requests, resolve, slot_env
from ..model.spec import RUN_ID_PLACEHOLDER, DagSpec, FailurePolicy, TaskSpec
from ..model.state import TERMINAL, TaskState, can_move, ended_outcome
from .events import Event, RunEvent, TaskEvent, TaskSnapshot
from .executor import Attempt, AttemptResult, Executor, LogFull, RunningAttempt, TaskEnvironment
from .job_group import JobGroupStopper, stopped_by_group
from .log_headers import LogHeaders
from .slots import SlotPool
from .workers import WorkerPool


def _log_exception(message: str, *args: Any) -> None:
    """Log an engine bug with its traceback (logging is imported on the first one: it is not needed otherwise).
    Never raises: out of descriptors, even the import fails, and then a line on stderr is all there is."""
    try:
        import logging

        logging.getLogger(__name__).exception(message, *args)
    except BaseException:
        try:
            os.write(2, f"tuidag: {message % args}\n".encode(errors="replace"))
        except BaseException:
            pass


FDS_PER_ATTEMPT = 3  # what a running attempt may hold: a pidfd (timeout), a log while it starts, a callable's log...
FDS_RESERVED = 64    # tuidag's own: the terminal, the journal, the UI, psutil's reads, imports


def parallel_limit() -> tuple[int | None, int | None]:
    """(most attempts that can run at once within the open-file limit, that limit), or (None, None) for no limit.
    More would fail to start (or, worse, fail half-way) with EMFILE."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None, None
    return max(1, (soft - FDS_RESERVED) // FDS_PER_ATTEMPT), soft


S = TaskState
Observer = Callable[[Event], None]
BatchObserver = Callable[[list[Event]], None]
_WAITING = (S.PENDING, S.QUEUED, S.RETRYING)
_DEAD_END = (S.FAILED, S.CANCELLED, S.SKIPPED)  # terminal states a dependent can never run after
_HOLDING = (S.QUEUED, S.RUNNING, S.CANCELLING)  # states a task keeps its slots in (QUEUED: admitted, not started)


class RerunRefused(ValueError):
    """`rerun()` of a task whose dependency can't succeed without being re-run itself."""


class InvalidTransition(RuntimeError):
    """The scheduler tried a move the state table forbids: a bug, never a user error."""


def default_parallel(dag: DagSpec, max_parallel: int | None, executor: Executor | None) -> tuple[int, str]:
    """max_parallel, and what it follows ("" when it is fixed): `max_parallel` (the command line), else the DAG's
    when it sets one, else the executor's parallelism (a Dask cluster's worker threads), else the CPU count."""
    if max_parallel is None and not dag.max_parallel_given and executor is not None:
        threads = executor.parallelism()
        if threads:
            return max(1, threads), executor.parallelism_source
    return max(1, max_parallel or dag.max_parallel), ""


class _Task:
    """The scheduler's mutable record of one task. Only touched with the scheduler lock held."""

    __slots__ = ("snap", "generation", "attempts_before", "running", "timer", "cancel_reason", "unannounced", "held")

    def __init__(self, snap: TaskSnapshot):
        self.snap = snap
        self.generation = 0               # bumped on re-run so stale pool work and timers are ignored
        self.attempts_before = 0          # attempts made before the latest re-run (retries budget is per re-run)
        self.running: RunningAttempt | None = None
        self.timer: threading.Timer | None = None
        self.cancel_reason: str | None = None
        self.unannounced: TaskState | None = None  # RUNNING not delivered yet: the state it came from (`_attempt`)
        self.held: dict[str, tuple[int, ...]] | None = None  # the slots given to it (kind -> slot numbers)

    @property
    def state(self) -> TaskState:
        return self.snap.state


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
        """Every task succeeded (or, in a job group, was stopped once the primary tasks had ended)."""
        return all(s.state is S.SUCCEEDED or stopped_by_group(s) for s in self.snapshots.values())

    @property
    def outcome(self) -> str:
        if self.interrupted_by:
            return "interrupted"
        return ended_outcome((s.state for s in self.snapshots.values()), self.ok)


class Scheduler:
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
    ):
        """`reused`: tasks SUCCEEDED from the start (carried over by --resume); a mapping gives their return
        values, which their dependents get in `ctx.results` as if they had just run."""
        dag = resolve(dag)  # requests checked against capacities (front ends did it already, with their locations)
        self.dag = dag
        self.executor = executor
        self.run_id = run_id
        wanted, self.parallel_source = default_parallel(dag, max_parallel, executor)
        if dag.job_group is not None:
            # Every task of a job group runs at once: with fewer slots, a task could wait for a server that never ends.
            wanted = max(wanted, len(dag.tasks))
        limit, fds = parallel_limit()
        self.max_parallel = min(wanted, limit) if limit else wanted
        # Why fewer tasks run at once than asked, for the views and the journal to say (None: as asked).
        self.parallel_note = (f"max_parallel {wanted} capped to {self.max_parallel} by the open-file limit "
                              f"({fds}; raise it with `ulimit -n`)" if self.max_parallel < wanted else None)
        self.kill_grace = dag.kill_grace if kill_grace is None else kill_grace
        self.clock = clock
        self.log_headers = LogHeaders()  # which bytes of the task logs are attempt headers
        self._lock = threading.Lock()
        self._deliver_lock = threading.Lock()
        self._outbox: deque[Event] = deque()
        self._ready: deque[tuple[str, int]] = deque()  # (task, generation) to submit to the pool
        self._observers: list[tuple[Observer | BatchObserver, bool]] = []  # (observer, wants batches)
        self._seq = 0
        self._pool = WorkerPool(self.max_parallel, "tuidag-task")
        self._paused = False
        self._stopping = False       # finish-running / cancel-all: start nothing new
        self._halted: str | None = None  # why `stop()` stopped the run for good
        self._closed = False  # `close()` began: the run is over for good
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
        self._tasks: dict[str, _Task] = {}
        logs = str(log_dir)  # joined as strings: a Path per task was a third of setting up a big run
        for name in dag.topological_order:
            snap = TaskSnapshot(name, S.PENDING, changed_at=now, log_path=f"{logs}/{log_name(name)}")
            if name in reused:
                snap = snap.evolve(state=S.SUCCEEDED, reused=True, reason="reused from an earlier run",
                                   value=reused[name])  # journalled again: a run resumed from this one gets it too
            self._tasks[name] = _Task(snap)
        self._unfinished = sum(not t.state.terminal for t in self._tasks.values())  # kept current by _set()
        executor.watch_placement(self._recheck_placement)
        if self.parallel_source and dag.job_group is None:
            executor.watch_parallelism(self._parallelism_changed)

    # ------------------------------------------------------------------------------------------------ observers
    def subscribe(self, observer: Observer | BatchObserver, *, batches: bool = False) -> Callable[[], None]:
        """Call `observer(event)` for every event from now on, in order, from engine threads. Keep it quick.

        With batches=True the observer gets a list of consecutive events per delivery instead, for observers that
        do I/O per call (the journal writes each batch with one write())."""
        entry = (observer, batches)
        with self._lock:
            self._observers = [*self._observers, entry]

        def unsubscribe() -> None:
            with self._lock:
                self._observers = [o for o in self._observers if o is not entry]

        return unsubscribe

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
    def finished(self) -> bool:
        return self._done.is_set()

    # ------------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Queue every task whose dependencies are met and return; work continues on pool threads."""
        with self._lock:
            if self._started:
                return
            self._started = True
            self._run_event("started", f"{counted(len(self._tasks), 'task')}, max_parallel {self.max_parallel}"
                            + (f" ({self.parallel_note})" if self.parallel_note else "")
                            + (f" ({self.parallel_source})" if self.parallel_source else ""))
            for t in self._tasks.values():
                if t.snap.reused:  # journal and observers learn which results were carried over
                    self._set(t, S.SUCCEEDED)
            for name, t in self._tasks.items():
                if t.state is S.PENDING and self._deps_succeeded(name):
                    self._enqueue(t)
            if self._group is not None:  # resumed with every primary task reused: the others have nothing to serve
                self._group.started(lambda name: self._tasks[name].state)
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
        return self._cancel(list(self._tasks), reason)

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
            if t.state not in (S.FAILED, S.CANCELLED, S.SKIPPED):
                return []
            blocked = [d for d in self.dag.tasks[name].depends_on if self._tasks[d].state in _DEAD_END]
            if blocked:
                raise RerunRefused(f"'{name}' needs '{blocked[0]}', which is {self._tasks[blocked[0]].state}: "
                                   f"re-run '{blocked[0]}' first")
            chosen = {name}
            for d in self.dag.descendants(name):  # topological order: a task's deps are decided before it
                state = self._tasks[d].state
                if state in _DEAD_END and all(
                        dep in chosen or self._tasks[dep].state not in _DEAD_END
                        for dep in self.dag.tasks[d].depends_on):
                    chosen.add(d)
            names = [n for n in self.dag.topological_order if n in chosen]
            self._stopping = False
            self._done.clear()
            for n in names:
                rt = self._tasks[n]
                rt.generation += 1
                rt.attempts_before = rt.snap.attempt
                rt.cancel_reason = None
                self._set(rt, S.PENDING, reason=None, exit_code=None, started_at=None, finished_at=None)
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
            for n in names:
                t = self._tasks[n]
                if t.state in _WAITING:
                    self._drop_pending_work(t)
                    self._set(t, S.CANCELLED, reason=reason, finished_at=self.clock())
                elif t.state is S.RUNNING:
                    t.cancel_reason = reason
                    self._set(t, S.CANCELLING, reason=reason)
                    if t.running is not None:
                        to_kill.append(t.running)
                else:
                    continue
                affected.append(n)
            self._check_done()
        self._flush()
        for running in to_kill:
            running.kill()
        return affected

    def _drop_pending_work(self, t: _Task) -> None:
        if t.timer is not None:
            t.timer.cancel()
            t.timer = None
        self._held.pop(t.snap.name, None)

    def _deps_succeeded(self, name: str) -> bool:
        return all(self._tasks[d].state is S.SUCCEEDED for d in self.dag.tasks[name].depends_on)

    def _enqueue(self, t: _Task) -> None:
        self._set(t, S.QUEUED)
        self._submit(t)

    def _submit(self, t: _Task) -> None:
        if self._paused:
            self._held[t.snap.name] = None
            return
        problem = self.executor.placement_problem(self.dag.tasks[t.snap.name])
        if problem is not None:  # waits here, holding no slot, until the executor says workers changed
            self._unplaced.append((t.snap.name, t.generation))
            if t.held is not None:
                self._release(t)
            if t.state is S.QUEUED and t.snap.reason != problem:
                self._set(t, S.QUEUED, reason=problem)
                self._unplaced_reasons.add(t.snap.name)
            return
        if self._unplaced_reasons and t.snap.name in self._unplaced_reasons:
            self._unplaced_reasons.discard(t.snap.name)
            if t.state is S.QUEUED and t.snap.reason is not None:
                self._set(t, S.QUEUED, reason=None)  # placed: no longer waiting for a worker
        if t.held is None and t.snap.name in self._requests:
            self._slot_waiters.append((t.snap.name, t.generation))
            self._admit()
            return
        self._ready.append((t.snap.name, t.generation))  # submitted by _flush, once the lock is released

    def _admit(self) -> None:
        """Give free slots to the tasks waiting for them that may have them (slots.py says which) and queue those
        for a pool thread; the others that are QUEUED say what they wait for."""
        if self._paused or self._stopping or not self._slot_waiters:
            return
        tasks = self._tasks
        live = [(name, generation) for name, generation in self._slot_waiters
                if tasks[name].generation == generation and tasks[name].held is None
                and tasks[name].state in (S.QUEUED, S.RETRYING)]
        admitted, blocked = self.slots.admit((item, self._requests[item[0]]) for item in live)
        self._slot_waiters = [item for item in live if item in blocked]
        for item, held in admitted:
            t = tasks[item[0]]
            t.held = held
            self._set(t, t.state, slots=format_slots(held), reason=None if t.state is S.QUEUED else t.snap.reason)
            self._ready.append(item)
        for (name, _), kinds in blocked.items():
            t = tasks[name]
            reason = "waiting for " + ", ".join(kinds)
            if t.state is S.QUEUED and t.snap.reason != reason:
                self._set(t, S.QUEUED, reason=reason)

    def _recheck_placement(self) -> None:
        """The executor's workers changed: try again the tasks no worker could run (see `_submit`)."""
        with self._lock:
            waiting, self._unplaced = self._unplaced, []
            for name, generation in waiting:
                t = self._tasks[name]
                if t.generation != generation or t.state not in (S.QUEUED, S.RETRYING):
                    continue  # cancelled, re-run or stopped meanwhile
                self._submit(t)
        self._flush()

    def _release(self, t: _Task) -> None:
        """`t` moved to a state that holds no slots: give back the ones it had, and let the waiters have them (a
        waiter that left waits no more either, and may have been keeping others behind it)."""
        if t.held is not None:
            self.slots.give_back(t.held)
            t.held = None
        self._admit()

    def _slot_env(self, spec: TaskSpec, held: dict[str, tuple[int, ...]] | None) -> dict[str, str]:
        """TUIDAG_SLOTS_<KIND> for each kind held, and CUDA_VISIBLE_DEVICES with the first GPU kind's numbers."""
        return slot_env(held, cuda_kind(spec)) if held else {}

    def _work(self, name: str, generation: int) -> None:
        """Runs on a pool thread: one attempt of one task, from start to its tree being gone; then, while nothing
        older waits for a thread, the first task that attempt made ready (handing it to another pool thread would
        cost a wake-up and a context switch per task for nothing)."""
        item: tuple[str, int] | None = (name, generation)
        while item is not None:
            name, generation = item
            try:
                item = self._attempt(name, generation)
            except BaseException:  # an engine bug, or no descriptor left: never leave the task RUNNING forever
                _log_exception("engine error while running %s", name)
                with self._lock:
                    t = self._tasks[name]
                    if t.generation == generation and t.state in (S.RUNNING, S.CANCELLING):
                        t.running = None
                        self._finish_attempt(t, AttemptResult(False, None, "internal error (see tuidag's log)"))
                self._flush()
                item = None

    def _attempt(self, name: str, generation: int) -> tuple[str, int] | None:
        """One attempt; returns a ready task for this thread to run next (see `_work`)."""
        with self._lock:
            t = self._tasks[name]
            if t.generation != generation or t.state not in (S.QUEUED, S.RETRYING) or self._stopping:
                return None
            if self._paused:  # queued for a slot before the pause: it waits for resume like anything queued since
                self._held[name] = None
                return None
            number = t.snap.attempt + 1
            spec = self.dag.tasks[name]
            now = self.clock()
            before = t.snap
            # RUNNING is announced once the leader's pid is known (one event, not a second one for the pid), or
            # before any other change of the task if one comes first (a cancel while launching, a launch error).
            # With an executor whose attempts start later (Dask), once the attempt has started (`_started_on`).
            first = t.snap.started_at is None
            self._set(t, S.RUNNING, announce=False, attempt=number, started_at=t.snap.started_at or now, pid=None,
                      create_time=None, reason=None, exit_code=None, worker=None, log_start=None)
            results = {d: self._results.get(d) for d in spec.depends_on} if spec.func is not None else {}
            slot_env = self._slot_env(spec, t.held)
        attempt = Attempt(
            run_id=self.run_id, task=spec, number=number,
            env=TaskEnvironment(self._base_env, {**spec.env, **self._run_env(spec), **slot_env, "TUIDAG_TASK": name,
                                                 "TUIDAG_ATTEMPT": str(number)}),
            workdir=spec.workdir or self.dag.workdir, log_path=t.snap.log_path, log_headers=self.log_headers,
            timeout=spec.timeout, kill_grace=self.kill_grace, results=results,
            on_worker=lambda worker, slots=None, started=None, ending=False: self._started_on(
                t, generation, number, worker, slots, started if first else None, ending),
            on_waiting=lambda: self._waiting(t, generation, number),
        )
        try:
            running = self.executor.launch(attempt)
        except LogFull as exc:
            return self._log_full(t, before, exc)
        except Exception as exc:  # spawn failures (missing workdir, ...) fail the attempt, not the engine
            result = AttemptResult(False, None, f"could not start: {exc}")
        else:
            # where this attempt's output starts: the journal keeps it, so a report reads the last attempt's lines
            log_start = self.log_headers.output_start(attempt.log_path)
            with self._lock:
                t.running = running
                kill_now = t.state is S.CANCELLING  # a cancel arrived while we were launching
                if running.pid is not None or log_start is not None:
                    known = {"log_start": log_start}
                    if running.pid is not None:
                        known.update(pid=running.pid, create_time=running.create_time)
                    if t.unannounced is not None:
                        t.snap = t.snap.evolve(**known)
                    else:  # a cancel announced RUNNING already: the pid comes as an update
                        self._set(t, t.state, **known)
                if t.unannounced is not None:
                    if not self.executor.starts_later:
                        self._announce(t)
            self._flush()
            if kill_now:
                running.kill()
            try:
                result = running.wait()
            except LogFull as exc:  # its setup ran, but there is no room to start its next step
                result = self._step_log_full(t, exc)
        with self._lock:
            t.running = None
            self._finish_attempt(t, result)
        return self._flush(keep=True)

    def _log_full(self, t: _Task, before: TaskSnapshot, exc: LogFull) -> tuple[str, int] | None:
        """No space for the attempt's log: it did not start, and none would. The run stops starting tasks (through
        `on_log_full`, which says why, else `stop`) and this task is CANCELLED like every other waiting one, not
        FAILED: nothing went wrong with it."""
        self._stop_for_log(exc)
        with self._lock:
            reason = self._halted or f"not started: no space for task logs ({exc.strerror})"
            if t.unannounced is not None:  # never shown RUNNING, and it never ran
                t.snap, t.unannounced = before, None
                self._set(t, S.CANCELLED, reason=reason, finished_at=self.clock())
                self._check_done()
            else:  # a cancel announced it while it was launching
                t.cancel_reason = t.cancel_reason or reason
                self._finish_attempt(t, AttemptResult(False, None, reason))
        return self._flush(keep=True)

    def _step_log_full(self, t: _Task, exc: LogFull) -> AttemptResult:
        """A step after the first (the command after its setup) could not start for lack of log space: the run stops
        as in `_log_full`, and the task ends CANCELLED with the same reason, its next step never started."""
        self._stop_for_log(exc)
        with self._lock:
            reason = self._halted or f"not started: no space for task logs ({exc.strerror})"
            if t.state is S.RUNNING:
                t.cancel_reason = reason
                self._set(t, S.CANCELLING, reason=reason)
        self._flush()
        return AttemptResult(False, None, reason, cancelled=True)

    def _stop_for_log(self, exc: LogFull) -> None:
        if self.on_log_full is not None:
            self.on_log_full(exc)
        else:
            self.stop(f"not started: no space for task logs ({exc.strerror})")

    def _waiting(self, t: _Task, generation: int, number: int) -> None:
        """The executor says attempt `number` still waits for a worker (`Executor.starts_later`): QUEUED says so,
        with why (an update event; it holds its slot meanwhile)."""
        with self._lock:
            if t.generation != generation or t.snap.attempt != number or t.unannounced is not S.QUEUED:
                return
            self._seq += 1
            self._outbox.append(TaskEvent(self._seq, self.clock(), S.QUEUED, t.snap.evolve(
                state=S.QUEUED, reason=self.executor.waiting_reason)))
        self._flush()

    def _started_on(self, t: _Task, generation: int, number: int, worker: str, slots: str | None,
                    started: float | None = None, ending: bool = False) -> None:
        """The executor says where attempt `number` runs (and, when the worker numbered the slots itself, which ones
        it has there): an update event (old == new state), so the views and the journal say so while it runs. With
        an executor whose attempts start later, this is the attempt's start: RUNNING is announced now, from when
        the process started (`started`, for the task's first attempt; never later than now, whatever the worker's
        clock says). `ending`: the attempt is over already, and its end delivers the event with its own."""
        with self._lock:
            if t.generation != generation or t.snap.attempt != number or t.state not in (S.RUNNING, S.CANCELLING):
                return
            if t.unannounced is not None:
                now = self.clock()
                since = {"started_at": min(started, now)} if started is not None else {}
                t.snap = t.snap.evolve(worker=worker, changed_at=now, **since, **({"slots": slots} if slots else {}))
                self._announce(t)
            elif t.snap.worker == worker and slots in (None, t.snap.slots):
                return
            else:
                self._set(t, t.state, worker=worker, **({"slots": slots} if slots else {}))
        if not ending:
            self._flush()

    def _run_env(self, spec: TaskSpec) -> dict[str, str]:
        return {key: value.replace(RUN_ID_PLACEHOLDER, self.run_id) for key, value in spec.run_env.items()}

    def _finish_attempt(self, t: _Task, result: AttemptResult) -> None:
        name = t.snap.name
        now = self.clock()
        spec = self.dag.tasks[name]
        if result.worker != t.snap.worker:  # the Dask worker that ran it, named in the attempt's last event
            t.snap = t.snap.evolve(worker=result.worker)
        if t.state is S.CANCELLING:
            self._set(t, S.CANCELLED, reason=t.cancel_reason, exit_code=result.exit_code, finished_at=now)
        elif result.ok:
            self._results[name] = result.value
            self._set(t, S.SUCCEEDED, exit_code=result.exit_code, finished_at=now, reason=None, value=result.value)
            if not self._stopping:
                for child in self.dag.children[name]:
                    ct = self._tasks[child]
                    if ct.state is S.PENDING and self._deps_succeeded(child):
                        self._enqueue(ct)
        elif t.snap.attempt - t.attempts_before <= spec.retries and not self._stopping:
            self._set(t, S.RETRYING, reason=result.reason, exit_code=result.exit_code)
            self._schedule_retry(t, spec.retry_delay)
        else:
            self._set(t, S.FAILED, reason=result.reason, exit_code=result.exit_code, finished_at=now)
            self._apply_failure_policy(name)
        self._check_done()

    def _schedule_retry(self, t: _Task, delay: float) -> None:
        generation = t.generation

        def due() -> None:
            with self._lock:
                if t.generation == generation and t.state is S.RETRYING and t.timer is timer:
                    t.timer = None
                    self._submit(t)
            self._flush()

        if delay <= 0:
            self._submit(t)
            return
        timer = threading.Timer(delay, due)
        timer.daemon = True
        t.timer = timer
        timer.start()

    def _apply_failure_policy(self, failed: str) -> None:
        now = self.clock()
        for d in self.dag.descendants(failed):
            dt = self._tasks[d]
            if dt.state in _WAITING:
                self._drop_pending_work(dt)
                self._set(dt, S.SKIPPED, reason=f"upstream '{failed}' failed", finished_at=now)
        policy = self.dag.on_failure
        if policy is not FailurePolicy.SKIP_DOWNSTREAM:
            self._stop_starting(f"run stopped: '{failed}' failed ({policy})")

    def _stop_starting(self, reason: str) -> list[str]:
        """Start nothing new: waiting tasks CANCELLED; running ones too under cancel-all, else left to finish."""
        self._stopping = True
        now = self.clock()
        to_kill: list[RunningAttempt] = []
        affected = []
        for t in self._tasks.values():
            if t.state in _WAITING:
                self._drop_pending_work(t)
                self._set(t, S.CANCELLED, reason=reason, finished_at=now)
            elif t.state is S.RUNNING and self.dag.on_failure is FailurePolicy.CANCEL_ALL:
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

    def _check_done(self) -> None:
        if self._started and self._unfinished == 0 and not self._done.is_set():
            counts: dict[str, int] = {}
            for t in self._tasks.values():
                counts[t.state.value] = counts.get(t.state.value, 0) + 1
            ok = all(t.state is S.SUCCEEDED or stopped_by_group(t.snap) for t in self._tasks.values())
            outcome = ended_outcome((t.state for t in self._tasks.values()), ok)
            detail = outcome + " " + " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
            if self._paused:  # everything ended while paused (cancelled): a later re-run must not be held
                self._paused = False
                self._run_event("resumed")
            self._run_event("finished", detail)
            self._done.set()

    def _set(self, t: _Task, new: TaskState, announce: bool = True, **fields: Any) -> None:
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
        if new is not old and new not in _HOLDING and t.snap.name in self._requests:
            self._release(t)

    def _announce(self, t: _Task) -> None:
        """Deliver the transition `_set(announce=False)` kept back, with the snapshot as it is now."""
        self._seq += 1
        self._outbox.append(TaskEvent(self._seq, t.snap.changed_at, t.unannounced, t.snap))
        t.unannounced = None

    def _run_event(self, kind: str, detail: str = "") -> None:
        self._seq += 1
        self._outbox.append(RunEvent(self._seq, self.clock(), kind, detail))

    def _flush(self, keep: bool = False) -> tuple[str, int] | None:
        """Submit the tasks that became ready, then deliver queued events in order. Called after every change, never
        with the scheduler lock held. With keep=True (a pool thread whose attempt just ended) the first ready task
        is returned instead of submitted when no older work waits for a thread, for the caller to run itself.

        It takes no scheduler lock either: events enter the outbox in order under that lock, and only the thread
        holding the delivery lock takes them out (deque appends and pops are atomic), so a pool thread that just
        changed a task never waits here for another thread's bookkeeping."""
        kept = None
        ready = self._ready
        while ready:
            try:
                item = ready.popleft()
            except IndexError:  # another thread took the last one
                break
            if keep and kept is None and self._pool.idle():
                kept = item
            else:
                self._pool.submit(self._work, *item)
        outbox = self._outbox
        while outbox:
            if not self._deliver_lock.acquire(blocking=False):
                return kept  # the thread holding it delivers our events too (it re-checks after releasing)
            try:
                while outbox:
                    batch = []
                    try:
                        while True:
                            batch.append(outbox.popleft())
                    except IndexError:
                        pass
                    for observer, batches in self._observers:
                        if batches:
                            try:
                                observer(batch)
                            except Exception:
                                _log_exception("observer %r failed on %d events", observer, len(batch))
                            continue
                        for event in batch:
                            try:
                                observer(event)
                            except Exception:
                                _log_exception("observer %r failed on %r", observer, event)
            finally:
                self._deliver_lock.release()
            # Loop: events another thread queued while we held the delivery lock are ours to deliver.
        return kept
