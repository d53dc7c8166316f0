"""The DAG of a stored run, as its journal's header describes it.

A viewer in another process, the post-mortem browser and the report draw a run from this, not from the DAG's file:
the file may have changed since the run started, or be a Python script that must not be imported again. Runs
recorded before the header kept the edges come back as tasks without dependencies. Under --watch the DAG file may
be edited while the run goes on: the journal's `dag` records say what the run's DAG became (`current_header`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..model.matrix import MatrixGroup
from ..model.resources import Request, requests
from ..model.spec import NOTIFY_CHOICES, DagSpec, TaskSpec
from .journal import open_stored, read_header
from .journal_records import with_dag
from .task_story import definitions_header, matrix_values

_DAG_MARK = b'"event":"dag",'  # in a `dag` record's line, as the journal writes it (and in no escaped string)


def current_header(path: Path) -> dict[str, Any]:
    """The journal's header with the run's DAG as it is now: as the last `dag` record says when the DAG file was
    edited under --watch (tasks added, removed ones kept), else as the run began. A run without reloads costs one
    search of the file for the record's mark."""
    header = read_header(path)
    if not header:
        return header
    try:
        with open_stored(path) as f:
            data = f.read()
    except OSError:
        return header
    at = data.rfind(_DAG_MARK)
    if at < 0:
        return header
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    try:
        record = json.loads(data[start : end if end >= 0 else len(data)])
    except ValueError:
        return header
    return with_dag(header, record)


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


def dag_header(dag: DagSpec, max_parallel: int | None) -> dict:
    """What the journal's header keeps of the DAG's shape, so a viewer in another process, the post-mortem browser
    and the report can draw the run without its file (which may have changed since, or be a Python script)."""
    return {
        "deps": {name: list(task.depends_on) for name, task in dag.tasks.items() if task.depends_on},
        "capacities": dict(dag.resources),
        "requests": {name: requests(task) for name, task in dag.tasks.items() if task.resources},
        "max_parallel": max(1, max_parallel or dag.max_parallel),
        **({"groups": {name: list(group.instances) for name, group in dag.groups.items()}} if dag.groups else {}),
        **({"matrix": matrix_values(dag)} if dag.groups else {}),
        **({"notify": dag.notify} if dag.notify else {}),  # when `tuidag attach` rings the terminal
        "definitions": definitions_header(dag),  # what each task was asked to do: its detail (`i`, `show --task`)
    }


def dag_record(dag: DagSpec, max_parallel: int) -> dict[str, Any]:
    """What a `dag` record says of the run's DAG once the DAG file was edited under --watch: every field of the
    header's description of it (`current_header` puts them in place of the header's), groups and all."""
    return {
        "tasks": list(dag.topological_order),
        **dag_header(dag, max_parallel),
        "groups": {name: list(group.instances) for name, group in dag.groups.items()},
        "matrix": matrix_values(dag),
        "fingerprints": dag.fingerprints,
    }
