"""What the terminal UI says about the run's time: the critical path and the ETA's forms, from what the UI knows
(snapshots and the timeline's segments) and the expected durations. The forecast itself is `views.eta`'s
(`live_forecast`, shared with the other views) and `model.forecast`'s; this picks the spans the path is read from
and words the header's forms. No textual: the app calls it on a worker thread, and tests call it directly.

A finished run's path comes from the actual spans; a live run's from the forecast, so it goes through the remaining
work and moves as tasks finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..engine.events import TaskSnapshot
from ..model.durations import format_duration
from ..model.forecast import Forecast, ForecastShape, Span, critical_path, task_spans
from ..model.timeline import Segment
from .eta import eta_text, live_forecast


class Outlook(NamedTuple):
    path: list[str]  # the critical path, first task first
    spans: dict[str, Span]  # what the path was computed from: actual, and forecast for a live run
    forecast: Forecast | None  # a live run's forecast (None: the run is finished)
    at: float = 0.0  # when it was worked out (the forecast plays the remaining work forward from then)

    @property
    def finished(self) -> bool:
        return self.forecast is None


def actual_spans(
    snapshots: Mapping[str, TaskSnapshot], segments: Mapping[str, Sequence[Segment]], now: float
) -> dict[str, Span]:
    """Each task that ran: its first attempt's start to its last one's end (now while running), from the segments,
    or from its snapshot when the segments don't have it. Results reused from an earlier run did not run."""
    spans = task_spans(segments, now)
    for name, snap in snapshots.items():
        if snap.reused:
            spans.pop(name, None)
        elif name not in spans and snap.started_at is not None:
            spans[name] = (snap.started_at, now if snap.finished_at is None else snap.finished_at)
    return spans


def outlook(
    shape: ForecastShape,
    snapshots: Mapping[str, TaskSnapshot],
    segments: Mapping[str, Sequence[Segment]],
    *,
    now: float,
    expected: Mapping[str, float],
    finished: bool,
) -> Outlook:
    if finished:
        actual = actual_spans(snapshots, segments, now)
        return Outlook(critical_path(shape.dag_deps, actual), actual, None)
    forecast = live_forecast(shape, snapshots, expected, now)
    return Outlook(critical_path(shape.dag_deps, forecast.spans), forecast.spans, forecast, now)


def eta_forms(result: Outlook | None, now: float, history: bool | None, paused: bool = False) -> list[str]:
    """The header's ETA of a live run, fullest first (`ETA 14:32:05 (in 3m20s)`, then `ETA 3m20s`); `ETA: no
    history` when no task has run before (`history` False: nothing to simulate); none while the durations are not
    read yet (`history` None) or the forecast not worked out, or when the run is finished. While `paused` there is
    no time of day to give (nothing new starts until the user resumes): `ETA: paused (3m20s of work left)`, the
    time the rest takes once resumed."""
    if history is None:
        return []
    if not history:
        return ["ETA: paused"] if paused else ["ETA: no history"]
    if result is None or result.forecast is None:
        return ["ETA: paused"] if paused else []
    forecast = result.forecast
    if paused:
        if forecast.end is None:
            return ["ETA: paused"]
        return [f"ETA: paused ({format_duration(max(0.0, forecast.end - result.at))} of work left)", "ETA: paused"]
    full = eta_text(forecast, now)
    if forecast.end is None:
        return [full, f"ETA: no history ({len(forecast.unknown):,})"]
    left = forecast.end - now
    return [full] if left <= 0 else [full, f"ETA {format_duration(left)}"]


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
