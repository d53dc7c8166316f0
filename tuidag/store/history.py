"""Run history for `tuidag runs` and `tuidag logs`: which runs belong to which DAG, and how each one went.

Everything here is read from a state dir that may hold folders of several DAGs (every DAG file in a folder shares
the `.tuidag` next to it), of older or newer tuidag versions, or damaged by hand: a record of the wrong shape is
skipped with a warning naming its file, never trusted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from ..model.dag_diff import REMOVED
from ..model.service import SERVICE_STOPPED
from ..model.spec import JOB_GROUP_STOPPED
from ..model.state import TERMINAL, TaskState, ended_outcome, ended_well
from .journal import (
    Replay,
    TaskRecord,
    open_stored,
    read_header,
    record_problem,
    replay,
    warn_bad_record,
    warn_unreadable,
)
from .run_dag import current_header
from .runs import RunDir, RunStore


class RunInfo(NamedTuple):
    run_id: str
    dag: str
    started_at: float | None
    duration: float | None
    counts: dict[str, int]
    outcome: str  # succeeded | failed | cancelled | interrupted | running (or what a summary says)


def outcome_of(run: RunDir, rep: Replay) -> str:
    """For a run without summary.json: still running, or interrupted (its process died mid-run)."""
    if run.owned():
        return "running"
    if rep.finished_at is not None and all(t.state in TERMINAL for t in rep.tasks.values()):
        # finished but the summary was never written: the process died right at the end
        ok = all(
            ended_well(
                t.state, t.state is TaskState.CANCELLED and t.reason in (JOB_GROUP_STOPPED, SERVICE_STOPPED, REMOVED)
            )
            for t in rep.tasks.values()
        )
        return ended_outcome((t.state for t in rep.tasks.values()), ok)
    return "interrupted"


def run_info(run: RunDir) -> RunInfo:
    summary = read_summary(run)
    if summary is not None:
        return RunInfo(
            run.run_id,
            summary.get("dag", "?"),
            summary.get("started_at"),
            summary.get("duration"),
            summary["counts"],
            summary.get("outcome", "failed"),
        )
    rep = replay(run.journal)
    counts: dict[str, int] = {}
    for task in rep.tasks.values():
        counts[task.state.value] = counts.get(task.state.value, 0) + 1
    end = rep.finished_at or rep.last_time  # last_time: the last sign of life, after a crash (see journal.replay)
    duration = end - rep.started_at if end is not None and rep.started_at is not None else None
    return RunInfo(run.run_id, rep.header.get("dag", "?"), rep.started_at, duration, counts, outcome_of(run, rep))


_MAX_SUMMARY = 1 << 20


def read_summary(run: RunDir) -> dict[str, Any] | None:
    """summary.json when it is one tuidag could have written; None when there is none yet, or (with a warning)
    when it is not one, so the caller falls back to the journal."""
    try:
        with open_stored(run.summary) as f:
            data = f.read(_MAX_SUMMARY + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        warn_unreadable(run.summary, exc)
        return None
    try:
        summary = json.loads(data) if len(data) <= _MAX_SUMMARY else None
    except ValueError:
        summary = None
    problem = "not a JSON object" if summary is None else summary_problem(summary)
    if problem:
        warn_bad_record(run.summary, 1, problem + "; using the journal instead")
        return None
    return summary


def _is_number(value: Any, low: float, high: float) -> bool:
    return (type(value) is float or type(value) is int) and low <= value < high


_STATES = frozenset(state.value for state in TaskState)
_SUMMARY_FIELDS = {
    "run_id": lambda v: type(v) is str,
    "dag": lambda v: type(v) is str,
    "outcome": lambda v: type(v) is str,
    "started_at": lambda v: v is None or _is_number(v, 0, 1e11),
    "finished_at": lambda v: v is None or _is_number(v, 0, 1e11),
    "duration": lambda v: v is None or _is_number(v, -1e11, 1e11),
    "counts": lambda v: type(v) is dict and all(k in _STATES and type(n) is int and n >= 0 for k, n in v.items()),
}


def summary_problem(summary: Any) -> str | None:
    """Why `summary` is not a summary tuidag could have written, or None."""
    if type(summary) is not dict:
        return f"expected a JSON object, got {type(summary).__name__}"
    if "counts" not in summary:
        return "no 'counts'"
    for name, check in _SUMMARY_FIELDS.items():
        if name in summary and not check(summary[name]):
            return f"bad {name!r}: {json.dumps(summary[name])[:60]}"
    return None


# Choosing runs.
def runs_of(store: RunStore, dag_file: Path | None) -> list[RunDir]:
    """The store's runs, oldest first; only those of the DAG in `dag_file` when it is given (a state dir is shared
    by every DAG file of its folder). A run is the file's when its journal names that file, by its real path."""
    runs = store.runs()
    if dag_file is None:
        return runs
    source = str(dag_file.resolve())
    return [run for run in runs if read_header(run.journal).get("source") == source]


def matching(runs: list[RunDir], run_id: str) -> list[RunDir]:
    """The run named `run_id` exactly, else every run whose id starts with it (several: the prefix is ambiguous)."""
    exact = [run for run in runs if run.run_id == run_id]
    return exact or [run for run in runs if run.run_id.startswith(run_id)]


def task_record(run: RunDir, task: str) -> TaskRecord | None:
    """How `task` ended in `run` (its last state, attempts, first start and last end), or None when the run has no
    such task. Only the journal lines that name the task are parsed, so listing one task over many big runs reads
    each journal at the speed of a byte search."""
    try:
        with open_stored(run.journal) as f:
            data = f.read()
    except OSError:
        return None
    marker = b'"task":' + json.dumps(task).encode()  # as the journal writer spells it (ASCII, no spaces)
    record: TaskRecord | None = None
    at = data.find(marker)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        try:
            rec = json.loads(data[start:end])
        except ValueError:
            rec = None
        if rec is not None and not record_problem(rec) and rec.get("type") == "task" and rec["task"] == task:
            record = record or TaskRecord(task)
            record.state = TaskState(rec["to"])
            record.attempt = rec.get("attempt", 0)
            record.started_at, record.finished_at = rec.get("started_at"), rec.get("finished_at")
            record.reused = rec.get("reused", False)
            record.reason = rec.get("reason")
        at = data.find(marker, end)
    if record is None and task in current_header(run.journal).get("tasks", ()):
        record = TaskRecord(task)  # listed, never moved: the run ended (or died) before it
    return record


def has_task(run: RunDir, task: str, or_group: bool = False) -> bool:
    """Whether the run has the task (with `or_group`, or a matrix task of that name: its group of instances), the
    tasks an edit of its DAG file under --watch added included."""
    header = current_header(run.journal)
    return task in header.get("tasks", ()) or (or_group and group_instances(run, task, header) is not None)


def group_instances(run: RunDir, name: str, header: dict[str, Any] | None = None) -> list[str] | None:
    """The instances of the matrix task `name` in the run, in the DAG's order; None when `name` is no matrix task
    there (a plain task of that name included). Only instances the header lists as tasks are given: the journal is
    read as untrusted input."""
    header = current_header(run.journal) if header is None else header
    groups, tasks = header.get("groups"), header.get("tasks")
    if type(groups) is not dict or type(tasks) is not list or name in tasks:
        return None
    instances = groups.get(name)
    if type(instances) is not list:
        return None
    listed = {task for task in tasks if type(task) is str}
    found = [i for i in instances if type(i) is str and i in listed]
    return found or None


def nearby_state_dirs(folder: Path, limit: int = 5, budget: int = 2000) -> list[Path]:
    """State dirs holding runs in `folder`'s subfolders (two levels down), to point a user who ran a command in the
    wrong folder at the right one. Bounded: at most `budget` folders are looked at, hidden ones skipped."""
    found: list[Path] = []
    level = [folder]
    for _ in range(2):
        below: list[Path] = []
        for parent in level:
            try:
                entries = sorted(parent.iterdir())
            except OSError:
                continue
            for entry in entries:
                budget -= 1
                if budget < 0:
                    return found
                if entry.name.startswith("."):
                    continue
                try:
                    if not entry.is_dir() or entry.is_symlink():
                        continue
                    state = entry / ".tuidag"
                    if RunStore(state).runs():
                        found.append(state)
                        if len(found) >= limit:
                            return found
                except OSError:
                    continue
                below.append(entry)
        level = below
    return found
