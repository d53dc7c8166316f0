"""The list view's columns: what each shows of a task, how it sorts, and which fit a given width.

Each column is one `Column` in `COLUMNS`, so adding one (the slots a task holds, the worker it runs on) is one entry.
An optional column is shown only once some task has a value for it. On a narrow screen the least important columns
are dropped (by `drop`, lowest first) until the name gets the room it wants. Room left over goes to the columns
sized by their content (the name, slots, worker), up to their longest value: at 160 columns the name no longer
takes 80 cells while the worker's address is cut (`tcp://127.0.0…`); what no column needs stays blank.
Plain data and functions (no textual), so the layout and the sort orders are easy to check apart from the widget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from ..engine.events import TaskSnapshot
from ..model.durations import format_duration
from ..model.state import TaskState
from .run_model import RunModel
from .state_style import COUNT_ORDER, LOOKS
from .text_cells import format_bytes

NAME_MIN = 12  # the name column never gets fewer cells than this while another column could be dropped
NAME_WANTED = 32  # ... and columns are dropped until it gets the longest name's width, up to this
_STATE_RANK = {state: rank for rank, state in enumerate(COUNT_ORDER)}  # the header's order: what needs attention first
_DIGITS = re.compile(r"(\d+)")

#: A cell: its text and its colour (None: the row's).
Cell = tuple[str, str | None]


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int  # cells, the sort arrow after the title included (the name's: its least width)
    value: Callable[[TaskSnapshot, RunModel, float], Any]  # what it sorts by; None: no value (blank, sorts last)
    cell: Callable[[TaskSnapshot, Any], Cell]  # what it shows, given the value
    right: bool = True  # numbers are right-aligned
    drop: int | None = None  # dropped on a narrow screen, lowest first; None: never
    descending_first: bool = False  # the first sort by it puts the largest first
    optional: bool = False  # shown only when some task has a value
    grows: bool = False  # sized by its longest value when there is room

    def has_value(self, snap: TaskSnapshot, model: RunModel) -> bool:
        return self.value(snap, model, 0.0) is not None


class Placed(NamedTuple):
    """A column as laid out: its first cell and its width."""

    column: Column
    x: int
    width: int


@lru_cache(maxsize=16384)
def natural_key(name: str) -> tuple:
    """Names sort as people count: `step-2` before `step-10`."""
    return tuple(int(part) if part.isdigit() else part for part in _DIGITS.split(name))


def _plain(snap: TaskSnapshot, value: Any) -> Cell:
    return ("" if value is None else str(value)), None


def _state_cell(snap: TaskSnapshot, value: Any) -> Cell:
    look = LOOKS[snap.state]
    return f"{look.glyph} {look.word}", look.colour


def _duration_cell(snap: TaskSnapshot, value: float | None) -> Cell:
    return ("" if value is None else format_duration(value)), None


def _exit_cell(snap: TaskSnapshot, value: int | None) -> Cell:
    if value is None:
        return "", None
    return str(value), (LOOKS[TaskState.FAILED].colour if value else None)


def _usage(snap: TaskSnapshot, model: RunModel, index: int) -> float | int | None:
    usage = model.usage.get(snap.name)
    return None if usage is None else usage[index]


COLUMNS: tuple[Column, ...] = (
    Column("state", "STATE", 11, lambda s, m, now: _STATE_RANK[s.state], _state_cell, right=False),
    Column("name", "NAME", NAME_MIN, lambda s, m, now: natural_key(s.name), lambda s, v: (s.name, None), right=False),
    Column("duration", "DURATION", 9, lambda s, m, now: s.duration(now), _duration_cell, drop=7, descending_first=True),
    Column("attempt", "ATTEMPT", 8, lambda s, m, now: s.attempt or None, _plain, drop=1),
    Column("exit", "EXIT", 5, lambda s, m, now: s.exit_code, _exit_cell, drop=4),
    Column(
        "cpu",
        "CPU",
        5,
        lambda s, m, now: _usage(s, m, 0),
        lambda s, v: (f"{v:.0f}%" if v is not None else "", None),
        drop=6,
        descending_first=True,
    ),
    Column(
        "mem",
        "MEM",
        6,
        lambda s, m, now: _usage(s, m, 1),
        lambda s, v: (format_bytes(v) if v is not None else "", None),
        drop=5,
        descending_first=True,
    ),
    # The slots a task holds (or last held: `gpu:0,1 db:0`) and, one day, the worker that runs it; until a task has
    # a value the columns stay hidden.
    Column(
        "slots", "SLOTS", 12, lambda s, m, now: getattr(s, "slots", None), _plain, drop=2, optional=True, grows=True
    ),
    Column(
        "worker",
        "WORKER",
        14,
        lambda s, m, now: getattr(s, "worker", None),
        _plain,
        right=False,
        drop=3,
        optional=True,
        grows=True,
    ),
)
BY_KEY = {column.key: column for column in COLUMNS}


def fit_columns(
    columns: list[Column], width: int, longest_name: int, longest: Mapping[str, int] | None = None
) -> list[Placed]:
    """Place `columns` (in their order) in `width` cells: a space before each, the least important dropped while
    the name would get less than it wants; the slack goes to the name up to its longest, then to the other columns
    that grow, the most important first, up to their `longest` values (cells)."""
    longest = longest or {}
    wanted = max(NAME_MIN, min(longest_name, NAME_WANTED))
    kept = list(columns)

    def used(cols: list[Column]) -> int:
        return sum(1 + (wanted if c.key == "name" else c.width) for c in cols)

    while used(kept) > width:
        droppable = [c for c in kept if c.drop is not None]
        if not droppable:
            break
        kept.remove(min(droppable, key=lambda c: c.drop or 0))
    slack = width - used(kept)
    widths = {c.key: max(1, wanted + min(0, slack)) if c.key == "name" else c.width for c in kept}
    growing = sorted((c for c in kept if c.grows), key=lambda c: -(c.drop or 0))
    for column, most in [(BY_KEY["name"], longest_name)] + [(c, longest.get(c.key, 0)) for c in growing]:
        if column.key in widths and slack > 0:
            extra = min(slack, max(0, most - widths[column.key]))
            widths[column.key] += extra
            slack -= extra
    placed, x = [], 1
    for column in kept:
        placed.append(Placed(column, x, widths[column.key]))
        x += widths[column.key] + 1
    return placed
