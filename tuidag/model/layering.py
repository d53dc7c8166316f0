"""Longest-path layers of a DAG: the one rule for a task's layer, shared by `DagSpec.depth` (`tuidag graph`) and
the graph layout (which works on a plain mapping of dependencies, so the rule takes (name, dependencies) pairs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def longest_path_layers(deps: Iterable[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """The layer of each task: 0 for a root, else 1 + the highest layer among its dependencies. `deps` gives each
    task with its dependencies in a topological order (dependencies first)."""
    layer: dict[str, int] = {}
    for name, ds in deps:
        layer[name] = 1 + max(layer[d] for d in ds) if ds else 0
    return layer
