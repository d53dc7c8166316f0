"""`tuidag plan` / `run --dry-run` say what a run would do with each task and why, and start nothing; `--force` and
`--from` run what is up to date; `tuidag cache` shows and prunes the content cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slowness import patience
from test_up_to_date import make_project, run, states
from tuidag.store.runs import RunStore

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def tuidag(folder: Path, *args: str, code: int = 0) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_plan_says_why_each_task_would_run_and_starts_nothing(project):
    assert tuidag(project, "plan", "dag.yaml").splitlines()[:5] == [
        "prepare: run: no earlier success with this definition",
        "lint: run: no earlier success with this definition",
        "train: run: its dependency prepare will run",
        "evaluate: run: its dependency train will run",
        "notify: run: it declares no outputs",
    ]
    assert not (project / "ran").exists() and not (project / "out").exists()
    run(project)
    (project / "data" / "train.csv").write_text("x,y\n5,5\n")
    (project / "out" / "lint").unlink()
    lines = tuidag(project, "plan", "dag.yaml").splitlines()
    assert lines[0].startswith("prepare: run: input data/train.csv changed (was ")
    assert lines[1].startswith("lint: restore: output out/lint is missing: restored from the cache")
    assert lines[2:5] == [
        "train: run: its dependency prepare will run",
        "evaluate: run: its dependency train will run",
        "notify: run: it declares no outputs",
    ]
    assert lines[5] == "5 tasks: 4 run, 1 restore"
    assert not (project / "out" / "lint").exists()  # a plan restores nothing either


def test_plan_of_an_up_to_date_dag_names_the_run_each_task_stands_on(project):
    run(project)
    (run_id,) = [r.run_id for r in RunStore(project / ".tuidag").runs()]
    lines = tuidag(project, "run", "--dry-run", "dag.yaml").splitlines()
    assert lines[:4] == [f"{name}: up to date (run {run_id})" for name in ("prepare", "lint", "train", "evaluate")]
    assert len(RunStore(project / ".tuidag").runs()) == 1  # --dry-run made no run


def test_plan_in_json_for_scripts_and_for_chosen_tasks_only(project):
    run(project)
    (project / "params.txt").write_text("lr=0.2\n")
    found = json.loads(tuidag(project, "plan", "dag.yaml", "train", "--format", "json"))
    assert [(row["task"], row["action"]) for row in found["tasks"]] == [("prepare", "up to date"), ("train", "run")]
    assert found["tasks"][1]["reason"].startswith("input params.txt changed (was ")


def test_force_runs_every_task_and_from_runs_a_task_and_its_downstream(project):
    run(project)
    assert run(project, "--force") == "evaluate lint notify prepare train"
    assert states(project)["train"] == ("SUCCEEDED", "--force: every task runs")
    assert run(project, "--from", "train") == "evaluate notify train"
    assert states(project)["evaluate"] == ("SUCCEEDED", "--from train: runs even if up to date")
    assert run(project) == "notify"  # the forced runs were recorded as successes like any other
    assert "no task 'trian' in dag (did you mean 'train'?)" in tuidag(
        project, "run", "dag.yaml", "--from", "trian", code=2
    )


def test_cache_shows_its_size_and_prunes_the_least_recently_used_first(project):
    run(project)
    shown = tuidag(project, "cache")
    assert "content: 4 files, " in shown and "(cap 10.0 GiB" in shown
    assert tuidag(project, "cache", "--max-size", "0").startswith("removed 4 entries")
    (project / "out" / "model.pt").unlink()
    assert run(project) == "notify train"  # nothing to restore it from: it runs


def test_plan_expands_a_glob_once_for_all_the_tasks_that_list_it(tmp_path, monkeypatch):
    """Nothing runs during a plan, so a glob matches the same files for every task: expanded once, not per task."""
    import glob

    from tuidag.model.freshness import NEVER, RUN
    from tuidag.model.loader import load_dag
    from tuidag.store.freshness import plan

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("a")
    (tmp_path / "src" / "b.py").write_text("b")
    tasks = "".join(
        f"  t{i}:\n    run: cat src/*.py > t{i}.txt\n    inputs: ['src/*.py']\n    outputs: [t{i}.txt]\n"
        for i in range(4)
    )
    (tmp_path / "dag.yaml").write_text("tasks:\n" + tasks)
    dag = load_dag(tmp_path / "dag.yaml")
    expanded: list[str] = []
    real_glob = glob.glob

    def counting_glob(pattern: str, **kwargs: object) -> list[str]:
        expanded.append(pattern)
        return real_glob(pattern, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(glob, "glob", counting_glob)
    verdicts = plan(dag, tmp_path / "state")
    assert expanded == ["src/*.py"]
    assert {name: (v.action, v.reason) for name, v in verdicts.items()} == {f"t{i}": (RUN, NEVER) for i in range(4)}
