"""When will the run end, what sets its length, and which tasks are worth making faster.

`simulate` plays the rest of a run forward with expected durations, by the scheduler's own rules (not a sum of
durations, nor a longest path that ignores `max_parallel` and resource slots):
- a task is ready once all its dependencies are done; ready tasks are taken first come, first served;
- a task asking for resource slots waits for them in order, and a waiter that cannot have its slots reserves the
  kinds it asks for, so no later waiter takes them (admission.py, the rule the engine follows too); it holds its
  slots from then on, even while it waits for one of the `max_parallel` threads (engine/scheduler.py);
- at most `max_parallel` tasks run at once.
A running task ends at `max(now, start + expected)`: one running longer than expected ends "any moment now".

`critical_path` walks back from the task that ends last through the dependency each task waited for; `speedups`
re-simulates with one task at a time made faster. Pure functions of plain mappings, for the live view (forecast
spans), the headless summary and the report (actual spans): no store, no engine, no textual.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from .admission import admit
from .spec import DagSpec
from .timeline import Segment, SegmentKind

Span = tuple[float, float]


class Forecast(NamedTuple):
    end: float | None  # when the last task ends; None when some remaining task has no expected duration
    spans: dict[str, Span]  # task -> (start, end): actual for finished tasks, predicted for the others
    unknown: tuple[str, ...]  # remaining tasks with no expected duration (in the DAG's order)
    earliest_end: float | None  # the end with unknown durations counted as zero: a lower bound (None: no tasks)


class ForecastShape(NamedTuple):
    """What the simulation needs of a DAG. Field names are `simulate`'s parameters: `simulate(**shape._asdict(),
    now=..., ...)`."""

    dag_deps: Mapping[str, Sequence[str]]
    order: Sequence[str]
    max_parallel: int
    capacities: Mapping[str, int]
    requests: Mapping[str, Mapping[str, int]]


def shape_of(dag: DagSpec, max_parallel: int | None = None) -> ForecastShape:
    """The shape of a DagSpec (a live run's, or `store.run_dag.dag_from_header`'s for a stored one)."""
    return ForecastShape(
        {name: tuple(task.depends_on) for name, task in dag.tasks.items()},
        tuple(dag.topological_order),
        max(1, max_parallel or dag.max_parallel),
        dict(dag.resources),
        {
            name: {kind: req.count for kind, req in task.resources.items()}
            for name, task in dag.tasks.items()
            if task.resources
        },
    )


def task_spans(segments: Mapping[str, Sequence[Segment]], now: float) -> dict[str, Span]:
    """Each task's time from its first attempt's start to its last attempt's end (retries and their delays
    included; waiting before the first attempt is not), from `TimelineRecorder.segments`. A running attempt ends
    at `now`. Tasks that never started have no span."""
    spans = {}
    for task, segs in segments.items():
        runs = [s for s in segs if s.kind is SegmentKind.RUNNING]
        if runs:
            end = runs[-1].end
            spans[task] = (runs[0].start, now if end is None else end)
    return spans


def simulate(
    dag_deps: Mapping[str, Sequence[str]],
    order: Sequence[str],
    *,
    now: float,
    finished: Mapping[str, Span],
    running: Mapping[str, float],
    expected: Mapping[str, float],
    max_parallel: int,
    capacities: Mapping[str, int] = {},
    requests: Mapping[str, Mapping[str, int]] = {},
    blocked: AbstractSet[str] = frozenset(),
) -> Forecast:
    """Play the remaining tasks of `order` (neither finished, running nor blocked, nor downstream of a blocked one:
    a failed task is both finished and blocked) forward from `now`. Tasks ready at `now` queue in the order their
    dependencies ended (then `order`); a retrying task belongs in neither `finished` nor `running`: it runs again
    for its whole expected duration.
    Unknown durations count as zero for the spans (a lower bound) and make `end` None."""
    return _Simulation(
        dag_deps, order, now, finished, running, expected, max_parallel, capacities, requests, blocked
    ).run()


class _Simulation:
    """One play of `simulate`: the clock is the end of the next running task (a heap of ends); at each end the
    task's threads and slots are freed, its children that have nothing left to wait for queue, and the queued
    tasks start as threads and slots allow."""

    def __init__(
        self,
        dag_deps: Mapping[str, Sequence[str]],
        order: Sequence[str],
        now: float,
        finished: Mapping[str, Span],
        running: Mapping[str, float],
        expected: Mapping[str, float],
        max_parallel: int,
        capacities: Mapping[str, int],
        requests: Mapping[str, Mapping[str, int]],
        blocked: AbstractSet[str],
    ) -> None:
        self.dag_deps, self.order, self.now, self.max_parallel = dag_deps, order, now, max_parallel
        self.finished, self.running, self.expected = finished, running, expected
        self.index = index = {name: i for i, name in enumerate(order)}
        self.children: dict[str, list[str]] = {name: [] for name in order}
        for name in order:
            for dep in dag_deps.get(name, ()):
                if dep in self.children:
                    self.children[dep].append(name)
        self.never = _downstream(blocked, self.children, finished, running)
        self.spans: dict[str, Span] = {name: (start, end) for name, (start, end) in finished.items() if name in index}
        self.unknown: list[str] = []
        self.free = free = {kind: max(0, int(count)) for kind, count in capacities.items()}
        # Kinds the DAG has, no more than it has (a tampered header must not make a task wait forever).
        self.want = {
            name: held
            for name, req in requests.items()
            if name in index
            if (
                held := {
                    kind: min(int(count), free[kind])
                    for kind, count in (req or {}).items()
                    if kind in free and count > 0 and free[kind] > 0
                }
            )
        }
        self.events: list[tuple[float, int, str]] = []  # (end, start order, task)
        self.seq = 0
        self.busy = 0  # threads taken
        self.missing: dict[str, int] = {}  # remaining task -> dependencies not done yet
        self.ready: deque[str] = deque()  # admitted to their slots (if any), waiting for a thread
        self.waiters: list[str] = []  # waiting for slots, in the order they started waiting

    def run(self) -> Forecast:
        self._place_running()
        for _, _, name in sorted(self._ready_now()):
            self._enqueue(name)
        self._start(self.now)
        events = self.events
        while events:
            t = events[0][0]
            while events and events[0][0] == t:
                self._end(heapq.heappop(events)[2])
            self._start(t)
        return self._forecast()

    def _duration(self, name: str) -> float:
        seconds = self.expected.get(name)
        if seconds is None:
            self.unknown.append(name)
            return 0.0
        return max(0.0, float(seconds))

    def _place_running(self) -> None:
        """The running tasks hold their threads and slots until they end."""
        index, running = self.index, self.running
        for name in sorted(running, key=lambda n: index.get(n, len(index))):
            if name not in index:
                continue
            start = running[name]
            end = max(self.now, start + self._duration(name))
            self.spans[name] = (start, end)
            for kind, count in self.want.get(name, _NO_SLOTS).items():
                self.free[kind] -= count
            self._push(end, name)
        self.busy = len(self.events)

    def _ready_now(self) -> list[tuple[float, int, str]]:
        """(when its last dependency ended, place in `order`, task) for each remaining task ready at `now`; the
        others count the dependencies they still wait for in `missing`."""
        index, finished = self.index, self.finished
        first = []
        for name in self.order:
            if name in self.spans or name in self.never:
                continue
            deps = [d for d in dict.fromkeys(self.dag_deps.get(name, ())) if d in index]
            waiting = sum(1 for d in deps if d not in finished)
            if waiting:
                self.missing[name] = waiting
            else:
                first.append((max((finished[d][1] for d in deps), default=float("-inf")), index[name], name))
        return first

    def _enqueue(self, name: str) -> None:
        if self.want.get(name, _NO_SLOTS):
            self.waiters.append(name)
            self._admit()
        else:
            self.ready.append(name)

    def _admit(self) -> None:
        """Slots to the waiters that may have them, by the scheduler's own rule (model/admission.py)."""
        want, waiters = self.want, self.waiters
        if not waiters:
            return
        admitted, blocked = admit(zip(waiters, map(want.__getitem__, waiters)), self.free, stop_early=True)
        if admitted:
            for name in admitted:
                for kind, count in want[name].items():
                    self.free[kind] -= count
            self.ready.extend(admitted)
            self.waiters = [*blocked, *waiters[len(admitted) + len(blocked) :]]

    def _start(self, t: float) -> None:
        """Start queued tasks at `t` while threads are free."""
        ready = self.ready
        while ready and self.busy < self.max_parallel:
            name = ready.popleft()
            end = t + self._duration(name)
            self.spans[name] = (t, end)
            self._push(end, name)
            self.busy += 1

    def _push(self, end: float, name: str) -> None:
        heapq.heappush(self.events, (end, self.seq, name))
        self.seq += 1

    def _end(self, name: str) -> None:
        """`name` ended: its thread and slots are free, and its children may be ready."""
        self.busy -= 1
        held = self.want.get(name, _NO_SLOTS)
        if held:
            for kind, count in held.items():
                self.free[kind] += count
            self._admit()
        missing = self.missing
        for child in self.children.get(name, ()):
            if child in missing:
                missing[child] -= 1
                if not missing[child]:
                    del missing[child]
                    self._enqueue(child)

    def _forecast(self) -> Forecast:
        spans, never, index = self.spans, self.never, self.index
        stuck = [name for name in self.order if name not in spans and name not in never]  # only with cyclic deps
        unknown = sorted(set(self.unknown) | set(stuck), key=index.__getitem__)
        last = max((end for _, end in spans.values()), default=None)
        if last is None and (self.running or self.finished):
            last = self.now
        return Forecast(None if unknown else last, spans, tuple(unknown), last)


_NO_SLOTS: Mapping[str, int] = {}


def _downstream(
    blocked: Iterable[str],
    children: Mapping[str, Sequence[str]],
    finished: Mapping[str, Span],
    running: Mapping[str, float],
) -> set[str]:
    """Every task below a blocked one that has not run, and the blocked ones that have not: none of them will. A
    blocked task may be finished (one that failed): it keeps its span, and what depends on it never runs."""
    never: set[str] = set()
    stack = list(blocked)
    while stack:
        name = stack.pop()
        if name in never:
            continue
        if name not in finished and name not in running:
            never.add(name)
        stack.extend(c for c in children.get(name, ()) if c not in finished and c not in running and c not in never)
    return never


def critical_path(
    dag_deps: Mapping[str, Sequence[str]], spans: Mapping[str, Span], tolerance: float = 0.25
) -> list[str]:
    """The chain that set the run's length, first task first: from the task that ends last, back through what each
    task waited for, to a task that started with the run. Actual spans give a finished run's path, `simulate`'s
    spans a live run's.

    What a task waited for: the dependency that ended last, when the task started then (within `tolerance`
    seconds: the scheduler's own delay, which a loaded machine stretches to tenths of a second). A task that
    started later waited for a thread (`max_parallel`) or for resource slots: then it waited for the task that
    ended last before it started (its end freed them), so a chain of tasks queued behind one GPU is on the path,
    though no edge links them. Ties go to the dependency listed first."""
    if not spans:
        return []
    by_end = sorted((end, name) for name, (_, end) in spans.items())
    ends = [end for end, _ in by_end]
    first = min(start for start, _ in spans.values())
    name = max(spans, key=lambda n: spans[n][1])
    path = [name]
    seen = {name}
    while True:
        start = spans[name][0]
        deps = [d for d in dag_deps.get(name, ()) if d in spans and d not in seen]
        ready = max((spans[d][1] for d in deps), default=first)
        after = None
        if start - ready > tolerance:  # held after it was ready: by whatever ended last before it started
            i = bisect_right(ends, start)
            while i > 0 and by_end[i - 1][1] in seen:
                i -= 1
            if i > 0 and by_end[i - 1][0] >= ready:
                after = by_end[i - 1][1]
        if after is None and deps:
            after = max(deps, key=lambda d: spans[d][1])
        if after is None:
            break
        path.append(after)
        seen.add(after)
        name = after
    path.reverse()
    return path


def speedups(
    dag_deps: Mapping[str, Sequence[str]],
    order: Sequence[str],
    *,
    now: float,
    finished: Mapping[str, Span],
    running: Mapping[str, float],
    expected: Mapping[str, float],
    max_parallel: int,
    capacities: Mapping[str, int] = {},
    requests: Mapping[str, Mapping[str, int]] = {},
    blocked: AbstractSet[str] = frozenset(),
    factor: float = 0.5,
    top: int = 3,
    candidates: int = 12,
    min_saved: float = 1e-9,
) -> list[tuple[str, float]]:
    """The `top` tasks that, made faster, would end the run soonest: (task, seconds saved), most first.

    Each candidate's expected duration is multiplied by `factor` (halved by default: a realistic "made faster",
    where zero would only measure its slack) and the rest of the run re-simulated, so a task whose saving is
    swallowed by `max_parallel` or slots saves nothing. Candidates are the not-yet-finished tasks on the forecast's
    critical path, the `candidates` longest of them (bounded work on a path of thousands). Savings under `min_saved`
    seconds are left out, and so, without simulating, are tasks whose cut is smaller than that (a task cannot save
    more than it loses; when no task's is, nothing is simulated at all); with unknown durations there is no forecast
    to improve, so the answer is empty. For a finished run, simulate it from its start: `now` = its start,
    `finished`/`running` empty, `expected` = the actual durations."""

    def play(expected: Mapping[str, float]) -> Forecast:
        return simulate(
            dag_deps,
            order,
            now=now,
            finished=finished,
            running=running,
            expected=expected,
            max_parallel=max_parallel,
            capacities=capacities,
            requests=requests,
            blocked=blocked,
        )

    if not any((cut or 0) * (1 - factor) >= min_saved for name, cut in expected.items() if name not in finished):
        return []  # no task could save enough: nothing to simulate (a run of 1,000 quick tasks saves ~10 ms)
    base = play(expected)
    if base.end is None:
        return []
    path = [
        name
        for name in critical_path(dag_deps, base.spans)
        if name not in finished and (expected.get(name) or 0) * (1 - factor) >= min_saved
    ]
    path.sort(key=lambda n: -expected[n])
    saved = []
    for name in path[:candidates]:
        faster = dict(expected)
        faster[name] = expected[name] * factor
        end = play(faster).end
        if end is not None and base.end - end >= min_saved:
            saved.append((name, base.end - end))
    saved.sort(key=lambda item: -item[1])
    return saved[:top]
