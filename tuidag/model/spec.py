"""The plain DAG model every front end (YAML, SkyPilot pipeline, Python API) produces and the engine consumes."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import Location

#: Task names double as log file names and CLI arguments, so they stay in a conservative alphabet.
TASK_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
DEFAULT_KILL_GRACE = 5.0
DEFAULT_SHELL = "/bin/sh"


class FailurePolicy(str, Enum):
    """What the scheduler does to the rest of the DAG when a task fails (after its retries)."""

    SKIP_DOWNSTREAM = "skip-downstream"  # descendants SKIPPED, independent branches go on
    FINISH_RUNNING = "finish-running"    # start nothing new, let running tasks finish, the rest CANCELLED
    CANCEL_ALL = "cancel-all"            # also cancel running tasks

    def __str__(self) -> str:
        return self.value


def task_name_problem(name: str) -> str | None:
    """Why `name` can't be a task name, or None when it can."""
    if not TASK_NAME_RE.match(name):
        return f"task name {name!r} may only contain letters, digits, '_', '.' and '-'"
    if name in (".", "..") or ".." in name:
        return f"task name {name!r} may not be '.' or contain '..'"
    return None


@dataclass(frozen=True)
class TaskSpec:
    """One task. Exactly one of `run` (a shell command) or `func` (an in-process callable) is the action;
    `setup` is an optional shell command that runs before `run` and fails the task with reason `setup failed`."""

    name: str
    run: str | None = None
    depends_on: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    retries: int = 0
    retry_delay: float = 0.0
    timeout: float | None = None
    setup: str | None = None
    func: Callable[..., Any] | None = field(default=None, compare=False)
    isolate: bool = False
    shell: str = DEFAULT_SHELL    # runs `run` and `setup` as `shell -c COMMAND` (SkyPilot pipelines use bash)
    location: Location | None = field(default=None, compare=False)
    dep_locations: tuple[Location | None, ...] = field(default=(), compare=False)

    def dep_location(self, index: int) -> Location | None:
        if index < len(self.dep_locations) and self.dep_locations[index]:
            return self.dep_locations[index]
        return self.location


@dataclass(frozen=True)
class DagSpec:
    name: str
    tasks: Mapping[str, TaskSpec]  # insertion order = file order
    max_parallel: int = field(default_factory=lambda: os.cpu_count() or 1)
    on_failure: FailurePolicy = FailurePolicy.SKIP_DOWNSTREAM
    kill_grace: float = DEFAULT_KILL_GRACE
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: Path = field(default_factory=Path.cwd)
    source: Path | None = None

    # Graph queries. A DagSpec is immutable, so these are computed once.
    @cached_property
    def children(self) -> dict[str, tuple[str, ...]]:
        kids: dict[str, list[str]] = {name: [] for name in self.tasks}
        for task in self.tasks.values():
            for dep in task.depends_on:
                kids[dep].append(task.name)
        return {name: tuple(v) for name, v in kids.items()}

    def parents(self, name: str) -> tuple[str, ...]:
        return self.tasks[name].depends_on

    def descendants(self, name: str) -> list[str]:
        """All tasks downstream of `name`, in topological order (excluding `name`)."""
        seen: set[str] = set()
        stack = list(self.children[name])
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(self.children[node])
        return [n for n in self.topological_order if n in seen]

    @cached_property
    def topological_order(self) -> tuple[str, ...]:
        """Kahn's algorithm, stable with respect to file order. Assumes the DAG was validated (no cycles)."""
        indeg = {name: len(t.depends_on) for name, t in self.tasks.items()}
        order: list[str] = [n for n, d in indeg.items() if d == 0]
        i = 0
        while i < len(order):
            for child in self.children[order[i]]:
                indeg[child] -= 1
                if indeg[child] == 0:
                    order.append(child)
            i += 1
        return tuple(order)

    @cached_property
    def depth(self) -> dict[str, int]:
        """Longest-path layer of each task: 0 for roots, 1 + max(depth of dependencies) otherwise."""
        depth: dict[str, int] = {}
        for name in self.topological_order:
            deps = self.tasks[name].depends_on
            depth[name] = 1 + max(depth[d] for d in deps) if deps else 0
        return depth
