"""The UI's outlook on a run: the critical path from what happened (finished) or from the forecast (live), the
header's ETA forms with and without history, and the path's rows with durations."""

from __future__ import annotations

from tuidag.engine.events import TaskSnapshot
from tuidag.model.forecast import ForecastShape
from tuidag.model.state import TaskState
from tuidag.model.timeline import Segment, SegmentKind
from tuidag.views.run_outlook import actual_spans, eta_forms, outlook, path_rows

S = TaskState
RUN = SegmentKind.RUNNING
#: a -> (slow | quick) -> end, and a lone task
DEPS = {"a": (), "slow": ("a",), "quick": ("a",), "end": ("slow", "quick"), "lone": ()}
SHAPE = ForecastShape(DEPS, tuple(DEPS), 4, {}, {})


def snap(name, state, start=None, end=None, **fields) -> TaskSnapshot:
    return TaskSnapshot(name, state, attempt=1 if start is not None else 0, started_at=start, finished_at=end, **fields)


def test_a_finished_runs_path_is_the_chain_that_set_its_length():
    snaps = {
        "a": snap("a", S.SUCCEEDED, 0, 1),
        "slow": snap("slow", S.SUCCEEDED, 1, 9),
        "quick": snap("quick", S.SUCCEEDED, 1, 2),
        "end": snap("end", S.SUCCEEDED, 9, 10),
        "lone": snap("lone", S.SUCCEEDED, 0, 3),
    }
    result = outlook(SHAPE, snaps, {}, now=50, expected={}, finished=True)
    assert result.path == ["a", "slow", "end"] and result.finished
    assert path_rows(result, snaps) == [("a", "1.0s", False), ("slow", "8.0s", False), ("end", "1.0s", False)]
    assert eta_forms(result, 50, True) == []  # finished: no ETA


def test_a_live_runs_path_goes_through_the_remaining_work_by_expected_durations():
    snaps = {
        "a": snap("a", S.SUCCEEDED, 0, 1),
        "slow": snap("slow", S.RUNNING, 1),
        "quick": snap("quick", S.PENDING),
        "end": snap("end", S.PENDING),
        "lone": snap("lone", S.SUCCEEDED, 0, 0.5),
    }
    expected = {"slow": 4.0, "quick": 10.0, "end": 2.0}
    result = outlook(SHAPE, snaps, {}, now=2, expected=expected, finished=False)
    assert result.path == ["a", "quick", "end"]  # quick has not started: it ends at 12, slow at 5
    assert result.forecast.end == 14
    assert eta_forms(result, 2, True)[1] == "ETA 12.0s" and "(in 12.0s)" in eta_forms(result, 2, True)[0]
    assert eta_forms(result, 10, True)[1] == "ETA 4.0s"  # the header counts down between forecasts
    assert eta_forms(result, 15, True) == ["ETA any moment"]
    rows = path_rows(result, snaps)
    assert rows[0] == ("a", "1.0s", False) and rows[1] == ("quick", "10.0s", True)


def test_a_paused_run_has_no_eta_only_the_work_left_once_resumed():
    """Paused, nothing new starts: a time of day would move on by itself (it did, a second a second); the work left
    is the forecast's end less the moment it was worked out, and stays put as the clock goes on."""
    snaps = {
        "a": snap("a", S.SUCCEEDED, 0, 1),
        "slow": snap("slow", S.RUNNING, 1),
        "quick": snap("quick", S.PENDING),
        "end": snap("end", S.PENDING),
        "lone": snap("lone", S.SUCCEEDED, 0, 0.5),
    }
    result = outlook(SHAPE, snaps, {}, now=2, expected={"slow": 4.0, "quick": 10.0, "end": 2.0}, finished=False)
    assert eta_forms(result, 2, True, paused=True) == ["ETA: paused (12.0s of work left)", "ETA: paused"]
    assert eta_forms(result, 30, True, paused=True) == ["ETA: paused (12.0s of work left)", "ETA: paused"]
    assert eta_forms(result, 2, False, paused=True) == ["ETA: paused"]  # no history: no work to tell
    unknown = outlook(SHAPE, snaps, {}, now=2, expected={}, finished=False)
    assert eta_forms(unknown, 2, True, paused=True) == ["ETA: paused"]
    assert eta_forms(result, 2, True)[0].startswith("ETA ") and "(in 12.0s)" in eta_forms(result, 2, True)[0]


def test_without_history_the_eta_says_so():
    snaps = {name: snap(name, S.PENDING) for name in DEPS}
    result = outlook(SHAPE, snaps, {}, now=0, expected={}, finished=False)
    assert eta_forms(result, 0, False) == eta_forms(None, 0, False) == ["ETA: no history"]
    assert eta_forms(result, 0, None) == []  # the store not read yet
    partly = outlook(SHAPE, snaps, {}, now=0, expected={"a": 1.0}, finished=False)
    assert eta_forms(partly, 0, True) == ["ETA unknown: no history for 4 tasks", "ETA: no history (4)"]
    assert eta_forms(None, 0, True) == []


def test_spans_come_from_the_segments_else_the_snapshots_and_reused_results_have_none():
    segs = {"a": [Segment("a", RUN, 1.0, 3.0, 1, S.RETRYING), Segment("a", RUN, 4.0, None, 2)]}
    snaps = {
        "a": snap("a", S.RUNNING, 1),
        "slow": snap("slow", S.SUCCEEDED, 2, 5),
        "quick": snap("quick", S.SUCCEEDED, reused=True),
        "end": snap("end", S.PENDING),
    }
    assert actual_spans(snaps, segs, now=6.0) == {"a": (1.0, 6.0), "slow": (2, 5)}
