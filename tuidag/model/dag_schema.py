"""The JSON schema (draft 2020-12) of tuidag's YAML DAG format, generated from dag_keys.py's table and the value
types below, for editors: with `# yaml-language-server: $schema=...` as a file's first line, the YAML language
server (VS Code, Neovim, Helix...) completes keys, shows each key's description and flags mistakes as they are typed.

The schema says what a single value or mapping can say: types, counts and their bounds, durations, names, the one
kind of a `ready_when`, a task's keys (an unknown one is flagged), keys that go only with another (a matrix, a
service, `restart: on-failure`). What needs the whole DAG (cycles, unknown dependencies, matrix placeholders,
outputs two tasks declare) or the YAML text itself (duplicate keys) stays `tuidag validate`'s: tests/test_schema.py
lists every such difference on the corpus of bad files.

`tuidag/schema.json` and `docs/schema.json` are this module's output, written by `python docs/gen_dag_file.py`;
tests/test_schema.py fails when they differ from it.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .dag_keys import KEYS, NOT_FOR_SERVICES, SCOPES, Key
from .durations import DURATION_RE, MAX_DURATION
from .matrix import KEY_RE
from .resources import KIND_RE
from .service import READY_KINDS, RESTART_POLICIES
from .spec import MAX_COUNT, MAX_TASK_NAME, NOTIFY_CHOICES, TASK_NAME_RE, FailurePolicy

#: The end of the text. A pattern is searched for (ECMA-262 in editors, Python's `re` in tests), and Python's `$` also
#: matches before a final newline: a task named "a\n" would pass. No character may follow: the end in both.
_END = r"(?![\s\S])"
_SCALAR = ["string", "number", "boolean"]
_NO_NUL = r"^[^\u0000]*$"


class ValueType(NamedTuple):
    """A kind of value, as the reference names (`title`) and describes it, and its JSON schema."""

    title: str
    description: str
    schema: dict[str, Any]


def _ref(name: str, **more: Any) -> dict[str, Any]:
    return {"$ref": f"#/$defs/{name}", **more}


def _one_or_list(entry: dict[str, Any], unique: bool = True) -> dict[str, Any]:
    """One entry, or a list of them (each once, when `unique`)."""
    listed: dict[str, Any] = {"type": "array", "items": entry}
    return {"anyOf": [entry, {**listed, "uniqueItems": True} if unique else listed]}


def _duration(positive: bool) -> dict[str, Any]:
    number: dict[str, Any] = {"type": "number", "maximum": MAX_DURATION}
    number["exclusiveMinimum" if positive else "minimum"] = 0
    pattern = DURATION_RE.pattern
    if positive:  # some digit other than 0
        pattern = "^(?=[^1-9]*[1-9])" + pattern.removeprefix("^")
    text = {"type": "string", "pattern": pattern, "patternErrorMessage": "a duration like 500ms, 5s, 2m or 1h"}
    return {"anyOf": [number, text]}


_TASK_NAME = {
    "pattern": f"^{TASK_NAME_RE.pattern}{_END}",
    "maxLength": MAX_TASK_NAME,
    "not": {"pattern": r"^\.$|\.\."},
    "patternErrorMessage": "letters, digits, '_', '.' and '-'",
}
_KIND = {"pattern": f"^{KIND_RE.pattern}{_END}", "patternErrorMessage": "letters, digits, '_', '.' and '-'"}
_MATRIX_KEY = f"^{KEY_RE.pattern}{_END}"

TYPES = {
    "text": ValueType(
        "text",
        "A string; a number or true/false is taken as written. Not empty, and no NUL character.",
        {"type": _SCALAR, "pattern": r"^[^\u0000]*[^\u0000\s][^\u0000]*$"},
    ),
    "command": ValueType(
        "command", "A shell command, run with `sh -c`; `|` and indented lines below for several lines.", _ref("text")
    ),
    "path": ValueType("folder", "A folder's path; `~` is the home folder.", _ref("text")),
    "regex": ValueType(
        "regular expression", "A regular expression (Python's syntax), searched for in each line.", _ref("text")
    ),
    "count": ValueType(
        "integer >= 1",
        f"A whole number from 1 to {MAX_COUNT:,}.",
        {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
    ),
    "count-or-zero": ValueType(
        "integer >= 0",
        f"A whole number from 0 to {MAX_COUNT:,}.",
        {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
    ),
    "duration": ValueType(
        "duration",
        "A number of seconds, or a number with a unit: `500ms`, `5s`, `2m`, `1h`. At most 8760h (a year).",
        _duration(positive=False),
    ),
    "positive-duration": ValueType("duration > 0", "A duration longer than 0.", _duration(positive=True)),
    "flag": ValueType("true/false", "`true` or `false`.", {"type": "boolean"}),
    "failure-policy": ValueType(
        "failure policy",
        "`skip-downstream`: skip what depends on the failed task, run the rest; `finish-running`: start nothing "
        "new, let running tasks finish; `cancel-all`: cancel running tasks too.",
        {"enum": [policy.value for policy in FailurePolicy]},
    ),
    "notify": ValueType(
        "notify choice",
        "`end`: once the run has ended; `failure`: as soon as a task fails; `never`.",
        {"enum": list(NOTIFY_CHOICES)},
    ),
    "executor": ValueType(
        "executor",
        "`local`, `dask` (an existing cluster, at `dask_address`) or `dask-local:N` (a cluster of N workers started "
        "for the run; one per CPU without `:N`).",
        {
            "type": "string",
            "pattern": r"^\s*(?:local|dask|dask-local(?::[0-9]*[1-9][0-9]*)?)\s*$",
            "patternErrorMessage": "local, dask or dask-local[:N]",
        },
    ),
    "restart": ValueType(
        "restart policy",
        "`no` or `on-failure` (YAML 1.1 reads an unquoted `no` as false, taken as `no` here).",
        {"enum": [*RESTART_POLICIES, False]},
    ),
    "env": ValueType(
        "environment",
        'A mapping of variable names to values: strings and numbers as written (`1.10` stays "1.10"), true/false '
        "as `true` and `false`.",
        {
            "type": "object",
            "propertyNames": {"pattern": r"^[^=\u0000]+$", "patternErrorMessage": "a name without '='"},
            "additionalProperties": {"type": _SCALAR, "pattern": _NO_NUL},
        },
    ),
    "capacities": ValueType(
        "slot capacities",
        f"A mapping of resource names (letters, digits, '_', '.', '-') to counts from 0 to {MAX_COUNT:,}.",
        {"type": "object", "propertyNames": _KIND, "additionalProperties": _ref("count-or-zero")},
    ),
    "requests": ValueType(
        "slot requests",
        "A mapping of resource names to counts from 1, each at most the DAG's capacity; in a matrix task, a count "
        'may be a placeholder (`"${{ matrix.gpus }}"`).',
        {
            "type": "object",
            "propertyNames": _KIND,
            "additionalProperties": {"anyOf": [_ref("count"), {"type": "string", "pattern": r"\$\{\{"}]},
        },
    ),
    "inputs": ValueType(
        "paths or globs", "A path or glob, or a list of them (`**` for any depth).", _one_or_list(_ref("text"))
    ),
    "outputs": ValueType(
        "paths",
        "A relative path, or a list of them: files and folders, no globs.",
        _one_or_list(_ref("text", pattern=r"^(?!/)[^*?\[]*$", patternErrorMessage="a relative path, not a glob")),
    ),
    "task-names": ValueType(
        "task names",
        "A task name, or a list of them: a matrix task (every instance), one instance (`train[lr=0.1,seed=1]`) or "
        "a selection (`train[seed=2]`).",
        _one_or_list({"type": _SCALAR, "minLength": 1}),
    ),
    "variable-names": ValueType(
        "variable names",
        "A variable name, or a list of them.",
        _one_or_list(_ref("text", pattern=r"^[^=]*$", patternErrorMessage="a name without '='"), unique=False),
    ),
    "tasks": ValueType(
        "tasks",
        f"A mapping of task names (letters, digits, '_', '.', '-'; at most {MAX_TASK_NAME}) to tasks.",
        {"type": "object", "minProperties": 1, "propertyNames": _TASK_NAME, "additionalProperties": _ref("task")},
    ),
    "matrix-value": ValueType(
        "matrix value", "A string, number or true/false, kept as written.", {"type": _SCALAR, "pattern": _NO_NUL}
    ),
    "matrix-values": ValueType(
        "matrix values",
        "A list of matrix values, at least one, each once.",
        {"type": "array", "minItems": 1, "uniqueItems": True, "items": _ref("matrix-value")},
    ),
    "combinations": ValueType(
        "combinations",
        "A list of mappings of matrix keys to one value each.",
        {
            "type": "array",
            "items": {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"pattern": _MATRIX_KEY},
                "additionalProperties": _ref("matrix-value"),
            },
        },
    ),
    "matrix": ValueType(
        "matrix",
        "A mapping of keys (letters, digits, '_', '-'; not a digit first) to lists of values, with `include` and "
        "`exclude` lists of combinations; at least one key or an `include`.",
        {},  # made from the table's matrix keys (below)
    ),
    "ready-check": ValueType(
        "readiness check",
        "A mapping with one of `port`, `http`, `log` or `command`, and an `interval`; `status` goes with `http`.",
        {},  # made from the table's ready_when keys (below)
    ),
    "port": ValueType("port", "A TCP port number, 1 to 65535.", {"type": "integer", "minimum": 1, "maximum": 65535}),
    "url": ValueType(
        "URL",
        "An `http://` or `https://` URL.",
        {"type": "string", "pattern": r"^https?://[^/\s]+", "patternErrorMessage": "a URL like http://127.0.0.1:8000/"},
    ),
    "http-status": ValueType("HTTP status", "100 to 599.", {"type": "integer", "minimum": 100, "maximum": 599}),
}


def dag_schema() -> dict[str, Any]:
    """The schema, as a JSON document."""
    defs = {name: {"description": kind.description, **kind.schema} for name, kind in TYPES.items()}
    defs["matrix"].update(_matrix())
    defs["ready-check"].update(_ready_check())
    defs["task"] = {
        "description": "A task: a shell command and what it needs.",
        "type": "object",
        "properties": _properties("task", "service"),
        "required": [key.name for key in KEYS if key.scope == "task" and key.default == "required"],
        "additionalProperties": False,
        "allOf": [
            *(_only_with(needs, names) for needs, names in _needs("task", "service").items()),
            {
                "if": _condition("service: true"),
                "then": {
                    "properties": {name: _forbidden(f"a service can't have '{name}'") for name in NOT_FOR_SERVICES}
                },
            },
        ],
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tuidag DAG file",
        "description": "A DAG of tasks for tuidag: its settings and its tasks. Generated from "
        "tuidag/model/dag_keys.py by docs/gen_dag_file.py.",
        "type": "object",
        "properties": _properties("dag"),
        "required": [key.name for key in KEYS if key.scope == "dag" and key.default == "required"],
        "additionalProperties": False,
        "$defs": defs,
    }


def schema_text() -> str:
    """The schema as the files hold it."""
    return json.dumps(dag_schema(), indent=2, ensure_ascii=False) + "\n"


def example_value(key: Key) -> Any:
    """A key's example as the value a YAML parser reads."""
    import yaml

    return yaml.safe_load(f"{key.name}: {key.example}")[key.name]


def _property(key: Key) -> dict[str, Any]:
    default = f" Default: {key.default}." if key.default not in ("", "none", "required") else ""
    needs = f" Only with `{key.needs}`." if key.needs else ""
    return _ref(key.type, description=key.description + default + needs, examples=[example_value(key)])


def _properties(*scopes: str) -> dict[str, Any]:
    assert all(scope in SCOPES for scope in scopes)
    return {key.name: _property(key) for key in KEYS if key.scope in scopes}


def _needs(*scopes: str) -> dict[str, list[str]]:
    """What the keys of `scopes` need -> the names of those that need it; a service's keys need `service: true`."""
    found: dict[str, list[str]] = {}
    for key in KEYS:
        if key.scope in scopes:
            for needs in filter(None, ("service: true" if key.scope == "service" else "", key.needs)):
                found.setdefault(needs, []).append(key.name)
    return found


def _condition(needs: str) -> dict[str, Any]:
    """`key` (it is there) or `key: value` (it has that value) as a schema."""
    name, _, value = needs.partition(": ")
    condition: dict[str, Any] = {"required": [name]}
    if value:
        condition["properties"] = {name: {"const": True if value == "true" else value}}
    return condition


def _forbidden(message: str) -> dict[str, Any]:
    """A key that may not be there. `errorMessage` is what the YAML language server says then."""
    return {"not": {}, "errorMessage": message}


def _only_with(needs: str, names: list[str]) -> dict[str, Any]:
    return {
        "if": _condition(needs),
        "else": {"properties": {name: _forbidden(f"'{name}' needs '{needs}'") for name in names}},
    }


def _matrix() -> dict[str, Any]:
    named = [key.name for key in KEYS if key.scope == "matrix" and key.name != "<key>"]
    (values,) = [key for key in KEYS if key.scope == "matrix" and key.name == "<key>"]
    others = "^(?!(?:" + "|".join(named) + f"){_END})" + _MATRIX_KEY.removeprefix("^")
    return {
        "type": "object",
        "properties": {key.name: _property(key) for key in KEYS if key.scope == "matrix" and key.name in named},
        "patternProperties": {others: _property(values)},
        "additionalProperties": False,
        "anyOf": [{"required": ["include"]}, {"not": {"propertyNames": {"enum": named}}}],  # a key, or an include
    }


def _ready_check() -> dict[str, Any]:
    rows = {key.name: key for key in KEYS if key.scope == "ready_when"}
    assert set(READY_KINDS) <= set(rows)

    def branch(kind: str) -> dict[str, Any]:
        fields = [
            name for name, key in rows.items() if name == kind or (name not in READY_KINDS and key.needs in ("", kind))
        ]
        return {
            "required": [kind],
            "properties": {name: _property(rows[name]) for name in fields},
            "additionalProperties": False,
        }

    return {"type": "object", "oneOf": [branch(kind) for kind in READY_KINDS]}
