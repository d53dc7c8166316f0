"""Graph checks shared by every front end: names, unknown and self dependencies, cycles, all reported together."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import DagError, did_you_mean
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
