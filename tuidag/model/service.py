"""Service tasks: a task that runs until the run ends (a database, a dev server) and is never "done". Its dependents
start once it is *ready*, as its `ready_when` check says (no check: as soon as it has started); it fails if it exits
(whatever its code) or is not ready within `ready_timeout`, and `restart: on-failure` starts it again. When every
other task has ended, the run stops its services, each after the services that depend on it.

This module holds what a DAG says about a service (`ServiceSpec`, `ReadyCheck`) and checks the Python front end's
values; service_yaml.py reads the YAML keys (without importing the YAML parser here: the DAG cache loads this module
on every run); the engine acts on it (engine/services.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

DEFAULT_READY_TIMEOUT = 60.0
DEFAULT_INTERVAL = 0.2  # between two polls of a port, an URL or a command
DEFAULT_MAX_RESTARTS = 3
#: The reason a service ends with when the run stopped it because every other task had ended: CANCELLED this way is
#: how a service is meant to end, and does not make the run fail.
SERVICE_STOPPED = "service stopped: the run's other tasks ended"
READY_KINDS = ("port", "http", "log", "command")
RESTART_POLICIES = ("no", "on-failure")


class ReadyCheck(NamedTuple):
    """How to tell that a service is ready: `kind` is one of READY_KINDS and `target` the port (as text), URL, regular
    expression or shell command; `status` is the HTTP status expected; `interval` the time between two polls."""

    kind: str
    target: str
    status: int = 200
    interval: float = DEFAULT_INTERVAL

    def describe(self) -> str:
        """How the check reads in the output: `port 5432`, `http URL`, `log 'listening'`, `command pg_isready`."""
        if self.kind == "log":
            return f"log {self.target!r}"
        return f"{self.kind} {self.target}"


class ServiceSpec(NamedTuple):
    """What makes a task a service, and how it is watched and restarted."""

    ready_when: ReadyCheck | None = None
    ready_timeout: float = DEFAULT_READY_TIMEOUT
    restart: bool = False  # `restart: on-failure`
    max_restarts: int = DEFAULT_MAX_RESTARTS
    restart_delay: float = 0.0


def service_from_values(
    service: Any,
    ready_when: Any,
    ready_timeout: Any,
    restart: Any,
    max_restarts: Any,
    restart_delay: Any,
    duration: Callable[[Any, str], Any],
) -> tuple[ServiceSpec | None, list[str]]:
    """The Python front end's service options (`dag.shell(..., service=True, ready_when={"port": 5432})`), checked as
    the YAML keys are: the ServiceSpec (None for a task that is not a service) and the problems found. `duration`
    converts a duration option (number or text), returning None after it reported a bad one."""
    problems: list[str] = []
    if service is not True and service is not False:
        return None, [f"service must be True or False, got {service!r}"]
    others = {"ready_when": ready_when is not None, "restart": restart != "no"}
    if not service:
        return None, [f"{key} is for a service: add service=True" for key, given in others.items() if given]
    check = None
    if ready_when is not None:
        check, problem = _check_from_mapping(ready_when, duration)
        if problem:
            problems.append(problem)
    if restart not in RESTART_POLICIES:
        problems.append(f"restart must be {' or '.join(repr(p) for p in RESTART_POLICIES)}, got {restart!r}")
    if not (isinstance(max_restarts, int) and not isinstance(max_restarts, bool) and max_restarts >= 0):
        problems.append(f"max_restarts must be an integer >= 0, got {max_restarts!r}")
    timeout = duration(ready_timeout, "ready_timeout")
    delay = duration(restart_delay, "restart_delay")
    if problems or timeout is None or delay is None:
        return None, problems
    if timeout <= 0:
        return None, [f"ready_timeout must be longer than 0, got {ready_timeout!r}"]
    return ServiceSpec(check, timeout, restart == "on-failure", max_restarts, delay), []


def _check_from_mapping(given: Any, duration: Callable[[Any, str], Any]) -> tuple[ReadyCheck | None, str | None]:
    shape = "a mapping with one of " + ", ".join(READY_KINDS) + " (like {'port': 5432})"
    if not isinstance(given, dict):
        return None, f"ready_when must be {shape}, got {given!r}"
    unknown = [key for key in given if key not in (*READY_KINDS, "status", "interval")]
    if unknown:
        return None, f"ready_when: unknown kind {unknown[0]!r}: it must be one of {', '.join(READY_KINDS)}"
    kinds = [key for key in given if key in READY_KINDS]
    if len(kinds) != 1:
        return None, f"ready_when must be {shape}, got {given!r}"
    kind, value = kinds[0], given[kinds[0]]
    interval = duration(given.get("interval", DEFAULT_INTERVAL), "ready_when: interval")
    if interval is None:
        return None, None
    status = given.get("status", 200)
    if "status" in given and kind != "http":
        return None, "ready_when: 'status' goes with an 'http' check"
    if not (isinstance(status, int) and 100 <= status <= 599):
        return None, f"ready_when: status must be an HTTP status (100-599), got {status!r}"
    if kind == "port":
        if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535):
            return None, f"ready_when: port must be a port number (1-65535), got {value!r}"
        return ReadyCheck("port", str(value), interval=interval), None
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        return None, f"ready_when: {kind} must be a non-empty string, got {value!r}"
    if kind == "http" and not re.match(r"https?://[^/\s]+", value):
        return None, f"ready_when: http must be an URL like http://127.0.0.1:8000/health, got {value!r}"
    if kind == "log":
        try:
            re.compile(value)
        except re.error as exc:
            return None, f"ready_when: log is not a valid regular expression: {exc}"
    return ReadyCheck(kind, value, status, interval), None
