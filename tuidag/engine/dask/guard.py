"""What tuidag installs on a Dask cluster so that an attempt runs once and nothing it started outlives it on any host,
whatever happens to the worker, the scheduler or the client (registered by every `DaskExecutor`, kept by the cluster
for the workers that join later):

- `AttemptsRunOnce`, a scheduler plugin. Dask runs a task again when the worker running it dies (up to
  `distributed.scheduler.allowed-failures` times) or leaves, and computes a finished task again when the worker holding
  its value is lost. A tuidag attempt must never run twice behind tuidag's back (its own `retries` decide what runs
  next), so for tuidag's keys only (other clients' tasks keep the cluster's settings): the first unexpected loss of the
  worker running it fails the task at once (`KilledWorker`: the client reports `worker lost`), and any second start
  (a worker that left in an orderly way, a value lost) is refused on the worker it goes to, before it runs: the
  refusal is sent on the scheduler's stream to that worker ahead of the task itself, so it is there first.
- `HostGuard`, a worker plugin: the guard of the attempts' trees on its worker's host. Every attempt's processes carry
  its worker's tag (`TUIDAG_DASK_GUARD=pid-start time` of the worker process) in their environment. The guard
  * kills an attempt's tree when no client wants its Dask task any more (the run's client died or lost the
    scheduler: the scheduler drops its tasks as soon as their client's connection closes, or, by the plugin above,
    once the client has sent no heartbeat for `CLIENT_SILENCE` seconds) or when the worker has lost its scheduler,
    looking every `CHECK_INTERVAL`;
  * kills every tree of its worker when the worker closes (plugin teardown);
  * starts a watchdog process (`python -m tuidag.engine.dask.watchdog TOKEN`, in a session of its own) that waits on a
    pipe only the worker process holds: when the worker process dies in any way, `kill -9` included, the pipe
    closes and the watchdog SIGKILLs every process carrying the worker's tag on this host, then exits;
  * at its start, kills what dead workers of this host left (tagged with a worker process that no longer exists)
    and removes the worker's log copies of runs not written to for `output.LOG_RETENTION` seconds.
- The worker-side request handler through which the client reads an attempt's output (`output.read_output`):
  output goes from the worker to the client directly, never through the scheduler (see `output`).
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

from .watchdog import kill_tagged, start_watchdog
from .wire import KEY_PREFIX, OUTPUT_OP, REFUSE_OP, ours, topic_client

if TYPE_CHECKING:
    from distributed import Scheduler

CHECK_INTERVAL = 0.1  # seconds between the guard's looks at its attempts (a dict lookup each: cheap)
CLIENT_SILENCE = 60.0  # seconds without a heartbeat after which a tuidag client is taken for gone


class AttemptsRunOnce(SchedulerPlugin):
    """Runs in the scheduler (see the module's docstring)."""

    name = "tuidag-attempts-run-once"
    idempotent = True  # one instance per cluster, whichever client registers it first

    async def start(self, scheduler: Scheduler) -> None:
        """Async as SchedulerPlugin declares it: the scheduler awaits it as it registers the plugin, on its loop."""
        from tornado.ioloop import PeriodicCallback

        self.scheduler = scheduler
        self.started: set[str] = set()  # tuidag keys that went to a worker, until the scheduler forgets them
        self.silence = float(os.environ.get("TUIDAG_DASK_CLIENT_SILENCE") or CLIENT_SILENCE)
        check = PeriodicCallback(self._drop_silent_clients, min(5.0, self.silence / 4) * 1000)
        scheduler.periodic_callbacks["tuidag-silent-clients"] = check
        check.start()

    def _drop_silent_clients(self) -> None:
        """A tuidag client whose heartbeats stopped (a machine gone without closing its connection, a stopped
        process) is dropped after `silence` seconds, as a closed connection is at once: its tasks are released, so
        each worker's guard kills their trees; should it come back, its connection is closed and it says so."""
        now = time.time()
        owners = {topic_client(topic) for topic in _topics(self.scheduler) if topic.startswith(KEY_PREFIX)}
        for client in owners:
            state = self.scheduler.clients.get(client)
            if state is None or now - state.last_seen <= self.silence:
                continue
            comm = self.scheduler.client_comms.get(client)
            if comm is not None:
                comm.abort()
            self.scheduler.remove_client(client, stimulus_id=f"tuidag-silent-client-{now}")

    def update_graph(self, scheduler, *, keys=(), tasks=(), **kwargs) -> None:
        limit = scheduler.allowed_failures
        for key in tasks or keys:
            if ours(key):
                state = scheduler.tasks.get(key)
                if state is not None:
                    state.suspicious = max(state.suspicious, limit)  # the next unexpected loss exceeds it

    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        if not ours(key):
            return
        if finish == "processing":
            if key not in self.started:
                self.started.add(key)
                return
            state = self.scheduler.tasks.get(key)
            worker = state.processing_on if state is not None else None
            if worker is not None:  # (the task message goes out at the end of this round of transitions)
                self.scheduler.worker_send(worker.address, {"op": REFUSE_OP, "key": key})
        elif finish == "forgotten":
            self.started.discard(key)

    def log_event(self, topic: str, msg) -> None:
        """An attempt's event that comes after its client left (its guard killed it): not kept either."""
        if topic.startswith(KEY_PREFIX):
            client = topic_client(topic)
            if client not in self.scheduler.clients:
                _topics(self.scheduler).pop(topic, None)

    def remove_client(self, scheduler, client: str) -> None:
        """A client left (closed, or died): drop its runs' topics (`DaskExecutor.topic`), whose events the scheduler
        would otherwise keep for as long as it runs, even if the client could not say so itself."""
        topics = _topics(scheduler)
        for name in [name for name in topics if name.startswith(f"{KEY_PREFIX}{client}-")]:
            topics.pop(name, None)


class HostGuard(WorkerPlugin):
    """Runs in each worker (see the module's docstring)."""

    name = "tuidag-host-guard"
    idempotent = True

    def setup(self, worker) -> None:
        from tornado.ioloop import PeriodicCallback

        from . import registry
        from .output import read_output

        worker.stream_handlers[REFUSE_OP] = registry.refuse
        worker.handlers[OUTPUT_OP] = read_output
        start_watchdog()
        threading.Thread(target=_tidy_host, daemon=True, name="tuidag-dask-tidy").start()
        check = PeriodicCallback(lambda: registry.guard_check(worker), CHECK_INTERVAL * 1000)
        worker.periodic_callbacks["tuidag-guard"] = check
        check.start()

    def teardown(self, worker) -> None:
        from . import registry

        check = worker.periodic_callbacks.pop("tuidag-guard", None)
        if check is not None:
            check.stop()
        registry.kill_running(worker, "the Dask worker closed")


def _tidy_host() -> None:
    from .output import LOG_RETENTION, prune_logs, worker_log_dir

    kill_tagged(None)
    prune_logs(worker_log_dir(), LOG_RETENTION)


def forget_topic(topic: str, dask_scheduler=None) -> None:
    """Run in the scheduler by `Client.run_on_scheduler` when a run ends: drop the run's topic and its events (the
    scheduler keeps every topic, and the last events of each, for as long as it runs)."""
    _topics(dask_scheduler).pop(topic, None)


def _topics(scheduler) -> dict:
    """The scheduler's topics (`Scheduler._broker._topics`, internal: nothing when it is not there)."""
    topics = getattr(getattr(scheduler, "_broker", None), "_topics", None)
    return topics if isinstance(topics, dict) else {}
