"""A live run's forecast from its task snapshots: what the header's ETA and the running tiles' progress bars show.

The engine's snapshots say where each task is; `model.forecast.simulate` plays the rest forward. Here the states
become the simulation's inputs: succeeded tasks are finished; running ones run (from the start of their current
attempt); failed and cancelled ones are finished if they ran and blocked either way (nothing below them will run),
as skipped ones and those outside the run's targets are (none of these is waited for, nor wants a history);
pending, queued and retrying ones are still to run, a retrying one for a whole attempt. A service that is READY is
finished as far as the forecast goes: its dependents waited for it to be ready, not for its end, which comes with
the run's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple

from ..engine.events import TaskSnapshot
from ..model.counts import counted
from ..model.durations import format_duration
from ..model.forecast import Forecast, ForecastShape, simulate
from ..model.state import TaskState

S = TaskState
OVERRUN = 2.0
"""A running attempt is unusually long past this many times its expected duration."""


def live_forecast(
    shape: ForecastShape, snapshots: Mapping[str, TaskSnapshot], expected: Mapping[str, float], now: float
) -> Forecast:
    finished: dict[str, tuple[float, float]] = {}
    running: dict[str, float] = {}
    blocked: set[str] = set()
    for name, snap in snapshots.items():
        state = snap.state
        if state in (S.RUNNING, S.CANCELLING):
            running[name] = attempt_start(snap, now)
        elif state is S.READY:  # a service: what its dependents waited for is done (it became ready then)
            finished[name] = (attempt_start(snap, now), snap.changed_at or now)
        elif state in (S.SUCCEEDED, S.UP_TO_DATE) or (state in (S.FAILED, S.CANCELLED) and snap.started_at is not None):
            start = snap.started_at if snap.started_at is not None else snap.changed_at
            finished[name] = (start, snap.finished_at if snap.finished_at is not None else snap.changed_at)
        if state in (S.FAILED, S.CANCELLED, S.SKIPPED, S.CANCELLING, S.UNTARGETED):
            blocked.add(name)
    return simulate(**shape._asdict(), now=now, finished=finished, running=running, expected=expected, blocked=blocked)


def attempt_start(snap: TaskSnapshot, now: float) -> float:
    """When the running attempt started: `started_at` is the first attempt's; a later attempt started when the
    task last became RUNNING (its last change, near enough: updates while it runs are rare)."""
    if snap.attempt > 1 or snap.started_at is None:
        return snap.changed_at or now
    return snap.started_at


class Progress(NamedTuple):
    fraction: float  # of the expected duration, 0..1 (a bar full at 1 while it runs on)
    overrun: bool  # over OVERRUN times the expected duration: unusually long


def progress(elapsed: float, expected: float | None) -> Progress | None:
    """A running attempt's progress against its expected duration; None without one (no history: no bar)."""
    if not expected or expected <= 0:
        return None
    return Progress(min(1.0, max(0.0, elapsed / expected)), elapsed > OVERRUN * expected)


def eta_text(forecast: Forecast, now: float) -> str:
    """The header's words: `ETA 14:32:05 (in 3m20s)`, `done`, or why there is no ETA."""
    if forecast.end is None:
        count = len(forecast.unknown)
        return f"ETA unknown: no history for {counted(count, 'task')}"
    left = forecast.end - now
    if left <= 0:
        return "ETA any moment"
    return f"ETA {time.strftime('%H:%M:%S', time.localtime(forecast.end))} (in {format_duration(left)})"
