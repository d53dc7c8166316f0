"""Runs that outlive the terminal: `tuidag run -d` and the commands that control a live run from anywhere.

Real processes only: the engine is a real detached process, its tasks real process trees, checked with psutil."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import psutil
import pytest

from dags import alive, read_pids, stubborn_trees, wait_until
from slowness import patience
from test_cli import tuidag
from tuidag.control.client import live_status
from tuidag.store.journal import replay
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli


_ENGINES: list[int] = []


@pytest.fixture(autouse=True)
def no_engine_left_behind():
    """A test that fails before its run ends must not leave a detached engine running for ever."""
    yield
    while _ENGINES:
        try:
            engine = psutil.Process(_ENGINES.pop())
            if "tuidag" in engine.cmdline():  # still the engine, not a process that reused its pid
                engine.terminate()
        except psutil.Error:
            pass


def start_detached(tmp_path: Path, dag_text: str) -> tuple[Path, str, int]:
    """(the DAG file, the run id, the engine's pid) of a run started with -d."""
    dag = tmp_path / "dag.yaml"
    dag.write_text(dag_text)
    proc = tuidag("run", str(dag), "-d", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    run_id = first.split()[2]
    pid = int(first.rsplit("engine pid ", 1)[1].rstrip(")"))
    _ENGINES.append(pid)
    assert f"tuidag attach {run_id}" in proc.stdout
    return dag, run_id, pid


def the_run(tmp_path: Path, run_id: str):
    return RunStore(tmp_path / ".tuidag").get(run_id)


def summary_of(run) -> dict:
    wait_until(lambda: run.summary.exists(), timeout=30)
    return json.loads(run.summary.read_text())


def test_a_detached_run_has_no_terminal_and_finishes_on_its_own(tmp_path):
    gate = tmp_path / "go"
    dag, run_id, pid = start_detached(
        tmp_path,
        f"""\
tasks:
  wait: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done; echo waited"}}
  after: {{run: "echo after", depends_on: [wait]}}
""",
    )
    engine = psutil.Process(pid)
    assert engine.terminal() is None and os.getsid(pid) != os.getsid(0)
    run = the_run(tmp_path, run_id)
    wait_until(lambda: (run.path / "control.sock").exists())
    status = live_status(run)
    assert status["pid"] == pid and status["viewers"] == 0
    assert f"running (pid {pid}, 0 viewers)" in tuidag("runs", str(dag), cwd=tmp_path).stdout
    gate.touch()
    record = summary_of(run)
    assert record["exit_code"] == 0 and record["outcome"] == "succeeded"
    assert (run.logs / "after.log").read_text().endswith("after\n")
    wait_until(lambda: "2 tasks: 2 succeeded" in (run.path / "engine.log").read_text())  # printed after the summary
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)


def test_control_commands_act_on_a_live_run_and_say_what_changed(tmp_path):
    pids = tmp_path / "pids"
    gate = tmp_path / "go"
    dag, run_id, _pid = start_detached(
        tmp_path,
        "max_parallel: 8\ntasks:\n"
        + stubborn_trees(pids)
        + f"""\
  a_child: {{run: "echo child", depends_on: [a]}}
  broken: {{run: "exit 3"}}
  fixed: {{run: "echo fixed", depends_on: [broken]}}
  held: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
""",
    )
    run = the_run(tmp_path, run_id)
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, timeout=20)
    trees = read_pids(pids)
    wait_until(lambda: replay(run.journal).tasks["fixed"].state.value == "SKIPPED")
    refused = tuidag("rerun", "fixed", "--file", str(dag), cwd=tmp_path)
    assert refused.returncode == 1 and "re-run 'broken' first" in refused.stderr

    cancelled = tuidag("cancel", "a", "--run", run_id[:15], "--file", str(dag), cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancelling 2 tasks: a, a_child" in cancelled.stdout
    assert replay(run.journal).tasks["b"].state.value == "RUNNING"  # only a's branch was cancelled

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    paused = tuidag("pause", cwd=elsewhere)
    assert paused.returncode == 2 and "no live run" in paused.stderr  # that folder's state dir has no run
    assert "paused" in tuidag("pause", "--file", str(dag), cwd=elsewhere).stdout
    assert "was already paused" in tuidag("pause", cwd=tmp_path).stdout  # the latest live run of the cwd's

    stopped = tuidag("stop", "--file", str(dag), cwd=tmp_path)
    assert stopped.returncode == 0 and "stopping: cancelling" in stopped.stdout
    record = summary_of(run)
    assert record["exit_code"] == 1
    wait_until(lambda: not any(alive(*ref) for ref in trees), timeout=20)
    states = {n: t.state.value for n, t in replay(run.journal).tasks.items()}
    assert states["a"] == states["a_child"] == states["b"] == states["held"] == "CANCELLED"
    gone = tuidag("cancel", "--all", "--run", run_id, "--file", str(dag), cwd=tmp_path)
    assert gone.returncode == 2 and "not running" in gone.stderr


def test_a_run_whose_every_task_was_cancelled_is_recorded_as_cancelled(tmp_path):
    gate = tmp_path / "go"
    dag, run_id, _pid = start_detached(
        tmp_path,
        f"""\
tasks:
  held: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
  after: {{run: "echo after", depends_on: [held]}}
""",
    )
    run = the_run(tmp_path, run_id)
    wait_until(lambda: replay(run.journal).tasks["held"].state.value == "RUNNING")
    assert tuidag("stop", "--file", str(dag), cwd=tmp_path).returncode == 0
    record = summary_of(run)
    assert (record["outcome"], record["exit_code"], record["counts"]) == ("cancelled", 1, {"CANCELLED": 2})
    listing = tuidag("runs", str(dag), cwd=tmp_path).stdout.splitlines()
    assert listing[1].split()[-1] == "cancelled"


def test_every_command_that_takes_task_names_suggests_the_one_meant(tmp_path):
    gate = tmp_path / "go"
    dag, run_id, _pid = start_detached(
        tmp_path,
        f"""\
tasks:
  train-large: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
  train-small: {{run: "echo small"}}
""",
    )
    run = the_run(tmp_path, run_id)
    wait_until(lambda: (run.path / "control.sock").exists())
    expected = f"tuidag: run {run_id} has no task 'train-lage' (did you mean 'train-large'?)\n"
    for command in (["cancel", "train-lage"], ["rerun", "train-lage"], ["cancel", "train-small", "train-lage"]):
        proc = tuidag(*command, "--file", str(dag), cwd=tmp_path)
        assert (proc.returncode, proc.stderr, proc.stdout) == (2, expected, ""), command
    logs = tuidag("logs", "train-lage", "--run", run_id, "--file", str(dag), cwd=tmp_path)
    assert (logs.returncode, logs.stderr) == (2, expected)
    assert replay(run.journal).tasks["train-large"].state.value == "RUNNING"  # nothing was cancelled
    gate.touch()
    assert summary_of(run)["outcome"] == "succeeded"


def test_sigterm_to_a_detached_engine_stops_it_like_a_foreground_run(tmp_path):
    pids = tmp_path / "pids"
    _dag, run_id, pid = start_detached(tmp_path, "tasks:\n" + stubborn_trees(pids))
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, timeout=20)
    trees = read_pids(pids)
    os.kill(pid, signal.SIGTERM)
    record = summary_of(the_run(tmp_path, run_id))
    assert record["exit_code"] == 143 and record["interrupted_by"] == "SIGTERM"
    wait_until(lambda: not any(alive(*ref) for ref in trees), timeout=20)
    states = {t.state.value for t in replay(the_run(tmp_path, run_id).journal).tasks.values()}
    assert states == {"CANCELLED"}


def test_several_commands_at_once_each_get_their_answer(tmp_path):
    gate = tmp_path / "go"
    tasks = "".join(f'  t{i}: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}\n' for i in range(6))
    dag, run_id, _pid = start_detached(tmp_path, "max_parallel: 8\ntasks:\n" + tasks)
    run = the_run(tmp_path, run_id)
    wait_until(lambda: (run.path / "control.sock").exists())
    results: dict[int, subprocess.CompletedProcess] = {}

    def cancel(i: int) -> None:
        results[i] = tuidag("cancel", f"t{i}", "--file", str(dag), cwd=tmp_path)

    threads = [threading.Thread(target=cancel, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(patience(60))
    assert all(results[i].returncode == 0 and f"cancelling 1 task: t{i}" in results[i].stdout for i in range(5))
    gate.touch()
    record = summary_of(run)
    assert record["counts"] == {"CANCELLED": 5, "SUCCEEDED": 1}


def test_bad_input_with_detach_is_reported_here_and_starts_nothing(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n  a: {run: true, depends_on: [ghost]}\n")
    proc = tuidag("run", str(dag), "-d", cwd=tmp_path)
    assert proc.returncode == 2 and f"{dag}:2:" in proc.stderr and "ghost" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / ".tuidag" / "runs").exists() or not list((tmp_path / ".tuidag" / "runs").iterdir())
    bad_executor = tuidag("run", str(dag.with_name("ok.yaml")), "-d", cwd=tmp_path)
    assert bad_executor.returncode == 2
    (tmp_path / "ok.yaml").write_text("tasks:\n  a: {run: 'true'}\n")
    unreachable = tuidag(
        "run",
        str(tmp_path / "ok.yaml"),
        "-d",
        "--executor",
        "dask",
        "--dask-address",
        "tcp://127.0.0.1:9",
        cwd=tmp_path,
    )
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr
    assert "127.0.0.1:9" in unreachable.stderr


def test_an_engine_killed_with_sigkill_is_reaped_by_the_next_command(tmp_path):
    pids = tmp_path / "pids"
    dag, run_id, pid = start_detached(tmp_path, "tasks:\n" + stubborn_trees(pids))
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3, timeout=20)
    trees = read_pids(pids)
    run = the_run(tmp_path, run_id)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not run.owned())
    gone = tuidag("cancel", "a", "--file", str(dag), cwd=tmp_path)
    assert gone.returncode == 2 and "no live run" in gone.stderr
    assert f"run {run_id} was interrupted; killed" in gone.stderr  # the command reaped the trees first
    assert not any(alive(*ref) for ref in trees)
    assert "interrupted" in tuidag("runs", str(dag), cwd=tmp_path).stdout
