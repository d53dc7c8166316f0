"""Graph checks shared by every front end: names, unknown and self dependencies, cycles, all reported together."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path

from .errors import DagError, Location, did_you_mean
from .spec import TaskSpec, task_name_problem


def graph_errors(tasks: Mapping[str, TaskSpec]) -> list[DagError]:
    errors: list[DagError] = []
    for task in tasks.values():
        # a matrix instance's name was made and checked when it was expanded (model/matrix.py)
        problem = None if task.group is not None else task_name_problem(task.name)
        if problem:
            errors.append(DagError(problem, task.location))
        for i, dep in enumerate(task.depends_on):
            where = task.dep_location(i)
            if dep == task.name:
                errors.append(DagError(f"task '{task.name}' depends on itself", where))
            elif dep not in tasks:
                hint = did_you_mean(dep, tasks)
                errors.append(DagError(f"task '{task.name}' depends on unknown task '{dep}'{hint}", where))
    # Looked for whatever else is wrong (unknown dependencies are left out of the search), so that one pass reports
    # every error.
    cycle = find_cycle(tasks)
    if cycle:
        # point at the dependency entry that closes the loop: cycle[1] depends on cycle[0]
        needer = tasks[cycle[1]]
        where = needer.dep_location(needer.depends_on.index(cycle[0]))
        errors.append(DagError("dependency cycle: " + " -> ".join(cycle), where))
    return errors


def find_cycle(tasks: Mapping[str, TaskSpec]) -> list[str] | None:
    """A cycle as [a, b, c, a], in the direction work flows: each task is followed by one that depends on it."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = {name: WHITE for name in tasks}
    children: dict[str, list[str]] = {name: [] for name in tasks}
    for t in tasks.values():
        for dep in t.depends_on:
            if dep in children and dep != t.name:
                children[dep].append(t.name)
    for root in tasks:
        if colour[root] != WHITE:
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                colour[node] = GREY
                path.append(node)
            kids = children[node]
            if i < len(kids):
                stack.append((node, i + 1))
                kid = kids[i]
                if colour[kid] == GREY:
                    start = path.index(kid)
                    return [*path[start:], kid]
                if colour[kid] == WHITE:
                    stack.append((kid, 0))
            else:
                colour[node] = BLACK
                path.pop()
    return None


_GLOB_CHARS = frozenset("*?[")


def io_errors(tasks: Mapping[str, TaskSpec], workdir: Path, folder: Path | None) -> list[DagError]:
    """The `inputs`/`outputs` mistakes: an output outside its task's workdir and the DAG's folder (tuidag would
    restore and remove files there), a glob as an output, two tasks declaring one output (or one inside the other),
    and an output that is also an input of its own task (it would never be up to date)."""
    errors: list[DagError] = []
    owners: dict[str, tuple[str, str]] = {}  # absolute output -> (task, as written)
    above: dict[str, tuple[str, str]] = {}  # each folder holding a declared output -> the first such output's owner
    for task in tasks.values():
        base = task.workdir or workdir
        inputs = [(os.path.normpath(os.path.join(base, entry)), entry) for entry in task.inputs]
        for i, entry in enumerate(task.outputs):
            where = _entry_location(task.output_locations, i, task)
            what = f"task '{task.name}': output '{entry}'"
            if _GLOB_CHARS & set(entry):
                errors.append(DagError(f"{what} is a glob: outputs are files or folders, named one by one", where))
                continue
            path = os.path.normpath(base / entry)
            roots = [str(base)] + ([str(folder)] if folder is not None else [])
            if not any(_inside(path, root) and path != root for root in roots):
                places = " or ".join(f"'{root}'" for root in dict.fromkeys(roots))
                errors.append(DagError(f"{what} is outside the task's workdir and the DAG's folder ({places})", where))
                continue
            folders = _folders_above(path)
            clash = owners.get(path) or above.get(path) or next((owners[f] for f in folders if f in owners), None)
            if clash is not None:
                other, written = clash
                errors.append(DagError(f"{what} is also declared by task '{other}' (as '{written}')", where))
            owners.setdefault(path, (task.name, entry))
            for parent in folders:
                above.setdefault(parent, (task.name, entry))
            for pattern, written in inputs:
                if (
                    _inside(path, pattern)
                    or _inside(pattern, path)
                    or (_GLOB_CHARS & set(pattern) and fnmatch.fnmatchcase(path, pattern))
                ):
                    errors.append(DagError(f"{what} is also an input of the same task ('{written}')", where))
                    break
    return errors


def _folders_above(path: str) -> list[str]:
    found = []
    parent = os.path.dirname(path)
    while parent and parent != path:
        found.append(parent)
        path, parent = parent, os.path.dirname(parent)
    return found


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _entry_location(locations: tuple[Location | None, ...], index: int, task: TaskSpec) -> Location | None:
    return locations[index] if index < len(locations) and locations[index] else task.location
