"""A live run whose engine is stopped (SIGSTOP) or killed (kill -9), with real processes and real signals.

- A request carries its deadline. A `tuidag pause` that gave up on a stopped engine was applied anyway once the
  engine was continued (the run then sat paused): the engine now drops a request whose deadline passed, and the
  client says "not done" when it knows (no `started` came before the deadline) and "may or may not" only when the
  engine had started the control.
- A viewer says "not answering" while the engine that holds the run does not answer, and goes on live after SIGCONT;
  it once opened such a run as a finished post-mortem.
- `tuidag logs -f` on a task whose run's engine died says so and exits non-zero (it stopped with exit 0)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from dags import Recorder, make_dag, served_run, wait_until
from slowness import patience
from test_detached_runs import (
    no_engine_left_behind,  # noqa: F401 (autouse: ends what a failed test left)
    start_detached,
    the_run,
    tuidag,
)
from tuidag.control import engine_connection, protocol, remote, server
from tuidag.control.client import ControlClient, NotAnswered, NotLive, live_status
from tuidag.control.remote import ANSWERING, NOT_ANSWERING, RemoteRun
from tuidag.engine.events import RunEvent, TaskEvent
from tuidag.model.state import TaskState
from tuidag.store.journal import replay
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli
S = TaskState


@pytest.fixture
def stopped_engine(tmp_path):
    """A detached run (`gate` waits for a file, `after` follows it) and a way to stop and continue its engine; the
    engine is continued however the test ends."""
    gate = tmp_path / "go"
    _dag, run_id, pid = start_detached(
        tmp_path,
        f"""\
tasks:
  gate: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
  after: {{run: "echo after", depends_on: [gate]}}
""",
    )
    run = the_run(tmp_path, run_id)
    wait_until(lambda: (run.path / protocol.SOCKET_NAME).exists())
    wait_until(
        lambda: (
            replay(run.journal).tasks.get("gate") is not None and replay(run.journal).tasks["gate"].state is S.RUNNING
        )
    )
    try:
        yield run, pid, gate
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        gate.touch()


def stop(pid: int) -> None:
    """SIGSTOP, and wait until every thread of the process is stopped (the signal takes effect asynchronously: a
    thread on another core may still answer a request right after `kill` returned)."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as f:
                states.append(f.read().rpartition(b")")[2].split()[0])
        return all(state in (b"T", b"t") for state in states)

    wait_until(stopped)


def engine_log(run) -> str:
    return (run.path / "engine.log").read_text()


def test_a_pause_that_gave_up_on_a_stopped_engine_never_happens_and_the_client_says_so(stopped_engine):
    run, pid, _ = stopped_engine
    stop(pid)
    try:
        with pytest.raises(
            NotAnswered,
            match=rf"\(pid {pid}\) did not answer in 2 s \(stopped, or too busy\): "
            r"pause not done, and it won't be",
        ):
            ControlClient(run, timeout=2).request("pause")
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: "dropped pause from pid" in engine_log(run))
    assert live_status(run, timeout=patience(10))["paused"] is False
    assert "scheduling paused" not in engine_log(run)


def test_a_control_the_engine_started_but_did_not_answer_in_time_may_or_may_not_have_happened(tmp_path, monkeypatch):
    """Only here can the client not know: the engine said `started` and then took longer than the deadline."""
    release = threading.Event()
    control = server.ControlServer._control

    def slow(self, request):
        release.wait(patience(30))
        return control(self, request)

    monkeypatch.setattr(server.ControlServer, "_control", slow)
    with served_run(make_dag({"a": "sleep 30"}, workdir=tmp_path), tmp_path) as session:
        # The deadline runs out while the control is held, but `started` must come before it: it scales
        with (
            ControlClient(session.run, timeout=patience(1)) as client,
            pytest.raises(
                NotAnswered,
                match=f"started the pause but did not answer in {patience(1):.0f} s: it "
                "may or may not have taken effect",
            ),
        ):
            client.request("pause")
        release.set()
        wait_until(lambda: session.scheduler.paused)  # it did, this time


def test_a_viewer_says_not_answering_while_the_engine_is_stopped_and_its_request_never_happens(
    stopped_engine, monkeypatch
):
    run, pid, gate = stopped_engine
    monkeypatch.setattr(engine_connection, "REQUEST_TIMEOUT", 1.0)
    viewer = RemoteRun.attach(run, RunStore(run.path.parent.parent))
    seen = Recorder()
    viewer.subscribe(seen)
    try:
        stop(pid)
        with pytest.raises(NotAnswered, match="pause not done, and it won't be"):
            viewer.pause()
        seen.wait_for(lambda: any(type(e) is RunEvent and e.kind == NOT_ANSWERING for e in seen.events))
        assert viewer.live and not viewer.finished and "not answering" in viewer.not_answering
        with pytest.raises(NotLive, match=r"not answering .*: pause not sent"):
            viewer.pause()
        os.kill(pid, signal.SIGCONT)
        seen.wait_for(lambda: any(type(e) is RunEvent and e.kind == ANSWERING for e in seen.events))
        wait_until(lambda: "dropped pause from pid" in engine_log(run))
        assert not viewer.paused and viewer.not_answering is None
        gate.touch()
        seen.wait_state("after", "SUCCEEDED")
    finally:
        viewer.close()


def test_a_viewer_attached_to_a_stopped_engine_waits_for_it_then_goes_live(stopped_engine, monkeypatch):
    run, pid, gate = stopped_engine
    monkeypatch.setattr(remote, "SUBSCRIBE_TIMEOUT", 0.5)
    stop(pid)
    viewer = RemoteRun.attach(run, RunStore(run.path.parent.parent))
    seen = Recorder()
    viewer.subscribe(seen)
    try:
        assert viewer.live and not viewer.finished and f"(pid {pid})" not in (viewer.lost or "")
        assert f"the engine (pid {pid}) holds run {run.run_id} but is not answering" in viewer.not_answering
        assert viewer.snapshot()["gate"].state is S.RUNNING  # what the journal says, until the engine answers
        os.kill(pid, signal.SIGCONT)
        seen.wait_for(lambda: any(type(e) is RunEvent and e.kind == ANSWERING for e in seen.events))
        assert viewer.engine_pid == pid and viewer.not_answering is None
        gate.touch()
        seen.wait_state("after", "SUCCEEDED")
        assert any(type(e) is TaskEvent and e.task == "gate" and e.new is S.SUCCEEDED for e in seen.events)
    finally:
        viewer.close()


@pytest.mark.parametrize("matrix", [False, True], ids=["a task", "a matrix task"])
def test_logs_follow_says_when_the_runs_engine_died_and_exits_non_zero(tmp_path, matrix):
    dag, run_id, pid = start_detached(
        tmp_path,
        """\
max_parallel: 4
tasks:
  talk:
    run: "while true; do echo still here; sleep 0.05; done"
"""
        + ("    matrix: {n: [1, 2]}\n" if matrix else ""),
    )
    run = the_run(tmp_path, run_id)
    first = "talk[n=1]" if matrix else "talk"
    log = run.log_path(first)
    wait_until(lambda: log.exists() and b"still here" in log.read_bytes())
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
    printed = tmp_path / "followed"
    with open(printed, "wb") as out:
        follow = subprocess.Popen(
            [sys.executable, "-m", "tuidag", "logs", "talk", "-f", "--file", str(dag)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        wait_until(lambda: printed.read_bytes().count(b"still here") > 3)  # it follows the live log
        if matrix:  # both instances' logs, each under its heading
            wait_until(
                lambda: b"==> talk[n=1] <==" in printed.read_bytes() and b"==> talk[n=2] <==" in printed.read_bytes()
            )
        os.kill(pid, signal.SIGKILL)
        _, err = follow.communicate(timeout=patience(30))
    finally:
        if follow.poll() is None:
            follow.kill()
        tuidag("runs", cwd=tmp_path)  # reaps the task the dead engine left
    assert follow.returncode == 1
    assert f"the engine of run {run_id} died before {first} ended: its log stops here" in err


def test_runs_says_a_stopped_engine_is_not_answering_and_running_once_continued(stopped_engine):
    """`tuidag runs` asked the engine for its status and, getting no answer from a stopped one, said plain
    "running": as if all were well."""
    run, pid, _ = stopped_engine
    stop(pid)
    try:
        proc = tuidag("runs", cwd=run.path.parent.parent.parent)
        assert proc.returncode == 0, proc.stderr
        (line,) = [line for line in proc.stdout.splitlines() if run.run_id in line]
        assert f"running (pid {pid}, stopped: not answering until continued)" in line
    finally:
        os.kill(pid, signal.SIGCONT)
    proc = tuidag("runs", cwd=run.path.parent.parent.parent)
    (line,) = [line for line in proc.stdout.splitlines() if run.run_id in line]
    assert f"running (pid {pid}, 0 viewers)" in line
