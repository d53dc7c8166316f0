"""What a resumed run (`tuidag run --resume`, the post-mortem's `r`) takes over from an earlier run of its DAG, and
why it takes no more: a task is reused, with the return value it had, when it SUCCEEDED there, its definition is
unchanged (its fingerprint), its return value was kept in the journal, and every task upstream of it is reused too."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from ..model.counts import counted, number
from ..model.spec import DagSpec
from ..model.state import SUCCESSFUL, TERMINAL, TaskState
from .journal import replay
from .runs import RunDir

NEW = "not in that run"
CHANGED = "changed"
VALUE = "return value not kept (not plain JSON)"
UPSTREAM = "after a task that runs again"
NAMES_SHOWN = 5  # names listed per reason; the rest are counted


class Reuse(NamedTuple):
    """The plan: reused tasks with their values, and why each other task runs again."""

    values: dict[str, Any]  # reused task -> its return value there (None for shell tasks), in DAG order
    why_not: dict[str, str]  # task that runs again -> why (one of the constants above, or "failed there", ...)
    shared_changes: list[str]  # what every task shares that changed (`env KEY`, `workdir`), when it is known

    def describe(self, total: int, env_options: Iterable[str] = (), targets: bool = False) -> str:
        """`reusing 1 of 7 tasks (load): changed: train, eval; failed there: ...`, naming why the others run.
        `env_options`: the variables this run was given with `--env`, named as such when they changed. With
        `targets`, `total` counts the tasks the run's targets need, and the text says so."""
        given = set(env_options)
        reused = list(self.values)
        text = f"reusing {number(len(reused))} of {counted(total, 'task')}"
        if targets:
            text += " the targets need"
        if 0 < len(reused) <= 10:
            text += f" ({', '.join(reused)})"
        groups: dict[str, list[str]] = {}
        for name, why in self.why_not.items():
            groups.setdefault(why, []).append(name)
        parts = []
        for why, names in groups.items():
            if why == CHANGED and self.shared_changes:
                causes = " and ".join(
                    f"--env {what[4:]}" if what.startswith("env ") and what[4:] in given else what
                    for what in self.shared_changes
                )
                if len(names) == total:
                    parts.append(f"{causes} changed every task's definition")
                    continue
                why = f"changed ({causes} changed)"
            elif len(names) == total and why == CHANGED:
                parts.append("every task's definition changed")
                continue
            parts.append(f"{why}: {_names(names)}")
        return text + (": " + "; ".join(parts) if parts else "")


def plan_reuse(dag: DagSpec, earlier: RunDir, wanted: AbstractSet[str] | None = None) -> Reuse:
    """What to take over from `earlier`, among the tasks `wanted` (the run's targets and what they need; None:
    every task): the others are outside the run and neither reused nor run."""
    rep = replay(earlier.journal)
    old_prints = rep.header.get("fingerprints") or {}
    prints = dag.fingerprints
    values: dict[str, Any] = {}
    why_not: dict[str, str] = {}
    for name in dag.topological_order:
        if wanted is not None and name not in wanted:
            continue
        record = rep.tasks.get(name)
        if record is None:
            why_not[name] = NEW
        elif record.state is TaskState.UNTARGETED:
            why_not[name] = "not a target there"
        elif record.state not in SUCCESSFUL:
            why_not[name] = f"{record.state.value.lower()} there" if record.state in TERMINAL else "unfinished there"
        elif old_prints.get(name) != prints[name]:
            why_not[name] = CHANGED
        elif not record.value_kept:
            why_not[name] = VALUE
        elif not all(dep in values for dep in dag.tasks[name].depends_on):
            why_not[name] = UPSTREAM
        else:
            values[name] = record.value
    return Reuse(values, why_not, shared_changes(rep.header.get("shared"), dag.shared_digests))


def shared_changes(old: Any, new: dict[str, str]) -> list[str]:
    """What every task shares that differs between the earlier run's header and now (nothing when the earlier
    run did not record it)."""
    if type(old) is not dict:
        return []
    return [what for what in sorted({*old, *new}) if old.get(what) != new.get(what)]


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown if len(names) <= NAMES_SHOWN else f"{shown} and {number(len(names) - NAMES_SHOWN)} more"
