"""The control channel on a real run in this process: requests, the viewer's stream, and hostile clients."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time

import pytest

from dags import make_dag, served_run, wait_until
from slowness import patience
from tuidag.control import protocol
from tuidag.control.client import ControlClient, LineReader, NotLive, Refused, connect, decode_event
from tuidag.engine.events import TaskEvent
from tuidag.launch import RunSession
from tuidag.model.state import TaskState

S = TaskState


@pytest.fixture
def live(tmp_path):
    """A served run: `gate` waits for a file, `after` depends on it, `other` sleeps; torn down however the test ends."""
    gate = tmp_path / "go"
    dag = make_dag(
        {
            "gate": f"while [ ! -e {gate} ]; do sleep 0.02; done",
            "after": {"run": "echo after", "depends_on": ["gate"]},
            "other": "sleep 30",
            "broken": "exit 3",
        },
        workdir=tmp_path,
    )
    with served_run(dag, tmp_path, gate) as session:
        yield session, gate


def test_the_socket_is_private_and_requests_control_the_run(live):
    session, _gate = live
    sock_path = session.run.path / protocol.SOCKET_NAME
    info = os.lstat(sock_path)
    assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(session.run.path).st_mode) == 0o700
    with ControlClient(session.run) as client:
        status = client.request("status")
        assert status["run_id"] == session.run.run_id and status["pid"] == os.getpid()
        wait_until(lambda: session.scheduler.snapshot()["other"].state is S.RUNNING)
        assert client.request("cancel", tasks=["other"])["changed"] == ["other"]
        wait_until(lambda: session.scheduler.snapshot()["other"].state is S.CANCELLED)
        with pytest.raises(Refused, match="no task named 'ghost'"):
            client.request("cancel", tasks=["ghost"])
        assert client.request("pause")["changed"] is True and session.scheduler.paused
        assert client.request("resume")["changed"] is True and not session.scheduler.paused
        wait_until(lambda: session.scheduler.snapshot()["broken"].state is S.FAILED)
        with pytest.raises(Refused, match="only failed, cancelled or skipped"):
            client.request("rerun", tasks=["gate"])
        assert client.request("rerun", tasks=["broken"])["changed"] == ["broken"]
        assert client.request("branch", task="gate")["tasks"] == ["gate", "after"]
        assert {"after", "gate"} <= set(client.request("stop")["changed"])
    wait_until(lambda: session.scheduler.finished)


def test_a_viewer_gets_a_snapshot_then_only_newer_events(live):
    session, gate = live
    wait_until(lambda: session.scheduler.snapshot()["gate"].pid is not None)
    sock = connect(session.run)
    lines = LineReader(sock)
    sock.sendall(protocol.encode({"op": "subscribe", "id": 7}))
    assert json.loads(lines.readline()) == {"type": "reply", "id": 7, "ok": True}
    head = json.loads(lines.readline())
    assert head["type"] == "snapshot" and head["count"] == 4 and head["run_id"] == session.run.run_id
    snaps = {
        e.snapshot.name: e.snapshot for e in (decode_event(json.loads(lines.readline())) for _ in range(head["count"]))
    }
    assert snaps["gate"].state is S.RUNNING and snaps["gate"].pid is not None
    # A batch the engine delivers after the snapshot that already holds it (delivery is not under its lock): here
    # the 'gate' QUEUED event again, which would roll the viewer's gate back from RUNNING.
    stale = TaskEvent(head["seq"] - 1, 0.0, S.PENDING, snaps["gate"]._replace(state=S.QUEUED, pid=None))
    session.control._on_events([stale])
    gate.touch()
    seen = []
    while not any(e.task == "after" and e.new is S.SUCCEEDED for e in seen):
        event = decode_event(json.loads(lines.readline()))
        if hasattr(event, "snapshot"):
            assert event.seq > head["seq"]
            seen.append(event)
    assert [e.new for e in seen if e.task == "gate"][-1] is S.SUCCEEDED
    sock.close()


def test_hostile_clients_get_errors_and_never_stall_the_run(live):
    session, gate = live
    quiet = connect(session.run)  # connects and never reads nor writes
    sock = connect(session.run)
    lines = LineReader(sock)
    bad = [
        b"not json",
        b"[1,2]",
        b'{"op": "format_disk"}',
        b'{"v": 99, "op": "status"}',
        b'{"op": "cancel"}',
        b'{"op": "cancel", "tasks": [1]}',
        b'{"op": "interrupt", "signal": "SIGKILL"}',
        b"\xff\xfe",
        b'{"op": "status", "id": {"deep": 1}}',
        b'{"op":' + b" " * 100,
        b'{"op": "cancel_all", "origin": "cancelled by the boss"}',
    ]
    for i in range(200):
        sock.sendall(bad[i % len(bad)] + b"\n")
    for _ in range(200):
        answer = json.loads(lines.readline())
        assert answer["type"] == "reply" and answer["ok"] is False and answer["error"]
    with ControlClient(session.run) as client:  # the channel still serves others
        assert client.request("status")["run_id"] == session.run.run_id
    sock.sendall(b"x" * (protocol.MAX_REQUEST + 10))  # no newline: refused, then closed
    assert json.loads(lines.readline())["error"].startswith("request longer than")
    assert lines.readline() is None
    gate.touch()
    wait_until(lambda: session.scheduler.snapshot()["after"].state is S.SUCCEEDED)
    quiet.close()


def test_a_viewer_that_stops_reading_is_dropped_not_waited_for(live, monkeypatch):
    from tuidag.control import transport

    monkeypatch.setattr(transport, "MAX_BACKLOG", 4096)
    session, gate = live
    stuck = connect(session.run)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    stuck.sendall(protocol.encode({"op": "subscribe"}))
    wait_until(lambda: session.control.viewers == 1)
    for _ in range(5000):  # events enough to overflow what the kernel and the backlog hold
        session.scheduler.pause()
        session.scheduler.resume()
    wait_until(lambda: session.control.viewers == 0)
    gate.touch()
    wait_until(lambda: session.scheduler.snapshot()["after"].state is S.SUCCEEDED)
    stuck.close()


def test_after_the_run_the_socket_is_gone_and_clients_are_told(tmp_path):
    session = RunSession.create(make_dag({"a": "true"}, workdir=tmp_path), tmp_path / "state")
    session.serve_control()
    session.scheduler.start()
    session.scheduler.wait(patience(30))
    summary = session.finish()
    assert not (session.run.path / protocol.SOCKET_NAME).exists()
    with pytest.raises(NotLive, match="not running"):
        ControlClient(session.run)
    record = json.loads(session.run.summary.read_text())
    assert record["exit_code"] == session.exit_code(summary) == 0


def test_a_planted_socket_path_is_not_connected_to(tmp_path):
    from tuidag.store.runs import RunDir

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / protocol.SOCKET_NAME).symlink_to("/tmp")
    with pytest.raises(NotLive, match="not a socket of yours"):
        connect(RunDir("r", folder))


def test_engine_messages_with_a_list_or_a_mapping_where_a_state_or_an_id_goes_are_ignored():
    """A hostile or newer engine's odd fields are ignored: a list or mapping as a state or a request id once raised
    TypeError (unhashable) in the viewer's reader thread, which then stopped following the run."""
    from tuidag.control.pending import PendingRequests

    assert decode_event({"type": "task", "task": "a", "to": ["succeeded"]}) is None
    event = decode_event({"type": "task", "task": "a", "to": S.RUNNING.value, "from": {"x": 1}})
    assert type(event) is TaskEvent and event.old is None and event.snapshot.state is S.RUNNING
    pending = PendingRequests()
    rid, waiter = pending.new()
    for odd in ([rid], {"id": rid}, str(rid), True):
        pending.started({"type": "started", "id": odd})
        pending.answer({"type": "reply", "id": odd, "ok": True})
    assert not waiter.started and not waiter.answered.is_set()
    pending.answer({"type": "reply", "id": rid, "ok": True})
    assert waiter.answered.is_set() and waiter.reply == {"type": "reply", "id": rid, "ok": True}


def test_a_request_on_a_connection_that_was_dropped_is_not_live_rather_than_a_crash(live):
    """A viewer drops its connection when subscribing again fails, just before it reads the run from the journal: a
    control sent in between was an AttributeError on the missing socket."""
    from tuidag.control.engine_connection import EngineConnection

    session, _gate = live
    connection = EngineConnection(session.run)
    connection._dial()
    connection._await_answer(patience(10))
    connection._drop_socket()
    with pytest.raises(NotLive, match="the engine is gone"):
        connection._ask("pause", {})
    assert not session.scheduler.paused


def test_every_op_the_protocol_accepts_has_a_handler_and_every_handler_an_op():
    """An op the protocol accepts but nothing handles is a request that passes the checks and then fails: the table
    of ops and the tables of handlers say the same."""
    from tuidag.control import dispatch

    assert set(protocol.OPS) == set(dispatch.AT_ONCE) | set(dispatch.CONTROLS)
    assert not set(dispatch.AT_ONCE) & set(dispatch.CONTROLS)


def test_usage_is_sampled_only_while_a_viewer_is_connected(live, monkeypatch):
    """CPU and memory go to viewers once a second; a run nobody watches runs no sampler and measures no tree."""
    from tuidag.control import server

    monkeypatch.setattr(server, "USAGE_INTERVAL", 0.05)
    session, _gate = live
    measured: list[str] = []
    usage = session.scheduler.usage
    monkeypatch.setattr(session.scheduler, "usage", lambda name: measured.append(name) or usage(name))
    wait_until(lambda: session.scheduler.snapshot()["other"].pid is not None)
    with ControlClient(session.run) as client:  # one-off requests make no viewer
        client.request("status")
    time.sleep(0.5)  # ten sampling periods with nobody watching
    assert measured == []
    assert "tuidag-control-usage" not in {t.name for t in threading.enumerate()}
    sock = connect(session.run)
    lines = LineReader(sock)
    sock.sendall(protocol.encode({"op": "subscribe", "id": 1}))
    deadline = time.monotonic() + patience(10)
    while True:
        message = json.loads(lines.readline())
        if message["type"] == "usage" and "other" in message["usage"]:
            break
        assert time.monotonic() < deadline, "no usage of the running task reached the viewer"
    assert "other" in measured
    sock.close()
    wait_until(lambda: session.control.viewers == 0)
    settled = len(measured) + 1  # a sample under way when the viewer left
    time.sleep(0.5)
    assert len(measured) <= settled
