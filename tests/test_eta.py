"""A live run's forecast from engine snapshots, the progress of a running attempt, and the ETA's words."""

from __future__ import annotations

from tuidag.engine.events import TaskSnapshot
from tuidag.model.forecast import Forecast, ForecastShape
from tuidag.model.state import TaskState as S
from tuidag.views.eta import Progress, eta_text, live_forecast, progress

SHAPE = ForecastShape({"b": ["a"], "c": ["b"], "e": ["d"], "g": ["f"]}, "abcdefg", 4, {}, {})
EXPECTED = {name: 10.0 for name in "abcdefg"}


def snap(name, state, attempt=0, started=None, finished=None, changed=0.0):
    return TaskSnapshot(name, state, attempt=attempt, started_at=started, finished_at=finished, changed_at=changed)


def test_each_state_becomes_the_right_input():
    snaps = {
        "a": snap("a", S.SUCCEEDED, 1, 0, 10),
        "b": snap("b", S.RUNNING, 1, 10),
        "c": snap("c", S.PENDING),
        "d": snap("d", S.FAILED, 1, 0, 4),
        "e": snap("e", S.PENDING),  # e never runs: d failed
        "f": snap("f", S.RUNNING, 2, 0, changed=12),  # a retry: its attempt started at 12, not 0
        "g": snap("g", S.PENDING),
    }
    f = live_forecast(SHAPE, snaps, EXPECTED, now=15)
    assert f.spans["b"] == (10, 20) and f.spans["c"] == (20, 30) and f.spans["d"] == (0, 4)
    assert "e" not in f.spans and f.spans["f"] == (12, 22) and f.spans["g"] == (22, 32) and f.end == 32


def test_progress_bars_and_overruns():
    assert progress(5, 10) == Progress(0.5, False)
    assert progress(25, 10) == Progress(1.0, True) and progress(20, 10).overrun is False
    assert progress(5, None) is None


def test_eta_words():
    assert eta_text(Forecast(None, {}, ("x", "y"), 0.0), now=0) == "ETA unknown: no history for 2 tasks"
    assert eta_text(Forecast(5.0, {}, (), 5.0), now=9) == "ETA any moment"
    assert eta_text(Forecast(200.0, {}, (), 200.0), now=0).endswith("(in 3m20s)")


def test_tasks_outside_the_run_s_targets_are_neither_waited_for_nor_need_a_history():
    """A run of target b (and its dependency a): c, d and the rest are UNTARGETED and have no history. The ETA is
    b's end; counting them would put it at the end of tasks that never start, or say "no history" for ever."""
    snaps = {
        "a": snap("a", S.SUCCEEDED, 1, 0, 10),
        "b": snap("b", S.RUNNING, 1, 10),
        **{name: snap(name, S.UNTARGETED) for name in "cdefg"},
    }
    f = live_forecast(SHAPE, snaps, {"a": 10.0, "b": 10.0}, now=15)
    assert (f.end, f.unknown) == (20, ()) and set(f.spans) == {"a", "b"}


def test_a_ready_service_is_done_for_the_forecast_and_needs_no_history():
    """A service runs until the run ends: counted as running, it would hold the ETA at its own (unknown) end, and
    with no history (a service never succeeds) the header would say "no history" for the whole run."""
    snaps = {
        "a": snap("a", S.READY, 1, 0, changed=2),
        "b": snap("b", S.RUNNING, 1, 2),
        "c": snap("c", S.PENDING),
        **{name: snap(name, S.UNTARGETED) for name in "defg"},
    }
    f = live_forecast(SHAPE, snaps, {"b": 10.0, "c": 10.0}, now=5)
    assert (f.end, f.unknown) == (22, ()) and f.spans["a"] == (0, 2)
