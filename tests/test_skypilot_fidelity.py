"""SkyPilot files behave as SkyPilot reads them (issue #16): the graph each `graph_*.yaml` fixture states in its
`# tasks:` / `# edges:` / `# note:` lines, values as SkyPilot converts them, `--env`, workdirs taken from where
tuidag runs, the runtime variables a task sees, and job groups run for real.

Fixtures are loaded from tests/skypilot (their relative workdirs are taken from there, as `sky` takes them from the
folder it runs in).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dags import alive, finish, read_pids, start_run, wait_until
from slowness import patience
from test_cli import tuidag
from tuidag.model.errors import Note
from tuidag.model.loader import load_dag
from tuidag.model.spec import JOB_GROUP_STOPPED, JobGroup

FIXTURES = Path(__file__).resolve().parent / "skypilot"
GRAPHS = sorted(FIXTURES.glob("graph_*.yaml"))


def comment(path: Path, prefix: str) -> list[str]:
    return [
        line[len(prefix) :].replace("FILE", str(path))
        for line in path.read_text().splitlines()
        if line.startswith(prefix)
    ]


def stated_graph(path: Path) -> tuple[list[str], set[tuple[str, str]]]:
    """The tasks (in file order) and edges a fixture states in its `# tasks:` and `# edges:` lines."""
    tasks = comment(path, "# tasks:")[0].split()
    edges = {tuple(edge.split("->")) for edge in comment(path, "# edges:")[0].split()}
    return tasks, edges


def load(path: Path, env: dict[str, str] | None = None) -> tuple:
    notes: list[Note] = []
    return load_dag(path, notes, env=tuple((env or {}).items())), [str(n) for n in notes]


def edges(dag) -> set[tuple[str, str]]:
    return {(dep, name) for name, task in dag.tasks.items() for dep in task.depends_on}


@pytest.fixture
def in_fixtures(monkeypatch):
    monkeypatch.chdir(FIXTURES)


@pytest.mark.parametrize("path", GRAPHS, ids=lambda p: p.stem)
def test_fixture_graphs(path, in_fixtures):
    dag, notes = load(path)
    tasks, stated_edges = stated_graph(path)
    assert list(dag.tasks) == tasks
    assert edges(dag) == stated_edges
    assert notes == comment(path, "# note: ")


# --- 1, 8: edges and names ----------------------------------------------------------------------------------------
def test_empty_edges_are_a_chain_not_parallel_tasks(in_fixtures):
    for name in ("graph_empty_downstream.yaml", "graph_null_downstream.yaml", "graph_empty_edges.yaml"):
        dag, _ = load(FIXTURES / name)
        assert max(dag.depth.values()) == len(dag.tasks) - 1, name


# --- 2: workdir ---------------------------------------------------------------------------------------------------
def test_relative_workdir_is_taken_from_where_tuidag_runs_with_variables_filled_in(in_fixtures):
    dag, _ = load(FIXTURES / "graph_workdir.yaml")
    assert dag.tasks["a"].workdir == FIXTURES / "work"  # ./$SUB with SUB from envs
    assert dag.tasks["b"].workdir == FIXTURES / "work"  # ${TOP} from secrets
    assert dag.workdir == FIXTURES  # a task without workdir runs in the file's folder


def test_workdir_from_another_folder_is_relative_to_that_folder(tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    dag, _ = load(FIXTURES / "graph_workdir.yaml")
    assert dag.tasks["a"].workdir == tmp_path / "work"


def test_own_format_keeps_workdirs_relative_to_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "dags"
    (folder / "work").mkdir(parents=True)
    path = folder / "own.yaml"
    path.write_text("tasks:\n  a: {run: pwd, workdir: work}\n")
    monkeypatch.chdir(tmp_path)
    assert load(path)[0].tasks["a"].workdir == folder / "work"


@pytest.mark.cli
def test_validate_reports_a_missing_workdir(tmp_path):
    shutil.copy(FIXTURES / "bad_workdir.yaml", tmp_path)
    proc = tuidag("validate", "bad_workdir.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == (
        "bad_workdir.yaml:5:10: task 'a': workdir: './missing-$SUB' ('./missing-x') is not a "
        f"directory (relative to {tmp_path}, where tuidag runs, as for sky)\n"
    )


# --- 4: envs values, null values and --env ---------------------------------------------------------------------
def test_env_values_are_converted_as_skypilot_converts_them(in_fixtures):
    dag, _ = load(FIXTURES / "graph_env_values.yaml")
    env = {k: v for k, v in dag.tasks["values"].env.items() if not k.startswith("SKYPILOT_")}
    assert env == {
        "SHARED": "from-anchor",
        "OVERRIDDEN": "own",
        "FLAG": "True",
        "HEX": "16",
        "BIG": "1000",
        "FLOAT": "1.1",
        "TEXT": "0x10",
    }


def test_env_overrides_fill_null_values_and_win_over_the_file(in_fixtures):
    path = FIXTURES / "bad_null_env.yaml"
    dag, _ = load(path, {"TOKEN": "s3cret", "OK": "overridden", "EXTRA": "x"})
    env = dag.tasks["a"].env
    assert (env["TOKEN"], env["OK"], env["EXTRA"]) == ("s3cret", "overridden", "x")
    assert load(FIXTURES / "graph_env_values.yaml", {"HEX": "0x10"})[0].tasks["values"].env["HEX"] == "0x10"


def test_env_overrides_fill_workdir_variables(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    dag, _ = load(FIXTURES / "graph_workdir.yaml", {"SUB": "elsewhere"})
    assert dag.tasks["a"].workdir == tmp_path / "elsewhere"


def test_env_overrides_apply_to_the_own_format_too(tmp_path):
    path = tmp_path / "own.yaml"
    path.write_text("env: {A: dag}\ntasks:\n  t: {run: 'true', env: {A: task, B: task}}\n")
    task = load(path, {"A": "flag"})[0].tasks["t"]
    assert dict(task.env) == {"A": "flag", "B": "task"}


@pytest.mark.cli
def test_cli_env_flag_fills_a_null_value(tmp_path):
    shutil.copy(FIXTURES / "bad_null_env.yaml", tmp_path / "p.yaml")
    proc = tuidag("run", "--no-tui", "p.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "p.yaml:6:10: task 'a': envs value for 'TOKEN' is null: give it with --env TOKEN=VALUE" in proc.stderr
    assert not (tmp_path / ".tuidag" / "runs").exists()  # nothing started
    proc = tuidag("run", "--no-tui", "--env", "TOKEN=given", "p.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[a] given" in proc.stdout
    proc = tuidag("run", "--no-tui", "--env", "TOKEN", "p.yaml", cwd=tmp_path, env={"TOKEN": "inherited"})
    assert proc.returncode == 0, proc.stderr
    assert "[a] inherited" in proc.stdout


@pytest.mark.cli
def test_cli_env_flag_for_python_dags(tmp_path):
    (tmp_path / "d.py").write_text("from tuidag import Dag\ndag = Dag('d')\ndag.shell('t', 'echo X=$X')\n")
    proc = tuidag("run", "--no-tui", "--env", "X=flag", "d.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[t] X=flag" in proc.stdout


@pytest.mark.cli
def test_cli_env_flag_mistakes_are_usage_errors(tmp_path):
    shutil.copy(FIXTURES / "bad_null_env.yaml", tmp_path / "p.yaml")
    env = {k: v for k, v in os.environ.items() if k != "TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "validate", "--env", "TOKEN", "p.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "TOKEN is not set in tuidag's environment: give its value, TOKEN=VALUE" in proc.stderr
    proc = tuidag("validate", "--env", "1X=2", "p.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "expected KEY or KEY=VALUE" in proc.stderr


# --- 5: a single task file ----------------------------------------------------------------------------------------
def test_single_task_file_keeps_its_settings(in_fixtures):
    dag, _ = load(FIXTURES / "graph_single_task.yaml")
    task = dag.tasks["train"]
    assert (dag.name, task.setup, task.env["LR"], task.depends_on) == ("train", "echo setting up", "0.1", ())


# --- 9: recovery --------------------------------------------------------------------------------------------------
def test_max_restarts_on_errors_becomes_retries(in_fixtures):
    dag, _ = load(FIXTURES / "graph_recovery.yaml")
    assert (dag.tasks["flaky"].retries, dag.tasks["steady"].retries) == (3, 0)


# --- 6: runtime variables -----------------------------------------------------------------------------------------
RUNTIME = """name: runtime
---
name: train
resources: {accelerators: A100:4}
run: |
  printf '%s|%s|%s|%s\\n' "$SKYPILOT_TASK_ID" "$SKYPILOT_NUM_GPUS_PER_NODE" "$SKYPILOT_NODE_RANK" \\
    "$SKYPILOT_CLUSTER_INFO" > train.out
  printf '%s' "$SKYPILOT_TASK_IDS" > ids.out
---
name: eval
resources: {any_of: [{accelerators: {H100: 2}}, {accelerators: [L4:1]}]}
run: printf '%s|%s\\n' "$SKYPILOT_TASK_ID" "$SKYPILOT_NUM_GPUS_PER_NODE" > eval.out
---
name: report
run: printf '%s|%s\\n' "$SKYPILOT_TASK_ID" "$SKYPILOT_NUM_GPUS_PER_NODE" > report.out
"""


def test_runtime_variables(tmp_path):
    path = tmp_path / "runtime.yaml"
    path.write_text(RUNTIME)
    dag, _ = load(path)
    seen_ids = []
    for _ in range(2):
        scheduler, _ = start_run(dag, tmp_path)
        assert set(finish(scheduler).values()) == {"SUCCEEDED"}
        train_id, gpus, rank, cluster = (tmp_path / "train.out").read_text().rstrip("\n").split("|")
        eval_id, eval_gpus = (tmp_path / "eval.out").read_text().split()[0].split("|")
        report_id, report_gpus = (tmp_path / "report.out").read_text().split()[0].split("|")
        assert (gpus, eval_gpus, report_gpus, rank) == ("4", "2", "0", "0")
        assert json.loads(cluster)["cluster_name"] == "runtime"
        ids = [train_id, eval_id, report_id]
        assert len(set(ids)) == 3 and all(scheduler.run_id in task_id for task_id in ids)
        assert (tmp_path / "ids.out").read_text().split("\n") == ids  # file order, one per line as SkyPilot lists
        seen_ids += ids
    assert len(set(seen_ids)) == 6  # unique per task and run


def test_runtime_variables_are_for_skypilot_files_only(tmp_path):
    path = tmp_path / "own.yaml"
    path.write_text("tasks:\n  a: {run: 'true'}\n")
    task = load(path)[0].tasks["a"]
    assert not any(k.startswith("SKYPILOT_") for k in {**task.env, **task.run_env})


def test_a_task_id_set_in_envs_is_the_tasks_own(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\n---\nname: a\nenvs: {SKYPILOT_TASK_ID: mine}\nrun: 'true'\n")
    task = load(path)[0].tasks["p"]  # a single task takes the pipeline's name
    assert task.env["SKYPILOT_TASK_ID"] == "mine" and "SKYPILOT_TASK_ID" not in task.run_env


# --- 3: job groups ------------------------------------------------------------------------------------------------
def test_job_group_model(in_fixtures):
    dag, _ = load(FIXTURES / "graph_job_group.yaml")
    assert dag.job_group == JobGroup(("trainer",), {"replay-buffer": 5.0, "eval-server": 60.0})
    assert dag.max_parallel == 3
    assert {task.env["SKYPILOT_JOBGROUP_NAME"] for task in dag.tasks.values()} == {"train-eval"}


def test_job_group_without_primary_tasks_has_every_task_primary(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(
        "name: g\nexecution: parallel\nprimary_tasks: []\n---\nname: a\nrun: 'true'\n---\nname: b\nrun: 'true'\n"
    )
    assert load(path)[0].job_group == JobGroup(("a", "b"), {})


JOB_GROUP = """name: group
execution: parallel
primary_tasks: [trainer]
termination_delay: {{default: 0, slow-stop: {delay}}}
---
name: trainer
run: |
  until [ -e servers.pid ] && [ -e slow.pid ]; do sleep 0.02; done
  echo trained
---
name: server
run: |
  sleep 60 & echo $! > servers.pid; echo $$ >> servers.pid
  wait
---
name: slow-stop
run: |
  sleep 60 & echo $! > slow.pid; echo $$ >> slow.pid
  wait
"""


def test_job_group_stops_the_other_tasks_once_the_primary_ends(tmp_path):
    path = tmp_path / "group.yaml"
    path.write_text(JOB_GROUP.format(delay="1s"))
    dag, _ = load(path)
    scheduler, rec = start_run(dag, tmp_path, max_parallel=1)  # a job group runs every task at once whatever -j says
    wait_until(
        lambda: (
            (tmp_path / "servers.pid").exists()
            and (tmp_path / "slow.pid").exists()
            and len((tmp_path / "slow.pid").read_text().split()) == 2
        )
    )
    procs = read_pids(tmp_path / "servers.pid") + read_pids(tmp_path / "slow.pid")
    assert finish(scheduler) == {"trainer": "SUCCEEDED", "server": "CANCELLED", "slow-stop": "CANCELLED"}
    snaps = scheduler.snapshot()
    assert snaps["server"].reason == snaps["slow-stop"].reason == JOB_GROUP_STOPPED
    assert not any(alive(pid, created) for pid, created in procs)
    ended = snaps["trainer"].finished_at
    cancelling = {e.task: e.time for e in rec.task_events() if e.new.value == "CANCELLING"}
    assert cancelling["server"] - ended < 1.0 <= cancelling["slow-stop"] - ended  # after its termination_delay
    from tuidag.engine import RunSummary

    assert RunSummary(snaps).ok  # stopping them is how the group ends: the run succeeded


def test_job_group_resumed_with_its_primary_task_reused_stops_the_others(tmp_path):
    path = tmp_path / "group.yaml"
    path.write_text(JOB_GROUP.format(delay=0))
    dag, _ = load(path)
    scheduler, _ = start_run(dag, tmp_path, reused=["trainer"])
    assert finish(scheduler) == {"trainer": "SUCCEEDED", "server": "CANCELLED", "slow-stop": "CANCELLED"}
    assert {snap.reason for name, snap in scheduler.snapshot().items() if name != "trainer"} == {JOB_GROUP_STOPPED}


def test_job_group_fails_when_a_primary_task_fails(tmp_path):
    path = tmp_path / "group.yaml"
    path.write_text(
        "name: g\nexecution: parallel\nprimary_tasks: [a]\n---\nname: a\nrun: exit 3\n---\n"
        "name: server\nrun: sleep 60\n"
    )
    dag, _ = load(path)
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "FAILED", "server": "CANCELLED"}
    from tuidag.engine import RunSummary

    assert not RunSummary(scheduler.snapshot()).ok


@pytest.mark.cli
def test_cli_job_group_exits_0_and_shows_stopped_tasks(tmp_path):
    (tmp_path / "group.yaml").write_text(JOB_GROUP.format(delay=0))
    proc = tuidag("run", "--no-tui", "group.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stopped = [line for line in proc.stdout.splitlines() if "--> CANCELLED in " in line]
    assert len(stopped) == 2 and all(line.endswith(f": {JOB_GROUP_STOPPED}") for line in stopped)
