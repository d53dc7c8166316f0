"""The timeline's geometry as plain data: which tasks go on which row, the time axis and its ticks, and which cells
of a row each wait and attempt covers. No textual here, so it is tested as text and costs nothing per frame beyond
the visible rows (a row's cells are worked out only when the row is drawn).

Time runs left to right on a scale of seconds per cell taken from a ladder of round values, so bars and ticks land
on whole cells and the axis reads `0s 10s 20s`, `0s 5m 10m` or `0s 1h 2h` as the run grows. Three densities follow
the graph's zoom level: full rows (name, bar, duration), compact rows (a short name, the bar) and dense rows, two
tasks a row in half-height cells, for thousands of tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import NamedTuple, TypeVar

from ..engine.events import TaskSnapshot
from ..model.state import TaskState
from ..model.timeline import Segment, SegmentKind

#: Seconds per cell the scale may take, finest first.
SCALES = (
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    3.0,
    4.0,
    5.0,
    7.5,
    10.0,
    15.0,
    20.0,
    30.0,
    45.0,
    60.0,
    90.0,
    120.0,
    180.0,
    240.0,
    300.0,
    450.0,
    600.0,
    900.0,
    1200.0,
    1800.0,
    2700.0,
    3600.0,
    5400.0,
    7200.0,
    10800.0,
    14400.0,
    21600.0,
    28800.0,
    43200.0,
    64800.0,
    86400.0,
)  # steps of 1.5x or less: a fitted run fills 2/3 or more
#: Seconds between two ticks of the axis, finest first.
TICK_STEPS = (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MIN_TICK_GAP = 10  # cells between two ticks at least: room for a label like `1h30m` and a gap
FIT_ROOM = 0.9  # a fitted scale leaves a tenth of the width free, so a live run's growth rarely changes the scale


class Density(Enum):
    """How much a row shows, after the graph's zoom level: rows for full tiles, compact rows for one-line tiles,
    dense rows (two tasks a row) for dots."""

    FULL = "full"
    COMPACT = "compact"
    DENSE = "dense"

    @property
    def per_row(self) -> int:
        return 2 if self is Density.DENSE else 1

    def name_width(self, longest: int, width: int) -> int:
        """Cells of the name column (none in dense rows: the log pane's title names the selected task)."""
        if self is Density.DENSE:
            return 0
        cap = 28 if self is Density.FULL else 14
        return max(4, min(longest, cap, width // 3))


class Paint(NamedTuple):
    """What covers a cell: a wait, or an attempt coloured by how it ended (or by the task's state while it runs)."""

    kind: SegmentKind
    state: TaskState


#: A cell of a dense row the forecast covers (what is still to come), told apart from waits and attempts.
FORECAST = Paint(SegmentKind.WAITING, TaskState.PENDING)


def fit_scale(span: float, cells: int) -> float:
    """The finest scale on the ladder at which `span` seconds take at most `FIT_ROOM` of `cells`."""
    room = max(1, cells) * FIT_ROOM
    for scale in SCALES:
        if span <= scale * room:
            return scale
    return SCALES[-1]


def scale_step(scale: float, step: int) -> float:
    """The scale `step` rungs finer (negative) or coarser (positive) on the ladder, within its ends."""
    here = min(range(len(SCALES)), key=lambda i: abs(math.log(SCALES[i] / scale)))
    return SCALES[max(0, min(len(SCALES) - 1, here + step))]


def tick_step(scale: float) -> float:
    """Seconds between ticks: the finest round step that leaves `MIN_TICK_GAP` cells between them."""
    for step in TICK_STEPS:
        if step / scale >= MIN_TICK_GAP:
            return step
    return TICK_STEPS[-1]


def tick_label(seconds: float) -> str:
    """A tick's time since the run started, exact and short: 0s, 0.5s, 45s, 1m30s, 5m, 1h, 1h00m10s, 1d02h."""
    if seconds < 60:
        return f"{seconds:g}s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    first = next(i for i, (n, _) in enumerate(parts) if n)
    last = max(i for i, (n, _) in enumerate(parts) if n)
    return "".join(
        f"{n}{unit}" if i == first else f"{n:02d}{unit}" for i, (n, unit) in enumerate(parts) if first <= i <= last
    )


def scale_label(scale: float) -> str:
    """A scale in few cells: 50ms, 1s, 5m, 1h."""
    return f"{scale * 1000:g}ms" if scale < 1 else tick_label(scale)


def ticks(offset: float, scale: float, cells: int) -> list[tuple[int, str]]:
    """(cell, label) of every tick in view, `offset` seconds after the run's start at cell 0."""
    step = tick_step(scale)
    first = math.ceil(offset / step - 1e-9) * step
    out: list[tuple[int, str]] = []
    t = first
    while True:
        x = round((t - offset) / scale)
        if x >= cells:
            return out
        if x >= 0:
            out.append((x, tick_label(max(0.0, t))))
        t += step


def axis_text(offset: float, scale: float, cells: int) -> str:
    """The axis line: each tick's label starting on its cell (a label that would run into the next one is left
    out)."""
    line = [" "] * cells
    free = 0
    for x, label in ticks(offset, scale, cells):
        if x < free:
            continue
        text = "╵" + label
        for i, ch in enumerate(text[: cells - x]):
            line[x + i] = ch
        free = x + len(text) + 1
    return "".join(line)


def generation_cells(
    starts: Sequence[tuple[str, float]], started: float, offset: float, scale: float, cells: int
) -> list[tuple[int, str]]:
    """(cell, label) of each of watch mode's rounds after the first (`g2`, when it began) that began in view."""
    return [(x, label) for label, t in starts if 0 <= (x := round((t - started - offset) / scale)) < cells]


def with_generations(axis: str, marks: Sequence[tuple[int, str]]) -> str:
    """The axis line with each round's mark and label (`┃g2`) over what the ticks put there."""
    line = list(axis)
    for x, label in marks:
        for i, ch in enumerate(("┃" + label)[: len(line) - x]):
            line[x + i] = ch
    return "".join(line)


def snapshot_segments(snap: TaskSnapshot) -> list[Segment]:
    """What a snapshot alone tells of a task's time (its current or last attempt), for a task whose transitions the
    recorder never saw (it started before the app subscribed and the journal does not say, or a test fed states)."""
    if snap.started_at is None or snap.reused:
        return []
    live = snap.finished_at is None
    return [
        Segment(
            snap.name,
            SegmentKind.RUNNING,
            snap.started_at,
            snap.finished_at,
            max(1, snap.attempt),
            None if live else snap.state,
        )
    ]


def row_paints(
    segments: Iterable[Segment], state: TaskState, left: float, scale: float, cells: int, now: float
) -> list[Paint | None]:
    """The paint of each of `cells` cells of a task's row, the first at time `left`. A segment covers at least one
    cell (a task of 10 ms still shows); where a wait and an attempt share a cell the attempt wins; a later segment
    wins over an earlier one of the same kind. An attempt still going on takes the task's `state` (running,
    stopping)."""
    out: list[Paint | None] = [None] * cells
    right = left + cells * scale
    for seg in segments:
        end = seg.end if seg.end is not None else max(now, seg.start)
        if end < left or seg.start >= right:
            continue
        x0 = max(0, math.floor((seg.start - left) / scale))
        x1 = min(cells, max(x0 + 1, math.ceil((end - left) / scale)))
        running = seg.kind is SegmentKind.RUNNING
        paint = Paint(seg.kind, (seg.outcome or state) if running else TaskState.QUEUED)
        for x in range(x0, x1):
            shown = out[x]
            if running or shown is None or shown.kind is SegmentKind.WAITING:
                out[x] = paint
    return out


#: How telling an attempt's outcome is on a folded group's row (higher wins a shared cell): a failure, then an
#: attempt still going on (no outcome yet), then any other.
_TELLING = {TaskState.FAILED: 2, None: 1}


def group_segments(instances: Iterable[Iterable[Segment]]) -> list[Segment]:
    """A matrix group's row as one task's segments, for `row_paints` (given the state RUNNING, which an attempt still
    going on takes): every instance's, those that look alike (a wait; an attempt of one outcome) merged where they
    overlap, waits first, then attempts from the least telling to the most, as a later segment of a kind wins a
    cell. A thousand queued instances wait over the same cells: merged, their row took 2.5 ms to draw, not 6.6."""
    alike: dict[tuple[bool, TaskState | None], list[Segment]] = {}
    for segs in instances:
        for seg in segs:
            running = seg.kind is SegmentKind.RUNNING
            alike.setdefault((running, seg.outcome if running else None), []).append(seg)
    merged: list[Segment] = []
    for _, segs in sorted(alike.items(), key=lambda item: (item[0][0], _TELLING.get(item[0][1], 0))):
        segs.sort(key=lambda seg: seg.start)
        current = segs[0]
        for seg in segs[1:]:
            if current.end is not None and seg.start > current.end:
                merged.append(current)
                current = seg
            elif current.end is not None and (seg.end is None or seg.end > current.end):
                current = current._replace(end=seg.end)
        merged.append(current)
    return merged


def forecast_cells(
    span: tuple[float, float], left: float, scale: float, cells: int, now: float
) -> tuple[int, int] | None:
    """The cells (start, end) a task's forecast covers from `now` on (what is still to come of a running task, all
    of a task not started), or None when none of it is in view or it takes no time (no history)."""
    start, end = max(span[0], now), span[1]
    if end - start <= 0:
        return None
    x0 = max(0, math.floor((start - left) / scale))
    x1 = min(cells, max(x0 + 1, math.ceil((end - left) / scale)))
    return (x0, x1) if x0 < x1 else None


_Cell = TypeVar("_Cell")  # what a cell holds


def runs(paints: Sequence[_Cell]) -> list[tuple[int, int, _Cell]]:
    """Consecutive equal cells as (start, end, value) runs."""
    out = []
    start = 0
    for x in range(1, len(paints) + 1):
        if x == len(paints) or paints[x] != paints[start]:
            out.append((start, x, paints[start]))
            start = x
    return out


def rows_of(order: Sequence[str], shown: Mapping[str, bool] | None, keep: str | None) -> list[str]:
    """The tasks listed, in `order`: those `shown` (None: all), and `keep` (the selection) even when hidden."""
    if shown is None:
        return list(order)
    return [name for name in order if shown[name] or name == keep]


def time_span(
    segments: Mapping[str, Sequence[Segment]], snapshots: Mapping[str, TaskSnapshot], started: float, now: float
) -> float:
    """The latest time anything reaches (`now` while something is still going on), at least `started`."""
    end = started
    for segs in segments.values():
        if segs:
            last = segs[-1]
            end = max(end, now if last.end is None else last.end)
    for snap in snapshots.values():
        if snap.started_at is not None and not snap.reused:
            end = max(end, now if snap.finished_at is None else snap.finished_at)
    return end
