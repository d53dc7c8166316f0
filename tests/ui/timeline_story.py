"""A run told as transitions at known times, for the timeline's Pilot and snapshot tests: waits, a retry, a failure,
a task still running and tasks not started, on the 12-task ML DAG of the graph snapshots (or any DAG by name)."""

from __future__ import annotations

from frozen_runs import T0

from tuidag.engine.events import TaskEvent, TaskSnapshot
from tuidag.model.state import TaskState

S = TaskState
#: task -> [(seconds after the start, new state, attempt)], in order
ML_STORY = {
    "download": [(0.0, S.QUEUED, 0), (0.5, S.RUNNING, 1), (20.0, S.SUCCEEDED, 1)],
    "prepare-data": [(20.0, S.QUEUED, 1), (20.0, S.RUNNING, 1), (45.0, S.SUCCEEDED, 1)],
    "tokenize": [
        (45.0, S.QUEUED, 0),
        (48.0, S.RUNNING, 1),
        (60.0, S.RETRYING, 1),
        (65.0, S.RUNNING, 2),
        (80.0, S.SUCCEEDED, 2),
    ],
    "features": [(45.0, S.QUEUED, 0), (55.0, S.RUNNING, 1), (90.0, S.SUCCEEDED, 1)],
    "train-small": [(90.0, S.QUEUED, 0), (92.0, S.RUNNING, 1), (110.0, S.FAILED, 1)],
    "train-large": [(90.0, S.QUEUED, 0), (100.0, S.RUNNING, 1)],
    "train-baseline": [(90.0, S.QUEUED, 0), (90.0, S.RUNNING, 1), (130.0, S.SUCCEEDED, 1)],
}
NOW = 150.0


def tell(app, story: dict[str, list[tuple[float, TaskState, int]]]) -> int:
    """Feed `story`'s transitions to the app in time order, with snapshots as the engine makes them; returns how
    many events."""
    steps = sorted(
        (t, i, name, state, attempt) for name, changes in story.items() for i, (t, state, attempt) in enumerate(changes)
    )
    old = {name: S.PENDING for name in story}
    started: dict[str, float] = {}
    seq = 0
    for t, _, name, state, attempt in steps:
        if state is S.RUNNING and old[name] is not S.RETRYING:
            started[name] = T0 + t
        start = started.get(name)
        finished = T0 + t if state.terminal else None
        seq += 1
        snap = TaskSnapshot(
            name,
            state,
            attempt=attempt,
            started_at=start,
            finished_at=finished,
            changed_at=T0 + t,
            exit_code=(1 if state is S.FAILED else 0) if state.terminal else None,
        )
        app.engine_event(TaskEvent(seq, T0 + t, old[name], snap))
        old[name] = state
    return seq
