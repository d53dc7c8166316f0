"""What the terminal UI says about the run's time: the ETA and the critical path, from what the UI knows (snapshots
and the timeline's segments) and the expected durations, through `model.forecast`. No textual: the app calls it on
a worker thread, and tests call it directly.

A finished run's path comes from the actual spans. A live run's comes from the forecast: finished tasks keep their
actual spans, running ones end at `max(now, start + expected)`, the rest are simulated by the scheduler's rules;
failed, cancelled and skipped tasks (and a task being cancelled) are blocked, with everything below them.
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from ..engine.events import TaskSnapshot
from ..model.durations import format_duration
from ..model.forecast import DagShape, Span, critical_path, simulate, task_spans
from ..model.state import TaskState
from ..model.timeline import Segment, SegmentKind

S = TaskState
_BLOCKED = frozenset({S.FAILED, S.CANCELLED, S.SKIPPED, S.CANCELLING})
UNUSUALLY_LONG = 2.0  # a running attempt over this many times its expected (median) duration is called long


class Outlook(NamedTuple):
    path: list[str]             # the critical path, first task first
    spans: dict[str, Span]      # what the path was computed from: actual, and forecast for a live run
    end: float | None           # when the run ends (ended); None: some remaining task has no history
    earliest_end: float | None  # the end with unknown durations counted as zero (None: nothing to forecast)
    unknown: tuple[str, ...]    # remaining tasks with no expected duration
    finished: bool


def actual_spans(snapshots: Mapping[str, TaskSnapshot], segments: Mapping[str, Sequence[Segment]],
                 now: float) -> dict[str, Span]:
    """Each task that ran: its first attempt's start to its last one's end (now while running), from the segments,
    or from its snapshot when the segments don't have it (results reused from an earlier run did not run)."""
    spans = task_spans(segments, now)
    for name, snap in snapshots.items():
        if name not in spans and snap.started_at is not None and not snap.reused:
            spans[name] = (snap.started_at, now if snap.finished_at is None else snap.finished_at)
    for name, snap in snapshots.items():
        if snap.reused:
            spans.pop(name, None)
    return spans


def outlook(shape: DagShape, snapshots: Mapping[str, TaskSnapshot], segments: Mapping[str, Sequence[Segment]], *,
            now: float, started: float, expected: Mapping[str, float], finished: bool) -> Outlook:
    actual = actual_spans(snapshots, segments, now)
    if finished:
        end = max((end for _, end in actual.values()), default=None)
        return Outlook(critical_path(shape.dag_deps, actual), actual, end, end, (), True)
    done: dict[str, Span] = {}
    running: dict[str, float] = {}
    blocked = set()
    for name, snap in snapshots.items():
        state = snap.state
        if snap.reused:
            done[name] = (started, started)
        elif state is S.SUCCEEDED and name in actual:
            done[name] = actual[name]
        elif state is S.RUNNING:
            running[name] = attempt_start(segments.get(name), snap, now)
        elif state in _BLOCKED:
            blocked.add(name)
    forecast = simulate(**shape._asdict(), now=now, finished=done, running=running, expected=expected,
                        blocked=frozenset(blocked))
    return Outlook(critical_path(shape.dag_deps, forecast.spans), forecast.spans, forecast.end,
                   forecast.earliest_end, forecast.unknown, False)


def attempt_start(segments: Sequence[Segment] | None, snap: TaskSnapshot, now: float) -> float:
    """When the running attempt started: its open segment's start, else the snapshot's (which, after a retry, is
    the first attempt's)."""
    if segments:
        last = segments[-1]
        if last.kind is SegmentKind.RUNNING and last.end is None:
            return last.start
    return snap.started_at if snap.started_at is not None else now


def eta_text(result: Outlook | None, now: float, any_history: bool) -> str | None:
    """The header's ETA: `ETA 2m10s`, `ETA ≥ 1m05s` (some tasks have no history), `ETA: no history`, `ETA: any
    moment` (the tasks left run past their expected durations); None when there is nothing to say (finished, or not
    worked out yet)."""
    if result is None or result.finished:
        return None
    if not any_history:
        return "ETA: no history"
    if result.end is not None:
        left = result.end - now
        return f"ETA {format_duration(left)}" if left >= 0.05 else "ETA: any moment"  # running past expected
    if result.earliest_end is not None:
        return f"ETA ≥ {format_duration(max(0.0, result.earliest_end - now))}"
    return "ETA: no history"


def progress(elapsed: float, expected: float | None) -> tuple[float, bool] | None:
    """(fraction of the expected duration done, capped at 1; whether it runs unusually long), None without history."""
    if not expected or expected <= 0:
        return None
    ratio = elapsed / expected
    return min(1.0, ratio), ratio > UNUSUALLY_LONG


def path_rows(result: Outlook, snapshots: Mapping[str, TaskSnapshot]) -> list[tuple[str, str, bool]]:
    """The critical path as (task, duration, forecast?) rows: on a live run, a task that has not finished shows the
    forecast's duration (its expected one, or what it has run so far if longer)."""
    rows = []
    for name in result.path:
        start, end = result.spans[name]
        snap = snapshots.get(name)
        forecast = not result.finished and (snap is None or not snap.state.terminal)
        rows.append((name, format_duration(end - start), forecast))
    return rows
