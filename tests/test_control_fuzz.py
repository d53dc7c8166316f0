"""The control channel under hostile requests: a live engine (a real detached `tuidag run -d` process, its real
socket) takes thousands of random and hand-made malformed requests, answers each with an error, and still serves
`status`, `pause` and `stop`. A single request once stopped the channel for good: 60,000 `[` (RecursionError in the
decoder) or a lone surrogate in an `id` echoed back (UnicodeEncodeError), and `tuidag stop` then said "not running"
while the engine went on running the tasks."""

from __future__ import annotations

import json
import random

import pytest

from dags import wait_until
from slowness import patience
from test_detached_runs import (
    no_engine_left_behind,  # noqa: F401 (autouse: ends what a failed test left)
    start_detached,
    summary_of,
    the_run,
    tuidag,
)
from tuidag.control import protocol
from tuidag.control.client import ControlClient, LineReader, connect, live_status

pytestmark = pytest.mark.cli

#: Ops that change the run: the fuzz never sends one that could be valid and on time.
CHANGES = ("cancel", "cancel_all", "rerun", "pause", "resume", "stop", "interrupt", "detach")
WRONG = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    1e308,
    -1e308,
    10**300,
    "",
    "x" * 5000,
    "\u0000",
    "\udc80",
    [],
    {},
    [[]],
    {"a": 1},
    ["a", 1],
    [None],
    "SIGKILL",
    "\x1b[2J",
    "é" * 100,
]
FIELDS = ("v", "op", "id", "deadline", "tasks", "task", "signal")


def hand_made() -> list[bytes]:
    """What the attacks used, and their relatives: nesting, surrogates, huge numbers, NUL, invalid UTF-8."""
    lines = [
        b"[" * 60000,
        b"{" * 30000,
        b'{"a":' * 12000,
        b'{"op":"status","x":' + b"[" * 40000,
        b'{"v":1,"op":"hello","id":"\\ud800"}',
        b'{"v":1,"op":"status","id":"\\udfff"}',
        b'{"op":"hello\\ud800"}',
        b'{"\\ud800":1,"op":"status"}',
        b'{"op":"branch","task":"\\udc80"}',
        b'{"op":"cancel","tasks":["\\ud83d"],"deadline":1}',
        b'{"op":"status","id":"\\ud83d\\ude00x"}',
        b'{"op":"status","id":1' + b"0" * 5000 + b"}",
        b'{"op":"status","id":1e999}',
        b'{"op":"status","id":-1e999}',
        b'{"op":"status","v":1' + b"0" * 4000 + b"}",
        b'{"op":"status","id":NaN}',
        b'{"op":"status","id":Infinity}',
        b'{"op":"status","deadline":1e999}',
        b'{"op":"status","deadline":NaN}',
        b'{"op":"status","id":' + b"9" * 64 + b"}",
        b"\x00",
        b"\x00" * 1000,
        b'{"op":"status\x00"}',
        b'{"op":"status","id":"a\\u0000b"}',
        b"\xff\xfe\xfd",
        b'{"op":"status","id":"\xff"}',
        b'{"op":"\xc0\xaf"}',
        b"\xef\xbb\xbf{}",
        b'{"op":"status","id":"' + "é".encode() * 3000 + b'"}',
        b'{"op":"branch","task":"' + b"a" * 5000 + b'"}',
        b'{"op":"cancel","tasks":[' + b'"a",' * 15000 + b'"a"],"deadline":1}',
        b"[]",
        b"null",
        b"1",
        b'"x"',
        b'{"op":"interrupt","signal":"SIGKILL"}',
        b'{"op":"interrupt","signal":9}',
        b'{"op":"cancel"}',
        b'{"op":"rerun","tasks":"gate"}',
        b'{"op":"cancel","tasks":[]}',
        b'{"v":"1","op":"stop"}',
        b'{"v":1.0,"op":"stop","x":1,"v":2}',
        b'{"op":"stop","id":[1]}',
        b'{"op":"stop","deadline":"soon"}',
        b'{"op":"pause","deadline":0}',
        b'{"op":"stop","deadline":-1}',
        b'{"op":"subscribe","id":{"a":1}}',
    ]
    return lines


def wrong_types(rng: random.Random) -> list[bytes]:
    """Every field of every op with every wrong value. An op that changes the run either gets a field its check
    refuses or a deadline already past (dropped unread): either way it must never take effect."""
    lines = []
    for op in [*protocol.OPS, "format_disk", ""]:
        for field in FIELDS:
            for value in WRONG:
                request: dict = {"v": 1, "op": op, "id": rng.randrange(1000)}
                if op in ("cancel", "rerun"):
                    request["tasks"] = ["gate"]
                if op == "branch":
                    request["task"] = "gate"
                if op == "interrupt":
                    request["signal"] = "SIGTERM"
                request[field] = value
                if op in CHANGES and not _refused(op, field, value):
                    request["deadline"] = rng.choice([0, 1.0, 86400.5])  # 1970: long past
                lines.append(json.dumps(request, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass"))
    return lines


def _refused(op: str, field: str, value) -> bool:
    """Whether the engine must refuse `op` for `value` in `field` (without a deadline to make sure of it)."""
    if field == "v":
        return not (type(value) is int and value == 1)
    if field == "id":
        return value is not None and (type(value) not in (int, str) or len(str(value)) > 64 or value == "\udc80")
    if field == "tasks" and op in ("cancel", "rerun"):
        return True  # no value in WRONG is a non-empty list of strings
    if field == "signal" and op == "interrupt":
        return True
    return field == "op"


def garbage(rng: random.Random, count: int) -> list[bytes]:
    """Random bytes, random JSON-ish text, and valid requests with a byte flipped."""
    lines = []
    alphabet = b'{}[]",:0123456789.eE-+ truefalsnul\\u\x00\xff\xc3\xa9ud800'
    for i in range(count):
        kind = i % 3
        if kind == 0:
            line = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        elif kind == 1:
            line = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 300)))
        else:
            line = bytearray(
                json.dumps(
                    {"v": 1, "op": rng.choice(list(protocol.OPS)), "id": i, "tasks": ["gate"], "deadline": 1.0}
                ).encode()
            )
            line[rng.randrange(len(line))] = rng.randrange(256)
            line = bytes(line)
            if b'"deadline": 1.0' not in line:
                line = b"\x00" + line  # the flip hit the deadline: keep the request one that can't take effect
        line = line.replace(b"\n", b" ")
        lines.append(line if line.strip() else b"\x00")
    return lines


def test_thousands_of_hostile_requests_get_errors_and_the_run_stays_controllable(tmp_path):
    gate = tmp_path / "go"
    dag, run_id, pid = start_detached(
        tmp_path,
        f"""\
tasks:
  gate: {{run: "while [ ! -e {gate} ]; do sleep 0.02; done"}}
  after: {{run: "true", depends_on: [gate]}}
""",
    )
    run = the_run(tmp_path, run_id)
    wait_until(lambda: (run.path / protocol.SOCKET_NAME).exists())
    rng = random.Random(25)
    lines = hand_made() + wrong_types(rng) + garbage(rng, 1500)
    rng.shuffle(lines)
    sock = connect(run, timeout=patience(20))
    sock.sendall(b"".join(line + b"\n" for line in lines))
    replies, reader = [], LineReader(sock)
    while len(replies) < len(lines):
        line = reader.readline()
        assert line is not None, f"the engine closed the connection after {len(replies)} replies"
        message = json.loads(line)
        if message.get("type") == "reply":  # (a valid `subscribe` makes this connection a viewer, too)
            replies.append(message)
    sock.close()
    assert len(replies) == len(lines) > 3000
    print(f"fuzz: {len(lines)} hostile requests, {sum(not r['ok'] for r in replies)} refused")

    too_long = connect(run)  # over the line limit: refused and closed, the channel goes on
    too_long.sendall(b"[" * (protocol.MAX_REQUEST + 10) + b"\n")
    assert json.loads(LineReader(too_long).readline())["error"].startswith("request longer than")
    too_long.close()

    log = (run.path / "engine.log").read_text()
    assert "control channel" not in log and "Traceback" not in log
    status = live_status(run, timeout=patience(10))
    assert status is not None and status["pid"] == pid and status["paused"] is False
    assert status["finished"] is False  # no hostile request cancelled, stopped or interrupted anything
    paused = tuidag("pause", "--file", str(dag), cwd=tmp_path)
    assert paused.returncode == 0 and "paused" in paused.stdout, paused.stderr
    assert live_status(run)["paused"] is True
    stopped = tuidag("stop", "--file", str(dag), cwd=tmp_path)
    assert stopped.returncode == 0 and "stopping: cancelling" in stopped.stdout, stopped.stderr
    assert summary_of(run)["counts"] == {"CANCELLED": 2}


def test_the_two_requests_that_stopped_the_channel_get_error_replies(tmp_path):
    from dags import make_dag, served_run

    dag = make_dag({"a": "sleep 30"}, workdir=tmp_path)
    with served_run(dag, tmp_path) as session:
        sock = connect(session.run)
        lines = LineReader(sock)
        sock.sendall(b"[" * 60000 + b"\n" + b'{"v":1,"op":"hello","id":"\\ud800"}\n')
        assert "nested deeper than" in json.loads(lines.readline())["error"]
        assert "not valid Unicode" in json.loads(lines.readline())["error"]
        sock.sendall(protocol.encode({"v": 1, "op": "hello", "id": 5}))
        assert json.loads(lines.readline())["ok"] is True  # the same connection goes on
        sock.close()


def test_a_connection_that_breaks_the_server_is_closed_and_a_failing_loop_restarts(tmp_path, monkeypatch, capfd):
    """Faults the parser can't catch (here: injected) end one connection; the serving loop itself failing is
    restarted and said, and the socket keeps serving."""
    from dags import make_dag, served_run
    from tuidag.control.server import ControlServer
    from tuidag.control.transport import Transport

    handle, update = ControlServer._handle, Transport._update_interest
    failures = {"loop": 1}

    def handle_or_fail(self, client, line):
        if b"boom" in line:
            raise MemoryError("injected: this request can't be handled")
        return handle(self, client, line)

    def update_or_fail(self):
        if failures["loop"] and any(c.asked for c in self.clients.values()):
            failures["loop"] -= 1
            raise RuntimeError("injected: the serving loop failed")
        return update(self)

    monkeypatch.setattr(ControlServer, "_handle", handle_or_fail)
    monkeypatch.setattr(Transport, "_update_interest", update_or_fail)
    dag = make_dag({"a": "sleep 30"}, workdir=tmp_path)
    with served_run(dag, tmp_path) as session:
        with ControlClient(session.run, timeout=patience(10)) as client:  # its request makes the loop fail once
            assert client.request("status")["run_id"] == session.run.run_id
        wait_until(lambda: not failures["loop"])
        bad = connect(session.run)
        bad.sendall(b'{"op":"boom"}\n')
        assert LineReader(bad).readline() is None  # that connection, and only it, is closed
        bad.close()
        with ControlClient(session.run, timeout=patience(10)) as client:
            assert client.request("status")["run_id"] == session.run.run_id
    err = capfd.readouterr().err
    assert "control channel failed: RuntimeError('injected: the serving loop failed'); restarted" in err
    assert "closed the connection of pid" in err and "MemoryError" in err
