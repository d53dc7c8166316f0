"""The YAML keys of a service task (`service`, `ready_when`, `ready_timeout`, `restart`, `max_restarts`,
`restart_delay`), read into a `ServiceSpec` (service.py) with a located error for each bad value."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from yaml.nodes import MappingNode, Node, ScalarNode

from .dag_keys import SERVICE_KEYS
from .errors import DagError
from .service import DEFAULT_INTERVAL, READY_KINDS, RESTART_POLICIES, ReadyCheck, ServiceSpec
from .yaml_nodes import _BOOL, _INT, _describe, _location, _typed


class Converters(NamedTuple):
    """The YAML reader's converters a service's keys use: (node, what) -> value, or `skip` after reporting."""

    duration: Callable[..., Any]
    integer: Callable[..., Any]
    text: Callable[..., Any]
    skip: Any


def read_service(
    file: str,
    fields: dict[str, tuple[Node, Node]],
    name: str,
    errors: list[DagError],
    convert: Converters,
) -> ServiceSpec | None:
    """The task's ServiceSpec when it says `service: true` (its service keys removed from `fields`), else None; a
    service key on a task that is not a service, and every bad value, is an error appended to `errors`."""
    what = f"task '{name}': "

    def fail(node: Node, message: str) -> None:
        errors.append(DagError(what + message, _location(file, node.start_mark)))

    flag = fields.pop("service", None)
    is_service = False
    if flag is not None:
        value = _typed(flag[1], _BOOL)
        if value is None:
            fail(flag[1], f"service must be true or false, got {_describe(flag[1])}")
        is_service = bool(value)
    given = {key: fields.pop(key) for key in SERVICE_KEYS if key in fields}
    if not is_service:
        for key_node, _ in given.values():
            fail(key_node, f"'{key_node.value}' is for a service: add 'service: true'")
        return None
    settings: dict[str, Any] = {}
    if "ready_when" in given:
        check = _ready_check(given["ready_when"][1], what + "ready_when", fail, convert)
        if check is not None:
            settings["ready_when"] = check
    if "ready_timeout" in given:
        settings["ready_timeout"] = convert.duration(given["ready_timeout"][1], what + "ready_timeout", positive=True)
    if "restart" in given:
        node = given["restart"][1]
        if isinstance(node, ScalarNode) and node.value in RESTART_POLICIES:
            settings["restart"] = node.value == "on-failure"
        else:
            choices = " or ".join(RESTART_POLICIES)
            fail(node, f"restart must be {choices}, got {_describe(node)}")
    if "max_restarts" in given:
        settings["max_restarts"] = convert.integer(given["max_restarts"][1], what + "max_restarts", minimum=0)
    if "restart_delay" in given:
        settings["restart_delay"] = convert.duration(given["restart_delay"][1], what + "restart_delay")
    if not settings.get("restart"):
        for key in ("max_restarts", "restart_delay"):
            if key in given:
                fail(given[key][0], f"'{key}' needs 'restart: on-failure'")
    return ServiceSpec(**{key: value for key, value in settings.items() if value is not convert.skip})


def _ready_check(node: Node, what: str, fail: Callable[[Node, str], None], convert: Converters) -> ReadyCheck | None:
    shape = "a mapping with one of " + ", ".join(READY_KINDS) + " (like {port: 5432})"
    if not isinstance(node, MappingNode):
        fail(node, f"ready_when must be {shape}, got {_describe(node)}")
        return None
    pairs = {key.value: (key, value) for key, value in node.value if isinstance(key, ScalarNode)}
    kinds = [key for key in pairs if key in READY_KINDS]
    extra = {"status", "interval"}
    for key, (key_node, _) in pairs.items():
        if key not in READY_KINDS and key not in extra:
            fail(key_node, f"ready_when: unknown kind '{key}': it must be one of {', '.join(READY_KINDS)}")
            return None
    if len(kinds) != 1:
        fail(node, f"ready_when must be {shape}" + (f", got {' and '.join(kinds)}" if kinds else ""))
        return None
    kind = kinds[0]
    value = pairs[kind][1]
    interval = DEFAULT_INTERVAL
    if "interval" in pairs:
        interval = convert.duration(pairs["interval"][1], "ready_when: interval", positive=True)
        if interval is convert.skip:
            return None
    status = 200
    if "status" in pairs:
        if kind != "http":
            fail(pairs["status"][0], "ready_when: 'status' goes with an 'http' check")
            return None
        code = _typed(pairs["status"][1], _INT)
        if code is None or not 100 <= code <= 599:
            fail(
                pairs["status"][1],
                f"ready_when: status must be an HTTP status (100-599), got {_describe(pairs['status'][1])}",
            )
            return None
        status = code
    if kind == "port":
        port = _typed(value, _INT)
        if port is None or not 1 <= port <= 65535:
            fail(value, f"ready_when: port must be a port number (1-65535), got {_describe(value)}")
            return None
        return ReadyCheck("port", str(port), interval=interval)
    text = convert.text(value, f"ready_when: {kind}", expected="a string")
    if text is convert.skip:
        return None
    if kind == "http" and not re.match(r"https?://[^/\s]+", text):
        fail(value, f"ready_when: http must be an URL like http://127.0.0.1:8000/health, got {_describe(value)}")
        return None
    if kind == "log":
        try:
            re.compile(text)
        except re.error as exc:
            fail(value, f"ready_when: log is not a valid regular expression: {exc}")
            return None
    return ReadyCheck(kind, text, status, interval)
