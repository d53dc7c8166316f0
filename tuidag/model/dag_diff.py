"""What an edit of the DAG file changed, for `--watch` (engine/dag_reload.py applies it to the run).

A run under `--watch` keeps every task it ever had: the tasks of the file as it is now, and those an edit removed,
which stay in the run (CANCELLED, "removed from the DAG file") so that its record, its viewers and `tuidag show`
keep what they did. That *union* is the DAG the engine and the views go on with: the new file's tasks as written,
then the removed ones with no dependencies (nothing of the new DAG depends on them, and so no round re-runs them).

A task is changed when what it does differs: its fingerprint (command, dependencies, environment, workdir, inputs
and outputs, service, a callable's code: what `--resume` compares) or any other setting of its definition (retries,
timeout, slots, `interruptible`, ...). Where it is written in the file (its location) is not part of it, so an edit
that moves a task or adds a comment above it changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .spec import DagSpec, TaskSpec

#: The reason a task the DAG file no longer has ends CANCELLED with: it is no longer part of the DAG, so, like a
#: service stopped at the end, it does not make the run fail.
REMOVED = "removed from the DAG file"

#: What the run can't change while it goes on (its slot pool, its executor, its job group are set up at its start):
#: an edit that changes one of these is refused as a DAG error would be, and the DAG is kept as it was.
_FIXED = (("resources", "capacities (resources)"), ("executor", "executor"), ("job_group", "job_group"))


class DagDiff(NamedTuple):
    union: DagSpec  # what the run goes on with (see the module's docstring)
    added: tuple[str, ...]  # new tasks, in the new DAG's order
    removed: tuple[str, ...]  # tasks of the run's DAG the file no longer has (removed by this edit)
    changed: tuple[str, ...]  # tasks in both whose definition differs, in the new DAG's order

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def describe(self, file: str) -> str:
        """`dev.yaml reloaded: added lint; changed test; removed old` (`... reloaded: no task changed`)."""
        parts = [
            f"{word} {', '.join(names[:5])}{f' and {len(names) - 5} more' if len(names) > 5 else ''}"
            for word, names in (("added", self.added), ("changed", self.changed), ("removed", self.removed))
            if names
        ]
        return f"{file} reloaded: {'; '.join(parts) if parts else 'no task changed'}"


def _settings(task: TaskSpec) -> TaskSpec:
    """The task as compared: without where it is written, and without its callable (compared by fingerprint)."""
    return task._replace(location=None, dep_locations=(), input_locations=(), output_locations=(), func=None)


def fixed_settings_changed(run: DagSpec, new: DagSpec) -> list[str]:
    """The settings of the run's DAG an edit changed that the run can't take on while it goes on."""
    return [label for field, label in _FIXED if getattr(run, field) != getattr(new, field)]


def diff(run: DagSpec, gone: frozenset[str], new: DagSpec) -> DagDiff:
    """What `new` (the file as now loaded) changes in the run's DAG `run` (a union, whose tasks in `gone` were removed
    by earlier edits). A removed task that comes back is added again."""
    before, after = run.fingerprints, new.fingerprints
    added = tuple(n for n in new.topological_order if n not in run.tasks or n in gone)
    changed = tuple(
        n
        for n in new.topological_order
        if n in run.tasks
        and n not in gone
        and (before[n] != after[n] or _settings(run.tasks[n]) != _settings(new.tasks[n]))
    )
    removed = tuple(n for n in run.topological_order if n not in new.tasks and n not in gone)
    kept = {n: run.tasks[n]._replace(depends_on=(), dep_locations=()) for n in run.topological_order}
    tasks = dict(new.tasks)
    for name in [*gone, *removed]:
        if name not in tasks:
            tasks[name] = kept[name]
    union = new.replace(tasks=tasks, groups=_union_groups(run.groups, new.groups, tasks))
    return DagDiff(union, added, removed, changed)


def _union_groups(old: Mapping, new: Mapping, tasks: Mapping[str, TaskSpec]) -> dict:
    """Matrix groups over the union: each group's instances that the union holds (a removed instance stays in its
    group, so the graph folds it with the others)."""
    groups = {}
    for name in dict.fromkeys([*new, *old]):
        group = new.get(name) or old[name]
        instances = tuple(n for n, task in tasks.items() if task.group == name)
        if instances:
            groups[name] = group._replace(instances=instances)
    return groups
