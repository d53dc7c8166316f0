"""Attempts that travel several to a Dask task (`group_attempts`, the default on a local cluster tuidag starts): the
engine's executor tests again with groups, then what groups must keep: each attempt ends on its own, cancelling one
that is still queued inside Dask leaves the others of its group, one that fails on the worker fails alone, and a
worker lost takes each attempt of the group with it."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

import psutil
import pytest
from distributed import Client, LocalCluster

import dags
from dags import alive, finish, make_dag, start_run, wait_until
from slowness import patience

# The engine's own tests with groups (see the autouse fixture below).
from test_engine import (  # noqa: F401
    test_cancel_all_policy_kills_running_tasks,
    test_cancel_queued_task_never_starts,
    test_cancel_running_branch_kills_whole_tree,
    test_failure_skips_downstream_and_independent_branch_continues,
    test_finish_running_policy_lets_running_finish_and_cancels_the_rest,
    test_max_parallel_is_never_exceeded,
    test_output_goes_to_per_task_log_with_header,
    test_retries_then_success,
    test_states_of_a_successful_chain,
    test_timeout_kills_tree_and_fails_with_reason,
)
from tuidag.engine.dask import attempt, runner
from tuidag.engine.dask.executor import DaskExecutor
from tuidag.model.state import TaskState

pytestmark = pytest.mark.xdist_group("dask_groups")  # one worker: the module-scoped fixtures are made once


@pytest.fixture(scope="module")
def client():
    """Two in-process workers, as the engine tests' cluster of test_dask_executor."""
    with (
        LocalCluster(n_workers=2, threads_per_worker=8, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def one_thread():
    """One in-process worker with one thread: a Dask task that holds it keeps the next one queued inside Dask."""
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def queued(one_thread):
    """The one-thread cluster."""
    return one_thread


@pytest.fixture(autouse=True)
def grouped(client, monkeypatch):
    """Every `start_run` here groups attempts; the list it gives collects each group handed to Dask."""
    groups: list[attempt._Group] = []
    monkeypatch.setattr(dags, "new_executor", lambda dag: grouping(client, dag))
    real = attempt._Group.__init__

    def recorded(self, members):
        real(self, members)
        groups.append(self)

    monkeypatch.setattr(attempt._Group, "__init__", recorded)
    return groups


def grouping(client, dag) -> DaskExecutor:
    return DaskExecutor(client=client, dag_env=dag.env, group_attempts=True)


def sizes(groups) -> list[int]:
    return [len(group.members) for group in groups]


def start_together(client, dag, tmp_path):
    """`start_run` with the client's event loop busy until every task of `dag` is launched: they go to Dask in one
    batch, as attempts launched while the loop is busy with other work do."""
    executor = grouping(client, dag)
    dags.new_executor = lambda _: executor  # (the autouse fixture's monkeypatch puts new_executor back)
    release = threading.Event()
    client.loop.add_callback(release.wait, 20)
    try:
        scheduler, rec = start_run(dag, tmp_path)
        wait_until(lambda: len(executor._to_submit) == len(dag.tasks))
    finally:
        release.set()
    return scheduler, rec


@contextmanager
def thread_held(client, gate):
    """The worker's one thread busy with a Dask task of its own until `gate` exists: what tuidag hands Dask meanwhile
    waits there, queued."""

    def hold(path: str) -> None:
        deadline = time.monotonic() + 30
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)

    future = client.submit(hold, str(gate), pure=False)
    wait_until(lambda: any(client.processing().values()))
    try:
        yield
    finally:
        gate.touch()
        future.result(timeout=patience(30))


def test_each_attempt_of_a_group_ends_on_its_own(tmp_path, client, grouped):
    """Four attempts launched together travel as one Dask task: the quick ones still end (and say so) at once."""
    gate = tmp_path / "gate"
    quick = {f"quick{i}": f"echo {i}" for i in range(3)}
    dag = make_dag({**quick, "slow": f"while [ ! -e {gate} ]; do sleep 0.01; done; echo slow"}, max_parallel=4)
    scheduler, rec = start_together(client, dag, tmp_path)
    try:
        wait_until(lambda: grouped)
        assert sizes(grouped) == [4], "the attempts were not handed to Dask as one task"
        for task in quick:
            rec.wait_state(task, "SUCCEEDED")
        assert scheduler.snapshot()["slow"].state is TaskState.RUNNING
    finally:
        gate.touch()
    assert finish(scheduler) == {**{task: "SUCCEEDED" for task in quick}, "slow": "SUCCEEDED"}
    for i, task in enumerate(quick):
        assert (tmp_path / "logs" / f"{task}.log").read_bytes().endswith(f"{i}\n".encode())
    assert (tmp_path / "logs" / "slow.log").read_bytes().endswith(b"slow\n")


def test_cancelling_a_queued_attempt_of_a_group_leaves_the_others(tmp_path, queued, grouped):
    """The group waits inside Dask (the worker's thread is busy): cancelling one attempt ends it at once and it never
    starts; the group still runs the others."""
    dag = make_dag({name: f"echo ran > {tmp_path / name}" for name in ("a", "b", "c")}, max_parallel=3)
    with thread_held(queued, tmp_path / "gate"):
        scheduler, rec = start_together(queued, dag, tmp_path)
        wait_until(lambda: grouped)
        assert sizes(grouped) == [3]
        assert scheduler.cancel("a") == ["a"]
        rec.wait_state("a", "CANCELLED")
        assert not (tmp_path / "b").exists(), "the group ran before the worker's thread was free"
    assert finish(scheduler) == {"a": "CANCELLED", "b": "SUCCEEDED", "c": "SUCCEEDED"}
    assert not (tmp_path / "a").exists(), "the cancelled attempt ran with its group"


def test_cancelling_every_attempt_of_a_queued_group_cancels_its_dask_task(tmp_path, queued, grouped):
    dag = make_dag({name: f"echo ran > {tmp_path / name}" for name in ("a", "b")}, max_parallel=2)
    with thread_held(queued, tmp_path / "gate"):
        scheduler, _rec = start_together(queued, dag, tmp_path)
        wait_until(lambda: grouped)
        assert sizes(grouped) == [2]
        scheduler.cancel_all()
        assert finish(scheduler) == {"a": "CANCELLED", "b": "CANCELLED"}
        wait_until(lambda: grouped[0].future.cancelled())
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_an_attempt_that_fails_on_the_worker_fails_alone(tmp_path, queued, grouped, monkeypatch):
    """Something going wrong on the worker before an attempt could start (here: its log folder) fails that attempt
    with the reason, not the Dask task: the other attempts of the group run and end as they do."""
    real = runner._run

    def broken(spec, *args):
        if spec["task"] == "bad":
            raise OSError(28, "No space left on device")
        return real(spec, *args)

    monkeypatch.setattr(runner, "_run", broken)  # the worker runs in this process
    dag = make_dag({"bad": "true", "good": "echo fine"}, max_parallel=2)
    scheduler, _rec = start_together(queued, dag, tmp_path)
    wait_until(lambda: grouped)
    assert sizes(grouped) == [2]
    assert finish(scheduler) == {"bad": "FAILED", "good": "SUCCEEDED"}
    reason = scheduler.snapshot()["bad"].reason
    assert reason.startswith("could not run on worker ") and "No space left on device" in reason


def test_a_lost_worker_fails_every_attempt_of_its_group(tmp_path):
    """Worker processes (`processes=True`): the one running a group is killed; each of its attempts fails with
    `worker lost` and its retry runs; nothing of the dead worker's trees is left."""
    with (
        LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        pids = tmp_path / "pids"
        command = f"echo $PPID $$ >> {pids}; [ $TUIDAG_ATTEMPT = 2 ] || exec sleep 60"
        dag = make_dag({"x": {"run": command, "retries": 1}, "y": {"run": command, "retries": 1}}, max_parallel=2)
        scheduler, rec = start_together(client, dag, tmp_path)
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 4, timeout=30)
        lines = [tuple(map(int, line.split())) for line in pids.read_text().splitlines()]
        assert len({worker for worker, _ in lines}) == 1, "the two attempts ran in different Dask tasks"
        leaders = [(leader, psutil.Process(leader).create_time()) for _, leader in lines]
        os.kill(lines[0][0], signal.SIGKILL)
        for task in ("x", "y"):
            assert rec.wait_state(task, "RETRYING", timeout=20).snapshot.reason.startswith("worker lost: tcp://")
        assert finish(scheduler, 60) == {"x": "SUCCEEDED", "y": "SUCCEEDED"}
        wait_until(lambda: not any(alive(*ref) for ref in leaders), timeout=10)  # (SIGKILL takes a moment)
