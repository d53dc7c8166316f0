"""Targets: `tuidag run FILE TASK...` (and `python etl.py TASK`) runs those tasks and the tasks they need, nothing
else. Real runs of the real command: each task leaves a marker file when it runs, so "never started" is checked on
disk, not only in what tuidag says; the rest is read back from the journal and summary.json, as every later command
reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dags import make_dag, start_run, wait_until
from slowness import patience
from tuidag.engine.scheduler import RerunRefused
from tuidag.model.state import TaskState
from tuidag.store.journal import read_header, replay
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli
S = TaskState


def tuidag(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
    return subprocess.run(
        [sys.executable, *args] if args[0].endswith(".py") else [sys.executable, "-m", "tuidag", *args],
        cwd=cwd,
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=patience(timeout),
        stdin=subprocess.DEVNULL,
    )


def diamond(tmp_path: Path, fail: str = "") -> Path:
    """prepare -> train -> report, prepare -> lint; `fail` exits 3. Each task that runs leaves `ran-NAME`."""

    def task(name: str) -> str:
        return f"touch {tmp_path}/ran-{name}" + ("; exit 3" if name == fail else "")

    path = tmp_path / "dag.yaml"
    path.write_text(
        f"""\
name: pipeline
tasks:
  prepare: {{run: "{task("prepare")}"}}
  train: {{run: "{task("train")}", depends_on: [prepare]}}
  report: {{run: "{task("report")}", depends_on: [train]}}
  lint: {{run: "{task("lint")}", depends_on: [prepare]}}
"""
    )
    return path


def ran(tmp_path: Path) -> set[str]:
    return {p.name[4:] for p in tmp_path.glob("ran-*")}


def last_run(tmp_path: Path):
    return RunStore(tmp_path / ".tuidag").runs()[-1]


def test_a_target_runs_with_what_it_needs_and_nothing_else_starts(tmp_path):
    proc = tuidag("run", str(diamond(tmp_path)), "train", "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == {"prepare", "train"}
    out = proc.stdout
    assert "(2 of 4 tasks for the target train)" in out.splitlines()[0]
    assert "[report]" not in out and "[lint]" not in out  # no per-task line for a task outside the targets
    table = out[out.index("TASK  ") :]
    assert "prepare" in table and "report" not in table and "lint" not in table
    assert out.endswith("2 tasks not targets\n" + out.splitlines()[-1] + "\n")
    assert out.splitlines()[-1].startswith("2 tasks: 2 succeeded in ")
    run = last_run(tmp_path)
    tasks = replay(run.journal).tasks
    assert {name: t.state for name, t in tasks.items()} == {
        "prepare": S.SUCCEEDED,
        "train": S.SUCCEEDED,
        "report": S.UNTARGETED,
        "lint": S.UNTARGETED,
    }
    assert tasks["lint"].reason == "not a target" and tasks["lint"].attempt == 0
    assert read_header(run.journal)["targets"] == ["train"]
    summary = json.loads(run.summary.read_text())
    assert (summary["outcome"], summary["exit_code"]) == ("succeeded", 0)
    assert summary["counts"] == {"SUCCEEDED": 2, "UNTARGETED": 2}


def test_the_exit_code_is_decided_by_the_targets_alone(tmp_path):
    """lint fails when it runs: a run of train leaves it out and succeeds; a run of lint fails, and its own
    dependency is the only other task that runs."""
    dag = diamond(tmp_path, fail="lint")
    assert tuidag("run", str(dag), "report", "--no-tui", cwd=tmp_path).returncode == 0
    assert ran(tmp_path) == {"prepare", "train", "report"}
    for marker in tmp_path.glob("ran-*"):
        marker.unlink()
    failed = tuidag("run", str(dag), "lint", "--no-tui", cwd=tmp_path)
    assert failed.returncode == 1
    assert ran(tmp_path) == {"prepare", "lint"}
    summary = json.loads(last_run(tmp_path).summary.read_text())
    assert (summary["outcome"], summary["counts"]) == ("failed", {"SUCCEEDED": 1, "FAILED": 1, "UNTARGETED": 2})


def test_targets_may_come_before_after_or_between_the_options_and_each_counts_once(tmp_path):
    dag = diamond(tmp_path)
    proc = tuidag("run", "--no-tui", str(dag), "lint", "-j", "1", "report", "lint", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == {"prepare", "train", "report", "lint"}
    assert read_header(last_run(tmp_path).journal)["targets"] == ["lint", "report"]
    assert "for the targets lint, report" in proc.stdout


def test_an_unknown_target_is_a_usage_error_with_the_closest_name_and_nothing_starts(tmp_path):
    dag = diamond(tmp_path)
    proc = tuidag("run", str(dag), "train", "reprot", "--no-tui", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"tuidag: {dag} has no task 'reprot' (did you mean 'report'?)\n"
    assert ran(tmp_path) == set() and not (tmp_path / ".tuidag" / "runs").exists()
    wrong = tuidag("run", str(dag), "train", "--bogus", cwd=tmp_path)
    assert wrong.returncode == 2 and "unrecognized arguments: --bogus" in wrong.stderr and ran(tmp_path) == set()


ETL = """\
import os
from tuidag import Dag

dag = Dag("etl")

def mark(ctx, name):
    open(os.path.join({folder!r}, "ran-" + name), "w").close()

@dag.task()
def extract(ctx):
    mark(ctx, "extract")

@dag.task(depends_on=[extract])
def transform(ctx):
    mark(ctx, "transform")

@dag.task(depends_on=[extract])
def audit(ctx):
    mark(ctx, "audit")

dag.shell("load", "touch {folder}/ran-load", depends_on=[transform])

if __name__ == "__main__":
    dag.main()
"""


SWEEP = """\
tasks:
  data: {run: "touch ran-data"}
  train:
    run: "touch ran-train-${{ matrix.seed }}${{ matrix.lr }}"
    matrix: {seed: [1, 2], lr: [x, y]}
    depends_on: [data]
  report: {run: "touch ran-report", depends_on: [train]}
"""


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        (["train"], {"data", "train-1x", "train-1y", "train-2x", "train-2y"}),
        (["train[seed=2]"], {"data", "train-2x", "train-2y"}),
        (["train[lr=y]", "train[seed=1,lr=x]"], {"data", "train-1x", "train-1y", "train-2y"}),
    ],
    ids=["a matrix task", "a selection", "two selections"],
)
def test_a_matrix_task_as_a_target_is_its_instances_and_a_selection_the_ones_it_selects(tmp_path, targets, expected):
    (tmp_path / "dag.yaml").write_text(SWEEP)
    proc = tuidag("run", "dag.yaml", *targets, "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == expected
    plan = tuidag("plan", "dag.yaml", *targets, cwd=tmp_path)
    assert plan.returncode == 0 and f"{len(expected)} tasks: " in plan.stdout


def test_from_a_matrix_task_runs_its_instances_and_what_follows_them(tmp_path):
    (tmp_path / "dag.yaml").write_text(
        "tasks:\n  data: {run: 'echo d > d.txt', outputs: [d.txt]}\n"
        "  train:\n    run: 'echo ${{ matrix.seed }} > t${{ matrix.seed }}.txt'\n"
        "    outputs: ['t${{ matrix.seed }}.txt']\n    matrix: {seed: [1, 2]}\n    depends_on: [data]\n"
        "  report: {run: 'cat t1.txt t2.txt > r.txt', outputs: [r.txt], depends_on: [train]}\n"
    )
    assert tuidag("run", "dag.yaml", "--no-tui", cwd=tmp_path).returncode == 0
    plan = tuidag("plan", "dag.yaml", "--from", "train", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    assert lines[0].startswith("data: up to date")
    assert lines[1:4] == [
        "train[seed=1]: run: --from train[seed=1]: runs even if up to date",
        "train[seed=2]: run: --from train[seed=2]: runs even if up to date",
        "report: run: --from train[seed=1]: runs even if up to date",
    ]
    wrong = tuidag("plan", "dag.yaml", "--from", "trian", cwd=tmp_path)
    assert wrong.returncode == 2 and "(did you mean 'train'?)" in wrong.stderr
    near = tuidag("run", "dag.yaml", "trian", "--no-tui", cwd=tmp_path)
    assert near.returncode == 2 and "has no task 'trian' (did you mean 'train'?)" in near.stderr
    assert ran(tmp_path) == set()


def test_a_python_dag_takes_targets_through_its_own_main_and_through_tuidag_run(tmp_path):
    script = tmp_path / "etl.py"
    script.write_text(ETL.format(folder=str(tmp_path)))
    proc = tuidag(str(script), "--no-tui", "transform", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == {"extract", "transform"}
    assert "2 tasks not targets" in proc.stdout
    for marker in tmp_path.glob("ran-*"):
        marker.unlink()
    proc = tuidag("run", str(script), "audit", "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == {"extract", "audit"}
    unknown = tuidag(str(script), "--no-tui", "lod", cwd=tmp_path)
    assert unknown.returncode == 2
    assert unknown.stderr == f"tuidag: {script} has no task 'lod' (did you mean 'load'?)\n"


def test_a_skypilot_pipeline_runs_its_target_and_the_steps_before_it(tmp_path):
    """A SkyPilot chain depends in document order: its middle step needs the first, and the last never runs."""
    path = tmp_path / "chain.yaml"
    path.write_text(
        """\
name: chain
---
name: fetch
run: echo fetch >> order.txt
---
name: train
run: echo train >> order.txt
---
name: report
run: echo report >> order.txt
"""
    )
    proc = tuidag("run", str(path), "train", "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "order.txt").read_text() == "fetch\ntrain\n"
    assert replay(last_run(tmp_path).journal).tasks["report"].state is S.UNTARGETED


def test_a_resumed_run_with_targets_reuses_within_them_and_says_why_others_run(tmp_path):
    """The first run makes train only; resumed with report as the target, prepare and train are reused and report
    runs; lint stays outside both runs."""
    dag = diamond(tmp_path)
    assert tuidag("run", str(dag), "train", "--no-tui", cwd=tmp_path).returncode == 0
    first = last_run(tmp_path)
    for marker in tmp_path.glob("ran-*"):
        marker.unlink()
    proc = tuidag("run", str(dag), "report", "--no-tui", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == {"report"}
    assert (
        f"tuidag: resuming {first.run_id}: reusing 2 of 3 tasks the targets need (prepare, train): "
        "not a target there: report\n"
    ) in proc.stderr
    tasks = replay(last_run(tmp_path).journal).tasks
    assert tasks["prepare"].reused and tasks["train"].reused
    assert tasks["lint"].state is S.UNTARGETED
    # resumed without targets, from a run that had them: what was outside it runs now
    for marker in tmp_path.glob("ran-*"):
        marker.unlink()
    whole = tuidag("run", str(dag), "--no-tui", "--resume", cwd=tmp_path)
    assert whole.returncode == 0 and ran(tmp_path) == {"lint"}
    assert "not a target there: lint" in whole.stderr


def test_a_detached_run_with_targets_runs_them_alone(tmp_path):
    dag = diamond(tmp_path)
    proc = tuidag("run", str(dag), "lint", "-d", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout.splitlines()[0].rsplit("engine pid ", 1)[1].rstrip(")"))
    try:
        run = last_run(tmp_path)
        wait_until(lambda: run.summary.exists(), timeout=30)
        summary = json.loads(run.summary.read_text())
        assert (summary["exit_code"], summary["counts"]) == (0, {"SUCCEEDED": 2, "UNTARGETED": 2})
        assert ran(tmp_path) == {"prepare", "lint"}
        wait_until(lambda: "2 tasks not targets" in (run.path / "engine.log").read_text())
    finally:
        try:
            engine = psutil.Process(pid)
            if "tuidag" in " ".join(engine.cmdline()):
                engine.terminate()
        except psutil.Error:
            pass


def test_re_running_a_task_outside_the_targets_is_refused_and_says_how_to_run_it(tmp_path):
    """A run's targets are fixed when it starts: re-running a task outside them would quietly widen the run (and
    what it needs upstream), so it is refused with the way to run it; the run goes on as it was."""
    gate = tmp_path / "go"
    dag = make_dag(
        {
            "a": f"while [ ! -e {gate} ]; do sleep 0.02; done",
            "b": {"run": "true", "depends_on": ["a"]},
            "c": "true",
        }
    )
    scheduler, _events = start_run(dag, tmp_path, targets=["a"])
    try:
        assert scheduler.snapshot()["b"].state is S.UNTARGETED
        with pytest.raises(RerunRefused, match="'c' is not a target of this run: start a run with it as a target"):
            scheduler.rerun("c")
        assert scheduler.snapshot()["c"].state is S.UNTARGETED and scheduler.snapshot()["c"].attempt == 0
    finally:
        gate.touch()
        assert scheduler.wait(patience(30))
        scheduler.close()
    assert {n: s.state for n, s in scheduler.snapshot().items()} == {
        "a": S.SUCCEEDED,
        "b": S.UNTARGETED,
        "c": S.UNTARGETED,
    }


def test_tuidag_rerun_of_a_task_outside_a_live_run_s_targets_is_refused(tmp_path):
    gate = tmp_path / "go"
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""\
tasks:
  held: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
  other: {{run: "touch {tmp_path}/ran-other"}}
"""
    )
    proc = tuidag("run", str(dag), "held", "-d", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout.splitlines()[0].rsplit("engine pid ", 1)[1].rstrip(")"))
    try:
        run = last_run(tmp_path)
        wait_until(lambda: (run.path / "control.sock").exists())
        refused = tuidag("rerun", "other", "--file", str(dag), cwd=tmp_path)
        assert refused.returncode != 0
        assert "'other' is not a target of this run: start a run with it as a target to run it" in refused.stderr
        gate.touch()
        wait_until(lambda: run.summary.exists(), timeout=30)
        assert json.loads(run.summary.read_text())["exit_code"] == 0
        assert ran(tmp_path) == set()
    finally:
        gate.touch()
        try:
            engine = psutil.Process(pid)
            if "tuidag" in " ".join(engine.cmdline()):
                engine.terminate()
        except psutil.Error:
            pass


def test_runs_of_some_targets_stay_out_of_the_dag_s_duration_trend(tmp_path):
    """A run of one target ran a part of the DAG: its duration says nothing of how long the DAG takes."""
    dag = diamond(tmp_path)
    for _ in range(2):
        assert tuidag("run", str(dag), "train", "--no-tui", cwd=tmp_path).returncode == 0
    listing = tuidag("runs", str(dag), cwd=tmp_path).stdout
    assert "succeeded=2 untargeted=2" in listing and "duration trend" not in listing
    for _ in range(2):
        assert tuidag("run", str(dag), "--no-tui", cwd=tmp_path).returncode == 0
    trend = tuidag("runs", str(dag), cwd=tmp_path).stdout.split("duration trend", 1)[1]
    assert "pipeline  ▁" in trend or "pipeline  █" in trend


def test_the_run_the_post_mortem_r_starts_keeps_the_targets(tmp_path, monkeypatch):
    """train fails in a run of report; fixed, the post-mortem's `r` starts `tuidag run FILE report --resume RUN`:
    prepare is reused, train and report run, lint stays outside it as it was."""
    from tuidag.control.remote import RemoteRun
    from tuidag.ui import viewer

    dag = diamond(tmp_path)
    dag.write_text(
        dag.read_text().replace(
            f"touch {tmp_path}/ran-train", f"test -e {tmp_path}/fixed && touch {tmp_path}/ran-train"
        )
    )
    assert tuidag("run", str(dag), "report", "--no-tui", cwd=tmp_path).returncode == 1
    (tmp_path / "fixed").touch()
    for marker in tmp_path.glob("ran-*"):
        marker.unlink()
    store = RunStore(tmp_path / ".tuidag")
    (run,) = store.runs()
    started: list[list[str]] = []
    monkeypatch.setattr(viewer.os, "execv", lambda path, argv: started.append(argv))
    viewer._resume(run, store, RemoteRun.stored(run, store))
    (argv,) = started
    assert argv[3:6] == ["run", str(dag), "report"] and argv[6:8] == ["--resume", run.run_id]
    proc = tuidag(*argv[3:], "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ran(tmp_path) == {"train", "report"}
    assert replay(last_run(tmp_path).journal).tasks["lint"].state is S.UNTARGETED


def test_the_report_names_the_targets_and_counts_the_tasks_outside_them(tmp_path):
    dag = diamond(tmp_path)
    assert tuidag("run", str(dag), "train", "--no-tui", cwd=tmp_path).returncode == 0
    facts = tuidag("report", "--file", str(dag), "--format", "json", "-o", "-", cwd=tmp_path)
    assert facts.returncode == 0, facts.stderr
    data = json.loads(facts.stdout)
    assert data["run"]["targets"] == ["train"] and data["run"]["counts"] == {"SUCCEEDED": 2, "UNTARGETED": 2}
    assert {task["name"]: task["state"] for task in data["tasks"]}["lint"] == "UNTARGETED"
    page = tuidag("report", "--file", str(dag), "-o", "-", cwd=tmp_path).stdout
    assert "<span>targets train</span>" in page and "2 not targets" in page


def test_logs_of_a_task_outside_the_targets_says_it_was_not_a_target_and_where_its_output_is(tmp_path):
    dag = diamond(tmp_path)
    assert tuidag("run", str(dag), "--no-tui", cwd=tmp_path).returncode == 0
    earlier = last_run(tmp_path)
    assert tuidag("run", str(dag), "train", "--no-tui", cwd=tmp_path).returncode == 0
    run = last_run(tmp_path)
    logs = tuidag("logs", "lint", "--run", run.run_id, "--file", str(dag), cwd=tmp_path)
    assert logs.returncode == 1
    assert f"tuidag: lint never ran in run {run.run_id}: it was not a target of that run\n" in logs.stderr
    assert f"the latest run with output of it is {earlier.run_id}" in logs.stderr


def test_a_target_on_a_local_dask_cluster_runs_what_it_needs_there_and_nothing_else(tmp_path):
    pytest.importorskip("distributed")
    proc = tuidag("run", str(diamond(tmp_path)), "report", "--no-tui", "--executor", "dask-local:1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ran(tmp_path) == {"prepare", "train", "report"}
    tasks = replay(last_run(tmp_path).journal).tasks
    assert tasks["lint"].state is S.UNTARGETED and tasks["lint"].worker is None
    assert tasks["report"].worker is not None  # it ran on the cluster's worker


def test_a_target_after_a_bare_resume_is_taken_for_a_run_id_and_the_error_says_where_to_put_it(tmp_path):
    dag = diamond(tmp_path)
    assert tuidag("run", str(dag), "--no-tui", cwd=tmp_path).returncode == 0
    proc = tuidag("run", str(dag), "--no-tui", "--resume", "train", cwd=tmp_path)
    assert proc.returncode == 2
    assert "to resume the latest run with train as a target, put it before --resume" in proc.stderr
    assert len(RunStore(tmp_path / ".tuidag").runs()) == 1  # nothing started
