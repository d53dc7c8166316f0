"""Why a finished run took as long as it did: its critical path, and the tasks that, made faster, would have
shortened it most. Shared by the headless summary and the report, so both say the same.

The path comes from the actual spans. The speedups re-simulate the run from its start with each task's actual
duration (model/forecast.py), because "what if this task had been faster" is a question about the schedule, not
about the path alone: a task on the path whose saving the `max_parallel` limit or a resource slot would swallow
saves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from ..model.durations import format_duration
from ..model.forecast import ForecastShape, Span, critical_path, speedups

SHOWN_AT_ENDS = 4
"""Tasks of a long critical path shown at its start and at its end in the one-line form; the middle is counted."""


MIN_SAVED = 0.05
MIN_SHARE = 0.005
"""Savings worth naming: at least MIN_SAVED seconds and MIN_SHARE of the run (tenths of a percent are noise, and
skipping the tasks that cannot save that much keeps a run of thousands of quick tasks from paying for the question)."""


class Insight(NamedTuple):
    path: list[str]  # the critical path, first task first
    spans: Mapping[str, Span]  # the actual spans it was computed from
    faster: list[tuple[str, float]]  # (task, seconds the run would have been shorter with it halved), most first


def run_insight(
    shape: ForecastShape, spans: Mapping[str, Span], started: float, reused: AbstractSet[str] = frozenset()
) -> Insight:
    """`spans`: each task that ran, from its first attempt's start to its last one's end (`forecast.task_spans`, or
    the snapshots' started_at/finished_at). Tasks that never ran (skipped, cancelled while waiting) are blocked in
    the re-simulation; results reused from an earlier run are done at the start."""
    ran = {name: span for name, span in spans.items() if name not in reused}
    done = {name: (started, started) for name in reused}
    never = {name for name in shape.order if name not in ran and name not in done}
    length = max((end for _, end in ran.values()), default=started) - started
    faster = speedups(
        **shape._asdict(),
        now=started,
        finished=done,
        running={},
        expected={name: end - start for name, (start, end) in ran.items()},
        blocked=never,
        min_saved=max(MIN_SAVED, MIN_SHARE * length),
    )
    return Insight(critical_path(shape.dag_deps, ran), ran, faster)


def path_text(insight: Insight, ends: int = SHOWN_AT_ENDS) -> str:
    """`a 2.0s -> b 8.1s -> d 2.2s`; a longer path keeps `ends` tasks at each end and counts the middle."""

    def step(name: str) -> str:
        start, end = insight.spans[name]
        return f"{name} {format_duration(end - start)}"

    path = insight.path
    if len(path) <= 2 * ends + 1:
        return " -> ".join(map(step, path))
    middle = path[ends:-ends]
    total = sum(insight.spans[n][1] - insight.spans[n][0] for n in middle)
    return " -> ".join(
        [*map(step, path[:ends]), f"({len(middle):,} more, {format_duration(total)})", *map(step, path[-ends:])]
    )


def summary_lines(insight: Insight) -> str:
    """The lines the headless summary ends with (the names are the run's text: the caller neutralises them)."""
    if not insight.path:
        return ""
    first, last = insight.spans[insight.path[0]][0], insight.spans[insight.path[-1]][1]
    text = (
        f"critical path ({len(insight.path):,} task{'s' if len(insight.path) != 1 else ''}, "
        f"{format_duration(last - first)}): {path_text(insight)}\n"
    )
    if insight.faster:
        text += (
            "halved, these would shorten the run most: "
            + ", ".join(f"{name} (-{format_duration(saved)})" for name, saved in insight.faster)
            + "\n"
        )
    else:
        text += "no single task made twice as fast would shorten the run noticeably\n"
    return text
