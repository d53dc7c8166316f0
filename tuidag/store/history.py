"""Run history for `tuidag runs` and `tuidag logs`: what each run folder says about how it went."""
from __future__ import annotations

from dataclasses import dataclass

from ..model.state import TERMINAL, TaskState
from .journal import Replay, replay
from .runs import RunDir


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    dag: str
    started_at: float | None
    duration: float | None
    counts: dict[str, int]
    outcome: str  # succeeded | failed | interrupted | running


def outcome_of(run: RunDir, rep: Replay) -> str:
    """For a run without summary.json: still running, or interrupted (its process died mid-run)."""
    if run.owned():
        return "running"
    if rep.finished_at is not None and all(t.state in TERMINAL for t in rep.tasks.values()):
        # finished but the summary was never written: the process died right at the end
        return "succeeded" if all(t.state is TaskState.SUCCEEDED for t in rep.tasks.values()) else "failed"
    return "interrupted"


def run_info(run: RunDir) -> RunInfo:
    summary = run.read_summary()
    if summary and "counts" in summary:
        return RunInfo(run.run_id, summary.get("dag", "?"), summary.get("started_at"), summary.get("duration"),
                       summary["counts"], summary.get("outcome", "failed"))
    rep = replay(run.journal)
    counts: dict[str, int] = {}
    for task in rep.tasks.values():
        counts[task.state.value] = counts.get(task.state.value, 0) + 1
    end = rep.finished_at or rep.last_time
    duration = end - rep.started_at if end is not None and rep.started_at is not None else None
    return RunInfo(run.run_id, rep.header.get("dag", "?"), rep.started_at, duration, counts, outcome_of(run, rep))
