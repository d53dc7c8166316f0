"""A task's whole story on one screen: what it was asked to do, what it depends on and what needs it, why it ran, each
attempt and how it ended, its return value and its log. The UI's detail screen (`i`) and `tuidag show --task` both
draw it from `task_detail` and `detail_lines` here, so the two can't disagree.

The facts come through the `RunSource` the UI reads every run through (its definition, kept in the journal's
header, and its attempts, folded from the journal). Every string in them is the run's own text: `detail_lines` makes
each one safe for a terminal (escape sequences dropped, control characters shown as U+FFFD, a multi-line command
split into lines), and whoever renders them must not parse them as markup.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any, NamedTuple

from ..control.run_source import RunSource
from ..engine.events import TaskSnapshot
from ..model.durations import format_duration
from ..model.spec import DEFAULT_SHELL
from ..model.state import TaskState
from ..store.task_story import HIDDEN, TaskStory
from .terminal_text import printable, strip_ansi

FORMAT = 1
"""Of `--format json`: bumped when a field changes meaning or goes away (new fields may be added without)."""

_ENDED = {
    TaskState.SUCCEEDED: "succeeded",
    TaskState.FAILED: "failed",
    TaskState.CANCELLED: "cancelled",
    TaskState.RETRYING: "failed, retried",
}


def signal_of(exit_code: int | None) -> str | None:
    """The signal that killed an attempt (its exit code is minus the signal's number), by name."""
    if exit_code is None or exit_code >= 0:
        return None
    try:
        return signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


def task_detail(
    source: RunSource, name: str, now: float | None = None, story: TaskStory | None = None
) -> dict[str, Any]:
    """Every fact of the task, as plain JSON-able data (`--format json`; the screen draws `detail_lines` of it).
    `story`: the task's attempts, read already (the screen repaints a running task's durations without reading the
    journal again). KeyError when the run has no such task."""
    now = time.time() if now is None else now
    if source.finished:  # an attempt the record leaves open (its engine died) lasted until the run's end, not now
        now = min(now, source.ended_at)
    dag = source.dag
    spec = dag.tasks[name]
    snap = source.snapshot().get(name) or TaskSnapshot(name, TaskState.PENDING)
    definition = source.definition(name)
    story = source.story(name) if story is None else story
    attempts = [
        {
            "number": a.number,
            "started_at": a.started_at,
            "finished_at": a.finished_at,
            "duration": a.duration(now),
            "state": a.state.value,
            "exit_code": a.exit_code,
            "signal": signal_of(a.exit_code),
            "reason": a.reason,
            "why": a.why,
            "worker": a.worker,
            "slots": a.slots,
            "ready_at": a.ready_at,
            "ready": a.ready,
        }
        for a in story.attempts
    ]
    env: dict[str, str] | None = None
    if definition is not None:
        env = {key: HIDDEN if value is None else value for key, value in definition.env.items()}
        env["TUIDAG_RUN_ID"] = source.run.run_id
        env["TUIDAG_TASK"] = name
        if attempts:
            env["TUIDAG_ATTEMPT"] = str(attempts[-1]["number"])
    why = next((a["why"] for a in reversed(attempts) if a["why"]), None)
    return {
        "format": FORMAT,
        "run_id": source.run.run_id,
        "task": name,
        "state": snap.state.value,
        "reason": snap.reason,
        "exit_code": snap.exit_code,
        "reused": snap.reused,
        "group": spec.group,
        "matrix": dict(definition.matrix) if definition is not None else {},
        "service": definition.service if definition is not None else None,
        "recorded": definition is not None,  # False: a run recorded before tuidag kept definitions
        "command": definition.command if definition is not None else None,
        "setup": definition.setup if definition is not None else None,
        "callable": definition.callable if definition is not None else None,
        "shell": definition.shell if definition is not None else None,
        "workdir": definition.workdir if definition is not None else None,
        "retries": definition.retries if definition is not None else None,
        "timeout": definition.timeout if definition is not None else None,
        "env": env,
        "depends_on": list(spec.depends_on),
        "needed_by": list(dag.children.get(name, ())),
        "why": why,
        "attempts": attempts,
        "value": story.value if story.has_value and not story.value_is_repr else None,
        "value_repr": story.value if story.has_value and story.value_is_repr else None,
        "has_value": story.has_value,
        "log": str(source.run.log_path(name)),
    }


def clean(text: object) -> str:
    """One line of the run's text, plain and safe: escapes dropped, control characters (a newline too) visible."""
    return printable(strip_ansi(str(text)))


def clean_lines(text: str) -> list[str]:
    """A multi-line text (a `run: |` script) as its lines, each made safe."""
    return [clean(line) for line in text.rstrip("\n").split("\n")] or [""]


class Line(NamedTuple):
    """One line of the detail: `label` (the first line of a field, else ""), its `text` (safe), and `kind`: "head",
    "field", "attempt", "dependency" (`task`: the task it names, so a view can jump to it)."""

    label: str
    text: str
    kind: str = "field"
    task: str | None = None


LABEL_WIDTH = 13  # "return value" and a space


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def state_word(state: str) -> str:
    return state.lower().replace("_", " ")


def _outcome(attempt: dict[str, Any]) -> list[str]:
    """How an attempt ended (`failed, retried (exit code 3)`), then its reason in full when it says more."""
    state = TaskState(attempt["state"])
    if state not in _ENDED:
        return [state_word(state.value)]
    if attempt["signal"]:
        how = f"killed by {attempt['signal']}"
    elif attempt["exit_code"] is not None:
        how = f"exit code {attempt['exit_code']}"
    else:
        how = ""
    reason = clean_lines(attempt["reason"]) if attempt["reason"] and attempt["reason"] != attempt["why"] else []
    if reason and reason[0] == how:
        how, reason = reason[0], reason[1:]
    return [_ENDED[state] + (f" ({how})" if how else "") + (f": {reason[0]}" if reason else ""), *reason[1:]]


def _field(label: str, lines: list[str]) -> list[Line]:
    return [Line(label if i == 0 else "", text) for i, text in enumerate(lines)]


def detail_lines(facts: dict[str, Any]) -> list[Line]:
    """The detail as lines, in the order both views show them."""
    name = facts["task"]
    state = facts["state"]
    head = f"{clean(name)} · {state_word(state)}"
    reason = facts["reason"]
    if reason and reason != facts["why"]:  # (a success's reason is why it ran: said below)
        said = clean(reason)  # `up to date (run R)` says the state itself
        head = f"{clean(name)} · {said}" if said.startswith(state_word(state)) else f"{head}: {said}"
    out = [Line("", head, "head")]
    kind = []
    if facts["group"]:
        values = ", ".join(f"{clean(k)}={clean(v)}" for k, v in facts["matrix"].items())
        kind.append(f"instance of {clean(facts['group'])}" + (f" ({values})" if values else ""))
    if facts["service"]:
        kind.append(f"service, ready when {clean(facts['service'])}" if facts["service"] != "service" else "service")
    if facts["reused"]:
        kind.append("reused from the run it resumed")
    if kind:
        out.append(Line("", "; ".join(kind), "head"))
    if not facts["recorded"]:
        out += _field("definition", ["not recorded (the run was made by an older tuidag)"])
    if facts["callable"]:
        out += _field("calls", [clean(facts["callable"])])
    if facts["setup"]:
        out += _field("setup", clean_lines(facts["setup"]))
    if facts["command"]:
        out += _field("command", clean_lines(facts["command"]))
    if facts["workdir"]:
        out += _field("workdir", [clean(facts["workdir"])])
    extras = []
    if facts["retries"]:
        extras.append(f"retries {facts['retries']}")
    if facts["timeout"]:
        extras.append(f"timeout {format_duration(facts['timeout'])}")
    if facts["shell"] and facts["shell"] != DEFAULT_SHELL:
        extras.append(f"shell {clean(facts['shell'])}")
    if extras:
        out += _field("options", [", ".join(extras)])
    if facts["env"] is not None:
        out += _field("environment", [f"{clean(k)}={clean(v)}" for k, v in sorted(facts["env"].items())])
    for label, names in (("depends on", facts["depends_on"]), ("needed by", facts["needed_by"])):
        if names:
            out += [Line(label if i == 0 else "", clean(n), "dependency", n) for i, n in enumerate(names)]
        else:
            out.append(Line(label, "nothing"))
    if facts["why"]:
        out += _field("why it ran", [clean(facts["why"])])
    elif facts["attempts"]:  # no plan: no task of the DAG declares inputs or outputs, so each runs every time
        out += _field("why it ran", ["it declares no inputs or outputs: it runs every time"])
    attempts = facts["attempts"]
    if not attempts:
        out += _field("attempts", ["none"])
    for i, a in enumerate(attempts):
        outcome = _outcome(a)
        line = f"#{a['number']}  {_when(a['started_at'])}  {format_duration(a['duration'])}  {outcome[0]}"
        out.append(Line("attempts" if i == 0 else "", line, "attempt"))
        out += [Line("", "    " + text, "attempt") for text in outcome[1:]]
        more = []
        if a["ready_at"] is not None:
            more.append(f"ready after {format_duration(a['ready_at'] - a['started_at'])}")
            if a["ready"]:
                more[-1] += f" ({clean(a['ready'])})"
        if a["worker"]:
            more.append(f"worker {clean(a['worker'])}")
        if a["slots"]:
            more.append(f"slots {clean(a['slots'])}")
        if more:
            out.append(Line("", "    " + ", ".join(more), "attempt"))
    if facts["has_value"]:
        if facts["value_repr"] is not None:
            shown = clean(facts["value_repr"]) + "  (its repr: not plain JSON)"
        else:
            shown = clean(json.dumps(facts["value"], ensure_ascii=False))
        out += _field("return value", [shown])
    out += _field("log", [clean(facts["log"])])
    return out


def detail_text(facts: dict[str, Any]) -> str:
    """The detail as `tuidag show --task` prints it."""
    return "\n".join(
        (f"{line.label:<{LABEL_WIDTH}}" if line.kind != "head" else "") + line.text for line in detail_lines(facts)
    )
