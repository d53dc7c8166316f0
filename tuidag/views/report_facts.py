"""What `tuidag report` says about a run, as plain data: the JSON of `--format json` and what the HTML is drawn from.

Read from the run's folder only (journal, summary.json, the failed tasks' logs), so a report can be made anywhere the
state dir is, after the DAG file changed or of a run still going on (its open segments end "now"). Every string in
it is the run's own text (task names, reasons, logs): whoever renders it must escape it.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from ..model.forecast import shape_of, task_spans
from ..model.state import TaskState
from ..model.timeline import SegmentKind, TimelineRecorder
from ..store.history import outcome_of, read_summary
from ..store.journal import read_journal, replay
from ..store.run_dag import dag_from_header
from ..store.runs import RunDir
from .log_tail import last_lines
from .logs import UnsafeLog
from .run_insight import run_insight
from .terminal_text import strip_ansi

FORMAT = 1
"""Of the JSON: bumped when a field changes meaning or goes away (new fields may be added without)."""
TAIL_LINES = 20
"""Lines of each failed task's log in the report."""


class TaskFacts(TypedDict):
    """One task of the report (`tasks` in the JSON)."""

    name: str
    state: str
    attempts: int
    reused: bool
    started_at: float | None
    finished_at: float | None
    duration: float | None
    waited: float
    exit_code: int | None
    reason: str | None
    depends_on: list[str]
    slots: str | None
    worker: str | None
    workers: dict[str, str]  # attempt number -> the Dask worker it ran on


def report_facts(run: RunDir, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    records = list(read_journal(run.journal))
    rep = replay(run.journal, records)
    header = rep.header
    timeline = TimelineRecorder()
    timeline.feed_journal(records)
    dag = dag_from_header(header)
    names = list(dag.tasks) or list(rep.tasks)
    summary = read_summary(run) if run.summary.exists() else None
    started = (
        rep.started_at
        if rep.started_at is not None
        else min((segs[0].start for segs in timeline.segments.values() if segs), default=now)
    )
    outcome = summary.get("outcome", "failed") if summary else outcome_of(run, rep)
    finished = (summary or {}).get("finished_at") or rep.finished_at
    end = finished if finished is not None else (now if outcome == "running" else rep.last_time or now)

    workers: dict[str, dict[int, str]] = {}  # task -> attempt -> the Dask worker it ran on
    for record in records:
        if record.get("type") == "task" and record.get("worker") and isinstance(record.get("attempt"), int):
            workers.setdefault(record["task"], {})[record["attempt"]] = record["worker"]

    tasks: list[TaskFacts] = []
    for name in names:
        task = rep.tasks.get(name)
        if task is None:
            continue
        waited = sum(s.duration(end) for s in timeline.segments.get(name, ()) if s.kind is SegmentKind.WAITING)
        tasks.append(
            {
                "name": name,
                "state": task.state.value,
                "attempts": task.attempt,
                "reused": task.reused,
                "started_at": task.started_at,
                "finished_at": task.finished_at,
                "duration": task.duration if not task.reused else None,
                "waited": round(waited, 6),
                "exit_code": task.exit_code,
                "reason": task.reason,
                "depends_on": list(dag.tasks[name].depends_on) if name in dag.tasks else [],
                "slots": task.slots,
                "worker": task.worker,
                "workers": {str(n): w for n, w in sorted(workers.get(name, {}).items())},
            }
        )

    segments = [
        {
            "task": s.task,
            "kind": s.kind.value,
            "start": s.start,
            "end": s.end,
            "attempt": s.attempt,
            "outcome": s.outcome.value if s.outcome else None,
        }
        for name in names
        for s in timeline.segments.get(name, ())
    ]
    reused = {t["name"] for t in tasks if t["reused"]}
    spans = {name: span for name, span in task_spans(timeline.segments, end).items() if name not in reused}
    insight = run_insight(shape_of(dag), spans, started, reused)
    return {
        "format": FORMAT,
        "run": {
            "run_id": run.run_id,
            "dag": header.get("dag", "?"),
            "source": header.get("source"),
            "host": header.get("host"),
            "executor": header.get("executor"),
            "resumed_from": header.get("resumed_from"),
            "targets": [name for name in header.get("targets") or () if isinstance(name, str)],
            "outcome": outcome,
            "started_at": started,
            "finished_at": finished,
            "duration": max(0.0, end - started),
            "counts": _counts(tasks),
            "max_parallel": header.get("max_parallel"),
            "capacities": header.get("capacities") or {},
            "reported_at": now,
        },
        "tasks": tasks,
        "segments": segments,
        "critical_path": [
            {"task": name, "start": spans[name][0], "end": spans[name][1], "duration": spans[name][1] - spans[name][0]}
            for name in insight.path
        ],
        "speedups": [{"task": name, "saved": saved, "if": "halved"} for name, saved in insight.faster],
        "groups": _groups(header, tasks),
        "failures": [
            _failure(run, task, rep.tasks[task["name"]].log_start)
            for task in tasks
            if task["state"] == TaskState.FAILED.value
        ],
    }


def _groups(header: dict[str, Any], tasks: list[TaskFacts]) -> list[dict[str, Any]]:
    """Each matrix group's instances by value: the keys (in the order the instances name them), and per instance
    its values, state and duration."""
    by_name = {task["name"]: task for task in tasks}
    stored = header.get("matrix")
    values: dict[str, Any] = stored if isinstance(stored, dict) else {}
    groups = []
    for group, instances in (header.get("groups") or {}).items():
        rows = []
        keys: dict[str, None] = {}
        for name in instances:
            task = by_name.get(name)
            if task is None:
                continue
            found = values.get(name)
            mine: dict[str, Any] = found if isinstance(found, dict) else {}
            keys.update(dict.fromkeys(str(k) for k in mine))
            rows.append(
                {
                    "task": name,
                    "values": {str(k): str(v) for k, v in mine.items()},
                    "state": task["state"],
                    "duration": task["duration"],
                }
            )
        groups.append({"name": str(group), "keys": list(keys), "instances": rows})
    return groups


def _counts(tasks: list[TaskFacts]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task["state"]] = counts.get(task["state"], 0) + 1
    return counts


def _failure(run: RunDir, task: TaskFacts, log_start: int | None) -> dict[str, Any]:
    """The failed task's last log lines (its last attempt's; escapes removed), or why there are none."""
    problem = None
    lines: list[str] = []
    try:
        raw = last_lines(str(run.log_path(task["name"])), log_start, TAIL_LINES)
    except UnicodeEncodeError:  # a name no run could have had (a lone surrogate): a tampered journal
        problem = "no log (its name cannot be a file name)"
    except FileNotFoundError:
        problem = "no log"
    except UnsafeLog as refused:
        problem = str(refused)
    except OSError as error:
        problem = f"its log could not be read ({error.strerror or error})"
    else:
        lines = [strip_ansi(line.decode("utf-8", "replace")) for line in raw]
    return {
        "task": task["name"],
        "attempt": task["attempts"],
        "reason": task["reason"],
        "exit_code": task["exit_code"],
        "log": lines,
        "log_problem": problem,
    }
