"""One attempt of one task on a pool thread, from launch to its end: what the executor is given, RUNNING announced
once the leader's pid is known, a cancel that arrives while launching, no space for the log, where a remote attempt
runs, and the end: success (its dependents become ready), a retry after `retry_delay`, or a failure and the DAG's
failure policy.

Part of `Scheduler` (scheduler.py). `_work` and `_attempt` run on pool threads with no lock held and take the
scheduler lock around each change, never while the executor launches or waits; so do the executor's callbacks
(`_waiting`, `_started_on`) and `_log_full`/`_step_log_full`. `_finish_attempt`, `_schedule_retry` and
`_apply_failure_policy` run with the lock held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..model.freshness import FAIL, RESTORE, RUN, UP_TO_DATE, Verdict
from ..model.matrix import with_group_results
from ..model.spec import RUN_ID_PLACEHOLDER, FailurePolicy, TaskSpec
from .events import TaskEvent, TaskSnapshot
from .executor import Attempt, AttemptResult, LogFull, RunningAttempt, TaskEnvironment
from .log_headers import LogHeaders
from .outbox import log_exception
from .task_queue import TaskQueue
from .task_records import WAITING, S, TaskRecord


class _LeaderFields(TypedDict, total=False):
    """TaskSnapshot fields known once an attempt is launched."""

    log_start: int | None
    pid: int
    create_time: float | None


class _PlacedFields(TypedDict, total=False):
    """TaskSnapshot fields a remote attempt's placement changes."""

    worker: str
    slots: str


class Freshness(Protocol):
    """What the scheduler asks before a task's attempt and tells after one succeeded (store/freshness.py)."""

    def decide(self, name: str) -> Verdict: ...
    def value(self, verdict: Verdict) -> Any: ...
    def succeeded(self, name: str, log_path: str | None, value: Any = None) -> str | None: ...
    def close(self) -> None: ...


class TaskAttempts(TaskQueue):
    """Attempts and their ends (the state is set in `Scheduler.__init__`)."""

    freshness: Freshness | None
    run_id: str
    kill_grace: float
    log_headers: LogHeaders
    _base_env: dict[str, str]
    on_log_full: Callable[[OSError], None] | None

    if TYPE_CHECKING:  # scheduler.py

        def stop(self, reason: str) -> list[str]: ...
        def _stop_starting(self, reason: str) -> list[str]: ...

        # services.py
        def _service_launched(self, t: TaskRecord, generation: int, number: int, running: RunningAttempt) -> None: ...

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
                log_exception("engine error while running %s", name)
                with self._lock:
                    t = self._tasks[name]
                    if t.generation == generation and t.state.active:
                        t.running = None
                        self._finish_attempt(t, AttemptResult(False, None, "internal error (see tuidag's log)"))
                self._flush()
                item = None

    def _attempt(self, name: str, generation: int) -> tuple[str, int] | None:
        """One attempt; returns a ready task for this thread to run next (see `_work`)."""
        verdict = None
        if self.freshness is not None:
            verdict = self._check_freshness(name, generation)
            if verdict is None:
                return self._flush(keep=True)
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
            self._set(
                t,
                S.RUNNING,
                announce=False,
                attempt=number,
                started_at=t.snap.started_at or now,
                pid=None,
                create_time=None,
                reason=t.why,
                exit_code=None,
                worker=None,
                log_start=None,
            )
            results = {d: self._results.get(d) for d in spec.depends_on} if spec.func is not None else {}
            if results and self.dag.groups:  # a matrix's results also as one mapping keyed by its values
                results = with_group_results(self.dag.tasks, self.dag.groups, spec.depends_on, results)
            slot_env = self._slot_env(spec, t.held)
        attempt = Attempt(
            run_id=self.run_id,
            task=spec,
            number=number,
            env=TaskEnvironment(
                self._base_env,
                {**spec.env, **self._run_env(spec), **slot_env, "TUIDAG_TASK": name, "TUIDAG_ATTEMPT": str(number)},
            ),
            workdir=spec.workdir or self.dag.workdir,
            log_path=t.snap.log_path,
            log_headers=self.log_headers,
            timeout=spec.timeout,
            kill_grace=self.kill_grace,
            results=results,
            on_worker=lambda worker, slots=None, started=None, ending=False: self._started_on(
                t, generation, number, worker, slots, started if first else None, ending
            ),
            on_waiting=lambda: self._waiting(t, generation, number),
        )
        try:
            if verdict is not None and verdict.action == FAIL:  # an input is missing: nothing to run it on
                raise _NotStarted(verdict.reason)
            running = self.executor.launch(attempt)
        except _NotStarted as exc:
            result = AttemptResult(False, None, str(exc))
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
                    known: _LeaderFields = {"log_start": log_start}
                    if running.pid is not None:
                        known["pid"] = running.pid
                        known["create_time"] = running.create_time
                    if t.unannounced is not None:
                        t.snap = t.snap.evolve(**known)
                    else:  # a cancel announced RUNNING already: the pid comes as an update
                        self._set(t, t.state, **known)
                if t.unannounced is not None and not self.executor.starts_later:
                    self._announce(t)
                if spec.service is not None and not kill_now:
                    self._service_launched(t, generation, number, running)
            self._flush()
            if kill_now:
                running.kill()
            try:
                result = running.wait()
            except LogFull as exc:  # its setup ran, but there is no room to start its next step
                result = self._step_log_full(t, exc)
            if result.ok and self.freshness is not None:  # a declared output it did not make fails it
                problem = self.freshness.succeeded(name, attempt.log_path, result.value)
                if problem is not None:
                    result = result._replace(ok=False, reason=problem)
        with self._lock:
            t.running = None
            self._finish_attempt(t, result)
        return self._flush(keep=True)

    def _check_freshness(self, name: str, generation: int) -> Verdict | None:
        """Whether the task needs to run, decided now that its dependencies have ended (outside the lock: it hashes
        files). An up-to-date task (its outputs restored if need be) ends UP_TO_DATE here and its dependents become
        ready: None. Otherwise the verdict, its reason kept as why the task runs (a FAIL one: why it can't)."""
        with self._lock:
            t = self._tasks[name]
            if t.generation != generation or t.state not in (S.QUEUED, S.RETRYING) or self._stopping or self._paused:
                return Verdict(RUN, "")  # `_attempt` sees why not, as without a check
        assert self.freshness is not None
        verdict = self.freshness.decide(name)
        with self._lock:
            if t.generation != generation or t.state not in (S.QUEUED, S.RETRYING) or self._stopping:
                return Verdict(RUN, "")
            if verdict.action in (UP_TO_DATE, RESTORE) and t.state is S.QUEUED:
                value = self.freshness.value(verdict)
                self._results[name] = value
                reason = verdict.reason if verdict.action == UP_TO_DATE else f"{verdict.reason} (run {verdict.run_id})"
                self._set(t, S.UP_TO_DATE, reason=reason, finished_at=self.clock(), value=value)
                self._children_ready(name)
                self._check_done()
                return None
            if verdict.action == RUN and t.state is S.QUEUED:
                # A watch round's task says the round first: "gen 2: a.txt changed (it declares no outputs)".
                joined = f"{t.round_why} ({verdict.reason})" if t.round_why and verdict.reason else None
                t.why = joined or t.round_why or verdict.reason or None
        return verdict

    def _children_ready(self, name: str) -> None:
        if not self._stopping:
            for child in self.dag.children[name]:
                ct = self._tasks[child]
                if ct.state is S.PENDING and self._deps_succeeded(child):
                    self._enqueue(ct)

    def _log_full(self, t: TaskRecord, before: TaskSnapshot, exc: LogFull) -> tuple[str, int] | None:
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

    def _step_log_full(self, t: TaskRecord, exc: LogFull) -> AttemptResult:
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

    def _waiting(self, t: TaskRecord, generation: int, number: int) -> None:
        """The executor says attempt `number` still waits for a worker (`Executor.starts_later`): QUEUED says so,
        with why (an update event; it holds its slot meanwhile)."""
        with self._lock:
            if t.generation != generation or t.snap.attempt != number or t.unannounced is not S.QUEUED:
                return
            self._seq += 1
            self._outbox.append(
                TaskEvent(
                    self._seq,
                    self.clock(),
                    S.QUEUED,
                    t.snap.evolve(state=S.QUEUED, reason=self.executor.waiting_reason),
                )
            )
        self._flush()

    def _started_on(
        self,
        t: TaskRecord,
        generation: int,
        number: int,
        worker: str,
        slots: str | None,
        started: float | None = None,
        ending: bool = False,
    ) -> None:
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
                fields: _PlacedFields = {"worker": worker}
                if slots:
                    fields["slots"] = slots
                self._set(t, t.state, **fields)
        if not ending:
            self._flush()

    def _run_env(self, spec: TaskSpec) -> dict[str, str]:
        return {key: value.replace(RUN_ID_PLACEHOLDER, self.run_id) for key, value in spec.run_env.items()}

    def _finish_attempt(self, t: TaskRecord, result: AttemptResult) -> None:
        name = t.snap.name
        now = self.clock()
        spec = self.dag.tasks[name]
        if result.worker != t.snap.worker:  # the Dask worker that ran it, named in the attempt's last event
            t.snap = t.snap.evolve(worker=result.worker)
        if t.state is S.CANCELLING:
            self._set(t, S.CANCELLED, reason=t.cancel_reason, exit_code=result.exit_code, finished_at=now)
        elif result.ok:
            self._results[name] = result.value
            self._set(t, S.SUCCEEDED, exit_code=result.exit_code, finished_at=now, reason=t.why, value=result.value)
            self._children_ready(name)
        elif t.snap.attempt - t.attempts_before <= spec.retries and not self._stopping:
            self._set(t, S.RETRYING, reason=result.reason, exit_code=result.exit_code)
            self._schedule_retry(t, spec.retry_delay)
        else:
            self._set(t, S.FAILED, reason=result.reason, exit_code=result.exit_code, finished_at=now)
            self._apply_failure_policy(name)
        self._check_done()

    def _schedule_retry(self, t: TaskRecord, delay: float) -> None:
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
            if dt.state in WAITING:
                self._drop_pending_work(dt)
                self._set(dt, S.SKIPPED, reason=f"upstream '{failed}' failed", finished_at=now)
        policy = self.dag.on_failure
        if policy is not FailurePolicy.SKIP_DOWNSTREAM:
            self._stop_starting(f"run stopped: '{failed}' failed ({policy})")


class _NotStarted(Exception):
    """An attempt that is not launched, with why (an input is missing)."""
