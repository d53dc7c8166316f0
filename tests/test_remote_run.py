"""RemoteRun without the UI: a real run served in this process, followed over its control socket."""

from __future__ import annotations

import threading
import time

import pytest

from dags import Recorder, make_dag, served_run, wait_until
from slowness import patience
from tuidag.control.client import NotLive, Refused
from tuidag.control.remote import ENGINE_GONE, RemoteRun
from tuidag.engine.events import RunEvent, TaskEvent
from tuidag.engine.scheduler import RerunRefused
from tuidag.launch import RunSession
from tuidag.model.state import TaskState

S = TaskState


@pytest.fixture
def live(tmp_path):
    gate = tmp_path / "go"
    dag = make_dag(
        {
            "gate": f"while [ ! -e {gate} ]; do sleep 0.02; done",
            "after": {"run": "echo after", "depends_on": ["gate"]},
            "broken": "exit 3",
            "needs-broken": {"run": "true", "depends_on": ["broken"]},
        },
        workdir=tmp_path,
        kill_grace=0.5,
    )
    with served_run(dag, tmp_path, gate) as session:
        wait_until(lambda: session.scheduler.snapshot()["needs-broken"].state is S.SKIPPED)
        remote = RemoteRun.attach(session.run, session.store)
        try:
            yield session, remote, gate
        finally:
            remote.close()


def test_the_snapshot_and_the_dag_come_from_the_engine_and_the_journal(live):
    session, remote, _ = live
    assert remote.dag.topological_order == session.dag.topological_order
    assert remote.dag.tasks["after"].depends_on == ("gate",)
    assert remote.snapshot() == {n: s._replace(log_path="") for n, s in session.scheduler.snapshot().items()}
    assert remote.started == session.started and remote.live and not remote.finished


def test_events_reach_observers_within_100_ms_even_after_bursts(live):
    """Thousands of wake-ups in a row once lost the server's wake-up flag: later events then waited up to 0.5 s."""
    session, remote, _ = live
    seen = Recorder()
    remote.subscribe(seen)
    for _ in range(2):
        threads = [
            threading.Thread(
                target=lambda: [f() for _ in range(300) for f in (session.scheduler.pause, session.scheduler.resume)]
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wait_until(lambda: not remote.paused and len(seen.events) >= 1)
        # Not a wait for a condition: the server must go quiet (blocked in its select) for a lost wake-up to show,
        # as the select's 0.5 s timeout; polling anything here would wake it.
        time.sleep(0.6)
        count = len(seen.events)
        made = time.monotonic()
        session.scheduler.pause()
        wait_until(lambda count=count: len(seen.events) > count, timeout=2)
        # Woken at once, not after the select's 0.5 s timeout (the lost wake-up); loose enough for a loaded machine.
        assert time.monotonic() - made < 0.4
        session.scheduler.resume()


def test_controls_are_requests_answered_by_id_from_any_thread(live):
    _session, remote, _gate = live
    with pytest.raises(RerunRefused, match="re-run 'broken' first"):
        remote.rerun("needs-broken")
    with pytest.raises(Refused, match="no task named"):
        remote.cancel("ghost")
    results = {}
    threads = [
        threading.Thread(target=lambda: results.setdefault("branch", remote.branch("gate"))),
        threading.Thread(target=lambda: results.setdefault("pause", remote.pause())),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {"branch": ["gate", "after"], "pause": True}
    wait_until(lambda: remote.paused)
    remote.resume()
    wait_until(lambda: not remote.paused)
    assert remote.cancel("gate") == ["gate", "after"]
    wait_until(lambda: remote.snapshot()["after"].state is S.CANCELLED)


def test_the_end_of_the_run_is_an_end_not_a_death(live):
    session, remote, gate = live
    seen = Recorder()
    remote.subscribe(seen)
    gate.touch()
    session.scheduler.wait(patience(10))
    session.finish()
    wait_until(lambda: any(type(e) is RunEvent and e.kind == ENGINE_GONE for e in seen.events), timeout=2)
    assert remote.lost is None and not remote.live and remote.finished
    assert remote.snapshot()["after"].state is S.SUCCEEDED
    with pytest.raises(NotLive, match="read-only"):
        remote.pause()


def test_a_viewer_dropped_for_reading_slowly_subscribes_again(live, monkeypatch):
    session, remote, gate = live
    seen = Recorder()
    remote.subscribe(seen)
    wait_until(lambda: session.control.viewers == 1)
    for client in list(session.control.transport.clients.values()):  # as the server drops a viewer that fell behind
        session.control.transport.drop(client)
    wait_until(lambda: session.control.viewers == 1, timeout=3)  # back
    gate.touch()
    wait_until(lambda: remote.snapshot()["after"].state is S.SUCCEEDED)
    assert remote.live and remote.lost is None
    assert any(type(e) is TaskEvent and e.task == "after" for e in seen.events)


def test_the_remote_run_is_core_it_never_imports_textual():
    import subprocess
    import sys

    code = "import sys, tuidag.control.remote; assert 'textual' not in sys.modules, 'textual imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_engine_that_holds_the_run_but_does_not_answer_is_not_answering_and_controls_say_so(tmp_path, monkeypatch):
    """A stopped engine (SIGSTOP) accepts connections (the kernel does) but never answers: not a hang, and not a
    finished run either while it holds the run's owner lock (here: this process does)."""
    import os
    import socket

    from tuidag.control import protocol, remote
    from tuidag.control.transport import bind_path
    from tuidag.store.runs import RunStore

    session = RunSession.create(make_dag({"a": "true"}, workdir=tmp_path), tmp_path / "state")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    folder = os.open(session.run.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listener.bind(bind_path(folder, str(session.run.path), protocol.SOCKET_NAME))
    finally:
        os.close(folder)
    listener.listen(1)
    monkeypatch.setattr(remote, "SUBSCRIBE_TIMEOUT", 0.2)
    viewer = None
    try:
        viewer = RemoteRun.attach(session.run, RunStore(tmp_path / "state"))
        assert viewer.live and not viewer.finished and "not answering" in viewer.not_answering
        with pytest.raises(NotLive, match=r"not answering.*pause not sent"):
            viewer.pause()
    finally:
        if viewer is not None:
            viewer.close()
        listener.close()
        session.scheduler.start()
        session.scheduler.wait(patience(10))
        session.finish()
