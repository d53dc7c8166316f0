"""Service tasks in the scheduler (model/service.py says what a DAG declares): a service's attempt is RUNNING until its
readiness check passes, then READY, and its dependents start (`MET`, task_queue.py); it never succeeds. A running
service does not count against `max_parallel`: the pool has one more thread while it runs.

- The check runs on a thread of its own per attempt (`_watch_ready`), polling every `interval` until the service is
  ready, its attempt has ended, or `ready_timeout` has passed: then the attempt is killed (its tree, as a cancel does)
  and ends FAILED, "not ready within ...". A service without a check is ready once it has started.
- An attempt that ends while RUNNING or READY (the process exited, whatever its code) fails the service. With
  `restart: on-failure` it is RETRYING for `restart_delay`, then started again, up to `max_restarts` times: dependents
  that were waiting keep waiting (a service that is not READY does not count as met) and those running keep running
  (nothing is skipped until it FAILED for good, which applies the DAG's failure policy as any failure does). Once
  the run is stopping its services, one that exits by itself is not restarted: it FAILED, as a crash.
- Once every task that is not a service has ended, the run stops its services: each is cancelled (`kill_grace`, tree
  kill) as soon as every task that depends on it has ended, so a service outlives the services that use it. They
  end CANCELLED with reason SERVICE_STOPPED, which counts as ending well (job_group.stopped_by_group). Cancelling
  every task (`cancel_all`: a signal, `tuidag stop`, the UI's stop) stops the services in that order too, with the
  cancel's reason, while the other tasks are cancelled at once.
- Under `--watch` (`_keep_services`, set by `watch_rounds`) services stay up when a round's other tasks have ended:
  they are stopped once watch mode ends (rounds.py `end_rounds`) or everything is cancelled.

Part of `Scheduler` (scheduler.py). `_set`, `_finish_attempt` and `_service_launched` run with the lock held; the
watcher and stopper threads take it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from ..model.durations import format_duration
from ..model.service import SERVICE_STOPPED, ServiceSpec
from ..model.state import TERMINAL, TaskState
from .executor import AttemptResult, RunningAttempt
from .outbox import log_exception
from .readiness import Probe
from .task_attempts import TaskAttempts
from .task_records import S, TaskRecord
from .workers import WorkerPool


class ServiceTasks(TaskAttempts):
    """Readiness, restarts and the ordered stop of service tasks (the state is set in `_init_services`)."""

    _services: frozenset[str]
    _plain_unfinished: int  # tasks that are not services and not in a terminal state
    _services_stopped: bool
    _keep_services: bool  # watch mode is on: services stay up between rounds
    _service_change: threading.Condition
    _not_ready: dict[str, str]  # service -> why its current attempt is being killed (not ready in time)
    _extra_threads: set[str]  # services whose running attempt added a pool thread (`_service_launched`)
    _pool: WorkerPool

    if TYPE_CHECKING:  # scheduler.py

        def _cancel(self, names: list[str], reason: str) -> list[str]: ...

    def _init_services(self) -> None:
        self._services = frozenset(name for name, spec in self.dag.tasks.items() if spec.service is not None)
        self._plain_unfinished = sum(
            not t.state.terminal for name, t in self._tasks.items() if name not in self._services
        )
        self._services_stopped = False
        self._keep_services = False
        self._service_change = threading.Condition(self._lock)
        self._not_ready = {}
        self._extra_threads = set()

    # ------------------------------------------------------------------------------------------- state moves
    def _set(self, t: TaskRecord, new: TaskState, announce: bool = True, **fields: Any) -> None:
        old = t.state
        super()._set(t, new, announce, **fields)
        if not self._services or new is old:
            return
        if new in TERMINAL and self._services_stopped:  # a user of a service being stopped ended
            self._service_change.notify_all()
        name = t.snap.name
        if name in self._services:
            return
        self._plain_unfinished += (old in TERMINAL) - (new in TERMINAL)
        if self._plain_unfinished == 0 and new in TERMINAL:
            if self._keep_services:  # watch mode: the round is over, the services stay up
                self._round_settled()
            self._stop_services()

    def _round_settled(self) -> None:
        """Under --watch a round's tasks have all ended and its services stay up, so the run is not finished: say so
        as `finished` says it of a round without services (a `settled` run event: `round K=V ... up=N`, the other
        tasks' states and how many services are up)."""
        counts: dict[str, int] = {}
        for name, t in self._tasks.items():
            if name not in self._services:
                counts[t.state.value] = counts.get(t.state.value, 0) + 1
        up = sum(self._tasks[name].state in (S.RUNNING, S.READY) for name in self._services)
        self._run_event("settled", " ".join(["round", *(f"{k}={v}" for k, v in sorted(counts.items())), f"up={up}"]))

    def _stop_services(self, reason: str = SERVICE_STOPPED, force: bool = False) -> None:
        """Every task that is not a service has ended, or (`force`) every task is being cancelled, with the lock held:
        stop the services, each once the tasks that depend on it have ended. Without `force`, a run of services alone
        (the DAG's, or its targets) runs until it is cancelled, and under --watch they stay up."""
        if self._services_stopped:
            return
        if not force and (
            self._keep_services
            or all(name in self._services or t.state is S.UNTARGETED for name, t in self._tasks.items())
        ):
            return
        self._services_stopped = True
        for name in self._services:
            if self._tasks[name].state in TERMINAL:
                continue
            users = self.dag.descendants(name)
            args = (name, users, reason)
            threading.Thread(target=self._stop_service, args=args, name="tuidag-stop", daemon=True).start()

    def _stop_service(self, name: str, users: list[str], reason: str) -> None:
        """On a thread of its own: wait for the tasks that depend on `name` to end, then stop it."""
        with self._lock:
            self._service_change.wait_for(lambda: all(self._tasks[u].state in TERMINAL for u in users))
        self._cancel([name], reason)

    # ------------------------------------------------------------------------------------------- attempts
    def _service_launched(self, t: TaskRecord, generation: int, number: int, running: RunningAttempt) -> None:
        """A service's attempt has started (lock held): ready at once without a check, else a watcher polls it."""
        spec = self.dag.tasks[t.snap.name]
        assert spec.service is not None
        # A service holds its pool thread until the run ends: the pool gets one more meanwhile, or services as many as
        # max_parallel would leave no thread for the tasks they serve (and the run would wait forever).
        self._extra_threads.add(spec.name)
        self._pool.resize(self._pool.size + 1)
        check = spec.service.ready_when
        if check is None:
            if t.state is S.RUNNING:
                self._became_ready(t, "started")
            return
        probe = Probe(
            check,
            log_path=t.snap.log_path or "",
            log_start=t.snap.log_start or 0,
            shell=spec.shell,
            workdir=spec.workdir or self.dag.workdir,
            # the attempt's tags: a probe still running when the service is stopped is ended with its tree
            env={**self._base_env, **spec.env, "TUIDAG_TASK": spec.name, "TUIDAG_ATTEMPT": str(number)},
        )
        args = (t, generation, number, running, probe, spec.service)
        threading.Thread(target=self._watch_ready, args=args, name="tuidag-ready", daemon=True).start()

    def _watch_ready(
        self, t: TaskRecord, generation: int, number: int, running: RunningAttempt, probe: Probe, service: ServiceSpec
    ) -> None:
        started = time.monotonic()
        deadline = started + service.ready_timeout
        wake = threading.Event()
        while True:
            with self._lock:
                if t.generation != generation or t.snap.attempt != number or t.state is not S.RUNNING:
                    return  # it ended, was stopped or re-run meanwhile
            try:
                ready = probe.ready(deadline - time.monotonic())
            except Exception:  # a probe's bug must not leave the service waiting forever: it fails it below
                log_exception("readiness check of %s failed", t.snap.name)
                ready = False
            now = time.monotonic()
            with self._lock:
                if t.generation != generation or t.snap.attempt != number or t.state is not S.RUNNING:
                    return
                if ready:
                    self._became_ready(t, f"{probe.check.describe()}, {format_duration(now - started)}")
                elif now >= deadline:
                    self._not_ready[t.snap.name] = (
                        f"not ready within {format_duration(service.ready_timeout)} ({probe.check.describe()})"
                    )
            self._flush()
            if ready:
                return
            if now >= deadline:
                running.kill()
                return
            wake.wait(min(probe.check.interval, max(0.0, deadline - now)))

    def _became_ready(self, t: TaskRecord, how: str) -> None:
        self._set(t, S.READY, reason=how)
        self._children_ready(t.snap.name)

    def _finish_attempt(self, t: TaskRecord, result: AttemptResult) -> None:
        name = t.snap.name
        spec = self.dag.tasks[name]
        if name in self._extra_threads:  # its thread is free again: the pool's size is back to what it was
            self._extra_threads.discard(name)
            self._pool.resize(self._pool.size - 1)
        if spec.service is None or t.state is S.CANCELLING:
            self._not_ready.pop(name, None)
            super()._finish_attempt(t, result)
            return
        reason = self._not_ready.pop(name, None)
        if reason is None:
            code = "" if result.exit_code is None else f" with code {result.exit_code}"
            reason = f"service exited{code}" + ("" if result.ok else f" ({result.reason})" if result.reason else "")
        restarts = t.snap.attempt - t.attempts_before - 1
        service = spec.service
        if service.restart and restarts < service.max_restarts and not (self._stopping or self._services_stopped):
            self._set(
                t,
                S.RETRYING,
                reason=f"{reason}: restart {restarts + 1} of {service.max_restarts}",
                exit_code=result.exit_code,
            )
            self._schedule_retry(t, service.restart_delay)
        else:
            self._set(t, S.FAILED, reason=reason, exit_code=result.exit_code, finished_at=self.clock())
            self._apply_failure_policy(name)
        self._check_done()
