"""A task's story as its run recorded it: what it was asked to do (its definition, kept in the journal's header) and
every attempt it made (folded from the journal's task records).

The definition is recorded when the run is created, so the detail of a task (the UI's `i`, `tuidag show --task`)
says what ran even after the DAG file changed, or of a Python DAG that must not be imported again. An environment
variable whose name looks like a secret (it contains TOKEN, SECRET, PASSWORD or KEY, in any case) is recorded
without its value: the run folder is private, but a detail is shown on screens, pasted into issues and served to
browsers, and a value that was never written can't leak from any of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ..model.matrix import text_of
from ..model.spec import DEFAULT_SHELL, RUN_ID_PLACEHOLDER, DagSpec, TaskSpec
from ..model.state import TaskState
from .journal import read_journal
from .journal_records import is_definitions

HIDDEN = "•••"
"""How a secret's value is shown (it is recorded as null)."""
_SECRET = re.compile("TOKEN|SECRET|PASSWORD|KEY", re.IGNORECASE)
_ENDS = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED, TaskState.RETRYING})


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name says its value is a secret (`API_TOKEN`, `db_password`, `SSH_KEY`)."""
    return _SECRET.search(name) is not None


class TaskDefinition(NamedTuple):
    """What a task was asked to do. `env`: the variables tuidag gives it besides the OS's (the DAG's, the task's, the
    run's), a secret's value None; `callable`: the function a Python task calls (`module.name`)."""

    command: str | None = None
    setup: str | None = None
    workdir: str | None = None
    env: Mapping[str, str | None] = {}
    callable: str | None = None
    shell: str | None = None
    retries: int = 0
    timeout: float | None = None
    service: str | None = None  # a service's readiness check (`port 5432`), or "service" when it has none
    matrix: Mapping[str, str] = {}  # a matrix instance's values, as text (`lr` -> `0.01`)


def _masked(env: Mapping[str, str]) -> dict[str, str | None]:
    return {key: None if looks_secret(key) else value for key, value in env.items()}


def definition_of(task: TaskSpec) -> dict[str, Any]:
    """A task's own definition as the journal's header keeps it: what the DAG gives every task (its workdir, its
    `env:`) is kept once, beside (`definitions_header`); a matrix instance's values are the header's `matrix`. Empty
    fields are left out: a header of 5,000 tasks grows by a third, not by half again."""
    func = task.func
    record: dict[str, Any] = {
        "command": task.run,
        "setup": task.setup,
        "workdir": str(task.workdir) if task.workdir is not None else None,
        "env": _masked(dict(task.env)),
        "run_env": _masked(dict(task.run_env)),  # `{run_id}` in them is the run's id
        "callable": None
        if func is None
        else f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', func)}",
        "shell": task.shell if (task.run or task.setup) and task.shell != DEFAULT_SHELL else None,
        "retries": task.retries,
        "timeout": task.timeout,
    }
    if task.service is not None:
        check = task.service.ready_when
        record["service"] = check.describe() if check is not None else "service"
    return {key: value for key, value in record.items() if value not in (None, {}, 0)}


def definitions_header(dag: DagSpec) -> dict[str, Any]:
    """Every task's definition, for the journal's header (`definitions`)."""
    return {
        "workdir": str(dag.workdir),
        "env": _masked(dag.env),
        "tasks": {name: definition_of(task) for name, task in dag.tasks.items()},
    }


def definition_from_spec(dag: DagSpec, name: str, run_id: str) -> TaskDefinition:
    """A task's definition from the DAG itself, as the header would give it back (a view of a run no journal holds)."""
    header = {"definitions": definitions_header(dag), "matrix": matrix_values(dag), "run_id": run_id}
    return definition_from_header(header, name) or TaskDefinition()


def matrix_values(dag: DagSpec) -> dict[str, dict[str, str]]:
    """Each matrix instance's values as text (`{"train[lr=0.01]": {"lr": "0.01"}}`), as the header's `matrix` keeps
    them (the report's table of a group's instances by value reads them there too)."""
    return {
        name: {key: text_of(value) for key, value in task.matrix}
        for name, task in dag.tasks.items()
        if task.group is not None
    }


def definition_from_header(header: Mapping[str, Any], name: str) -> TaskDefinition | None:
    """The task's definition as the run's header recorded it; None for a run recorded before definitions were kept
    (the header was checked when read: `journal_records.is_definitions`)."""
    definitions = header.get("definitions")
    if not isinstance(definitions, dict) or not is_definitions(definitions) or name not in definitions["tasks"]:
        return None
    record = definitions["tasks"][name]
    timeout = record.get("timeout")
    matrix = header.get("matrix")
    return TaskDefinition(
        command=record.get("command"),
        setup=record.get("setup"),
        workdir=record.get("workdir") or definitions.get("workdir"),
        env={
            **(definitions.get("env") or {}),
            **(record.get("env") or {}),
            **{
                key: value if value is None else value.replace(RUN_ID_PLACEHOLDER, str(header.get("run_id")))
                for key, value in (record.get("run_env") or {}).items()
            },
        },
        callable=record.get("callable"),
        shell=record.get("shell") or (DEFAULT_SHELL if record.get("command") or record.get("setup") else None),
        retries=record.get("retries", 0),
        timeout=float(timeout) if timeout is not None else None,
        service=record.get("service"),
        matrix=dict(matrix.get(name) or {}) if isinstance(matrix, dict) else {},
    )


class AttemptRecord(NamedTuple):
    """One attempt, as the journal saw it: `why` is the reason it ran (from the plan: `input data.csv changed`),
    `reason` how it ended (`exit code 1`, `killed by SIGTERM`, `timed out after 5s`); `state` is the state it ended
    in (RETRYING: another attempt followed) or the task's state while it goes on (RUNNING, READY)."""

    number: int
    started_at: float
    state: TaskState
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str | None = None
    why: str | None = None
    worker: str | None = None
    slots: str | None = None
    ready_at: float | None = None  # a service's: when it became ready
    ready: str | None = None  # ... and what said so (`port 5432, 1.2s`)

    def duration(self, now: float) -> float:
        return max(0.0, (self.finished_at if self.finished_at is not None else now) - self.started_at)


class TaskStory(NamedTuple):
    """What the journal says of one task: its attempts, oldest first, and its return value (a callable's, once it
    succeeded: the value itself when JSON holds it exactly, else its repr as text, `value_is_repr`)."""

    attempts: list[AttemptRecord]
    value: Any = None
    value_is_repr: bool = False
    has_value: bool = False


def fold_attempts(records: list[dict[str, Any]]) -> TaskStory:
    """The attempts of one task from its journal records (checked ones, in order)."""
    attempts: dict[int, AttemptRecord] = {}
    value: Any = None
    is_repr = has_value = False
    for rec in records:
        t = rec.get("t")
        if t is None:
            continue
        state = TaskState(rec["to"])
        number = rec.get("attempt", 0)
        if state is TaskState.SUCCEEDED and ("value" in rec or "value_repr" in rec):
            has_value, is_repr = True, "value" not in rec
            value = rec["value"] if "value" in rec else rec["value_repr"]
        attempt = attempts.get(number)
        if attempt is None:
            if state is not TaskState.RUNNING or number < 1:
                continue  # not an attempt's start: waiting, skipped, up to date, reused, cancelled before it ran
            attempt = AttemptRecord(number, t, state, why=rec.get("reason"))
        changes: dict[str, Any] = {}
        if rec.get("worker") is not None:
            changes["worker"] = rec["worker"]
        if rec.get("slots") is not None:
            changes["slots"] = rec["slots"]
        if state is TaskState.READY and attempt.ready_at is None:
            changes.update(ready_at=t, ready=rec.get("reason"))
        if state in _ENDS:
            changes.update(
                finished_at=rec.get("finished_at") or t, exit_code=rec.get("exit_code"), reason=rec.get("reason")
            )
        if attempt.state not in _ENDS:
            changes["state"] = state
        attempts[number] = attempt._replace(**changes)
    return TaskStory(sorted(attempts.values(), key=lambda a: a.number), value, is_repr, has_value)


def task_story(journal: Path, name: str) -> TaskStory:
    """Fold the run's journal for one task. Only the lines that name it are parsed (a journal of a big run is tens of
    MB; a detail is asked for while the UI runs), and each is checked as every record read back is."""
    needle = b'"task":' + json.dumps(name).encode() + b","
    records = [
        record
        for record in read_journal(journal, containing=needle)
        if record.get("type") == "task" and record.get("task") == name
    ]
    return fold_attempts(records)
