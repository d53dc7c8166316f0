"""The control channel's wire format: small, versioned, newline-delimited JSON over a Unix stream socket.

Every message is one JSON object on one line. A client sends requests; each has an `op` and an optional `id` it
chooses, and the engine answers each with `{"type": "reply", "id": ..., "ok": true|false, ...}` (`error` says why
when not ok). A request may carry a `deadline` (seconds since the epoch) after which its sender no longer waits: the
engine drops it if the deadline passed before it got to it (`"expired": true` in the reply), and before a control
(cancel, pause, ...) takes effect it sends `{"type": "started", "id": ...}` and checks the deadline once that line
is on the socket, so a sender that saw no `started` by its deadline knows the control never happens. A connection
the engine closes gets `{"type": "bye", "reason": ...}` first when it can say why (no request in time, too many
connections). A viewer sends `subscribe` once; from then on the engine also sends, in order:

- `{"type": "snapshot", "seq": N, "tasks": [...], "paused": bool, "watching": bool, ...}`: every task as it is now
  (the state the journal replays to), then only events newer than `seq`; with `"dag": {...}` once the DAG file was
  edited under --watch (the run's DAG as the latest `dag` event says it);
- task events, as the journal writes them (`"type": "task"`, see `store/journal.task_line`);
- run events `{"type": "run", "event": "started|paused|resumed|watching|settled|watch-ended|finished|...", "t": ...,
  "detail": ...}`, as the
  journal writes them (a `dag` event, the DAG file edited under --watch, with the run's DAG in the fields of a
  journal header: `tasks`, `deps`, `definitions`...);
- `{"type": "usage", "usage": {task: [cpu_percent, rss_bytes]}}` once a second while tasks run;
- `{"type": "notice", "text": ...}` for what a viewer must tell its user (the state dir filled up).

A `cancel`, `cancel_all` or `stop` request may say where it comes from (`"origin": "viewer"` from a terminal UI,
`"cli"` from `tuidag cancel`/`stop`): the journal records the cancel's reason with it (`cancel_reason`).

Requests are limited to `MAX_REQUEST` bytes: a longer line is refused and the connection closed. Within that, a
request is decoded with limits (`MAX_DEPTH` levels of nesting, `MAX_ITEMS` values, strings of `MAX_STRING`
characters) and every string must be valid Unicode (a lone surrogate such as `"\\ud800"` can't be written back as
UTF-8): anything else is refused with an error reply. Python's decoder recurses once per level, so 60,000 `[` in a
line raised RecursionError, and a lone surrogate echoed in a reply raised UnicodeEncodeError: either stopped the
engine's control channel for good before these checks. Nothing here touches sockets: the engine's server and the
clients share these definitions.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

VERSION = 1
MAX_REQUEST = 64 << 10  # a request line; task lists of a big DAG fit many times over
MAX_MESSAGE = 256 << 20  # what a client accepts from the engine in one line (a snapshot of a huge DAG)
SOCKET_NAME = "control.sock"
MAX_DEPTH = 16  # a request needs 2 (an object holding a list of names)
MAX_ITEMS = 16384  # values in one request (task names of a cancel); the line limit bounds them anyway
MAX_STRING = 4096  # characters of one string (task names have at most 128)

#: op -> the fields it needs ("tasks": a list of task names).
OPS: dict[str, tuple[str, ...]] = {
    "hello": (),
    "status": (),
    "subscribe": (),
    "branch": ("task",),
    "cancel": ("tasks",),
    "cancel_all": (),
    "rerun": ("tasks",),
    "pause": (),
    "resume": (),
    "stop": (),
    "interrupt": ("signal",),
}
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
ORIGINS = ("viewer", "cli")
#: op -> origin (None: the request did not say) -> the reason a cancelled task records; the state word is already on
#: a tile, so the UI shows what follows `cancelled` (`in the UI`, `by tuidag cancel`).
_REASONS: dict[str, dict[str | None, str]] = {
    "cancel": {
        "viewer": "cancelled in the UI",
        "cli": "cancelled by tuidag cancel",
        None: "cancelled over the control socket",
    },
    "cancel_all": {
        "viewer": "cancelled in the UI (cancel all)",
        "cli": "cancelled by tuidag cancel --all",
        None: "cancelled over the control socket (cancel all)",
    },
    "stop": {
        "viewer": "cancelled: the run was stopped in the UI",
        "cli": "cancelled: stopped by tuidag stop",
        None: "cancelled: the run was stopped over the control socket",
    },
}

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


class ProtocolError(ValueError):
    """A message that is not a request of this protocol; the text is what the reply's `error` says."""


def encode(message: dict[str, Any]) -> bytes:
    """One line of the protocol. Never raises on odd text: a string that isn't valid Unicode (a lone surrogate that
    is not a byte `surrogateescape` decoded) is written with replacement characters."""
    text = _ENCODER.encode(message) + "\n"
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


_BRACKETS = re.compile(rb"[\[\]{}]")
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _check_depth(line: bytes) -> None:
    """Refuse nesting deeper than MAX_DEPTH before the decoder sees it (it recurses once per level)."""
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return  # the usual case: too few brackets to nest that deep
    depth = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b'""', line)):
        if match.group() in b"[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ProtocolError(f"nested deeper than {MAX_DEPTH} levels")
        else:
            depth -= 1


def _check_values(message: Any) -> None:
    """Refuse more than MAX_ITEMS values, strings over MAX_STRING characters and text that isn't valid Unicode."""
    stack, count = [message], 0
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_ITEMS:
            raise ProtocolError(f"more than {MAX_ITEMS} values")
        if type(value) is dict:
            stack.extend(value.keys())
            stack.extend(value.values())
        elif type(value) is list:
            stack.extend(value)
        elif type(value) is str:
            if len(value) > MAX_STRING:
                raise ProtocolError(f"a string longer than {MAX_STRING} characters")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ProtocolError("a string that is not valid Unicode (a lone surrogate)") from None


def parse_request(line: bytes) -> dict[str, Any]:
    """The request on `line` (without its newline), checked: ProtocolError says what is wrong."""
    _check_depth(line)
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ProtocolError("not a JSON object") from None
    if type(message) is not dict:
        raise ProtocolError("not a JSON object")
    _check_values(message)
    version = message.get("v", VERSION)
    if type(version) is not int or version != VERSION:
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
    deadline = message.get("deadline")
    if deadline is not None and (type(deadline) not in (int, float) or not math.isfinite(deadline)):
        raise ProtocolError("'deadline' must be a time (seconds since the epoch)")
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
