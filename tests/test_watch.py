"""`tuidag run --watch`, headless, as a user runs it: a real tuidag process, real files edited on disk, real task
processes (their markers and pids checked with psutil)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from dags import alive, read_pids, wait_until
from slowness import patience
from watching import REPO, lines, watching

MARKING = """
tasks:
  a:
    run: echo a >> marks
    inputs: [a.txt]
  b:
    run: echo b >> marks
    depends_on: [a]
  c:
    run: echo c >> marks
    inputs: [c.txt]
  d:
    run: echo d >> marks
"""


def _inputs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("1\n")
    (tmp_path / "c.txt").write_text("1\n")


def test_an_edited_input_runs_its_task_and_what_is_downstream_of_it_again_and_nothing_else(tmp_path):
    _inputs(tmp_path)
    marks = tmp_path / "marks"
    with watching(tmp_path, MARKING) as run:
        wait_until(lambda: len(lines(marks)) == 4 and run.said("[d] --> SUCCEEDED"), timeout=30)
        (tmp_path / "a.txt").write_text("2\n")
        wait_until(lambda: len(lines(marks)) >= 6 and run.said("[b] --> SUCCEEDED in"), timeout=30)
        # a fence: a later change to c's input is the next generation, so nothing else ran in between
        (tmp_path / "c.txt").write_text("2\n")
        wait_until(lambda: len(lines(marks)) >= 7 and len(run.generations()) == 2, timeout=30)
        wait_until(lambda: run.output().count("[c] --> SUCCEEDED") == 2, timeout=30)
    assert lines(marks)[4:] == ["a", "b", "c"]
    assert run.generations() == ["tuidag: gen 2: a.txt changed -> a, b", "tuidag: gen 3: c.txt changed -> c"]
    assert run.proc.returncode == 128 + signal.SIGTERM
    # each round's end is said, as the run's tasks stand after it (the final summary follows watch mode's end)
    ended = [line for line in run.output().splitlines() if " ended in " in line]
    assert [re.sub(r" in \S+;", ";", line) for line in ended] == [
        f"tuidag: gen {n} ended; 4 tasks: 4 succeeded · watching for changes" for n in (1, 2, 3)
    ]
    # Why each ran, as the detail (`i`, `show --task`) and the report say it: a round's tasks name the round first.
    why = {
        (rec["task"], rec["attempt"]): rec.get("reason")
        for rec in run.journal()
        if rec.get("type") == "task" and rec.get("to") == "SUCCEEDED"
    }
    assert why[("a", 1)] == why[("d", 1)] == "it declares no outputs"
    assert why[("a", 2)] == why[("b", 2)] == "gen 2: a.txt changed (it declares no outputs)"
    assert why[("c", 2)] == "gen 3: c.txt changed (it declares no outputs)"


def test_three_quick_writes_to_an_input_make_one_generation(tmp_path):
    """An editor's save may write a file several times within a few tens of milliseconds: one round, not three."""
    _inputs(tmp_path)
    marks = tmp_path / "marks"
    with watching(tmp_path, MARKING) as run:
        wait_until(lambda: len(lines(marks)) == 4, timeout=30)
        for n in range(3):  # as an editor writes: truncate, write, then touch up, 60 ms apart
            (tmp_path / "a.txt").write_text(f"{n}\n")
            time.sleep(0.06)
        wait_until(lambda: len(run.generations()) >= 1, timeout=30)
        (tmp_path / "c.txt").write_text("2\n")  # the fence: the next generation is this one
        wait_until(lambda: any("c.txt" in line for line in run.generations()), timeout=30)
    assert run.generations() == ["tuidag: gen 2: a.txt changed -> a, b", "tuidag: gen 3: c.txt changed -> c"]


def test_two_inputs_changed_together_make_one_round_of_both_subgraphs(tmp_path):
    _inputs(tmp_path)
    marks = tmp_path / "marks"
    with watching(tmp_path, MARKING) as run:
        wait_until(lambda: len(lines(marks)) == 4, timeout=30)
        (tmp_path / "a.txt").write_text("2\n")
        (tmp_path / "c.txt").write_text("2\n")
        wait_until(lambda: len(lines(marks)) == 7, timeout=30)
    assert run.generations() == ["tuidag: gen 2: a.txt, c.txt changed -> a, c, b"]
    assert sorted(lines(marks)[4:]) == ["a", "b", "c"]


def test_a_running_task_whose_input_changes_is_restarted_and_its_dependents_wait_for_the_new_attempt(tmp_path):
    (tmp_path / "a.txt").write_text("1\n")
    pids, marks = tmp_path / "pids", tmp_path / "marks"
    dag = """
tasks:
  slow:
    run: echo $$ >> pids; sleep 120 & wait; echo slow >> marks
    inputs: [a.txt]
  after:
    run: echo after >> marks
    depends_on: [slow]
"""
    with watching(tmp_path, dag) as run:
        wait_until(lambda: len(lines(pids)) == 1, timeout=30)
        first = read_pids(pids)[0]
        (tmp_path / "a.txt").write_text("2\n")
        wait_until(lambda: len(lines(pids)) == 2, timeout=30)
        assert not alive(*first)
        # printed in the printer's next round (every 50 ms while events come), maybe after the new attempt began
        wait_until(lambda: run.said("[slow] --> CANCELLED"), timeout=10)
        assert lines(marks) == []  # the interrupted attempt's dependents never started
        (second,) = read_pids(pids)  # the first is gone
    assert not alive(*second)


def test_a_task_that_is_not_interruptible_finishes_before_it_runs_again_and_its_dependents_run_once(tmp_path):
    (tmp_path / "a.txt").write_text("1\n")
    pids, marks, release = tmp_path / "pids", tmp_path / "marks", tmp_path / "release"
    dag = """
tasks:
  slow:
    run: echo $$ >> pids; while [ ! -e release ]; do sleep 0.02; done; echo slow >> marks
    inputs: [a.txt]
    interruptible: false
  after:
    run: echo after >> marks
    depends_on: [slow]
"""
    with watching(tmp_path, dag) as run:
        wait_until(lambda: len(lines(pids)) == 1, timeout=30)
        first = read_pids(pids)[0]
        (tmp_path / "a.txt").write_text("2\n")
        wait_until(lambda: len(run.generations()) == 1, timeout=30)
        assert alive(*first) and len(lines(pids)) == 1  # left to finish
        release.touch()
        wait_until(lambda: lines(marks).count("after") == 1 and lines(marks).count("slow") == 2, timeout=30)
        wait_until(lambda: run.output().count("[after] --> SUCCEEDED") == 1, timeout=30)
    assert lines(marks) == ["slow", "slow", "after"]  # `after` never ran on what the first attempt made
    assert len(lines(pids)) == 2


def test_a_change_to_a_tasks_own_output_does_not_run_it_or_its_ancestors_again(tmp_path):
    """`gen` would loop for ever if a task's outputs re-ran it: make writes out.txt, which is in the folder `build`
    and `make` read; only the task that reads out.txt as an input of its own (`use`) runs."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "in.txt").write_text("1\n")
    marks = tmp_path / "marks"
    dag = """
tasks:
  make:
    run: echo make >> marks; cp src/in.txt src/out.txt
    inputs: [src/in.txt]
    outputs: [src/out.txt]
  use:
    run: echo use >> marks
    inputs: [src/out.txt]
    depends_on: [make]
"""
    with watching(tmp_path, dag) as run:
        wait_until(lambda: lines(marks) == ["make", "use"], timeout=30)
        (tmp_path / "src" / "in.txt").write_text("2\n")
        wait_until(lambda: run.output().count("[use] --> SUCCEEDED") == 2, timeout=30)
        (tmp_path / "src" / "in.txt").write_text("3\n")  # the fence
        wait_until(lambda: run.output().count("[use] --> SUCCEEDED") == 3, timeout=30)
    assert [line.split(" -> ")[1] for line in run.generations()] == ["make, use", "make, use"]
    assert lines(marks) == ["make", "use"] * 3


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_watch_mode_and_leaves_nothing_running(tmp_path, sig):
    (tmp_path / "a.txt").write_text("1\n")
    pids = tmp_path / "pids"
    dag = """
tasks:
  slow:
    run: echo $$ >> pids; sleep 120 & echo $! >> pids; wait
    inputs: [a.txt]
"""
    earlier = {p.pid for p in psutil.Process().children(recursive=True)}  # e.g. an earlier test's forkserver
    with watching(tmp_path, dag) as run:
        wait_until(lambda: len(lines(pids)) == 2, timeout=30)
        refs = read_pids(pids)
        run.proc.send_signal(sig)
        run.proc.wait(timeout=patience(30))
    assert run.proc.returncode == 128 + sig
    assert [ref for ref in refs if alive(*ref)] == []
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in earlier]
    assert not [p for p in left if p.status() != psutil.STATUS_ZOMBIE]


def test_the_dev_demo_re_runs_build_web_and_test_for_the_app_the_server_for_its_code_and_test_for_its_tests():
    from tuidag.model.loader import load_dag
    from tuidag.watch import WatchPlan

    demos = Path(__file__).resolve().parent.parent / "demos"
    dag = load_dag(demos / "dev.yaml")
    plan = WatchPlan(dag, demos / ".tuidag")
    assert plan.affected([str(demos / "dev" / "app.py")]) == ["build"]  # the round adds what is downstream: web, test
    assert dag.descendants("build") == ["web", "test"]
    assert plan.affected([str(demos / "dev" / "server.py")]) == ["web"]
    assert plan.affected([str(demos / "dev" / "test_app.py")]) == ["test"]
    web = dag.tasks["web"].service
    assert web is not None and web.ready_when is not None and web.ready_when.kind == "http"
    assert not plan.wanted(str(demos / ".tuidag" / "runs" / "x" / "journal.jsonl"))


def test_interruptible_must_be_true_or_false_with_a_located_error(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n  a:\n    run: 'true'\n    interruptible: maybe\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "--watch", str(dag)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert f"{dag}:4:20: task 'a': interruptible must be true or false" in proc.stderr
    assert not (tmp_path / ".tuidag").exists() or not list((tmp_path / ".tuidag").glob("runs/*"))


def test_a_python_dag_says_a_shell_task_is_not_interruptible():
    from tuidag.api import Dag

    dag = Dag("py")
    dag.shell("a", "true", interruptible=False)
    dag.shell("b", "true")
    spec = dag.spec()
    assert spec.tasks["a"].interruptible is False and spec.tasks["b"].interruptible is True


def test_a_task_up_to_date_from_an_earlier_run_that_runs_again_writes_a_log_of_its_own(tmp_path):
    """Its log was the earlier run's file, linked in: the new attempt gets a new file, and the earlier run's log and
    the headless output hold no line of the other's."""
    (tmp_path / "a.txt").write_text("1\n")
    dag = "tasks:\n  a:\n    run: echo made from $(cat a.txt) > model.txt; echo said from $(cat a.txt)\n"
    dag += "    inputs: [a.txt]\n    outputs: [model.txt]\n"
    (tmp_path / "dag.yaml").write_text(dag)
    first = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "dag.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=patience(60),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert first.returncode == 0, first.stderr
    (earlier,) = (tmp_path / ".tuidag" / "runs").glob("*/logs/a.log")
    before = earlier.read_bytes()
    assert b"said from 1" in before
    with watching(tmp_path, dag) as run:
        wait_until(lambda: run.said("[a] --> up to date"), timeout=30)
        (tmp_path / "a.txt").write_text("2\n")
        wait_until(lambda: run.said("[a] --> SUCCEEDED"), timeout=30)
    assert earlier.read_bytes() == before  # the earlier run's log is as that run left it
    (current,) = [p for p in (tmp_path / ".tuidag" / "runs").glob("*/logs/a.log") if p != earlier]
    assert b"said from 2" in current.read_bytes() and b"said from 1" not in current.read_bytes()
    assert "said from 2" in run.output() and "said from 1" not in run.output()
