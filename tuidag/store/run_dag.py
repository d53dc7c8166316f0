"""The DAG of a stored run, as its journal's header describes it.

A viewer in another process, the post-mortem browser and the report draw a run from this, not from the DAG's file:
the file may have changed since the run started, or be a Python script that must not be imported again. Runs
recorded before the header kept the edges come back as tasks without dependencies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..model.matrix import MatrixGroup
from ..model.resources import Request
from ..model.spec import NOTIFY_CHOICES, DagSpec, TaskSpec


def dag_from_header(header: dict[str, Any]) -> DagSpec:
    """A DagSpec with the run's names, edges, slot capacities and requests, and its `notify:` (when its viewers
    ring the terminal); its tasks have no commands: it is for drawing and reasoning about the run, never for running
    it. The header was checked by the journal reader."""
    names = list(dict.fromkeys(header.get("tasks") or []))  # topological order, as the run wrote it
    deps = header.get("deps") or {}
    requests = header.get("requests") or {}
    tasks: dict[str, TaskSpec] = {}
    for name in names:
        # Only edges from tasks listed earlier: a tampered header can't make a cycle or name a task that isn't there.
        wanted = tuple(dict.fromkeys(dep for dep in deps.get(name, ()) if dep in tasks))
        held = {kind: Request(count) for kind, count in (requests.get(name) or {}).items()}
        tasks[name] = TaskSpec(name, depends_on=wanted, resources=held)
    groups = {}
    for group, instances in (header.get("groups") or {}).items():  # matrix tasks: their instances, as run
        kept = tuple(name for name in instances if name in tasks and tasks[name].group is None)
        for name in kept:
            tasks[name] = tasks[name]._replace(group=group)
        groups[group] = MatrixGroup(group, (), kept)
    source = header.get("source")
    notify = header.get("notify")
    return DagSpec(
        str(header.get("dag") or "dag"),
        tasks,
        max_parallel=header.get("max_parallel") or None,
        resources=dict(header.get("capacities") or {}),
        source=Path(source) if source else None,
        groups=groups,
        notify=notify if notify in NOTIFY_CHOICES else None,
    )
