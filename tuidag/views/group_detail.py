"""`tuidag show RUN --task GROUP` for a matrix task: its instances side by side (state, duration, attempts, exit code;
each one's name says its values), what the UI's group tile sums up, with how to see one instance's whole detail. As
data for `--format json`."""

from __future__ import annotations

import shlex
from typing import Any

from ..engine.events import TaskSnapshot
from ..model.counts import counted, states_said
from ..model.durations import format_duration
from ..model.matrix import MatrixGroup


def group_detail(group: MatrixGroup, snapshots: dict[str, TaskSnapshot]) -> dict[str, Any]:
    """The facts: the group's name and its instances in the DAG's order, each with its state and run."""
    instances = []
    for name in group.instances:
        snap = snapshots.get(name)
        started = snap.started_at if snap is not None else None
        finished = snap.finished_at if snap is not None else None
        instances.append(
            {
                "name": name,
                "state": snap.state.value if snap is not None else "PENDING",
                "attempts": snap.attempt if snap is not None else 0,
                "duration": finished - started if started is not None and finished is not None else None,
                "exit_code": snap.exit_code if snap is not None else None,
            }
        )
    return {"group": group.name, "instances": instances}


def group_text(facts: dict[str, Any], run_id: str) -> str:
    """`train · a matrix of 3 instances · 2 succeeded, 1 failed`, a table of the instances, and how to see one."""
    instances = facts["instances"]
    counts: dict[str, int] = {}
    for instance in instances:
        counts[instance["state"]] = counts.get(instance["state"], 0) + 1
    said = states_said(counts)
    rows = [("INSTANCE", "STATE", "DURATION", "ATTEMPTS", "EXIT")]
    for instance in instances:
        exit_code = instance["exit_code"]
        rows.append(
            (
                instance["name"],
                instance["state"].lower(),
                format_duration(instance["duration"]) if instance["duration"] is not None else "-",
                str(instance["attempts"]),
                "-" if exit_code is None else str(exit_code),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"{facts['group']} · a matrix of {counted(len(instances), 'instance')} · {said}"]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    if instances:
        lines.append(f"one instance's detail: tuidag show {run_id} --task {shlex.quote(instances[0]['name'])}")
    return "\n".join(lines)
