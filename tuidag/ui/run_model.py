"""What the UI knows about the run, updated in batches on the UI thread from engine events.

The engine calls the app's observer from its own threads; the observer only appends to a deque. The app drains the
deque on a timer and hands the whole batch to `RunModel.apply`, which returns the tasks whose tiles need repainting.
Plain Python (no textual), so the bookkeeping is easy to reason about apart from the widgets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from ..engine.events import RunEvent, TaskEvent, TaskSnapshot, event_counts
from ..model.state import TERMINAL, TaskState
from ..model.timeline import TimelineRecorder
from .state_style import FAINT


@dataclass(frozen=True, slots=True)
class UsageSample:
    """CPU % and RSS bytes of each running task's process tree, sampled off the UI thread."""

    usage: dict[str, tuple[float, int]]


class StateFilter(Enum):
    """Which tasks the graph and the list show (`F` cycles through them). Hidden tasks still count in the header."""

    ALL = ("all", frozenset(TaskState))
    FAILED = ("failed", frozenset({TaskState.FAILED}))
    RUNNING = ("running", frozenset({TaskState.RUNNING, TaskState.READY, TaskState.RETRYING, TaskState.CANCELLING}))
    UNFINISHED = ("unfinished", frozenset(TaskState) - TERMINAL)

    def __init__(self, word: str, states: frozenset[TaskState]) -> None:
        self.word = word
        self.states = states

    def next(self) -> StateFilter:
        members = list(StateFilter)
        return members[(members.index(self) + 1) % len(members)]


class RunModel:
    def __init__(self, snapshots: dict[str, TaskSnapshot], started: float, clock: Callable[[], float]):
        self.snapshots = dict(snapshots)
        self.usage: dict[str, tuple[float, int]] = {}
        self.counts: Counter[TaskState] = Counter(s.state for s in self.snapshots.values())
        self.started = started
        self.clock = clock
        self.paused = False
        self.watching = False  # under --watch: an ended round is not the run's end (the engine waits for changes)
        #: Under --watch with services up, a round's other tasks all ended: their counts by state, and "up", the
        #: services up (the run is not finished: they run); None while a round goes on.
        self.settled: dict[str, int] | None = None
        self.generation: str | None = None  # watch mode's latest round, as the engine says it (`gen 4: ... -> ...`)
        self.generations: list[tuple[str, float]] = []  # each round after the first: (`g2`, when it began)
        self.dag_error: str | None = None  # the DAG file was edited into one with errors (located), until fixed
        self.reshaped = False  # the DAG changed (an edit of its file): the app lays it out anew, then clears this
        self.finished_at: float | None = None  # set by the engine's "finished" event, cleared by a re-run
        self.stopping = False  # the user asked to quit: everything is being cancelled
        self.state_filter = StateFilter.ALL
        self.timeline = TimelineRecorder()  # every task's waits and attempts, for the timeline view
        self._seeded_seq = 0  # events up to this one were read from the journal: their live copies are skipped

    def seed_timeline(self, records: Iterable[dict]) -> None:
        """What the journal recorded before the app subscribed (the run starts first). The journal is the engine's
        first observer and events are delivered in order, so it holds a prefix of them: the events the app then
        receives again (those up to the last one read) are not recorded twice."""
        records = list(records)
        tasks = [rec for rec in records if rec.get("type") == "task"]
        self.timeline.feed_journal(tasks)
        self._seeded_seq = max((rec.get("seq", 0) for rec in tasks), default=0)
        for rec in records:  # watch mode's rounds and the DAG file's edits so far
            if rec.get("type") == "run" and rec.get("event") in ("generation", "dag", "dag-error"):
                self._run_news(rec["event"], rec.get("detail") or "", float(rec.get("t") or 0.0))
                self.settled = None if rec["event"] == "generation" else self.settled
            elif rec.get("type") == "run" and rec.get("event") == "settled":
                self.settled = event_counts(str(rec.get("detail") or ""))
            elif self.settled is not None and rec.get("type") == "task" and rec.get("to") == "QUEUED":
                self.settled = None  # a task started again after the round settled (a re-run)

    def add_tasks(self, names: Iterable[str]) -> None:
        """Tasks an edit of the DAG file added: PENDING until their first event."""
        for name in names:
            if name not in self.snapshots:
                self.snapshots[name] = TaskSnapshot(name, TaskState.PENDING)
                self.counts[TaskState.PENDING] += 1

    def _run_news(self, kind: str, detail: str, t: float) -> None:
        """A round began (`generation`), the DAG file was reloaded (`dag`) or could not be (`dag-error`)."""
        if kind == "generation":
            self.generation = detail
            label = "g" + detail.partition(":")[0].removeprefix("gen ")
            if not any(seen == label for seen, _ in self.generations):
                self.generations.append((label, t))
        elif kind == "dag":
            self.dag_error = None
            self.reshaped = True
        else:
            self.dag_error = detail

    def shown(self, name: str) -> bool:
        """Whether the state filter shows this task (the graph dims the others, the list leaves them out)."""
        return self.snapshots[name].state in self.state_filter.states

    def lit(self, name: str) -> bool:
        """Whether this task is drawn in its colours: shown by the state filter, and part of this run (a task outside
        its targets is drawn faint, as a hidden one is)."""
        state = self.snapshots[name].state
        return state in self.state_filter.states and state not in FAINT

    @property
    def total(self) -> int:
        return len(self.snapshots)

    @property
    def targeted(self) -> int:
        """The tasks this run is about: all of them, but those outside its targets."""
        return len(self.snapshots) - self.counts[TaskState.UNTARGETED]

    @property
    def done(self) -> int:
        """The tasks of this run that ended (outside its targets, a task is no part of it: not counted)."""
        return sum(n for state, n in self.counts.items() if state.terminal and state not in FAINT)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def elapsed(self) -> float:
        end = self.finished_at if self.finished_at is not None else self.clock()
        return max(0.0, end - self.started)

    def running(self) -> list[str]:
        return [name for name, snap in self.snapshots.items() if snap.state is TaskState.RUNNING]

    def apply(self, events: Iterable[TaskEvent | RunEvent | UsageSample]) -> set[str]:
        """Apply a batch in order; return the names of tasks whose tiles changed.

        Runs on the UI thread for every engine event (thousands a second in a big run of short tasks), so the common
        case, a task event, is written out with local names rather than through the events' properties."""
        changed: set[str] = set()
        add = changed.add
        snapshots, counts = self.snapshots, self.counts
        running, queued = TaskState.RUNNING, TaskState.QUEUED
        for event in events:
            if isinstance(event, TaskEvent):
                snap = event.snapshot
                name, new = snap.name, snap.state
                try:
                    old = snapshots[name].state
                except KeyError:  # a task an edit of the DAG file added
                    self.add_tasks([name])
                    self.reshaped = True
                    old = TaskState.PENDING
                if old is not new:
                    counts[old] -= 1
                    counts[new] += 1
                if event.old is not new and event.seq > self._seeded_seq:
                    self.timeline.record(name, event.old, new, event.time, snap.attempt)
                snapshots[name] = snap
                if new is not running and name in self.usage:
                    del self.usage[name]
                if new not in TERMINAL:
                    self.finished_at = None
                    if new is queued:  # a task starts again: a settled round is over
                        self.settled = None
                add(name)
            elif isinstance(event, RunEvent):
                if event.kind in ("paused", "resumed"):
                    self.paused = event.kind == "paused"
                elif event.kind in ("watching", "watch-ended"):
                    self.watching = event.kind == "watching"
                    self.settled = None
                elif event.kind == "settled":
                    self.settled = event_counts(event.detail)
                elif event.kind in ("generation", "dag", "dag-error"):
                    self._run_news(event.kind, event.detail, event.time)
                    self.settled = None if event.kind == "generation" else self.settled
                elif event.kind == "finished":
                    self.finished_at = event.time
            else:
                live = {n: u for n, u in event.usage.items() if snapshots[n].state is running}
                changed.update(live.keys() ^ self.usage.keys())
                changed.update(n for n, u in live.items() if self.usage.get(n) != u)
                self.usage = live
        return changed
