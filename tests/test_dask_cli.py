"""`tuidag run --executor dask...` as a user runs it: a local Dask cluster started and closed with the run, the
journal naming the worker, signals, and a clear exit 2 when Dask is missing or misnamed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from dags import alive, read_pids, stubborn_trees, wait_until
from slowness import patience
from test_cli import tuidag, write
from tuidag.engine import process
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli


def test_a_run_on_a_local_cluster_names_the_worker_and_streams_output(tmp_path):
    dag = write(
        tmp_path / "dag.yaml",
        """\
executor: dask-local:1
tasks:
  hello: {run: "echo hello from $TUIDAG_TASK"}
  world: {run: "printf 'world'", depends_on: hello}
""",
    )
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[hello] hello from hello" in proc.stdout and "[world] world" in proc.stdout
    assert proc.stderr == ""  # Dask's own log lines stay out of the user's terminal
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    final = [r for r in read_journal(run.journal) if r.get("type") == "task" and r["to"] == "SUCCEEDED"]
    assert len(final) == 2 and all(r["worker"].startswith("127.0.0.1:") for r in final)  # (host:port: no --name)
    live = {
        r["task"]: r["worker"]
        for r in read_journal(run.journal)
        if r.get("type") == "task" and r["from"] == "QUEUED" and r["to"] == "RUNNING" and r.get("worker")
    }
    assert live == {r["task"]: r["worker"] for r in final}  # named while it ran, by the worker that ran it
    assert replay(run.journal).tasks["world"].worker == final[-1]["worker"]
    logs = tuidag("logs", "world", "--file", str(dag), cwd=tmp_path)
    assert logs.stdout.endswith("world")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_kills_every_tree_and_closes_the_local_cluster(tmp_path, sig, code, request):
    """Sent to the whole process group, as Ctrl+C in a terminal is: the cluster's workers get it too."""
    pids = tmp_path / "pids"
    dag = write(tmp_path / "dag.yaml", "kill_grace: 500ms\ntasks:\n" + stubborn_trees(pids))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", str(dag), "--executor", "dask-local:2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    # In a session of its own, tuidag looks like a run's orphan to an OrphanReaper an engine test may have left
    # running in this process, which would take its exit status (`subprocess` then reports 0): it is a leader.
    process.LEADERS.add(proc.pid)
    request.addfinalizer(lambda: process.LEADERS.discard(proc.pid))
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, timeout=30)
    refs = read_pids(pids)
    children = psutil.Process(proc.pid).children()  # the workers; the tasks run under them
    workers = [(p.pid, p.create_time()) for p in children if "resource_tracker" not in " ".join(p.cmdline())]
    assert len(workers) == 2
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=patience(30))
    assert proc.returncode == code, out + err
    assert not any(alive(*r) for r in refs)
    assert not any(alive(*r) for r in workers), "a Dask worker process outlived the run"
    # multiprocessing's resource tracker (not a worker) ends on its own once it sees tuidag gone
    wait_until(lambda: not any(alive(p.pid, p.create_time()) for p in children if p.is_running()), timeout=5)
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    assert {n: t.state.value for n, t in replay(run.journal).tasks.items()} == {"a": "CANCELLED", "b": "CANCELLED"}
    assert json.loads(run.summary.read_text())["outcome"] == "interrupted"
    assert "Traceback" not in err


def test_without_dask_the_run_says_how_to_install_it(tmp_path):
    broken = tmp_path / "site" / "distributed"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('not installed')\n")
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a: {run: 'true'}\n")
    env = {"PYTHONPATH": f"{tmp_path / 'site'}:{os.environ.get('PYTHONPATH', '')}"}
    proc = tuidag("run", str(dag), "--executor", "dask-local", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert proc.stderr == (
        "tuidag: the Dask executor needs Dask: pip install 'tuidag[dask]' (or pip install 'dask[distributed]')\n"
    )


def test_bad_executor_choices_are_usage_errors(tmp_path):
    dag = write(tmp_path / "dag.yaml", "executor: dask\ntasks:\n  a: {run: 'true'}\n")
    proc = tuidag("run", str(dag), cwd=tmp_path, env={"DASK_SCHEDULER_ADDRESS": ""})
    assert proc.returncode == 2 and "--dask-address tcp://HOST:8786" in proc.stderr
    proc = tuidag("run", str(dag), "--executor", "dask-local:0", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "tuidag: dask-local:N needs a positive number of worker processes, got 'dask-local:0'\n"
    bad = write(tmp_path / "bad.yaml", "executor: ray\ntasks:\n  a: {run: 'true'}\n")
    proc = tuidag("validate", str(bad), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"{bad}:1:11: executor: the executor must be local, dask or dask-local[:N], got 'ray'\n")


def test_a_scheduler_that_goes_away_fails_the_running_tasks_and_its_worker_kills_their_trees(tmp_path):
    """An existing cluster (a scheduler and a worker started as a user would) whose scheduler dies mid-run: every
    running task fails, saying why, and the worker, cut off from its scheduler, kills their trees itself (its
    guard: nobody could stop them or see them end)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    scheduler = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dashboard-address",
            ":0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    address = f"tcp://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--nthreads",
            "2",
            "--no-nanny",
            "--dashboard-address",
            ":0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = tmp_path / "started"
        dag = write(
            tmp_path / "dag.yaml",
            f"tasks:\n  slow: {{run: 'echo $$ >> {started}; exec sleep 30'}}\n"
            f"  slower: {{run: 'echo $$ >> {started}; exec sleep 30'}}\n",
        )
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tuidag",
                "run",
                str(dag),
                "--executor",
                "dask",
                "--dask-address",
                address,
                "--dask-timeout",
                f"{patience(30):.0f}s",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # (the scheduler has just been started: on a busy machine it may open its port later than the default
        # --dask-timeout of 5 s; a run that ends anyway says why at once)
        wait_until(
            lambda: run.poll() is not None or (started.exists() and len(started.read_text().split()) == 2), timeout=60
        )
        assert run.poll() is None, run.communicate()
        tasks = read_pids(started)
        scheduler.kill()
        out, err = run.communicate(timeout=patience(60))
        assert run.returncode == 1, err
        for name in ("slow", "slower"):
            line = next(line for line in out.splitlines() if line.startswith(f"[{name}]") and "--> FAILED" in line)
            assert f"the Dask scheduler {address} is unreachable" in line, line
        assert "Traceback" not in err
        wait_until(lambda: not any(alive(*task) for task in tasks), timeout=30)
    finally:
        for proc in (scheduler, worker):
            proc.kill()
            proc.wait()
