"""The Dask executor: each attempt runs on a worker inside a Dask task (`runner.run_attempts`; on a local
cluster, attempts launched together share one, see `DaskExecutor._submit_batch`); the scheduler, states, policies,
journal and views are the same as for a local run.

Imported only when a run asks for Dask (`--executor dask...`, `executor:` in the file): `distributed` takes about a
second to import, which a plain run must not pay.

What Dask does and does not do for us:
- A future's `cancel()` stops a task that has not started, and returns True for a running one without stopping it.
  So a running attempt is stopped on its worker (`Client.run(cancel_key, ...)`, which starts the tree kill there),
  and `wait()` returns when the worker says the tree is gone (its end event), never on the future's word alone.
- Output is read from the worker directly (`output.read_output`) and appended to the run's local log file as
  it comes, so everything that reads local logs works unchanged. Only small events (an attempt started, an attempt
  ended and how much output it wrote) travel through the scheduler, on one topic per executor
  (`Worker.log_event` -> `Client.subscribe_topic`); the scheduler stores a topic's events for as long as it runs,
  so the topic is dropped there when the executor closes.
- Resource slots: a task's `resources` are asked of Dask too (`submit(resources=...)`), so only a worker that
  advertises them runs it. tuidag's own slots still decide when a task may start and which slot numbers it holds (the
  cluster-wide limit); Dask only picks a worker that has what the task asks for. A task no worker can run waits in
  tuidag, QUEUED with the reason (`waiting: no Dask worker has gpu=2`), not inside Dask where nothing would say why
  (`placement_problem`); it is tried again when workers join or leave (the scheduler's `all` topic) and every
  `RECHECK_INTERVAL` while anything waits (a worker's resources can change without either).
- A worker that dies mid-attempt: the attempt fails with `worker lost: ADDRESS` (tuidag's retries apply), from the
  scheduler's `remove-worker` event (which lists the tasks the worker was running) or the task's `KilledWorker`.
  Dask never runs the attempt again itself (`guard.AttemptsRunOnce`), and what the attempt left on the lost
  worker's host is killed there (`guard.HostGuard`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ...model.resources import requests
from ...model.spec import TaskSpec
from ..executor import Attempt, Executor, RunningAttempt
from .attempt import DaskAttempt, _Group
from .cluster import CONNECT_TIMEOUT, close_local, connect, prepare, quiet_dask_logs, start_local
from .wire import name_to_show, new_topic

RECHECK_INTERVAL = 1.0  # seconds between looks at the workers' resources while a task waits for a worker
GATHER_SUBMISSIONS = 0.001  # seconds a submission waits for others while attempts run (see DaskExecutor.submit)


def dask_resources(attempt: Attempt) -> dict[str, int] | None:
    """The Dask worker resources an attempt asks for (`Client.submit(resources=...)`): its resource slots, so that
    only a worker that advertises them runs it. None when it asks for none (any worker)."""
    return requests(attempt.task) if attempt.task.resources else None


def placement_problem(task: TaskSpec, workers: list[dict[str, float]]) -> str | None:
    """Why none of `workers` (the resources each advertises) can run `task`, or None."""
    if not workers:
        return "waiting: no Dask worker"
    if not task.resources:
        return None
    wanted = requests(task)
    if any(all(advertised.get(kind, 0) >= count for kind, count in wanted.items()) for advertised in workers):
        return None
    return "waiting: no Dask worker has " + ", ".join(f"{kind}={count}" for kind, count in wanted.items())


class DaskExecutor(Executor):
    """Attempts on a Dask cluster: an existing one (`address`), a `LocalCluster` started here and closed by `close()`
    (`local_workers`), or a client the caller owns (`client`, for tests sharing one cluster).

    A local cluster's workers each advertise the DAG's whole capacities (`resources`), not a share of them: they run
    on this machine, so slot number i is the same device whichever worker runs the task, and tuidag's slots (which
    hand out the numbers in TUIDAG_SLOTS_<KIND> and CUDA_VISIBLE_DEVICES) already keep the total within the capacity.
    Split capacities would make Dask refuse a request that fits the machine (2 GPUs asked, 1 per worker) and let the
    worker Dask picks disagree with the slot numbers tuidag gave. On an existing cluster the workers advertise what
    they have (`dask worker --resources gpu=2`); tuidag's capacities then cap the cluster-wide total, and each worker
    numbers a task's slots within its own (TUIDAG_SLOTS_<KIND>, CUDA_VISIBLE_DEVICES: the devices of the machine the
    task runs on), reported back with the worker's name so the views and the journal show the numbers the task got."""

    starts_later = True  # an attempt waits in the cluster's queue until a worker thread is free
    waiting_reason = "waiting for a Dask worker"
    parallelism_source = "the Dask cluster's worker threads"

    def __init__(
        self,
        address: str | None = None,
        *,
        local_workers: int | None = None,
        processes: bool = True,
        dag_env: Mapping[str, str] | None = None,
        client: Any = None,
        resources: Mapping[str, int] | None = None,
        workers_number_slots: bool | None = None,
        group_attempts: bool | None = None,
        timeout: float = CONNECT_TIMEOUT,
    ):
        self.dag_env = dict(dag_env or {})
        self._cluster = None
        # Whether workers number slots themselves (their own devices; see runner): by default on a cluster given
        # by its address, whose workers are other machines.
        self.workers_number_slots = address is not None if workers_number_slots is None else workers_number_slots
        self._own_client = client is None
        if client is None:
            quiet_dask_logs()
            if address is None:
                self._cluster, client = start_local(local_workers, processes, resources)
            else:
                client = connect(address, timeout)
        self.client = client
        prepare(client)
        # Several attempts to a Dask task (`_submit_batch`): by default on a local cluster started here.
        self.group_attempts = self._cluster is not None if group_attempts is None else group_attempts
        self.address = self._cluster.scheduler_address if self._cluster is not None else client.scheduler.address
        self.description = (
            f"dask-local:{len(self._cluster.workers)}" if self._cluster is not None else f"dask {self.address}"
        )
        self.topic = new_topic(client.id)
        self._lock = threading.Lock()
        self._attempts: dict[str, DaskAttempt] = {}  # attempt key -> attempt, while it runs
        self._groups: dict[str, _Group] = {}  # Dask key -> its attempts, until each has ended
        self._runs: set[str] = set()  # run ids of the attempts launched
        self._to_submit: list[tuple[DaskAttempt, bytes]] = []  # launched, not yet handed to Dask (`submit`)
        self._submit_lock = threading.Lock()
        self._submit_due = False  # `_submit_queued` is on its way to the event loop
        self._closed = False
        client.subscribe_topic(self.topic, self._on_event)
        self._workers: list[dict[str, float]] = []
        self._threads = 0  # the workers' threads, all together
        self.names: dict[str, str] = {}  # worker address -> its name as the views show it (kept after it left)
        self._parallelism_changed: Callable[[int], None] | None = None
        # The default max_parallel follows the worker threads of a cluster given by its address (a local cluster's
        # workers have threads to spare: the CPU count is the default there).
        self._follows_threads = address is not None
        self._workers = self._advertised()  # what each worker advertises, for placement_problem
        self._recheck: Callable[[], None] | None = None
        self._waiting = False  # a task waits for a worker: look again every RECHECK_INTERVAL
        self._look_again = threading.Event()
        client.subscribe_topic("all", self._on_cluster_event)
        self._watcher = threading.Thread(target=self._watch_workers, daemon=True, name="tuidag-dask-workers")
        self._watcher.start()

    # --- which workers can run what (see the module's docstring) --------------------------------------------------
    def placement_problem(self, task: TaskSpec) -> str | None:
        problem = placement_problem(task, self._workers)
        if problem is not None and not self._waiting:
            self._waiting = True
            if threading.current_thread() is not self._watcher:  # (the watcher's own re-check: the list is fresh)
                self._look_again.set()  # the list may be older than the worker that would do
        return problem

    def watch_placement(self, recheck: Callable[[], None]) -> None:
        self._recheck = recheck

    def _advertised(self) -> list[dict[str, float]]:
        """The resources of each worker the scheduler knows (one request to it); their threads, all together, into
        `_threads` (max_parallel follows them: `watch_parallelism`)."""
        if self.client.status != "running":
            return self._workers
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except Exception:
            return self._workers
        self.names.update(
            (address, name_to_show(worker.get("name"), address)) for address, worker in info.get("workers", {}).items()
        )
        workers = info.get("workers", {}).values()
        threads = sum(int(worker.get("nthreads") or 0) for worker in workers)
        if threads != self._threads:
            self._threads = threads
            if threads and self._parallelism_changed is not None:
                self._parallelism_changed(threads)
        return [dict(worker.get("resources") or {}) for worker in workers]

    def parallelism(self) -> int | None:
        return self._threads or None if self._follows_threads else None

    def watch_parallelism(self, changed: Callable[[int], None]) -> None:
        self._parallelism_changed = changed

    def _on_cluster_event(self, event: tuple[float, dict]) -> None:
        """On the client's event loop: a worker joined or left (look from the watcher thread: never block the loop).
        The attempts a worker that left was running are lost with it, whether or not it had said it ran them."""
        message = event[1]
        if not isinstance(message, dict) or message.get("action") not in ("add-worker", "remove-worker"):
            return
        self._look_again.set()
        if message["action"] == "remove-worker":
            for key in message.get("processing-tasks") or ():
                with self._lock:
                    task = self._groups.get(key)
                for running in task.members if task is not None else ():
                    running.worker_lost(str(message.get("worker")))

    def _watch_workers(self) -> None:
        while not self._closed:
            self._look_again.wait(RECHECK_INTERVAL if self._waiting else None)
            self._look_again.clear()
            if self._closed:
                return
            self._workers = self._advertised()
            if self._waiting and self._recheck is not None:
                self._waiting = False  # set again by placement_problem for what still finds no worker
                self._recheck()

    def launch(self, attempt: Attempt) -> RunningAttempt:
        self._runs.add(attempt.run_id)
        return DaskAttempt(self, attempt)

    def submit(self, attempt: DaskAttempt, packed: bytes) -> None:
        """Hand an attempt to Dask on the client's event loop, together with those launched until the loop gets to
        it: one message to the scheduler (one `update_graph`) for them all, not one each, as what the scheduler does
        per message is much of what a quick task costs it. Submitting from a pool thread went through the loop
        anyway (the client sends from there), and batched nothing: pool threads launch one at a time.

        While other attempts run, a submission waits GATHER_SUBMISSIONS for more: the ends that arrive together
        (one message from the scheduler) wake their pool threads one after the other, and the attempts they launch
        then travel together, in one `update_graph` and one Dask task (`_Group`). A lone attempt (a chain) goes at
        once: nothing would join it."""
        with self._submit_lock:
            self._to_submit.append((attempt, packed))
            if self._submit_due:
                return
            self._submit_due = True
            others = len(self._attempts) > len(self._to_submit)  # (a hint: read without the attempts' lock)
        loop = self.client.loop
        if others:
            loop.add_callback(loop.call_later, GATHER_SUBMISSIONS, self._submit_queued)
        else:
            loop.add_callback(self._submit_queued)

    def _submit_queued(self) -> None:
        with self._submit_lock:
            batch, self._to_submit, self._submit_due = self._to_submit, [], False
        self._submit_batch(batch)

    def _submit_batch(self, batch: list[tuple[DaskAttempt, bytes]]) -> None:
        """One `map` per set of resources asked for. On a local cluster (`group_attempts`), attempts that ask for
        no resource and run no callable travel together as one Dask task (`_Group`): their processes run on this
        machine whichever worker starts them, and what Dask spends per task (a state machine on
        the scheduler and on the worker, messages both ways, a release) was most of what a quick attempt cost.
        Elsewhere each attempt is a Dask task of its own, so that Dask places each one."""
        from .runner import run_attempts

        groups: dict[tuple, list[list[tuple[DaskAttempt, bytes]]]] = {}
        together: list[tuple[DaskAttempt, bytes]] = []
        for item in batch:
            resources = dask_resources(item[0].attempt)
            if self.group_attempts and resources is None and item[0].attempt.task.func is None:
                together.append(item)
            else:
                groups.setdefault(tuple(resources.items()) if resources else (), []).append([item])
        if together:
            groups.setdefault((), []).append(together)
        for kinds, items in groups.items():
            carriers = [_Group(members) for members in items]
            try:
                futures = self.client.map(
                    run_attempts,
                    [group.packs for group in carriers],
                    key=[group.key for group in carriers],
                    pure=False,
                    resources=dict(kinds) or None,
                )
            except Exception as exc:
                for group in carriers:
                    for attempt in group.members:
                        attempt.not_submitted(exc)
                continue
            with self._lock:
                for group in carriers:
                    self._groups[group.key] = group
            for group, future in zip(carriers, futures):
                group.future = future
                for attempt in group.members:
                    attempt.submitted(group)

    def _on_event(self, event: tuple[float, list]) -> None:
        """On the client's event loop: route one event of a running attempt (see `wire`)."""
        kind, key, payload = event[1]
        with self._lock:
            running = self._attempts.get(key)
        if running is not None:
            running.on_event(kind, payload)

    def run_on_workers(self, function, *args: Any, workers: list[str] | None = None) -> dict[str, Any]:
        """`Client.run` that reports nothing but what the workers answered (unreachable ones are left out), and
        nothing at all while the scheduler is unreachable (the client would wait for it to come back)."""
        if self.client.status != "running":
            return {}
        try:
            return self.client.run(function, *args, workers=workers, on_error="return")
        except Exception:
            return {}

    def force_kill(self) -> int:
        """SIGKILL every process of the runs on every worker (a second Ctrl+C, or what a run left at its end)."""
        from .registry import kill_all

        found = 0
        for run_id in list(self._runs):
            answers = self.run_on_workers(kill_all, run_id)
            found += sum(n for n in answers.values() if isinstance(n, int))
        return found

    def close(self) -> None:
        """The run is over: end what its tasks left on the workers (daemons; the tree of an attempt whose worker was
        lost, on a worker that came back), stop listening, close the client and the local cluster started here."""
        if self._closed:
            return
        self._closed = True
        self._look_again.set()
        self.force_kill()
        for topic in (self.topic, "all"):
            try:
                self.client.unsubscribe_topic(topic)
            except Exception:
                pass
        if self.client.status == "running":
            from .guard import forget_topic

            try:
                self.client.run_on_scheduler(forget_topic, self.topic)
            except Exception:
                pass
        if self._own_client:
            self.client.close()
            if self._cluster is not None:
                close_local(self._cluster)
