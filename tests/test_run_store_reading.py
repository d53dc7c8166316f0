"""Reading the run store back: a journal line or summary of the wrong shape is skipped with a warning naming the file
and line, and every command that reads the state dir (`run`, `runs`, `logs`) goes on working."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given

from dags import wait_until
from journal_events import task_events
from slowness import patience
from test_cli import tuidag
from tuidag.model.state import TaskState
from tuidag.store.history import run_info, summary_problem
from tuidag.store.journal import read_journal, replay, task_line
from tuidag.store.journal_records import record_problem
from tuidag.store.runs import RunStore

REPO = Path(__file__).resolve().parent.parent
DAG = "tasks:\n  x:\n    run: echo hello x\n  y:\n    run: echo hello y\n    depends_on: x\n"


def finished_run(tmp_path: Path):
    dag = tmp_path / "dag.yaml"
    dag.write_text(DAG)
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    return dag, run


BAD_LINES = {
    "unknown state": b'{"type":"task","task":"x","to":"BOGUS"}',
    "a list": b"[]",
    "no to": b'{"type":"task","task":"x"}',
    "string pid": b'{"type":"task","task":"x","to":"RUNNING","pid":"123"}',
    "bool pid": b'{"type":"task","task":"x","to":"RUNNING","pid":true}',
    "negative pid": b'{"type":"task","task":"x","to":"RUNNING","pid":-1}',
    "NaN time": b'{"type":"task","task":"x","to":"RUNNING","started_at":NaN}',
    "huge time": b'{"type":"run","event":"started","t":1e300}',
    "null task": b'{"type":"task","task":null,"to":"FAILED"}',
    "unknown type": b'{"type":"mystery"}',
    "not json": b"\x00\xff garbage",
    "tasks not a list": b'{"type":"run","event":"created","tasks":5}',
}


@pytest.mark.parametrize("line", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_a_bad_journal_line_is_skipped_with_a_warning_by_every_command(tmp_path, line):
    dag, run = finished_run(tmp_path)
    lines = run.journal.read_bytes().splitlines(keepends=True)
    lines.insert(3, line + b"\n")  # in the middle: the records after it still count
    run.journal.write_bytes(b"".join(lines))
    run.summary.unlink()  # so that the commands replay the journal (the reaper closes the run again)

    runs = tuidag("runs", cwd=tmp_path)
    warning = f"tuidag: warning: {run.journal}:4: skipped a bad record: "
    assert runs.returncode == 0 and "Traceback" not in runs.stderr
    assert warning in runs.stderr
    assert runs.stdout.splitlines()[1].split()[-2] == "succeeded=2"  # what the records after the bad one say

    logs = tuidag("logs", "y", cwd=tmp_path)
    assert (logs.returncode, logs.stdout.splitlines()[-1]) == (0, "hello y") and "Traceback" not in logs.stderr

    again = tuidag("run", str(dag), "--resume", cwd=tmp_path)
    assert again.returncode == 0 and "Traceback" not in again.stderr and "reusing 2 of 2" in again.stderr


def test_a_torn_last_line_is_skipped_quietly(tmp_path):
    _, run = finished_run(tmp_path)
    with open(run.journal, "ab") as f:
        f.write(b'{"type":"task","task":"x","to":"FAI')  # a crash in the middle of a write
    run.summary.unlink()
    proc = tuidag("runs", cwd=tmp_path)
    assert proc.returncode == 0 and "warning" not in proc.stderr


def test_a_bad_header_leaves_the_run_listed(tmp_path):
    _, run = finished_run(tmp_path)
    lines = run.journal.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    lines[0] = json.dumps({**header, "pid": "me"}).encode() + b"\n"
    run.journal.write_bytes(b"".join(lines))
    run.summary.unlink()
    proc = tuidag("runs", cwd=tmp_path)
    assert proc.returncode == 0 and f"{run.journal}:1: skipped a bad record: bad 'pid'" in proc.stderr
    assert run.run_id in proc.stdout


BAD_SUMMARIES = {
    "counts a number": {"counts": 5},
    "started_at a string": {"started_at": "yesterday"},
    "duration infinite": {"duration": 1e999},
    "counts of no state": {"counts": {"BOGUS": 1}},
    "dag a list": {"dag": ["x"]},
}


@pytest.mark.parametrize("change", BAD_SUMMARIES.values(), ids=BAD_SUMMARIES.keys())
def test_a_bad_summary_falls_back_to_the_journal(tmp_path, change):
    _, run = finished_run(tmp_path)
    summary = json.loads(run.summary.read_text())
    run.summary.write_text(json.dumps({**summary, **change}))
    proc = tuidag("runs", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert f"tuidag: warning: {run.summary}:1: skipped a bad record: bad '" in proc.stderr
    assert proc.stdout.splitlines()[1].split()[-2:] == ["succeeded=2", "succeeded"]


@pytest.mark.parametrize("text", ["[]", "not json", '"a string"', "{}"])
def test_a_summary_that_is_no_object_falls_back_too(tmp_path, text):
    _, run = finished_run(tmp_path)
    run.summary.write_text(text)
    info = run_info(run)
    assert (info.outcome, info.counts) == ("succeeded", {"SUCCEEDED": 2})


def test_what_the_writer_writes_is_valid(tmp_path):
    _, run = finished_run(tmp_path)
    lines = run.journal.read_bytes().splitlines()
    assert [record_problem(json.loads(line)) for line in lines] == [None] * len(lines)
    assert summary_problem(json.loads(run.summary.read_text())) is None


@given(task_events())
def test_every_task_line_the_writer_can_write_passes_validation(event):
    assert record_problem(json.loads(task_line(event))) is None


def test_bad_lines_reach_neither_replay_nor_the_reaper(tmp_path):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                b'{"type":"run","event":"created","tasks":["x"]}',
                b'{"type":"task","task":"x","to":"RUNNING","pid":0}',
                b'{"type":"task","task":"x","to":"RUNNING","pid":4242,"create_time":5.5,"attempt":1}',
                b'{"type":"task","task":"x","to":"BOGUS","pid":1}',
            ]
        )
        + b"\n"
    )
    assert [r.get("pid") for r in read_journal(path)] == [None, 4242]
    record = replay(path).tasks["x"]
    assert (record.state, record.pids) == (TaskState.RUNNING, [(4242, 5.5)])


def test_an_interrupted_run_lasts_until_its_owner_died(tmp_path):
    """kill -9 while the only task runs quietly: the journal's last event is its start, but the run lived on."""
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n  quiet:\n    run: sleep 60\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", str(dag)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def started() -> bool:
        runs = RunStore(tmp_path / ".tuidag").runs()
        task = replay(runs[0].journal).tasks.get("quiet") if runs else None
        return task is not None and task.pid is not None

    try:
        wait_until(started)
        time.sleep(2.5)  # the scenario itself: the run goes on quietly for a while
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:  # the test failed before the kill: stop the run, its task with it
            proc.terminate()
        proc.wait(patience(30))
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    rep = replay(run.journal)
    assert rep.last_time - rep.tasks["quiet"].started_at >= 1.5  # the heartbeat, not the last event (~0 s)
    listed = tuidag("runs", cwd=tmp_path)  # reaps the leftover `sleep` and closes the run
    assert listed.returncode == 0
    info = run_info(run)
    assert info.outcome == "interrupted" and info.duration >= 1.9  # 2.5 s, less one heartbeat and start-up
    assert json.loads(run.summary.read_text())["duration"] >= 1.9


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_journal_that_is_no_regular_file_is_not_read(tmp_path, kind):
    """A FIFO would block every command forever; a symlink would make tuidag read a file of the planter's choice."""
    _, run = finished_run(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text('{"type":"task","task":"x","to":"RUNNING","pid":"top secret"}\n')
    run.journal.unlink()
    os.mkfifo(run.journal) if kind == "fifo" else run.journal.symlink_to(secret)
    run.summary.unlink()
    proc = tuidag("runs", cwd=tmp_path, timeout=30)
    assert proc.returncode == 0 and run.run_id in proc.stdout
    why = "not a regular file" if kind == "fifo" else "a symbolic link, not followed"
    assert f"tuidag: warning: {run.journal}: skipped: {why}" in proc.stderr and "top secret" not in proc.stderr
