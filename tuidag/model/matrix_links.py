"""Dependencies on matrix tasks (model/matrix.py), once every instance exists: a dependency on a group becomes
its instances (all of them: fan-in), paired by the keys both matrices share (`eval[seed=2]` waits for
`train[lr=*,seed=2]`), or the instances a selector names (`train[seed=2]`, or one by its full name)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .errors import DagError, Location
from .matrix import NAME_UNSAFE, SELECTOR_RE, MatrixGroup, text_of
from .spec import DagSpec, TaskSpec


def rewire(
    tasks: dict[str, TaskSpec], groups: Mapping[str, MatrixGroup], errors: list[DagError]
) -> dict[str, TaskSpec]:
    """Dependencies on a group or on a selector (`train[seed=2]`) replaced by the instances they mean."""
    if not groups:
        return tasks
    index: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], list[str]]] = {}  # (group, keys) -> values -> names

    def paired(group: MatrixGroup, keys: tuple[str, ...], values: Mapping[str, Any]) -> list[str]:
        by_values = index.get((group.name, keys))
        if by_values is None:
            by_values = index[(group.name, keys)] = {}
            for inst in group.instances:
                mine = dict(tasks[inst].matrix) if inst in tasks else {}
                if all(k in mine for k in keys):
                    by_values.setdefault(tuple(text_of(mine[k]) for k in keys), []).append(inst)
        return by_values.get(tuple(text_of(values[k]) for k in keys), [])

    out: dict[str, TaskSpec] = {}
    for name, task in tasks.items():
        if not any(dep in groups or "[" in dep for dep in task.depends_on):
            out[name] = task
            continue
        values = dict(task.matrix)
        deps: list[str] = []
        taken: set[str] = set()  # deps as a set: a fan-in on thousands of instances stays linear
        where: list[Location | None] = []
        for i, dep in enumerate(task.depends_on):
            at = task.dep_location(i)
            found: list[str] | None
            group = groups.get(dep)
            if group is not None and dep == task.group:
                errors.append(DagError(f"task '{dep}' depends on itself", at))
                continue
            if group is not None and not group.instances:
                continue  # a matrix that could not be expanded: its own error says why
            if group is not None:
                shared = tuple(k for k in group.keys if k in values)
                found = paired(group, shared, values) if shared else list(group.instances)
                if not found:
                    pairs = ", ".join(f"{k}={text_of(values[k])}" for k in shared)
                    errors.append(DagError(f"task '{name}' pairs with no instance of '{dep}' (none has {pairs})", at))
                    continue
            elif dep in tasks or "[" not in dep:
                found = [dep]  # a task, an instance by its full name, or unknown (graph_errors says so)
            else:
                found = _selected(dep, groups, tasks, name, at, errors)
                if found is None:
                    continue
            for one in found:
                if one not in taken and one != name:
                    taken.add(one)
                    deps.append(one)
                    where.append(at)
        out[name] = task._replace(depends_on=tuple(deps), dep_locations=tuple(where))
    return out


class Selection(NamedTuple):
    """What a selector (`train[seed=2]`) names: the instances it selects, or why none (`problem`: "unknown" when
    it names no matrix task, "form" when it is not KEY=VALUE pairs, "none" when no instance matches)."""

    instances: list[str]
    problem: str | None = None
    group: str | None = None


def select(selector: str, groups: Mapping[str, MatrixGroup], tasks: Mapping[str, TaskSpec]) -> Selection:
    """The instances `group[key=value,...]` selects: every value given must match (as the instance's name spells
    it)."""
    m = SELECTOR_RE.fullmatch(selector)
    group = groups.get(m.group(1)) if m else None
    if m is None or group is None:
        return Selection([], "unknown")
    wanted: dict[str, str] = {}
    for part in filter(None, m.group(2).split(",")):
        key, equals, value = part.partition("=")
        if not equals:
            return Selection([], "form", group.name)
        wanted[key.strip()] = value.strip()
    found = [
        inst
        for inst in group.instances
        if all(NAME_UNSAFE.sub("_", text_of(dict(tasks[inst].matrix).get(k, ""))) == v for k, v in wanted.items())
    ]
    return Selection(found, None if found else "none", group.name)


def _selected(
    dep: str, groups: Mapping[str, MatrixGroup], tasks: Mapping[str, TaskSpec], name: str, at: Any, errors: list
) -> list[str] | None:
    """The instances `group[key=value,...]` selects, or None after an error."""
    chosen = select(dep, groups, tasks)
    if chosen.problem == "unknown":
        errors.append(DagError(f"task '{name}' depends on unknown task '{dep}'", at))
    elif chosen.problem == "form":
        errors.append(DagError(f"task '{name}': '{dep}' should select instances as {chosen.group}[KEY=VALUE,...]", at))
    elif chosen.problem == "none":
        errors.append(DagError(f"task '{name}' depends on '{dep}', which matches no instance of '{chosen.group}'", at))
    else:
        return chosen.instances
    return None


def named_instances(dag: DagSpec, name: str) -> list[str]:
    """The instances a matrix task's name (`train`) or a selection of it (`train[seed=2]`) means, for a name given
    on the command line (targets, `cancel`, `rerun`); none for any other name."""
    if name in dag.groups:
        return list(dag.groups[name].instances)
    return select(name, dag.groups, dag.tasks).instances if "[" in name and dag.groups else []
