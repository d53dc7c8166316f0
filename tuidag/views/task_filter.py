"""Which tasks' lines the combined log view shows (no textual here): the branch of one task, the tasks whose names
contain some text, or both at once (the tasks in the branch whose names match)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model.spec import DagSpec


@dataclass(frozen=True)
class TaskFilter:
    """`branch`: a task whose lines are shown with those of everything downstream of it; `name`: text the shown
    tasks' names contain (ignoring case). Neither: every task."""

    branch: str | None = None
    name: str = ""

    @property
    def active(self) -> bool:
        return self.branch is not None or bool(self.name)

    def with_branch(self, branch: str | None) -> TaskFilter:
        return replace(self, branch=branch)

    def with_name(self, name: str) -> TaskFilter:
        return replace(self, name=name.strip())

    def tasks(self, dag: DagSpec) -> frozenset[str] | None:
        """The tasks of `dag` to show, or None for all of them."""
        if not self.active:
            return None
        if self.branch is None:
            shown = frozenset(dag.tasks)
        else:  # a matrix group's branch: its instances and everything downstream of them
            group = dag.groups.get(self.branch)
            roots = list(group.instances) if group is not None else [self.branch]
            shown = frozenset(roots).union(*(dag.descendants(root) for root in roots))
        needle = self.name.lower()
        return frozenset(task for task in shown if needle in task.lower())

    def describe(self) -> str:
        """For the pane's title: `all tasks`, `branch of build`, `tasks matching “test”`, or both."""
        parts = []
        if self.branch is not None:
            parts.append(f"branch of {self.branch}")
        if self.name:
            parts.append(f"{'' if parts else 'tasks '}matching “{self.name}”")
        return ", ".join(parts) or "all tasks"
