"""How far each matrix group has got, in words: `train: 12 of 16 done, 1 failed, 3 running`.

The headless output prints a group's line as its instances end (at most once a second per group, and always when
its last instance ends), and the summary prints every group's line, so a sweep of a thousand instances reads as
one line of progress rather than only a thousand lines of states.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from ..engine.events import TaskSnapshot
from ..model.counts import number
from ..model.matrix import MatrixGroup
from ..model.state import TaskState as S

#: The order states are listed in after `done`.
_ORDER = (S.FAILED, S.CANCELLED, S.SKIPPED, S.RUNNING, S.READY, S.CANCELLING, S.RETRYING, S.QUEUED, S.PENDING)


def group_line(name: str, states: Iterable[S]) -> str:
    """`train: 12 of 16 done, 1 failed, 3 running` (done: succeeded)."""
    counts: dict[S, int] = {}
    total = 0
    for state in states:
        counts[state] = counts.get(state, 0) + 1
        total += 1
    parts = [f"{number(counts.get(S.SUCCEEDED, 0))} of {number(total)} done"]
    others = sorted(
        (state for state in counts if state is not S.SUCCEEDED),
        key=lambda state: _ORDER.index(state) if state in _ORDER else len(_ORDER),
    )  # a state not listed (a newer one) still counts, after the others
    parts += [f"{number(counts[state])} {state.value.lower()}" for state in others]
    return f"{name}: {', '.join(parts)}"


def group_lines(groups: Mapping[str, MatrixGroup], snapshots: Mapping[str, TaskSnapshot]) -> list[str]:
    """Every group's line, for the summary."""
    return [
        group_line(name, (snapshots[i].state for i in group.instances if i in snapshots))
        for name, group in groups.items()
    ]


class GroupProgress:
    """Follows the instances' states; `update` says when a group's line is worth printing."""

    def __init__(
        self, groups: Mapping[str, MatrixGroup], every: float = 1.0, clock: Callable[[], float] = time.monotonic
    ):
        self._group_of = {instance: name for name, group in groups.items() for instance in group.instances}
        self._states: dict[str, dict[str, S]] = {
            name: dict.fromkeys(group.instances, S.PENDING) for name, group in groups.items()
        }
        self._said: dict[str, float] = {}
        self._every = every
        self._clock = clock

    def update(self, snap: TaskSnapshot) -> str | None:
        """The line of the group `snap` is an instance of, when an instance just ended and the group's last line is
        at least `every` seconds old or this was its last instance to end; else None."""
        group = self._group_of.get(snap.name)
        if group is None:
            return None
        states = self._states[group]
        was = states[snap.name]
        states[snap.name] = snap.state
        if not snap.state.terminal or was.terminal:
            return None
        now = self._clock()
        if all(state.terminal for state in states.values()) or now - self._said.get(group, -self._every) >= self._every:
            self._said[group] = now
            return group_line(group, states.values())
        return None


#: A group tile's bar, in this order: done, failed, stopped (cancelled, skipped), running, queued (the rest).
BAR_PARTS = ("done", "failed", "stopped", "running", "queued")
_PART_OF = {S.SUCCEEDED: "done", S.UP_TO_DATE: "done", S.FAILED: "failed"}
_PART_OF.update({S.CANCELLED: "stopped", S.SKIPPED: "stopped", S.UNTARGETED: "stopped"})
_PART_OF.update({S.RUNNING: "running", S.CANCELLING: "running", S.RETRYING: "running"})


class GroupSummary(NamedTuple):
    """What a group's tile shows: instances per part of its bar, the best and worst durations of those done, and
    the state it is drawn in (the most urgent of its instances')."""

    total: int
    parts: dict[str, int]
    best: float | None
    worst: float | None
    state: S


def summarise(snapshots: Iterable[TaskSnapshot], now: float) -> GroupSummary:
    parts = dict.fromkeys(BAR_PARTS, 0)
    best = worst = None
    total = 0
    for snap in snapshots:
        total += 1
        part = _PART_OF.get(snap.state, "queued")
        parts[part] += 1
        if part == "done":
            seconds = snap.duration(now)
            if seconds is not None:
                best = seconds if best is None else min(best, seconds)
                worst = seconds if worst is None else max(worst, seconds)
    if parts["failed"]:
        state = S.FAILED
    elif parts["running"]:
        state = S.RUNNING
    elif parts["queued"]:
        state = S.QUEUED if parts["done"] or parts["stopped"] else S.PENDING
    elif parts["stopped"] and not parts["done"]:
        state = S.CANCELLED
    else:
        state = S.SUCCEEDED
    return GroupSummary(total, parts, best, worst, state)
