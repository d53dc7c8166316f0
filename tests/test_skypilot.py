"""SkyPilot pipeline files: detection by content, the DAG they become, located errors and notes, and real runs.

Every `bad_*.yaml` in tests/skypilot/ states the exact errors it must produce in `# expect:` lines, and a good file
its notes in `# note:` lines (FILE stands for the path as passed).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dags import alive, finish, read_pids, start_run, wait_until
from test_cli import tuidag
from tuidag.model import DagErrors, Location
from tuidag.model.errors import Note
from tuidag.model.loader import load_dag
from tuidag.model.skypilot_loader import SKYPILOT_ENV

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "skypilot"
BAD = sorted(FIXTURES.glob("bad_*.yaml"))


def comment_lines(path: Path, prefix: str, shown_as: str) -> list[str]:
    return [
        line[len(prefix) :].replace("FILE", shown_as)
        for line in path.read_text().splitlines()
        if line.startswith(prefix)
    ]


def copy_fixture(name: str, tmp_path: Path) -> Path:
    """A fixture in a folder of its own: tasks write their files next to it."""
    target = tmp_path / name
    shutil.copy(FIXTURES / name, target)
    return target


def load(path: Path) -> tuple:
    notes: list[Note] = []
    return load_dag(path, notes), [str(n) for n in notes]


def edges(dag) -> set[tuple[str, str]]:
    return {(dep, name) for name, task in dag.tasks.items() for dep in task.depends_on}


# --- loading ----------------------------------------------------------------------------------------------------
def test_chain_in_document_order_with_setup_envs_and_workdir(tmp_path, monkeypatch):
    path = copy_fixture("chain.yaml", tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)  # relative workdirs are taken from where tuidag runs
    dag, notes = load(path)
    assert notes == []
    assert (dag.name, list(dag.tasks)) == ("chain", ["fetch", "train", "report"])
    assert edges(dag) == {("fetch", "train"), ("train", "report")}
    fetch, train, report = dag.tasks.values()
    assert fetch.setup and "setting up fetch" in fetch.setup and "fetch says" in fetch.run
    assert {k: v for k, v in fetch.env.items() if not k.startswith("SKYPILOT_")} == {
        "GREETING": "hello",
        "RETRIES": "3",
        "VERBOSE": "True",
    }  # str() of the YAML value, as SkyPilot makes it
    assert fetch.location == Location(str(path), 4, 7)
    assert train.workdir == tmp_path / "sub" and fetch.workdir is None
    assert report.run is None and "no run step" in report.setup
    assert dag.env == SKYPILOT_ENV and dag.workdir == tmp_path and dag.source == path.resolve()


@pytest.mark.parametrize("name", ["diamond_downstream.yaml", "diamond_edges.yaml"])
def test_diamonds(name):
    path = FIXTURES / name
    dag, notes = load(path)
    assert list(dag.tasks) == ["data-processing", "infer_A", "infer_B", "eval"]
    assert edges(dag) == {
        ("data-processing", "infer_A"),
        ("data-processing", "infer_B"),
        ("infer_A", "eval"),
        ("infer_B", "eval"),
    }
    assert dag.depth == {"data-processing": 0, "infer_A": 1, "infer_B": 1, "eval": 2}
    assert notes == comment_lines(path, "# note: ", str(path))


def test_dependencies_point_at_the_edge_that_declares_them():
    path = FIXTURES / "diamond_downstream.yaml"
    dag, _ = load(path)
    assert dag.tasks["infer_A"].dep_locations == (Location(str(path), 7, 21),)
    assert dag.tasks["eval"].dep_locations == (Location(str(path), 8, 13), Location(str(path), 9, 12))


def test_first_document_with_task_keys_is_a_task(tmp_path):
    path = tmp_path / "no-header.yaml"
    path.write_text("name: a\nrun: echo a\n---\nname: b\nrun: echo b\n---\n")  # a trailing empty document too
    dag, _ = load(path)
    assert (dag.name, list(dag.tasks), edges(dag)) == ("no-header", ["a", "b"], {("a", "b")})


def test_unnamed_tasks_get_numbered_names(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("name: p\n---\nrun: echo one\n---\nrun: echo two\n")
    assert list(load(path)[0].tasks) == ["p-0", "p-1"]  # as SkyPilot names them


def test_detection_is_by_content_not_file_name(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    pipeline = tmp_path / "pipeline.txt"
    pipeline.write_text((FIXTURES / "chain.yaml").read_text())
    assert list(load(pipeline)[0].tasks) == ["fetch", "train", "report"]
    # One document after a '---' marker is tuidag's own format.
    own = tmp_path / "own.yaml"
    own.write_text("---\ntasks:\n  a: {run: echo a}\n")
    assert list(load(own)[0].tasks) == ["a"]
    # Several documents whose first has tasks: still tuidag's format, which holds exactly one document.
    two = tmp_path / "two.yaml"
    two.write_text("tasks:\n  a: {run: echo a}\n---\nname: b\nrun: echo b\n")
    with pytest.raises(DagErrors) as caught:
        load_dag(two)
    assert [str(e) for e in caught.value.errors] == [
        f"{two}:3:1: found a second YAML document: a DAG file holds exactly one"
    ]
    # A single document with SkyPilot task keys is a one-task pipeline, whatever the file is called ...
    single = tmp_path / "task.txt"
    single.write_text("name: a\nrun: echo a\n")
    assert list(load(single)[0].tasks) == ["a"]
    # ... but one with a key of tuidag's own format is tuidag's, which says what is wrong in its own terms.
    own_single = tmp_path / "own-single.yaml"
    own_single.write_text("max_parallel: 2\nrun: echo a\n")
    with pytest.raises(DagErrors) as caught:
        load_dag(own_single)
    assert [str(e) for e in caught.value.errors] == [
        f"{own_single}:1:1: missing 'tasks': a DAG file needs at least one task",
        f"{own_single}:2:1: unknown key 'run'",
    ]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_errors_are_located(path, monkeypatch):
    monkeypatch.chdir(FIXTURES)  # relative workdirs are taken from there (CWD in the messages)
    with pytest.raises(DagErrors) as caught:
        load_dag(path)
    expected = [line.replace("CWD", str(FIXTURES)) for line in comment_lines(path, "# expect: ", str(path))]
    assert expected and [str(err) for err in caught.value.errors] == expected


# --- running ----------------------------------------------------------------------------------------------------
def test_chain_runs_setup_then_run_with_bash_envs_and_workdir(tmp_path, monkeypatch):
    path = copy_fixture("chain.yaml", tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    dag, _ = load(path)
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler) == {"fetch": "SUCCEEDED", "train": "SUCCEEDED", "report": "SUCCEEDED"}
    assert (tmp_path / "order.txt").read_text().split() == ["fetch", "train"]
    fetch = (tmp_path / "logs" / "fetch.log").read_text().splitlines()
    assert fetch[1:] == ["--- setup ---", "setting up fetch", "--- run ---", "fetch says hello from node 0 of 1"]
    train = (tmp_path / "logs" / "train.log").read_text().splitlines()
    if shutil.which("bash"):
        assert train[1:] == ["running under bash", "train in sub"]
    report = (tmp_path / "logs" / "report.log").read_text().splitlines()
    assert report[1:] == ["--- setup ---", "report has no run step"]


@pytest.mark.parametrize("name", ["diamond_downstream.yaml", "diamond_edges.yaml"])
def test_diamond_runs_in_dependency_order(tmp_path, name):
    dag, _ = load(copy_fixture(name, tmp_path))
    scheduler, rec = start_run(dag, tmp_path)
    assert set(finish(scheduler).values()) == {"SUCCEEDED"}
    order = (tmp_path / "order.txt").read_text().split()
    assert order[0] == "data-processing" and order[-1] == "eval" and sorted(order[1:3]) == ["infer_A", "infer_B"]
    seq = {(e.task, e.new.value): e.seq for e in rec.task_events() if e.is_transition}
    assert seq[("eval", "QUEUED")] > max(seq[("infer_A", "SUCCEEDED")], seq[("infer_B", "SUCCEEDED")])


def test_setup_failure_fails_the_task_and_skips_downstream(tmp_path):
    dag, _ = load(copy_fixture("setup_fails.yaml", tmp_path))
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"first": "SUCCEEDED", "second": "FAILED", "third": "SKIPPED"}
    snaps = scheduler.snapshot()
    assert (snaps["second"].reason, snaps["second"].exit_code) == ("setup failed", 1)
    assert snaps["third"].reason == "upstream 'second' failed"
    assert not (tmp_path / "second-ran.txt").exists()
    log = (tmp_path / "logs" / "second.log").read_text().splitlines()
    assert log[1:] == ["--- setup ---", "installing dependencies"]
    assert "RUNNING" not in rec.states("third")


def test_setup_failure_is_retried_like_any_failure(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\n---\nname: flaky\nsetup: test -e ok || { touch ok; exit 3; }\nrun: echo ran\n"
        "resources: {job_recovery: {max_restarts_on_errors: 1}}\n---\nname: after\nrun: echo after\n"
    )
    dag, _ = load(path)
    assert dag.tasks["flaky"].retries == 1  # SkyPilot restarts a managed job that many times on user errors
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"flaky": "SUCCEEDED", "after": "SUCCEEDED"}
    assert rec.states("flaky") == ["QUEUED", "RUNNING", "RETRYING", "RUNNING", "SUCCEEDED"]
    retrying = next(e for e in rec.task_events("flaky") if e.new.value == "RETRYING")
    assert retrying.snapshot.reason == "setup failed"


def test_cancelling_during_setup_kills_it_and_run_never_starts(tmp_path):
    path = tmp_path / "slow-setup.yaml"
    path.write_text(
        "name: p\n---\nname: prepare\nsetup: echo $$ > setup.pid; sleep 30\nrun: touch ran\n"
        "---\nname: after\nrun: touch after-ran\n"
    )
    dag, _ = load(path)
    scheduler, rec = start_run(dag, tmp_path, kill_grace=1.0)
    pid_file = tmp_path / "setup.pid"
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    procs = read_pids(pid_file)
    scheduler.cancel("prepare")
    assert finish(scheduler) == {"prepare": "CANCELLED", "after": "CANCELLED"}
    assert not any(alive(pid, ct) for pid, ct in procs)
    assert not (tmp_path / "ran").exists() and not (tmp_path / "after-ran").exists()
    assert rec.states("prepare") == ["QUEUED", "RUNNING", "CANCELLING", "CANCELLED"]


@pytest.mark.cli
def test_cli_runs_a_pipeline_and_prints_notes(tmp_path):
    copy_fixture("setup_fails.yaml", tmp_path)
    proc = tuidag("run", "--no-tui", "setup_fails.yaml", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "[second] --> FAILED in " in proc.stdout and ": setup failed\n" in proc.stdout
    assert "[third]  --> SKIPPED: upstream 'second' failed" in proc.stdout
    assert (tmp_path / ".tuidag" / "runs").is_dir()

    copy_fixture("diamond_downstream.yaml", tmp_path)
    proc = tuidag("validate", "diamond_downstream.yaml", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == "diamond_downstream.yaml: ok: diamond, 4 tasks, 4 edges\n"
    assert proc.stderr.splitlines() == comment_lines(
        tmp_path / "diamond_downstream.yaml", "# note: ", "diamond_downstream.yaml"
    )
    proc = tuidag("run", "--no-tui", "-q", "diamond_downstream.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stderr.splitlines()) == 3


@pytest.mark.cli
def test_cli_reports_located_errors_with_exit_2(tmp_path):
    proc = tuidag(
        "run",
        "--no-tui",
        "--state-dir",
        str(tmp_path / "state"),
        str((FIXTURES / "bad_keys.yaml").relative_to(REPO)),
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == comment_lines(
        FIXTURES / "bad_keys.yaml", "# expect: ", "tests/skypilot/bad_keys.yaml"
    )
    assert not (tmp_path / "state").exists()


def test_demo_pipeline_loads():
    dag, notes = load(REPO / "demos" / "skypilot_pipeline.yaml")
    assert len(dag.tasks) == 4 and dag.depth["eval"] == 2
    assert len(notes) == 5 and all("is ignored when running locally" in n for n in notes)
