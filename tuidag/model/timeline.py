"""Where each task's time went: its history as segments on the wall clock, one per wait and one per attempt.

Built from state transitions as they happen (a live run's events) or as the journal recorded them (a finished run),
with the same `TimelineRecorder`, so the timeline view, the report and the critical path read one account of time.
Plain Python, O(1) per transition: a big run makes thousands a second.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple

from .state import TaskState

S = TaskState


class SegmentKind(str, Enum):
    WAITING = "waiting"  # ready to start but held: no free slot, a pause, resource slots, a retry's delay
    RUNNING = "running"  # an attempt executing (CANCELLING included: its processes are still alive)


class Segment(NamedTuple):
    task: str
    kind: SegmentKind
    start: float
    end: float | None  # None: still going on
    attempt: int  # the attempt a RUNNING segment is (1, 2, ...); the one it waits for when WAITING
    outcome: TaskState | None = None  # how a RUNNING segment ended (SUCCEEDED, FAILED, RETRYING, CANCELLED...)

    def duration(self, now: float) -> float:
        return (self.end if self.end is not None else now) - self.start


_WAITING = frozenset({S.QUEUED, S.RETRYING})
_RUNNING = frozenset({S.RUNNING, S.READY, S.CANCELLING})


class TimelineRecorder:
    """Folds transitions `(task, old, new, time, attempt)` into segments per task, in the order they happened.

    A segment opens when a task enters a waiting or running state and closes when it leaves it; CANCELLING continues
    the RUNNING segment it came from, as READY (a service) does. Re-runs and retries append new segments, so every
    attempt is its own bar."""

    __slots__ = ("segments",)

    def __init__(self) -> None:
        self.segments: dict[str, list[Segment]] = {}

    def record(self, task: str, old: TaskState | None, new: TaskState, t: float, attempt: int) -> None:
        if old is new:
            return
        if old in (S.RUNNING, S.READY) and new in (S.READY, S.CANCELLING):
            return  # the same attempt, being stopped or (a service) ready
        segs = self.segments.get(task)
        if segs and segs[-1].end is None:
            last = segs[-1]
            segs[-1] = last._replace(end=max(t, last.start), outcome=new if last.kind is SegmentKind.RUNNING else None)
        kind = SegmentKind.WAITING if new in _WAITING else SegmentKind.RUNNING if new in _RUNNING else None
        if kind is None:
            return
        if segs is None:
            segs = self.segments[task] = []
        segs.append(Segment(task, kind, t, None, attempt + 1 if kind is SegmentKind.WAITING else attempt))

    def feed_journal(self, records: Iterable[dict]) -> None:
        """Task records of a journal (`read_journal`), in order."""
        for rec in records:
            if rec.get("type") != "task":
                continue
            try:
                old = TaskState(rec["from"]) if rec.get("from") else None
                self.record(rec["task"], old, TaskState(rec["to"]), float(rec["t"]), int(rec.get("attempt", 0)))
            except (KeyError, ValueError, TypeError):
                continue  # a record the journal reader let through but that says nothing about time

    def attempts(self, task: str) -> list[Segment]:
        return [s for s in self.segments.get(task, ()) if s.kind is SegmentKind.RUNNING]

    def span(self) -> tuple[float, float | None] | None:
        """The earliest start and latest end of any segment (end None while one is still going on)."""
        starts = [segs[0].start for segs in self.segments.values() if segs]
        if not starts:
            return None
        ends = [s.end for segs in self.segments.values() for s in segs[-1:]]
        closed = [end for end in ends if end is not None]
        return min(starts), (max(closed) if len(closed) == len(ends) else None)
