"""The Dask executor: the engine's executor tests and the resource-slot tests again with attempts on a Dask cluster (one
in-process LocalCluster shared by the module, for speed), then what only Dask has: output streamed from a worker, the
worker named while the task runs, tasks queued inside Dask, resources asked of the workers (and a request none of them
can meet), worker loss, and the tree kill on real worker processes (`processes=True`)."""

from __future__ import annotations

import io
import os
import signal

import psutil
import pytest
from distributed import Client, LocalCluster, Worker

import dags
from dags import alive, finish, make_dag, read_pids, start_run, wait_until
from slowness import patience

# The engine's own tests, run here against the Dask executor (see the autouse fixture below).
from test_engine import (  # noqa: F401
    test_cancel_all_policy_kills_running_tasks,
    test_cancel_pending_task,
    test_cancel_queued_task_never_starts,
    test_cancel_retrying_task,
    test_cancel_running_branch_kills_whole_tree,
    test_command_not_found,
    test_environment_and_stdin,
    test_failure_skips_downstream_and_independent_branch_continues,
    test_finish_running_policy_lets_running_finish_and_cancels_the_rest,
    test_leader_exits_on_term_while_children_ignore_it,
    test_leftover_background_process_is_ended_with_the_task,
    test_max_parallel_is_never_exceeded,
    test_output_goes_to_per_task_log_with_header,
    test_pause_holds_new_work_and_resume_releases_it,
    test_rerun_failed_task_and_its_skipped_descendants,
    test_retries_exhausted_fail,
    test_retries_then_success,
    test_states_of_a_successful_chain,
    test_task_killed_by_signal_reports_it,
    test_timeout_applies_retries,
    test_timeout_kills_tree_and_fails_with_reason,
)

# The slot tests too: slots never exceeded (from the times the tasks write), no head-of-line blocking, no starvation.
# (Not the one that expects a missing workdir to fail at launch: on Dask the worker finds it, see below.)
from test_slots import (  # noqa: F401
    WAIT_FOR_GO,
    slotted,
    test_a_large_request_keeps_its_place_against_later_small_ones,
    test_a_task_waiting_out_its_retry_delay_holds_no_slot,
    test_cancelling_the_waiter_ahead_lets_the_ones_behind_it_start,
    test_capacity_is_never_exceeded_and_overlapping_tasks_hold_different_slots,
    test_slot_numbers_reach_the_task_environment,
    test_slots_freed_while_paused_are_handed_out_on_resume,
    test_waiting_for_a_gpu_does_not_hold_up_a_cpu_task_behind_it,
)
from tuidag.engine.dask.executor import DaskExecutor
from tuidag.model.spec import TaskSpec
from tuidag.model.state import TaskState
from tuidag.views.headless import HeadlessReporter

pytestmark = pytest.mark.xdist_group("dask_executor")  # one worker: the module-scoped fixtures are made once

#: What the shared cluster's workers advertise: enough of every kind the slot tests ask for.
ADVERTISED = {"gpu": 4, "db": 4, "V100": 4}


@pytest.fixture(scope="module")
def client():
    """Two in-process workers (a LocalCluster of threads starts in a few hundredths of a second)."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=8, processes=False, dashboard_address=":0", resources=ADVERTISED
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture(autouse=True)
def on_dask(client, monkeypatch):
    """Every `start_run` in this module runs its attempts on the shared cluster."""
    monkeypatch.setattr(dags, "new_executor", lambda dag: DaskExecutor(client=client, dag_env=dag.env))


def log_of(tmp_path, task: str) -> bytes:
    return (tmp_path / "logs" / f"{task}.log").read_bytes()


def test_output_is_streamed_byte_exact_and_the_worker_keeps_a_copy(tmp_path, client):
    payload = bytes(range(256)) * 300  # every byte value, more than one chunk
    data = tmp_path / "data"
    data.write_bytes(payload)
    dag = make_dag({"a": f"cat {data}; printf 'no newline'"})
    scheduler, _rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "SUCCEEDED"}
    log = log_of(tmp_path, "a")
    header, _, body = log.partition(b"===\n")
    assert header.startswith(b"=== tuidag: a attempt 1 started")
    assert body == payload + b"no newline"
    worker = scheduler.snapshot()["a"].worker
    assert worker in client.scheduler_info()["workers"]
    from tuidag.engine.dask.output import worker_log_dir

    copy = (worker_log_dir() / scheduler.run_id / "a.log").read_bytes()
    assert copy.endswith(body)


def test_output_arrives_while_the_task_runs(tmp_path):
    gate = tmp_path / "gate"
    dag = make_dag({"a": f"echo first; while [ ! -e {gate} ]; do sleep 0.01; done; echo second"})
    scheduler, _rec = start_run(dag, tmp_path)
    wait_until(lambda: (tmp_path / "logs" / "a.log").exists() and b"first\n" in log_of(tmp_path, "a"))
    assert b"second" not in log_of(tmp_path, "a")
    gate.touch()
    assert finish(scheduler) == {"a": "SUCCEEDED"}
    assert log_of(tmp_path, "a").endswith(b"first\nsecond\n")


def test_the_worker_gets_its_own_environment_not_the_clients(tmp_path, monkeypatch):
    """PATH/HOME come from the worker's environment, never from the client's; the DAG's and the task's do come."""
    dag = make_dag(
        {"a": {"run": 'echo "$CLIENT_ONLY|$FROM_DAG|$FROM_TASK|$TUIDAG_TASK"', "env": {"FROM_TASK": "t"}}},
        env={"FROM_DAG": "d"},
    )
    executor = DaskExecutor(client=dags.new_executor(dag).client, dag_env=dag.env)
    monkeypatch.setattr(dags, "new_executor", lambda _: executor)
    os.environ["CLIENT_ONLY"] = "leaked"  # in the client's environment: what is sent to the worker must not carry it
    try:
        spec = executor_spec(executor, dag, tmp_path)
    finally:
        del os.environ["CLIENT_ONLY"]
    assert "CLIENT_ONLY" not in spec["env"] and "PATH" not in spec["env"] and "HOME" not in spec["env"]
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "SUCCEEDED"}
    assert log_of(tmp_path, "a").splitlines()[-1] == b"|d|t|a"


def executor_spec(executor: DaskExecutor, dag, tmp_path) -> dict:
    """What the executor would send a worker for task `a` (built as for a run, without submitting it)."""
    from tuidag.engine.dask.wire import worker_spec
    from tuidag.engine.executor import Attempt, TaskEnvironment

    env = TaskEnvironment({**os.environ, **dag.env}, {**dag.tasks["a"].env, "TUIDAG_TASK": "a"})
    attempt = Attempt("r", dag.tasks["a"], 1, env, tmp_path, str(tmp_path / "a.log"), None, 1.0)
    return worker_spec(attempt, "k", executor.topic, executor.dag_env)


def test_missing_workdir_names_the_worker_and_the_path(tmp_path):
    missing = tmp_path / "nope"
    dag = make_dag({"a": {"run": "true", "workdir": missing}})
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "FAILED"}
    snap = scheduler.snapshot()["a"]
    assert snap.reason == f"workdir {missing} does not exist on worker {snap.worker}"
    assert snap.worker.startswith("inproc://")


def test_cancel_a_task_queued_inside_dask_never_starts_it(tmp_path):
    """The one worker thread is taken by a Dask task of our own, so `waiting` sits in Dask's queue (tuidag launched
    it): it is QUEUED, saying so, not RUNNING; cancelling it cancels its future, and it never runs."""
    marker, gate = tmp_path / "ran", tmp_path / "gate"
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as one,
    ):
        blocker = one.submit(_wait_for, str(gate), pure=False)
        try:
            wait_until(
                lambda: getattr(cluster.scheduler.tasks.get(blocker.key), "state", None) == "processing", timeout=30
            )
            dags.new_executor = lambda dag: DaskExecutor(client=one, dag_env=dag.env)  # undone by monkeypatch
            scheduler, rec = start_run(make_dag({"waiting": f"touch {marker}"}), tmp_path)
            rec.wait_for(
                lambda: any(e.snapshot.reason == "waiting for a Dask worker" for e in rec.task_events("waiting")),
                timeout=30,
            )
            wait_until(lambda: len(cluster.scheduler.tasks) == 2, timeout=30)  # Dask's, behind the blocker
            assert "RUNNING" not in rec.states("waiting")
            scheduler.cancel("waiting")
            assert finish(scheduler) == {"waiting": "CANCELLED"}
        finally:
            gate.touch()
        blocker.result(timeout=patience(30))
    assert not marker.exists()
    assert log_of(tmp_path, "waiting").count(b"\n") == 1  # the header alone


def _wait_for(path: str) -> None:
    import time

    while not os.path.exists(path):
        time.sleep(0.01)


def square(ctx):
    print("squaring", ctx.results["two"])
    return ctx.results["two"] ** 2


def two():
    return 2


def test_callables_run_in_a_child_process_on_the_worker(tmp_path):
    tasks = {"two": TaskSpec("two", func=two), "sq": TaskSpec("sq", func=square, depends_on=("two",))}
    dag = make_dag({}).replace(tasks=tasks)
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"two": "SUCCEEDED", "sq": "SUCCEEDED"}
    assert scheduler.snapshot()["sq"].value == 4
    assert log_of(tmp_path, "sq").endswith(b"squaring 2\n")


def test_an_unpicklable_callable_or_result_fails_the_task_clearly(tmp_path):
    import threading

    lock = threading.Lock()
    tasks = {
        "bad_func": TaskSpec("bad_func", func=lambda: lock),  # the closure holds a lock: can't be pickled
        "bad_result": TaskSpec("bad_result", func=make_lock),
    }
    dag = make_dag({}).replace(tasks=tasks)
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"bad_func": "FAILED", "bad_result": "FAILED"}
    snaps = scheduler.snapshot()
    assert snaps["bad_func"].reason.startswith("could not start: the callable cannot be pickled for a Dask worker")
    assert snaps["bad_result"].reason.startswith("the return value cannot be pickled")


def make_lock():
    import threading

    return threading.Lock()


# --- real worker processes ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def process_cluster():
    with LocalCluster(n_workers=2, threads_per_worker=4, processes=True, dashboard_address=":0") as cluster:
        yield cluster


def test_cancel_kills_the_whole_tree_on_a_worker_process(tmp_path, process_cluster):
    """The tree (with a setsid grandchild and a child that ignores SIGTERM) runs under a worker process; cancelling
    kills every process of it there, with the SIGTERM -> SIGKILL escalation."""
    with Client(process_cluster) as client:
        dags.new_executor = lambda dag: DaskExecutor(client=client, dag_env=dag.env)
        pids = tmp_path / "pids"
        script = (
            f"echo $$ >> {pids}; setsid sh -c 'echo $$ >> {pids}; sleep 60' & "
            f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; while :; do sleep 0.1; done' & wait"
        )
        dag = make_dag({"t": script}, kill_grace=0.3)
        scheduler, _rec = start_run(dag, tmp_path)
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, timeout=30)
        refs = read_pids(pids)
        workers = set(client.run(os.getpid).values())
        assert psutil.Process(refs[0][0]).ppid() in workers  # the task runs under a worker process, not here
        scheduler.cancel("t")
        assert finish(scheduler) == {"t": "CANCELLED"}
        assert not any(alive(*r) for r in refs), "a process of the cancelled tree survived on the worker"


def test_a_worker_that_dies_fails_the_attempt_and_the_retry_runs_elsewhere(tmp_path, process_cluster):
    """As on any cluster, Dask would run the task again on another worker: tuidag learns the worker left while running
    it (even one killed before it said where the task runs, as here: at once), fails the attempt with `worker lost`,
    stops Dask's second run, and its own retry runs. What the dead worker's task left is ended with the run."""
    with Client(process_cluster) as client:
        dags.new_executor = lambda dag: DaskExecutor(client=client, dag_env=dag.env)
        pids = tmp_path / "pids"
        dag = make_dag(
            {"t": {"run": f"echo $PPID $$ >> {pids}; [ $TUIDAG_ATTEMPT = 2 ] || exec sleep 60", "retries": 1}}
        )
        scheduler, rec = start_run(dag, tmp_path)
        wait_until(lambda: pids.exists() and pids.read_text().strip(), timeout=30)
        worker, leader = map(int, pids.read_text().split())
        leader_ref = (leader, psutil.Process(leader).create_time())
        os.kill(worker, signal.SIGKILL)  # at once: maybe before the worker said the task runs there
        event = rec.wait_state("t", "RETRYING", timeout=20)
        assert event.snapshot.reason.startswith("worker lost: tcp://")
        assert finish(scheduler, 30) == {"t": "SUCCEEDED"}
        assert scheduler.snapshot()["t"].attempt == 2
        assert not alive(*leader_ref), "the lost worker's task was left running"


# --- where tasks run: resources and the worker ----------------------------------------------------------------------
def test_the_worker_is_named_as_soon_as_the_task_runs_there(tmp_path, client):
    """The task becomes RUNNING when its process starts on a worker, and that event names the worker (while the
    task still runs, not only at its end)."""
    dag = make_dag({"a": WAIT_FOR_GO}, workdir=tmp_path)
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_for(lambda: any(e.new.value == "RUNNING" and e.snapshot.worker for e in rec.task_events("a")))
    update = next(e for e in rec.task_events("a") if e.snapshot.worker)
    assert update.old is TaskState.QUEUED and update.new is TaskState.RUNNING
    assert update.snapshot.worker in client.scheduler_info()["workers"]
    assert scheduler.snapshot()["a"].state is TaskState.RUNNING
    (tmp_path / "go").touch()
    assert finish(scheduler) == {"a": "SUCCEEDED"}
    assert scheduler.snapshot()["a"].worker == update.snapshot.worker


def _start_worker(cluster: LocalCluster, resources: dict) -> Worker:
    """One more in-process worker, advertising `resources`, joining the running cluster."""

    async def start():
        return await Worker(cluster.scheduler_address, nthreads=4, resources=resources, dashboard_address=":0")

    return cluster.sync(start)


def test_a_request_no_worker_can_meet_waits_and_says_why_until_a_worker_that_can_joins(tmp_path):
    """The only worker has no GPU: the GPU task waits in tuidag (QUEUED, with the reason) while a CPU task runs; once
    a worker with two GPUs joins, every GPU task runs there, as Dask resources send them."""
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=4, processes=False, dashboard_address=":0", resources={"gpu": 1}
        ) as cluster,
        Client(cluster) as one,
    ):
        dags.new_executor = lambda dag: DaskExecutor(client=one, dag_env=dag.env)  # undone by monkeypatch
        dag = slotted(
            make_dag({"pair": "true", "single": "true", "cpu": "true", "single2": "true"}, workdir=tmp_path),
            {"pair": {"gpu": 2}, "single": {"gpu": 1}, "single2": {"gpu": 1}},
            {"gpu": 2},
        )
        scheduler, rec = start_run(dag, tmp_path)
        rec.wait_state("cpu", "SUCCEEDED")
        rec.wait_for(lambda: scheduler.snapshot()["pair"].reason == "waiting: no Dask worker has gpu=2")
        snap = scheduler.snapshot()["pair"]
        assert snap.state is TaskState.QUEUED and snap.attempt == 0 and snap.slots is None  # holds no slot meanwhile
        small = _start_worker(cluster, {"gpu": 2})
        try:
            assert finish(scheduler) == dict.fromkeys(["pair", "single", "cpu", "single2"], "SUCCEEDED")
            snaps = scheduler.snapshot()
            assert snaps["pair"].worker == small.address and snaps["pair"].reason is None
            assert "RUNNING" in rec.states("single") and snaps["cpu"].worker != small.address
        finally:
            cluster.sync(small.close)
    out = io.StringIO()  # what the headless output says of it (the events recorded, replayed to the reporter)
    reporter = HeadlessReporter(out, scheduler.log_headers, quiet=True)
    for event in rec.events:
        reporter(event)
    reporter.start(list(dag.tasks))
    reporter.stop()
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[pair]")]
    assert lines[:2] == [
        "[pair]    --> QUEUED: waiting: no Dask worker has gpu=2",
        "[pair]    --> RUNNING [slots gpu:0,1]",
    ], lines
    assert len(lines) == 3 and lines[2].startswith("[pair]    --> SUCCEEDED"), lines


def test_task_resources_are_asked_of_dask(tmp_path, client):
    """What a task sends with its Dask task: its slots as Dask resources, nothing for a task without any."""
    from tuidag.engine.dask.executor import dask_resources
    from tuidag.engine.executor import Attempt

    dag = slotted(make_dag({"g": "true", "c": "true"}), {"g": {"gpu": 2, "db": 1}}, {"gpu": 2, "db": 1})
    attempt = Attempt("r", dag.tasks["g"], 1, {}, tmp_path, str(tmp_path / "g.log"), None, 1.0)
    assert dask_resources(attempt) == {"gpu": 2, "db": 1}
    assert dask_resources(attempt._replace(task=dag.tasks["c"])) is None


def test_a_local_clusters_workers_each_advertise_the_whole_capacity():
    executor = DaskExecutor(local_workers=2, processes=False, resources={"gpu": 2, "db": 1})
    try:
        workers = executor.client.scheduler_info(n_workers=-1)["workers"].values()
        assert [w["resources"] for w in workers] == [{"gpu": 2, "db": 1}] * 2
    finally:
        executor.close()


def test_on_a_cluster_of_other_machines_each_worker_numbers_the_slots_of_its_own_devices(tmp_path):
    """Two workers with one GPU each (two machines): tuidag's two GPU slots are cluster-wide, but each task gets the
    device of the machine it runs on, GPU 0 on both, and the views and the journal say so."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0", resources={"gpu": 1}
        ) as cluster,
        Client(cluster) as both,
    ):
        dags.new_executor = lambda dag: DaskExecutor(client=both, dag_env=dag.env, workers_number_slots=True)
        show = f'echo "$TUIDAG_SLOTS_GPU $CUDA_VISIBLE_DEVICES"; {WAIT_FOR_GO}'
        dag = slotted(
            make_dag({"a": show, "b": show}, workdir=tmp_path), {"a": {"gpu": 1}, "b": {"gpu": 1}}, {"gpu": 2}
        )
        scheduler, rec = start_run(dag, tmp_path)
        rec.wait_for(lambda: all(s.worker for s in scheduler.snapshot().values()))
        running = scheduler.snapshot()
        assert running["a"].worker != running["b"].worker
        assert running["a"].slots == running["b"].slots == "gpu:0"  # not tuidag's cluster-wide gpu:0 and gpu:1
        (tmp_path / "go").touch()
        assert finish(scheduler) == {"a": "SUCCEEDED", "b": "SUCCEEDED"}
    assert [log_of(tmp_path, name).splitlines()[1] for name in ("a", "b")] == [b"0 0", b"0 0"]


def test_a_cluster_without_workers_says_so_and_runs_the_tasks_once_one_joins(tmp_path):
    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as cluster, Client(cluster) as empty:
        dags.new_executor = lambda dag: DaskExecutor(client=empty, dag_env=dag.env)  # undone by monkeypatch
        scheduler, rec = start_run(make_dag({"a": "true", "b": {"run": "true", "depends_on": ["a"]}}), tmp_path)
        rec.wait_for(lambda: scheduler.snapshot()["a"].reason == "waiting: no Dask worker")
        worker = _start_worker(cluster, {})
        try:
            assert finish(scheduler) == {"a": "SUCCEEDED", "b": "SUCCEEDED"}
            assert scheduler.snapshot()["a"].worker == worker.address
        finally:
            cluster.sync(worker.close)


def test_a_cancel_while_the_worker_starts_the_attempt_waits_for_its_tree(tmp_path, monkeypatch):
    """A cancel that reaches the worker after the attempt's processes exist but before the worker has it among its
    running attempts: the task is CANCELLED only once its tree is gone (it was reported at once, the tree still
    running). The in-process worker is held at that point until the cancel has reached it (its module state is
    this process's)."""
    from tuidag.engine.dask import registry, runner

    real_start = runner._Tail.start

    def start_later(tail):
        """The processes exist; the worker does not list the attempt as running until the cancel has reached it."""
        wait_until(lambda: registry._cancelled, timeout=20)
        real_start(tail)

    monkeypatch.setattr(runner._Tail, "start", start_later)
    pids = tmp_path / "pids"
    dag = make_dag({"t": f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; exec sleep 60' & wait"}, kill_grace=0.3)
    scheduler, rec = start_run(dag, tmp_path)
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    refs = read_pids(pids)
    scheduler.cancel("t")
    rec.wait_state("t", "CANCELLED")
    assert not any(alive(*r) for r in refs), "CANCELLED while the task's processes still ran"
    assert finish(scheduler) == {"t": "CANCELLED"}


def test_a_zombie_its_tree_leaves_to_this_process_does_not_hold_up_a_cancel(tmp_path, monkeypatch):
    """The in-process workers run attempts in this process, which adopts orphans once it is a child subreaper (as a
    tuidag, or a test session, is for good once a local run's executor made it one). A process of the tree that
    ignores SIGTERM keeps its exited child unreaped; SIGKILLed, it leaves that zombie to this process, in the
    attempt's process group. The zombie is reaped and the cancel ends with the tree, not once the SIGKILL passes
    give up on the group (`process.KILL_PASSES_DEADLINE`, put out of the wait's reach here)."""
    from tuidag.engine import orphans, process

    assert orphans.become_subreaper()
    monkeypatch.setattr(process, "KILL_PASSES_DEADLINE", 3600.0)
    pids = tmp_path / "pids"
    # `sleep 0` exits at once, and its parent, exec'd into `sleep 60`, never reaps it.
    dag = make_dag({"t": f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; sleep 0 & exec sleep 60' & wait"}, kill_grace=0.3)
    scheduler, rec = start_run(dag, tmp_path)
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    keeper = psutil.Process(int(pids.read_text()))
    wait_until(lambda: [child for child in keeper.children() if child.status() == psutil.STATUS_ZOMBIE])
    zombie = keeper.children()[0].pid
    scheduler.cancel("t")
    rec.wait_state("t", "CANCELLED")
    assert finish(scheduler) == {"t": "CANCELLED"}
    assert not psutil.pid_exists(keeper.pid) and not psutil.pid_exists(zombie), "a process of the tree is left"
