"""Hypothesis strategies for the journal's tests: any task event the engine can hand the journal writer."""

from __future__ import annotations

from hypothesis import strategies as st

from tuidag.engine.events import TaskEvent, TaskSnapshot
from tuidag.model.state import TaskState

times = st.floats(min_value=0, max_value=4e9, allow_nan=False)
optional_time = st.none() | times
values = (
    st.none()
    | st.integers()
    | st.floats()
    | st.text()
    | st.lists(st.integers(), max_size=3)
    | st.tuples(st.integers())
    | st.dictionaries(st.integers(), st.text(), max_size=2)
    | st.builds(object)
)


@st.composite
def task_events(draw: st.DrawFn) -> TaskEvent:
    """A task event with every field drawn: a state move, its attempt, reason, exit code, times, process, value."""
    snap = TaskSnapshot(
        draw(st.text(min_size=1, max_size=20)),
        draw(st.sampled_from(TaskState)),
        attempt=draw(st.integers(0, 100)),
        reason=draw(st.none() | st.text(max_size=40)),
        exit_code=draw(st.none() | st.integers(-64, 255)),
        started_at=draw(optional_time),
        finished_at=draw(optional_time),
        pid=draw(st.none() | st.integers(1, 2**22)),
        create_time=draw(optional_time),
        reused=draw(st.booleans()),
        value=draw(values),
    )
    return TaskEvent(draw(st.integers(0, 10**9)), draw(times), draw(st.none() | st.sampled_from(TaskState)), snap)
