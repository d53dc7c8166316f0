"""A tuidag killed with SIGKILL mid-run: the journal survives, the run shows as interrupted, and the next tuidag
command kills exactly the processes the dead run left behind. Plus --resume and concurrent runs on one state dir."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dags import alive, read_pids, wait_until
from slowness import patience
from test_cli import tuidag, write
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore

LONG_DAG = """\
tasks:
  quick:
    run: echo quick
  slow:
    depends_on: quick
    run: |
      setsid sh -c 'echo $$ >> {pids}; sleep 120' &
      sh -c 'trap "" TERM; echo $$ >> {pids}; sleep 120' &
      echo $$ >> {pids}; wait
  after:
    depends_on: slow
    run: echo after
"""


def start_and_kill9(tmp_path: Path) -> tuple[list[tuple[int, float]], Path]:
    pids = tmp_path / "pids"
    dag = write(tmp_path / "dag.yaml", LONG_DAG.format(pids=pids))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    refs = read_pids(pids)

    def slow_running_on_record() -> bool:
        """The journal is written on its own thread: under load it can trail what the task already did."""
        runs = RunStore(tmp_path / ".tuidag").runs()
        if not runs or not runs[0].journal.exists():
            return False
        tasks = replay(runs[0].journal).tasks
        return "slow" in tasks and tasks["slow"].state.value == "RUNNING"

    wait_until(slow_running_on_record)
    proc.send_signal(signal.SIGKILL)
    proc.wait(patience(10))
    return refs, dag


def test_kill9_leaves_readable_journal_and_next_command_reaps(tmp_path):
    bystander = subprocess.Popen(["sleep", "120"])  # another program's process: must never be touched
    try:
        refs, _dag = start_and_kill9(tmp_path)
        assert all(alive(*r) for r in refs), "the leftovers should still be running before the reap"
        (run,) = RunStore(tmp_path / ".tuidag").runs()
        raw = run.journal.read_bytes().splitlines()
        assert raw and all(json.loads(line) for line in raw)  # every line parses
        states = {n: t.state.value for n, t in replay(run.journal).tasks.items()}
        assert states["quick"] == "SUCCEEDED" and states["slow"] == "RUNNING"

        listing = tuidag("runs", cwd=tmp_path)
        assert listing.returncode == 0
        assert "was interrupted; killed 5 leftover processes" in listing.stderr
        assert "slow: pid" in listing.stderr
        assert listing.stdout.splitlines()[1].split()[-1] == "interrupted"
        wait_until(lambda: not any(alive(*r) for r in refs), timeout=10)
        assert bystander.poll() is None
        summary = json.loads(run.summary.read_text())
        assert summary["outcome"] == "interrupted" and len(summary["reaped"]) == 5
        again = tuidag("runs", cwd=tmp_path)  # reaped once; the next command has nothing to say
        assert "interrupted;" not in again.stderr and again.stdout.splitlines()[1].endswith("interrupted")
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize("identity", ["other create time", "no create time, no tag"])
def test_reaper_never_touches_a_recycled_pid(tmp_path, identity):
    """A journal naming a live pid that now belongs to another process (another create time, or without the run's
    tag in its environment) must leave that process alone."""
    bystander = subprocess.Popen(["sleep", "120"])
    try:
        store = RunStore(tmp_path / "state")
        _run, journal = store.create_run("fake", None, ["t"])
        record = {
            "type": "task",
            "seq": 1,
            "t": 1.0,
            "task": "t",
            "from": "QUEUED",
            "to": "RUNNING",
            "pid": bystander.pid,
        }
        if identity == "other create time":
            record["create_time"] = psutil.Process(bystander.pid).create_time() - 100
        journal.write(record)
        journal.close()
        # the run's owner is this very process; a fresh process must see it as dead to reap it
        code = (
            "import sys; from pathlib import Path; from tuidag.store.runs import RunStore; "
            "from tuidag.store.reaper import reap_interrupted; "
            "r = reap_interrupted(RunStore(Path(sys.argv[1]))); print(len(r), sum(len(x.processes) for x in r))"
        )
        from tuidag.store import runs as runs_module

        for fd in runs_module._owner_locks:  # give up ownership as a dead process would
            os.close(fd)
        runs_module._owner_locks.clear()
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "state")], capture_output=True, text=True)
        assert out.stdout.split() == ["1", "0"], out.stderr
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_resume_reuses_succeeded_tasks(tmp_path):
    flag = tmp_path / "fixed"
    counter = tmp_path / "a-runs"
    dag = write(
        tmp_path / "dag.yaml",
        f"""\
tasks:
  a:
    run: echo a >> {counter}; echo output of a
  b:
    depends_on: a
    run: test -e {flag}
  c:
    depends_on: b
    run: echo c
  d:
    run: echo d
""",
    )
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 1
    flag.touch()
    proc = tuidag("run", str(dag), "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reusing 2 of 4 tasks (a, d)" in proc.stderr
    assert counter.read_text() == "a\n"  # a did not run again
    first, second = RunStore(tmp_path / ".tuidag").runs()
    rep = replay(second.journal)
    assert rep.tasks["a"].reused and rep.tasks["a"].state.value == "SUCCEEDED"
    assert not rep.tasks["b"].reused and rep.tasks["b"].state.value == "SUCCEEDED"
    assert rep.header["resumed_from"] == first.run_id
    assert second.log_path("a").read_text() == first.log_path("a").read_text()
    assert "output of a" in tuidag("logs", "a", cwd=tmp_path).stdout
    assert "SUCCEEDED (reused)" in proc.stdout


def test_resume_reruns_tasks_whose_definition_changed(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a:\n    run: echo one\n  b:\n    depends_on: a\n    run: echo b\n")
    tuidag("run", str(dag), cwd=tmp_path)
    write(dag, "tasks:\n  a:\n    run: echo two\n  b:\n    depends_on: a\n    run: echo b\n")
    proc = tuidag("run", str(dag), "--resume", cwd=tmp_path)
    assert "reusing 0 of 2 tasks" in proc.stderr


def test_resume_named_run_and_unknown_run(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a:\n    run: echo a\n")
    tuidag("run", str(dag), cwd=tmp_path)
    (first,) = RunStore(tmp_path / ".tuidag").runs()
    assert "reusing 1 of 1" in tuidag("run", str(dag), "--resume", first.run_id, cwd=tmp_path).stderr
    bad = tuidag("run", str(dag), "--resume", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("tuidag: --resume: no run 'nope'")


def test_two_tuidags_on_one_state_dir(tmp_path):
    """Concurrent runs don't corrupt each other, and neither one's reaper touches the other's live run."""
    pids, go = tmp_path / "pids", tmp_path / "go"
    slow = write(
        tmp_path / "slow.yaml",
        f"tasks:\n  s:\n    run: echo $$ > {pids}; while [ ! -e {go} ]; do sleep 0.05; done; echo slow done\n",
    )
    fast = write(tmp_path / "fast.yaml", "tasks:\n" + "".join(f"  t{i}:\n    run: echo {i}\n" for i in range(20)))
    runner = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", str(slow)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    (ref,) = read_pids(pids)
    results = [
        subprocess.Popen(
            [sys.executable, "-m", "tuidag", "run", str(fast)],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in results:
        _, err = proc.communicate(timeout=patience(60))
        assert proc.returncode == 0 and "interrupted" not in err
    assert alive(*ref)  # the slow run's task was left alone
    assert "still running" in tuidag("run", str(slow), "--resume", cwd=tmp_path).stderr
    go.touch()
    assert runner.wait(patience(30)) == 0
    runs = RunStore(tmp_path / ".tuidag").runs()
    assert len(runs) == 3
    for run in runs:
        records = list(read_journal(run.journal))
        assert len(records) == len(run.journal.read_bytes().splitlines())
        assert json.loads(run.summary.read_text())["outcome"] == "succeeded"
