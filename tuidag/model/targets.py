"""A run's targets (`tuidag run FILE TASK...`): the tasks asked for and what they need, and nothing else.

A target needs every task upstream of it, so the tasks that run are the targets and their ancestors; the others end
UNTARGETED without starting. Every front end (the CLI, `Dag.main()`, a resumed run, the UI's resume) picks them
here, so they all agree on what a target brings along.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .spec import DagSpec

NOT_A_TARGET = "not a target"
"""The reason an untargeted task shows: the UI's word for the state too."""


def expand_targets(dag: DagSpec, targets: Iterable[str]) -> list[str]:
    """The targets as tasks: a matrix task (`train`) is its instances, a selection (`train[seed=2]`) the instances
    it selects; in the order given, each once. A name of neither kind stays as it is, for `unknown_targets`."""
    from .matrix_links import named_instances

    found: dict[str, None] = {}
    for name in targets:
        tasks = [name] if name in dag.tasks else named_instances(dag, name)
        found.update(dict.fromkeys(tasks or [name]))  # an unknown name stays, for `unknown_targets` to name
    return list(found)


def unknown_targets(dag: DagSpec, targets: Iterable[str]) -> list[str]:
    """The names among `targets` that are no task of `dag`, in the order given."""
    return [name for name in targets if name not in dag.tasks]


def needed(dag: DagSpec, targets: Sequence[str]) -> frozenset[str]:
    """The targets and every task upstream of them: what runs. No targets: every task."""
    if not targets:
        return frozenset(dag.tasks)
    seen: set[str] = set()
    stack = list(targets)
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(dag.tasks[name].depends_on)
    return frozenset(seen)
