"""The control channel's wire format: small, versioned, newline-delimited JSON over a Unix stream socket.

Every message is one JSON object on one line. A client sends requests; each has an `op` and an optional `id` it
chooses, and the engine answers each with `{"type": "reply", "id": ..., "ok": true|false, ...}` (`error` says why
when not ok). A viewer sends `subscribe` once; from then on the engine also sends, in order:

- `{"type": "snapshot", "seq": N, "tasks": [...], "paused": bool, ...}`: every task as it is now (the state the
  journal replays to), then only events newer than `seq`;
- task events, as the journal writes them (`"type": "task"`, see `store/journal.task_line`);
- run events `{"type": "run", "event": "started|paused|resumed|finished", "t": ..., "detail": ...}`;
- `{"type": "usage", "usage": {task: [cpu_percent, rss_bytes]}}` once a second while tasks run;
- `{"type": "notice", "text": ...}` for what a viewer must tell its user (the state dir filled up).

A `cancel`, `cancel_all` or `stop` request may say where it comes from (`"origin": "viewer"` from a terminal UI,
`"cli"` from `tuidag cancel`/`stop`): the journal records the cancel's reason with it (`cancel_reason`).

Requests are limited to `MAX_REQUEST` bytes: a longer line is refused and the connection closed. Nothing here
touches sockets: the engine's server and the clients share these definitions.
"""
from __future__ import annotations

import json
from typing import Any

VERSION = 1
MAX_REQUEST = 64 << 10     # a request line; task lists of a big DAG fit many times over
MAX_MESSAGE = 256 << 20    # what a client accepts from the engine in one line (a snapshot of a huge DAG)
SOCKET_NAME = "control.sock"

#: op -> the fields it needs ("tasks": a list of task names).
OPS: dict[str, tuple[str, ...]] = {
    "hello": (), "status": (), "subscribe": (), "branch": ("task",), "cancel": ("tasks",), "cancel_all": (),
    "rerun": ("tasks",), "pause": (), "resume": (), "stop": (), "interrupt": ("signal",), "detach": (),
}
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
ORIGINS = ("viewer", "cli")
#: op -> origin (None: the request did not say) -> the reason a cancelled task records; the state word is already on
#: a tile, so the UI shows what follows `cancelled` (`in the UI`, `by tuidag cancel`).
_REASONS: dict[str, dict[str | None, str]] = {
    "cancel": {"viewer": "cancelled in the UI", "cli": "cancelled by tuidag cancel",
               None: "cancelled over the control socket"},
    "cancel_all": {"viewer": "cancelled in the UI (cancel all)", "cli": "cancelled by tuidag cancel --all",
                   None: "cancelled over the control socket (cancel all)"},
    "stop": {"viewer": "cancelled: the run was stopped in the UI", "cli": "cancelled: stopped by tuidag stop",
             None: "cancelled: the run was stopped over the control socket"},
}

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


class ProtocolError(ValueError):
    """A message that is not a request of this protocol; the text is what the reply's `error` says."""


def encode(message: dict[str, Any]) -> bytes:
    return (_ENCODER.encode(message) + "\n").encode("utf-8", "surrogateescape")


def parse_request(line: bytes) -> dict[str, Any]:
    """The request on `line` (without its newline), checked: ProtocolError says what is wrong."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("not a JSON object") from None
    if type(message) is not dict:
        raise ProtocolError("not a JSON object")
    version = message.get("v", VERSION)
    if version != VERSION:
        raise ProtocolError(f"unsupported protocol version {str(version)[:20]!r} (this engine speaks {VERSION})")
    op = message.get("op")
    if type(op) is not str or op not in OPS:
        raise ProtocolError(f"unknown op {str(op)[:40]!r}")
    for field in OPS[op]:
        value = message.get(field)
        if field == "tasks":
            if type(value) is not list or not value or not all(type(v) is str for v in value):
                raise ProtocolError(f"{op}: 'tasks' must be a non-empty list of task names")
        elif field == "signal":
            if value not in SIGNALS:
                raise ProtocolError(f"{op}: 'signal' must be one of {', '.join(SIGNALS)}")
        elif type(value) is not str:
            raise ProtocolError(f"{op}: '{field}' must be a string")
    if "origin" in message and message["origin"] not in ORIGINS:
        raise ProtocolError(f"'origin' must be one of {', '.join(ORIGINS)}")
    request_id = message.get("id")
    if request_id is not None and (type(request_id) not in (int, str) or len(str(request_id)) > 64):
        raise ProtocolError("'id' must be a short string or an integer")
    return message


def reply(request_id: Any, ok: bool = True, **fields: Any) -> bytes:
    return encode({"type": "reply", "id": request_id, "ok": ok, **fields})


def cancel_reason(op: str, origin: str | None) -> str:
    """What a task cancelled by `op` (cancel, cancel_all, stop) records as its reason: where the request came from."""
    return _REASONS[op][origin]
