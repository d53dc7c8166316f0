"""What a journal record may hold: the schema every record read back is checked against before it is used.

The journal is read back from a folder others may be able to write, and its values reach the reaper (pids to
signal), the tables (times) and log paths (task names), so nothing in it is trusted: a record that fails these checks
is skipped with a warning naming its line (store/journal.py).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from typing import Any

from ..model.state import TaskState

# What each field of a record may hold. The journal is read back from a folder others may be able to write, and its
# values reach the reaper (pids to signal), the tables (times) and log paths (task names), so nothing is trusted.
_STATES = frozenset(state.value for state in TaskState)


def _is_int(value: Any) -> bool:
    return type(value) is int  # bool is an int subclass, and True is not a pid


def _is_time(value: Any) -> bool:
    """A wall-clock timestamp: finite, and between 1970 and year 5000 (what datetime and formatting accept)."""
    return (type(value) is float or type(value) is int) and 0 <= value < 1e11


def _is_pid(value: Any) -> bool:
    return type(value) is int and 0 < value < 1 << 31


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or check(value)


def _is_str(value: Any) -> bool:
    return type(value) is str


def _is_name_list(value: Any) -> bool:
    return type(value) is list and all(type(item) is str and item for item in value)


def _is_str_map(value: Any) -> bool:
    return type(value) is dict and all(type(item) is str for item in value.values())


def _is_deps(value: Any) -> bool:
    return type(value) is dict and all(type(key) is str and _is_name_list(item) for key, item in value.items())


def _is_count_map(value: Any) -> bool:
    return type(value) is dict and all(type(key) is str and _is_int(item) and item >= 0 for key, item in value.items())


def _is_definition(record: Any) -> bool:
    text = (str, type(None))
    if type(record) is not dict:
        return False
    for key in ("command", "setup", "workdir", "callable", "shell", "service"):
        if not isinstance(record.get(key), text):
            return False
    for key in ("env", "run_env"):
        env = record.get(key, {})
        if type(env) is not dict or not all(isinstance(v, text) for v in env.values()):
            return False
    if type(record.get("retries", 0)) is not int:
        return False
    return record.get("timeout") is None or type(record["timeout"]) in (int, float)


def is_definitions(value: Any) -> bool:
    """The header's `definitions` as tuidag writes them (store/task_story.py): the DAG's workdir and environment
    (a secret's value null), and each task's own definition."""
    if type(value) is not dict or not isinstance(value.get("workdir"), str) or type(value.get("tasks")) is not dict:
        return False
    env = value.get("env", {})
    if type(env) is not dict or not all(isinstance(v, (str, type(None))) for v in env.values()):
        return False
    return all(_is_definition(record) for record in value["tasks"].values())


_RUN_FIELDS: dict[str, Callable[[Any], bool]] = {
    "event": _is_str,
    "seq": _is_int,
    "t": _is_time,
    "detail": _optional(_is_str),
    "signal": lambda value: type(value) is str and value in signal.Signals.__members__,  # "forced-exit"
    # the header ("created")
    "run_id": _is_str,
    "dag": _is_str,
    "source": _optional(_is_str),
    "host": _is_str,
    "pid": _is_pid,
    "pid_create_time": _optional(_is_time),
    "tasks": _is_name_list,
    "fingerprints": _is_str_map,
    "shared": _is_str_map,
    "resumed_from": _optional(_is_str),
    "deps": _is_deps,
    "capacities": _is_count_map,
    "requests": lambda value: type(value) is dict and all(_is_count_map(item) for item in value.values()),
    "max_parallel": lambda value: _is_int(value) and value > 0,
    "options": lambda value: type(value) is list and all(type(item) is str for item in value),
    "groups": lambda value: type(value) is dict and all(_is_name_list(item) for item in value.values()),
    "matrix": lambda value: type(value) is dict and all(_is_str_map(item) for item in value.values()),
    "definitions": is_definitions,
}
_TASK_FIELDS: dict[str, Callable[[Any], bool]] = {
    "task": lambda value: type(value) is str and value != "",
    "to": lambda value: value in _STATES,
    "from": lambda value: value is None or value in _STATES,
    "seq": _is_int,
    "t": _is_time,
    "attempt": lambda value: type(value) is int and value >= 0,
    "exit_code": _optional(_is_int),
    "started_at": _optional(_is_time),
    "finished_at": _optional(_is_time),
    "pid": _optional(_is_pid),
    "create_time": _optional(_is_time),
    "reason": _optional(_is_str),
    "reused": lambda value: type(value) is bool,
    "value_repr": _is_str,
    "slots": _optional(_is_str),
    "worker": _optional(_is_str),
    "log_start": _optional(lambda value: type(value) is int and value >= 0),
}
_RUN_REQUIRED: tuple[str, ...] = ("event",)
_TASK_REQUIRED = ("task", "to")


def record_problem(record: Any) -> str | None:
    """Why `record` is not a journal record tuidag could have written, or None when it is one. Fields this version
    does not know are allowed (a newer tuidag may add some)."""
    if type(record) is not dict:
        return f"expected a JSON object, got {type(record).__name__}"
    kind = record.get("type")
    if kind == "run":
        fields, required = _RUN_FIELDS, _RUN_REQUIRED
    elif kind == "task":
        fields, required = _TASK_FIELDS, _TASK_REQUIRED
    else:
        return f"unknown record type {str(kind)[:40]!r}"
    for name in required:
        if name not in record:
            return f"a {kind} record without {name!r}"
    for name, value in record.items():
        check = fields.get(name)
        if check is not None and not check(value):
            return f"bad {name!r}: {json.dumps(value)[:60]}"
    return None


#: What a `dag` record (an edit of the DAG file under --watch) says of the run's DAG: it replaces these of the header.
DAG_FIELDS = (
    "tasks",
    "deps",
    "capacities",
    "requests",
    "max_parallel",
    "groups",
    "matrix",
    "definitions",
    "fingerprints",
)


def with_dag(header: dict[str, Any], record: Any) -> dict[str, Any]:
    """`header` with the DAG a `dag` record describes (the header as it was if the record is not a good one)."""
    if type(record) is not dict or record.get("event") != "dag" or record_problem(record):
        return header
    return {**header, **{key: record[key] for key in DAG_FIELDS if key in record}}
