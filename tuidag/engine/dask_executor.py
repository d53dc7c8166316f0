"""The Dask executor: each attempt runs on a worker inside a Dask task (`dask_worker.run_attempts`; on a local
cluster, attempts launched together share one, see `DaskExecutor._submit_batch`); the scheduler, states, policies,
journal and views are the same as for a local run.

Imported only when a run asks for Dask (`--executor dask...`, `executor:` in the file): `distributed` takes about a
second to import, which a plain run must not pay.

What Dask does and does not do for us:
- A future's `cancel()` stops a task that has not started, and returns True for a running one without stopping it.
  So a running attempt is stopped on its worker (`Client.run(cancel_key, ...)`, which starts the tree kill there),
  and `wait()` returns when the worker says the tree is gone (its end event), never on the future's word alone.
- Output is read from the worker directly (`dask_worker.read_output`) and appended to the run's local log file as
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
  Dask never runs the attempt again itself (`dask_guard.AttemptsRunOnce`), and what the attempt left on the lost
  worker's host is killed there (`dask_guard.HostGuard`).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Mapping

from ..model.resources import requests
from ..model.spec import TaskSpec
from .dask_attempt import DaskAttempt, _Group, worker_spec  # noqa: F401  (worker_spec: for the tests)
from .executor import Attempt, Executor, RunningAttempt
from .dask_connect import DaskUnreachable  # noqa: F401  (the CLI's name for a bad address)

INSTALL_HINT = "the Dask executor needs Dask: pip install 'tuidag[dask]' (or pip install 'dask[distributed]')"
LOCAL_THREADS_PER_WORKER = 8  # attempts a local-cluster worker runs at once (its threads mostly wait for processes)
CONNECT_TIMEOUT = 5.0  # seconds to reach a scheduler given by its address and hear it answer (--dask-timeout)
RECHECK_INTERVAL = 1.0  # seconds between looks at the workers' resources while a task waits for a worker
GATHER_SUBMISSIONS = 0.001  # seconds a submission waits for others while attempts run (see DaskExecutor.submit)


def _send_sooner(client: Any) -> None:
    """The client batches what it sends the scheduler for 10 ms (a fixed interval, not a setting): every submit
    of a chain of quick tasks waited for it. 1 ms, as a worker's own stream to its nanny uses."""
    comm = getattr(client, "scheduler_comm", None)
    if comm is not None and getattr(comm, "interval", 0) > 0.001:
        comm.interval = 0.001


def _scheduler_sends_sooner(scheduler: Any) -> None:
    """The same for a local cluster's scheduler (it runs in this process): its streams to the workers batch for 5 ms,
    to the client for 2 ms."""
    for comm in [*getattr(scheduler, "stream_comms", {}).values(), *getattr(scheduler, "client_comms", {}).values()]:
        if getattr(comm, "interval", 0) > 0.001:
            comm.interval = 0.001


def _in_process_client(cluster: Any) -> Any:
    """A client of the local cluster's scheduler, which runs in this process, through an in-process comm on the
    scheduler's own event loop: what they tell each other (every submission, every task's end, every event) is then
    handed over as it is, where TCP to themselves had each of them encode, write, read and decode it on the one
    event loop they share anyway. The workers, other processes, still use TCP."""
    from distributed import Client

    scheduler = cluster.scheduler
    cluster.sync(scheduler.listen, "inproc://")
    return Client(scheduler.listeners[-1].contact_address, loop=cluster.loop)


@contextmanager
def _signals_ignored():
    """Start worker processes that ignore SIGINT and SIGTERM (the disposition survives their exec): Ctrl+C in a
    terminal reaches the whole process group, and a worker that died of it would leave its tasks' trees running.
    tuidag handles the signal itself: it cancels every task, then closes the cluster."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _install_guards(client: Any) -> None:
    """The scheduler plugin that keeps Dask from running an attempt twice and the workers' guard of their hosts
    (`dask_guard`); the cluster keeps them, for the workers that join later too, and ignores a second registration."""
    from .dask_guard import AttemptsRunOnce, HostGuard

    client.register_plugin(AttemptsRunOnce())
    client.register_plugin(HostGuard())


def dask_missing() -> bool:
    """Dask can't be imported here (not installed, or broken)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return True
    return False


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

    def __init__(self, address: str | None = None, *, local_workers: int | None = None, processes: bool = True,
                 dag_env: Mapping[str, str] | None = None, client: Any = None,
                 resources: Mapping[str, int] | None = None, workers_number_slots: bool | None = None,
                 group_attempts: bool | None = None, timeout: float = CONNECT_TIMEOUT):
        import uuid

        import logging

        import dask
        from distributed import LocalCluster

        self.dag_env = dict(dag_env or {})
        self._cluster = None
        # Whether workers number slots themselves (their own devices; see dask_worker): by default on a cluster given
        # by its address, whose workers are other machines.
        self.workers_number_slots = address is not None if workers_number_slots is None else workers_number_slots
        self._own_client = client is None
        if client is None:
            # Dask's own log lines would land in the middle of the UI; what matters reaches the tasks' reasons.
            for name in ["distributed", *logging.root.manager.loggerDict]:
                if name.startswith("distributed"):
                    logging.getLogger(name).setLevel(logging.CRITICAL)
            if address is None:
                # What a local cluster for tuidag's tasks does without, as it costs CPU the tasks could use: the
                # workers' statistical profiler (it samples every thread every 10 ms, for a dashboard nobody looks
                # at here), work stealing (bookkeeping on every task's every transition, to move tasks between
                # workers, when tuidag only submits what can run now), memory limits (a monitor polling every
                # process 10 times a second: the tasks' own processes are not the worker's memory, and a worker
                # holds no data), and frequent health ticks and system monitoring. On Linux, worker processes are
                # forked from this one, which has Dask loaded already: a spawned one imports it again (0.6 s each,
                # two at once on two cores took a second), a forked one starts in a few hundredths. (The fork
                # happens here, before tuidag starts any thread of its own.)
                config = {"distributed.worker.multiprocessing-method": "fork"} if sys.platform == "linux" else {}
                with dask.config.set({**config, "distributed.scheduler.allowed-failures": 0,
                                      "distributed.worker.profile.enabled": False,
                                      "distributed.scheduler.work-stealing": False,
                                      "distributed.admin.tick.interval": "1s",
                                      "distributed.admin.system-monitor.interval": "5s"}), _signals_ignored():
                    self._cluster = LocalCluster(n_workers=local_workers or os.cpu_count() or 1, processes=processes,
                                                 threads_per_worker=LOCAL_THREADS_PER_WORKER,
                                                 resources=dict(resources) if resources else None, memory_limit=0,
                                                 dashboard_address=":0",  # its HTTP server starts even with None
                                                 silence_logs=logging.CRITICAL)
                client = _in_process_client(self._cluster)
                _scheduler_sends_sooner(self._cluster.scheduler)
            else:
                from .dask_connect import connect

                client = connect(address, timeout)
        self.client = client
        _install_guards(client)
        # Several attempts to a Dask task (`_submit_batch`): by default on a local cluster started here.
        self.group_attempts = self._cluster is not None if group_attempts is None else group_attempts
        _send_sooner(client)
        self.address = self._cluster.scheduler_address if self._cluster is not None else client.scheduler.address
        self.description = f"dask-local:{len(self._cluster.workers)}" if self._cluster is not None else \
            f"dask {self.address}"
        self.topic = f"tuidag-{client.id}-{uuid.uuid4().hex}"  # (the scheduler drops it when the client leaves)
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
        from .dask_worker import name_to_show

        self.names.update((address, name_to_show(worker.get("name"), address))
                          for address, worker in info.get("workers", {}).items())
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
        from .dask_worker import run_attempts

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
        for resources, items in groups.items():
            carriers = [_Group(members) for members in items]
            try:
                futures = self.client.map(run_attempts, [group.packs for group in carriers],
                                          key=[group.key for group in carriers], pure=False,
                                          resources=dict(resources) or None)
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
        """On the client's event loop: route one event of a running attempt (see `dask_worker`)."""
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
        from .dask_worker import kill_all

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
            from .dask_guard import forget_topic

            try:
                self.client.run_on_scheduler(forget_topic, self.topic)
            except Exception:
                pass
        if self._own_client:
            self.client.close()
            if self._cluster is not None:
                self._end_local_workers()
                self._cluster.close()

    def _end_local_workers(self) -> None:
        """SIGKILL the local cluster's worker processes (their nannies told not to restart them) before closing it:
        every task tree is gone and a worker holds nothing else, while each one's orderly close took 0.3-0.5 s,
        longer than all of a small run. Dask's internals (`workers`, a nanny's process): anything unexpected
        leaves the orderly close to do it all."""
        try:
            for nanny in list(self._cluster.workers.values()):
                pid = nanny.process.process.pid
                nanny.auto_restart = False
                os.kill(pid, signal.SIGKILL)
        except (AttributeError, OSError, TypeError):
            pass
