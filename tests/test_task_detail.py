"""`tuidag show RUN --task NAME`: a task's whole story on stdout (text and JSON), from a real run's record; the
facts under it (views/task_detail.py), which the UI's detail screen draws too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from command import tuidag
from dags import make_dag, wait_until
from test_cli import write
from tuidag.control.remote import RemoteRun
from tuidag.launch import RunSession
from tuidag.model.state import TaskState
from tuidag.store.runs import RunStore
from tuidag.store.task_story import fold_attempts
from tuidag.views.task_detail import detail_text, task_detail

pytestmark = [
    pytest.mark.cli,
    pytest.mark.xdist_group("task_detail"),
]  # one worker: the module-scoped fixtures are made once

STORY_DAG = """\
name: story
env:
  API_TOKEN: hunter2-token-value
  MODE: fast
tasks:
  fetch:
    run: echo fetching
  build:
    depends_on: fetch
    retries: 2
    env:
      db_password: s3cret-pass
      LEVEL: "3"
    run: |
      echo "building attempt $TUIDAG_ATTEMPT"
      echo "a very long line of the build script that goes on and on past the width of any terminal it is shown in"
      exit 3
  test:
    depends_on: build
    run: echo test
  late:
    depends_on: fetch
    run: kill -TERM $$
"""


@pytest.fixture(scope="module")
def story_run(tmp_path_factory) -> Path:
    """One real run of STORY_DAG, over: `build` failed three times, `test` skipped, `late` killed by a signal."""
    tmp = tmp_path_factory.mktemp("story")
    result = tuidag("run", str(write(tmp / "dag.yaml", STORY_DAG)), "--no-tui", cwd=tmp)
    assert result.returncode == 1, result.stderr
    return tmp


def test_show_task_prints_every_attempt_with_its_exit_code_and_the_definition(story_run):
    result = tuidag("show", "--task", "build", cwd=story_run)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("build · failed: exit code 3\n")
    lines = out.splitlines()
    # the command as written, each of its lines, whole
    assert 'command      echo "building attempt $TUIDAG_ATTEMPT"' in lines
    assert any("past the width of any terminal it is shown in" in line for line in lines)
    assert f"workdir      {story_run}" in lines
    assert "options      retries 2" in lines
    attempts = [line for line in lines if " #" in line or line.startswith("attempts")]
    assert [a.split()[-4:] for a in attempts] == [
        ["retried", "(exit", "code", "3)"],
        ["retried", "(exit", "code", "3)"],
        ["failed", "(exit", "code", "3)"],
    ]
    assert "depends on   fetch" in lines and "needed by    test" in lines
    assert any(line.startswith("log ") and line.endswith("logs/build.log") for line in lines)


def test_secrets_are_shown_as_dots_and_never_recorded(story_run):
    out = tuidag("show", "--task", "build", cwd=story_run).stdout
    assert "API_TOKEN=•••" in out and "db_password=•••" in out
    assert "MODE=fast" in out and "LEVEL=3" in out and "TUIDAG_TASK=build" in out
    assert "hunter2" not in out and "s3cret" not in out
    (journal,) = (story_run / ".tuidag" / "runs").glob("*/journal.jsonl")
    assert b"hunter2" not in journal.read_bytes() and b"s3cret" not in journal.read_bytes()


def test_a_killed_attempt_names_its_signal_and_a_skipped_task_has_no_attempt(story_run):
    late = tuidag("show", "--task", "late", "--format", "json", cwd=story_run)
    facts = json.loads(late.stdout)
    (attempt,) = facts["attempts"]
    assert (attempt["exit_code"], attempt["signal"], attempt["state"]) == (-15, "SIGTERM", "FAILED")
    assert "failed (killed by SIGTERM)" in tuidag("show", "--task", "late", cwd=story_run).stdout
    skipped = tuidag("show", "--task", "test", cwd=story_run).stdout
    assert skipped.startswith("test · skipped: upstream 'build' failed\n")
    assert "attempts     none" in skipped.splitlines()


def test_show_task_json_holds_the_same_facts(story_run):
    result = tuidag("show", "--task", "build", "--format", "json", cwd=story_run)
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["format"] == 1 and facts["task"] == "build" and facts["state"] == "FAILED"
    assert facts["command"].startswith('echo "building attempt $TUIDAG_ATTEMPT"\n')
    assert facts["env"]["API_TOKEN"] == "•••" and facts["env"]["MODE"] == "fast"
    assert facts["depends_on"] == ["fetch"] and facts["needed_by"] == ["test"]
    assert [(a["number"], a["state"], a["exit_code"]) for a in facts["attempts"]] == [
        (1, "RETRYING", 3),
        (2, "RETRYING", 3),
        (3, "FAILED", 3),
    ]
    for a, b in zip(facts["attempts"], facts["attempts"][1:]):
        assert a["started_at"] <= a["finished_at"] <= b["started_at"]
    assert facts["log"].endswith("logs/build.log")


def test_an_unknown_task_is_a_usage_error_naming_the_closest(story_run):
    result = tuidag("show", "--task", "biuld", cwd=story_run)
    assert result.returncode == 2
    assert "has no task 'biuld' (did you mean 'build'?)" in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_a_matrix_task_shows_its_instances_side_by_side_and_how_to_see_one(tmp_path):
    dag = write(
        tmp_path / "dag.yaml",
        "tasks:\n  train:\n    run: 'test ${{ matrix.seed }} != 2 || exit 7'\n    matrix: {seed: [3, 2, 1]}\n",
    )
    assert tuidag("run", str(dag), "--no-tui", cwd=tmp_path).returncode == 1
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    text = tuidag("show", "--task", "train", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "train · a matrix of 3 instances · 2 succeeded, 1 failed"
    assert lines[1].split() == ["INSTANCE", "STATE", "DURATION", "ATTEMPTS", "EXIT"]
    rows = [line.split() for line in lines[2:5]]
    assert [(row[0], row[1], row[3], row[4]) for row in rows] == [
        ("train[seed=3]", "succeeded", "1", "0"),
        ("train[seed=2]", "failed", "1", "7"),
        ("train[seed=1]", "succeeded", "1", "0"),
    ]
    assert lines[5] == f"one instance's detail: tuidag show {run.run_id} --task 'train[seed=3]'"
    data = json.loads(tuidag("show", "--task", "train", "--format", "json", cwd=tmp_path).stdout)
    assert data["group"] == "train"
    assert [(i["name"], i["state"], i["exit_code"]) for i in data["instances"]] == [
        ("train[seed=3]", "SUCCEEDED", 0),
        ("train[seed=2]", "FAILED", 7),
        ("train[seed=1]", "SUCCEEDED", 0),
    ]
    one = tuidag("show", "--task", "train[seed=2]", cwd=tmp_path)  # an instance: its whole detail, as before
    assert one.returncode == 0 and "exit code 7" in one.stdout
    near = tuidag("show", "--task", "trian", cwd=tmp_path)
    assert near.returncode == 2 and "(did you mean 'train'?)" in near.stderr


def test_format_without_task_is_a_usage_error(story_run):
    result = tuidag("show", "--format", "json", cwd=story_run)
    assert result.returncode == 2 and "--task" in result.stderr


def test_the_runs_own_text_reaches_the_terminal_inert(tmp_path):
    """A command and a reason holding escape sequences (a title change, a screen clear) print without them."""
    dag = 'tasks:\n  evil:\n    run: "echo hi \\e]2;pwned\\a \\e[2J; exit 4"\n'
    tuidag("run", str(write(tmp_path / "dag.yaml", dag)), "--no-tui", cwd=tmp_path)
    out = tuidag("show", "--task", "evil", cwd=tmp_path).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert "echo hi" in out and "exit 4" in out
    raw = json.loads(tuidag("show", "--task", "evil", "--format", "json", cwd=tmp_path).stdout)
    assert "\x1b]2;pwned\x07" in raw["command"]  # the data keeps it (escaped in the JSON text)


def test_why_it_ran_is_the_plans_reason(tmp_path):
    """A task with inputs and outputs runs when an input changed, and its detail says so; when nothing changed it
    did not run, and its detail says it was up to date."""
    (tmp_path / "data.txt").write_text("one\n")
    dag = write(
        tmp_path / "dag.yaml",
        "tasks:\n  make:\n    inputs: [data.txt]\n    outputs: [out.txt]\n    run: cp data.txt out.txt\n",
    )
    tuidag("run", str(dag), "--no-tui", cwd=tmp_path)
    first = json.loads(tuidag("show", "--task", "make", "--format", "json", cwd=tmp_path).stdout)
    assert first["why"] == "no earlier success with this definition"
    (tmp_path / "data.txt").write_text("two\n")
    tuidag("run", str(dag), "--no-tui", cwd=tmp_path)
    second = tuidag("show", "--task", "make", cwd=tmp_path).stdout
    assert any(line.startswith("why it ran   input data.txt changed") for line in second.splitlines()), second
    tuidag("run", str(dag), "--no-tui", cwd=tmp_path)
    third = tuidag("show", "--task", "make", cwd=tmp_path).stdout
    assert third.startswith("make · up to date (run ") and "attempts     none" in third.splitlines()


def test_a_callables_return_value_is_in_its_detail(tmp_path):
    dag = make_dag({"calc": {"func": lambda: {"answer": 42}}, "odd": {"func": lambda: {1, 2}}}, workdir=tmp_path)
    session = RunSession.create(dag, tmp_path / "state")
    session.scheduler.start()
    assert session.scheduler.wait(30)
    session.finish()
    store = RunStore(tmp_path / "state")
    source = RemoteRun.stored(session.run, store)
    calc = task_detail(source, "calc")
    assert calc["value"] == {"answer": 42} and calc["callable"].endswith("<lambda>")
    assert 'return value {"answer": 42}' in detail_text(calc)
    odd = task_detail(source, "odd")
    assert odd["value_repr"] == "{1, 2}" and "{1, 2}  (its repr: not plain JSON)" in detail_text(odd)


def test_a_services_attempt_says_when_it_became_ready():
    """A service's attempt is READY until the run ends it: its detail says when and what said so."""
    t0 = time.time()
    records = [
        {"type": "task", "task": "db", "t": t0, "to": "QUEUED", "attempt": 0},
        {"type": "task", "task": "db", "t": t0 + 1, "to": "RUNNING", "attempt": 1},
        {"type": "task", "task": "db", "t": t0 + 3, "to": "READY", "attempt": 1, "reason": "port 5432, 2.0s"},
    ]
    story = fold_attempts(records)
    (attempt,) = story.attempts
    assert attempt.state is TaskState.READY and attempt.ready_at == t0 + 3 and attempt.ready == "port 5432, 2.0s"
    records.append({"type": "task", "task": "db", "t": t0 + 9, "to": "CANCELLED", "attempt": 1, "reason": "run ended"})
    (ended,) = fold_attempts(records).attempts
    assert (ended.state, ended.finished_at, ended.ready_at) == (TaskState.CANCELLED, t0 + 9, t0 + 3)


def test_a_live_runs_task_shows_its_attempt_going_on(tmp_path):
    """On a run still going on (detached), the detail is the live one: the attempt runs, its clock ticks."""
    gate = tmp_path / "go"
    dag = write(tmp_path / "dag.yaml", f"tasks:\n  wait:\n    run: while [ ! -e {gate} ]; do sleep 0.05; done\n")
    assert tuidag("run", str(dag), "-d", cwd=tmp_path).returncode == 0

    def facts() -> dict:
        result = tuidag("show", "--task", "wait", "--format", "json", cwd=tmp_path)
        return json.loads(result.stdout) if result.returncode == 0 else {}

    try:
        seen: list[dict] = []
        wait_until(lambda: bool(seen.append(facts()) or (seen[-1].get("attempts") and seen[-1]["state"] == "RUNNING")))
        (attempt,) = seen[-1]["attempts"]
        assert attempt["state"] == "RUNNING" and attempt["finished_at"] is None
        # its clock goes on: a later detail says it has lasted longer
        wait_until(lambda: facts()["attempts"][0]["duration"] > attempt["duration"])
        assert "wait · running" in tuidag("show", "--task", "wait", cwd=tmp_path).stdout
    finally:
        gate.touch()
    wait_until(lambda: facts().get("state") == "SUCCEEDED", timeout=30)


def test_a_skypilot_tasks_setup_and_the_ids_it_was_given(tmp_path):
    """A SkyPilot task's `setup` is shown with its command, and the variables whose value holds the run's id show
    the value the task got."""
    tuidag(
        "run",
        str(write(tmp_path / "sky.yaml", "name: one\nsetup: echo setting up\nrun: echo running\n")),
        "--no-tui",
        cwd=tmp_path,
    )
    facts = json.loads(tuidag("show", "--task", "one", "--format", "json", cwd=tmp_path).stdout)
    assert (facts["setup"], facts["command"]) == ("echo setting up", "echo running")
    assert facts["env"]["SKYPILOT_TASK_ID"] == f"sky-managed-{facts['run_id']}_one-0"
    lines = tuidag("show", "--task", "one", cwd=tmp_path).stdout.splitlines()
    assert lines[1:3] == ["setup        echo setting up", "command      echo running"]


def test_a_run_recorded_before_definitions_were_kept_still_shows_its_attempts(story_run, tmp_path):
    """A run an earlier tuidag made has no definitions in its header: the detail says so, and shows the rest."""
    import shutil

    (journal,) = (story_run / ".tuidag" / "runs").glob("*/journal.jsonl")
    run = journal.parent
    old = tmp_path / "state" / "runs" / run.name
    shutil.copytree(run, old)
    header, rest = (old / "journal.jsonl").read_bytes().split(b"\n", 1)
    fields = json.loads(header)
    del fields["definitions"]
    (old / "journal.jsonl").write_bytes(json.dumps(fields).encode() + b"\n" + rest)
    result = tuidag("show", "--task", "build", "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "definition   not recorded (the run was made by an older tuidag)" in lines
    assert "depends on   fetch" in lines and sum(" #" in line or "attempts     #" in line for line in lines) == 3
