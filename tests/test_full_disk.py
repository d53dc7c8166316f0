"""A state dir whose disk fills up (a real 1 MB tmpfs): one clear error, no traceback, the run stops starting tasks
under its failure policy, exit 1, and its outcome is recorded as honestly as the store allows."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dags import finish, make_dag, start_run, wait_until
from disks import small_disk
from slowness import patience
from tuidag.engine.scheduler import RerunRefused
from tuidag.store.journal import read_journal
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli


def tuidag(*args: str, cwd: Path, **kwargs) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"} | {"NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tuidag", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def echo_dag(path: Path, count: int, first: str = "", policy: str = "skip-downstream") -> Path:
    lines = [f"on_failure: {policy}", "tasks:", *([f"  long: {{run: '{first}'}}"] if first else [])]
    lines += [f"  t{i}: {{run: echo hello from task {i}}}" for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def fill(disk: Path) -> None:
    """Take the disk's last free block."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with pytest.raises(OSError) as info:
            while True:
                os.write(fd, b"x" * 4096)
        assert info.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


def table(stdout: str) -> dict[str, tuple[str, int]]:
    """The final summary table: task -> (state, attempts)."""
    rows = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) >= 3 and cells[1] in ("SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED") and cells[2].isdigit():
            rows[cells[0]] = (cells[1], int(cells[2]))
    return rows


def test_a_disk_that_fills_up_stops_the_run_with_one_clear_error(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        state = disk / "state"
        # 1,000 logs need ~4 MB (a page each): the disk fills up a few hundred tasks in, and the journal's next
        # page fails within a few dozen more, so many tasks are certainly still waiting when the run stops
        dag = echo_dag(tmp_path / "echoes.yaml", 1000)
        proc = tuidag("run", "--no-tui", "-q", "-j", "4", str(dag), "--state-dir", str(state), cwd=tmp_path)
        out, err = proc.communicate(timeout=patience(120))
        assert proc.returncode == 1, err
        assert "Traceback" not in err + out
        # each log takes a page of its own and the journal's appends share one, so a new log usually fails first;
        # but the journal's next page may be the one the disk has no room for (seen in CI): either way, one line
        (line,) = err.splitlines()
        assert line in [
            f"tuidag: error: the state dir {state} is full (No space left on device): {what} can't be written "
            "any more, so no more tasks start; running tasks finish"
            for what in ("task logs", "the run's journal")
        ]
        assert out.endswith("tuidag: run incomplete: state dir full (see the error above)\n")
        rows = table(out)
        assert len(rows) == 1000
        # stopped, not killed: every CANCELLED task is one that never started
        assert {state for state, _ in rows.values()} <= {"SUCCEEDED", "FAILED", "CANCELLED"}
        assert any(state == "CANCELLED" for state, _ in rows.values())
        assert all(attempts == 0 for state, attempts in rows.values() if state == "CANCELLED")

        (run,) = RunStore(state).runs()
        assert sorted(os.listdir(run.path)) == ["journal.jsonl", "logs", "owner.lock", "summary.json"]  # no temp file
        summary = json.loads(run.summary.read_text())
        assert summary["outcome"] == "incomplete: state dir full"
        assert summary["counts"] == {
            s: n for s in ("SUCCEEDED", "FAILED", "CANCELLED") if (n := sum(v[0] == s for v in rows.values()))
        }
        ends = [r for r in read_journal(run.journal) if r.get("to") in ("SUCCEEDED", "FAILED", "CANCELLED")]
        assert 0 < len(ends) < 1000  # it stops where the disk filled up: not every task's end is in it

        listing = subprocess.run(
            [sys.executable, "-m", "tuidag", "runs", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=patience(60),
        )
        assert listing.returncode == 0 and listing.stderr == ""
        assert listing.stdout.splitlines()[1].endswith("incomplete: state dir full")


@pytest.mark.parametrize("policy", ["skip-downstream", "finish-running", "cancel-all"])
def test_a_running_task_is_treated_by_the_failure_policy(tmp_path, policy):
    """The journal can't be trusted once a write failed: no more tasks start; a running task finishes, unless the
    DAG's policy is cancel-all (then it is killed, as when a task fails)."""
    go, finished = tmp_path / "go", tmp_path / "finished"
    # waits (up to ~30 s of a quiet machine) for the test to say go, writing nothing to its log on the full disk
    long = (
        f"for i in $(seq {round(patience(30) / 0.02)}); do [ -e {go} ] && break; sleep 0.02; done; "
        f"[ -e {go} ] && touch {finished}"
    )
    with small_disk(tmp_path / "disk") as disk:
        dag = echo_dag(tmp_path / "echoes.yaml", 300, first=long, policy=policy)
        proc = tuidag("run", "--no-tui", "-q", "-j", "4", str(dag), "--state-dir", str(disk / "state"), cwd=tmp_path)
        error = proc.stderr.readline()
        assert error.startswith(f"tuidag: error: the state dir {disk / 'state'} is full"), error
        if policy != "cancel-all":
            assert error.rstrip().endswith("running tasks finish")
            go.touch()
        else:
            assert error.rstrip().endswith("running tasks are cancelled (on_failure: cancel-all)")
        out, err = proc.communicate(timeout=patience(60))
        assert proc.returncode == 1 and "Traceback" not in err, err
        if policy == "cancel-all":
            assert table(out)["long"] == ("CANCELLED", 1) and not finished.exists()
        else:
            assert table(out)["long"] == ("SUCCEEDED", 1) and finished.exists()


def test_runs_closes_a_crashed_run_on_a_full_disk(tmp_path):
    """`tuidag runs` while the disk is full: the reaper still kills what a crashed run left and records it as
    interrupted, in the room the run reserved for its summary; no traceback."""
    with small_disk(tmp_path / "disk") as disk:
        state = disk / "state"
        dag = tmp_path / "slow.yaml"
        dag.write_text(f"tasks:\n  slow: {{run: 'echo $$ > {tmp_path}/pid; exec sleep 60'}}\n")
        proc = tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), cwd=tmp_path)
        wait_until(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip(), timeout=30)
        sleeper = psutil.Process(int((tmp_path / "pid").read_text()))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        fill(disk)
        listing = subprocess.run(
            [sys.executable, "-m", "tuidag", "runs", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=patience(60),
        )
        assert listing.returncode == 0 and "Traceback" not in listing.stderr, listing.stderr
        assert "was interrupted; killed 1 leftover process: slow: pid" in listing.stderr
        assert listing.stdout.splitlines()[1].endswith("interrupted")
        wait_until(lambda: not sleeper.is_running() or sleeper.status() == psutil.STATUS_ZOMBIE, timeout=10)
        (run,) = RunStore(state).runs()
        assert json.loads(run.summary.read_text())["outcome"] == "interrupted"


def test_a_full_disk_at_the_start_is_refused_before_anything_starts(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        state = disk / "state"
        (state / "runs").mkdir(parents=True, mode=0o700)
        fill(disk)
        dag = tmp_path / "one.yaml"
        dag.write_text(f"tasks:\n  a: {{run: touch {tmp_path}/started}}\n")
        proc = tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), cwd=tmp_path)
        _out, err = proc.communicate(timeout=patience(60))
        assert proc.returncode == 2 and err == f"tuidag: state dir {state} is full (No space left on device)\n"
        assert not (tmp_path / "started").exists()
        assert [n for n in os.listdir(state / "runs") if n != ".reap.lock"] == []  # the half-made run is gone


def test_stop_starts_nothing_more_and_lets_running_tasks_finish(tmp_path):
    """The engine side of a journal that failed: `Scheduler.stop` (skip-downstream here), and no re-run after it."""
    go = tmp_path / "go"
    tasks = {"long": f"while [ ! -e {go} ]; do sleep 0.02; done", "next": {"run": "true", "depends_on": ["long"]}}
    dag = make_dag(tasks, workdir=tmp_path)
    scheduler, recorder = start_run(dag, tmp_path)
    recorder.wait_state("long", "RUNNING")
    assert scheduler.stop("not started: state dir full") == ["next"]
    go.touch()
    assert finish(scheduler) == {"long": "SUCCEEDED", "next": "CANCELLED"}
    assert scheduler.snapshot()["next"].reason == "not started: state dir full"
    with pytest.raises(RerunRefused, match="the run was stopped: not started: state dir full"):
        scheduler.rerun("next")


def test_a_task_log_that_fills_the_state_dir_stops_the_run_like_a_full_journal(tmp_path):
    """A task's output fills the disk; the journal's small appends still fit in its last page, so only the next
    task's log fails: each later task was started and FAILED "could not start: No space left on device", and the
    run said failed, not that the state dir was full."""
    with small_disk(tmp_path / "disk") as disk:
        state = disk / "state"
        dag = tmp_path / "fill.yaml"
        dag.write_text(
            "tasks:\n  fill: {run: 'head -c 2000000 /dev/zero || true'}\n"
            + "".join(f"  t{i}: {{run: echo {i}, depends_on: fill}}\n" for i in range(5))
        )
        proc = tuidag("run", "--no-tui", "-q", "-j", "1", str(dag), "--state-dir", str(state), cwd=tmp_path)
        out, err = proc.communicate(timeout=patience(120))
        assert proc.returncode == 1 and "Traceback" not in err + out, err
        assert err.splitlines() == [
            f"tuidag: error: the state dir {state} is full (No space left on device): task logs can't be written "
            "any more, so no more tasks start; running tasks finish"
        ]
        rows = table(out)
        assert rows == {"fill": ("SUCCEEDED", 1), **{f"t{i}": ("CANCELLED", 0) for i in range(5)}}
        assert out.count("not started: state dir full") == 5
        assert out.endswith("tuidag: run incomplete: state dir full (see the error above)\n")
        (run,) = RunStore(state).runs()
        assert json.loads(run.summary.read_text())["outcome"] == "incomplete: state dir full"
        listing = subprocess.run(
            [sys.executable, "-m", "tuidag", "runs", "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=patience(60),
        )
        assert listing.stdout.splitlines()[1].endswith("incomplete: state dir full")


def test_no_room_to_start_the_command_after_its_setup_ends_the_task_cancelled(tmp_path):
    """A SkyPilot task's setup fills the disk: its `--- run ---` line can't be written, so its command never starts
    (it was an engine error before, 'internal error (see tuidag's log)')."""
    with small_disk(tmp_path / "disk") as disk:
        state = disk / "state"
        task = write_task(
            tmp_path / "task.yaml", "name: prep\nsetup: head -c 2000000 /dev/zero || true\nrun: echo never\n"
        )
        proc = tuidag("run", "--no-tui", "-q", str(task), "--state-dir", str(state), cwd=tmp_path)
        out, err = proc.communicate(timeout=patience(120))
        assert proc.returncode == 1 and "Traceback" not in err + out, err
        assert err.splitlines() == [
            f"tuidag: error: the state dir {state} is full (No space left on device): task logs can't be written "
            "any more, so no more tasks start; running tasks finish"
        ]
        assert table(out) == {"prep": ("CANCELLED", 1)}
        assert "not started: state dir full" in out and "never" not in out


def write_task(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
