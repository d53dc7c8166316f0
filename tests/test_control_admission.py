"""Who gets a connection to a live run's control socket. 64 connections that never sent a byte once filled every
place for as long as they stayed open: `tuidag pause` and `stop` then failed (Connection reset by peer, exit 2) while
`tuidag runs` said the run was running. Silent connections are now closed after a few seconds, one-off requests
always find a place (the idle connection that waited longest makes room), and a refusal says why."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from dags import make_dag, served_run, wait_until
from slowness import patience
from test_detached_runs import (
    no_engine_left_behind,  # noqa: F401 (autouse: ends what a failed test left)
    start_detached,
    summary_of,
    the_run,
    tuidag,
)
from tuidag.control import protocol, server, transport
from tuidag.control.client import ControlClient, LineReader, NotLive, connect


def bye_of(sock: socket.socket, timeout: float) -> str | None:
    """The reason the engine gave as it closed `sock` (None: it closed without one, or not within `timeout`)."""
    sock.settimeout(timeout)
    reader = LineReader(sock)
    try:
        line = reader.readline()
    except NotLive:
        return None
    message = json.loads(line) if line else {}
    return message.get("reason") if message.get("type") == "bye" and reader.readline() is None else None


def connect_soon(run) -> socket.socket:
    """A connection, retried while the engine's accept queue is full (EAGAIN)."""
    found: list[socket.socket] = []

    def connected() -> bool:
        try:
            found.append(connect(run))
        except NotLive as exc:
            assert "Resource temporarily unavailable" in str(exc), exc
        return bool(found)

    wait_until(connected)
    return found[0]


@pytest.mark.cli
def test_idle_connections_never_lock_commands_out_and_are_closed_saying_why(tmp_path):
    gate = tmp_path / "go"
    dag, run_id, pid = start_detached(
        tmp_path,
        f"""\
tasks:
  gate: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
""",
    )
    run = the_run(tmp_path, run_id)
    wait_until(lambda: (run.path / protocol.SOCKET_NAME).exists())
    idle = [connect_soon(run) for _ in range(150)]  # more than every place there is; not one byte sent
    try:
        paused = tuidag("pause", "--file", str(dag), cwd=tmp_path)
        assert paused.returncode == 0 and "paused" in paused.stdout, paused.stderr
        assert f"running (pid {pid}, 0 viewers, paused)" in tuidag("runs", str(dag), cwd=tmp_path).stdout
        reasons = [bye_of(sock, timeout=patience(20)) for sock in idle]
    finally:
        for sock in idle:
            sock.close()
    made_room = reasons.count("closed to make room for a new connection: this one was idle")
    too_slow = reasons.count(f"no request within {transport.FIRST_REQUEST:.0f} s of connecting")
    assert made_room >= 150 - transport.MAX_VIEWERS - transport.RESERVE and made_room + too_slow == 150, reasons
    stopped = tuidag("stop", "--file", str(dag), cwd=tmp_path)
    assert stopped.returncode == 0 and "stopping" in stopped.stdout, stopped.stderr
    assert summary_of(run)["counts"] == {"CANCELLED": 1}


def test_when_every_place_is_taken_the_refusal_says_why(tmp_path, monkeypatch):
    """Only viewers and requests waiting for an answer hold places nobody can take: the next connection is told so
    (it was closed without a word), and so is a viewer beyond the viewers' cap."""
    monkeypatch.setattr(transport, "MAX_VIEWERS", 1)
    monkeypatch.setattr(transport, "RESERVE", 1)
    release = threading.Event()
    control = server.ControlServer._control

    def slow_pause(self, request):
        if request["op"] == "pause":
            release.wait(patience(30))  # a control that takes its time (a cancel waiting for kills)
        return control(self, request)

    monkeypatch.setattr(server.ControlServer, "_control", slow_pause)
    with served_run(make_dag({"a": "sleep 30"}, workdir=tmp_path), tmp_path) as session:
        viewer = connect(session.run)
        viewer.sendall(protocol.encode({"op": "subscribe"}))
        wait_until(lambda: session.control.viewers == 1)
        second = connect(session.run)
        second.sendall(protocol.encode({"op": "subscribe", "id": 2}))
        replies = LineReader(second)
        assert json.loads(replies.readline())["error"] == "too many viewers: this run has 1 already"
        second.close()
        pausing = ControlClient(session.run, timeout=patience(30))
        waiting = threading.Thread(target=pausing.request, args=("pause",))
        waiting.start()
        wait_until(lambda: any(c.pending for c in session.control.transport.clients.values()))
        with pytest.raises(
            NotLive,
            match="closed the connection: too many connections: 1 viewers and 1 requests "
            "waiting for answers; try again",
        ):
            ControlClient(session.run).request("status")
        release.set()
        waiting.join(patience(30))
        pausing.close()
        assert session.scheduler.paused
        with ControlClient(session.run) as client:  # a place again
            assert client.request("status")["paused"] is True
        viewer.close()
