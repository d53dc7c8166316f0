"""Runs written straight into a state dir, with the timings a test needs, instead of run for real (which would take
as long as the timings say). The records are the ones the journal writer makes (a test in test_expected checks a
real run reads the same), so every reader of the store takes them as real."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from tuidag.model.state import TaskState, ended_outcome
from tuidag.store.runs import RunDir, log_file_name


class Plan(NamedTuple):
    """One task's story: queued at `queued`, then each attempt (start, end), the last ending in `final` (earlier
    ones in RETRYING). No attempts: it went from PENDING to `final` (SKIPPED, CANCELLED) at `queued`."""

    queued: float
    attempts: Sequence[tuple[float, float]]
    final: str = "SUCCEEDED"


def write_run(
    state_dir: Path,
    run_id: str,
    plans: Mapping[str, Plan],
    *,
    dag: str = "d",
    source: str | None = None,
    deps: Mapping[str, Sequence[str]] | None = None,
    fingerprints: Mapping[str, str] | None = None,
    max_parallel: int = 4,
    capacities: Mapping[str, int] | None = None,
    requests: Mapping[str, Mapping[str, int]] | None = None,
    logs: Mapping[str, str] | None = None,
    reused: Sequence[str] = (),
    summary: bool = True,
) -> RunDir:
    run = RunDir(run_id, state_dir / "runs" / run_id)
    run.logs.mkdir(parents=True)
    started = min((p.queued for p in plans.values()), default=0.0)
    header = {
        "type": "run",
        "event": "created",
        "run_id": run_id,
        "dag": dag,
        "source": source,
        "host": "h",
        "pid": 1,
        "tasks": list(plans),
        "fingerprints": dict(fingerprints or {}),
        "deps": {k: list(v) for k, v in (deps or {}).items() if v},
        "capacities": dict(capacities or {}),
        "requests": {k: dict(v) for k, v in (requests or {}).items()},
        "max_parallel": max_parallel,
    }
    records: list[dict] = []

    def move(task: str, old: str | None, new: str, t: float, attempt: int, **extra) -> None:
        records.append({"type": "task", "t": t, "task": task, "from": old, "to": new, "attempt": attempt, **extra})

    end = started
    for name, plan in plans.items():
        if name in reused:
            move(name, None, "SUCCEEDED", started, 0, reused=True)
            continue
        if not plan.attempts:
            move(name, "PENDING", plan.final, plan.queued, 0)
            continue
        move(name, "PENDING", "QUEUED", plan.queued, 0)
        old = "QUEUED"
        for number, (a, b) in enumerate(plan.attempts, start=1):
            last = number == len(plan.attempts)
            move(name, old, "RUNNING", a, number, started_at=plan.attempts[0][0])
            new = plan.final if last else "RETRYING"
            move(
                name,
                "RUNNING",
                new,
                b,
                number,
                started_at=plan.attempts[0][0],
                **({"finished_at": b, "exit_code": 0 if new == "SUCCEEDED" else 1} if last else {}),
            )
            old = "RETRYING"
            end = max(end, b)
    records.sort(key=lambda r: r["t"])
    lines = [
        header,
        {"type": "run", "event": "started", "t": started},
        *records,
        {"type": "run", "event": "finished", "t": end},
    ]
    for seq, rec in enumerate(lines[1:], start=1):
        rec["seq"] = seq
    run.journal.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines))
    for name, text in (logs or {}).items():
        (run.logs / log_file_name(name)).write_text(text)
    if summary:
        counts: dict[str, int] = {}
        for name, plan in plans.items():
            state = "SUCCEEDED" if name in reused else plan.final
            counts[state] = counts.get(state, 0) + 1
        run.summary.write_text(
            json.dumps(
                {
                    "run_id": run_id,
                    "dag": dag,
                    "source": source or "",
                    "started_at": started,
                    "finished_at": end,
                    "duration": end - started,
                    "counts": counts,
                    "outcome": ended_outcome(map(TaskState, counts), set(counts) == {"SUCCEEDED"}),
                    "interrupted_by": None,
                }
            )
        )
    return run
