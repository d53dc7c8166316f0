"""The UI's outlook on a run: the critical path from what happened (finished) or from the forecast (live), the ETA's
wording with and without history, and a running task's progress against its expected duration."""
from __future__ import annotations

from tuidag.engine.events import TaskSnapshot
from tuidag.model.forecast import DagShape
from tuidag.model.state import TaskState
from tuidag.model.timeline import Segment, SegmentKind
from tuidag.views.run_outlook import attempt_start, eta_text, outlook, path_rows, progress

S = TaskState
RUN = SegmentKind.RUNNING
#: a -> (slow | quick) -> end, and a lone task
DEPS = {"a": (), "slow": ("a",), "quick": ("a",), "end": ("slow", "quick"), "lone": ()}
SHAPE = DagShape(DEPS, tuple(DEPS), 4, {}, {})


def snap(name, state, start=None, end=None, **fields) -> TaskSnapshot:
    return TaskSnapshot(name, state, attempt=1 if start is not None else 0, started_at=start, finished_at=end, **fields)


def test_a_finished_runs_path_is_the_chain_that_set_its_length():
    snaps = {"a": snap("a", S.SUCCEEDED, 0, 1), "slow": snap("slow", S.SUCCEEDED, 1, 9),
             "quick": snap("quick", S.SUCCEEDED, 1, 2), "end": snap("end", S.SUCCEEDED, 9, 10),
             "lone": snap("lone", S.SUCCEEDED, 0, 3)}
    result = outlook(SHAPE, snaps, {}, now=50, started=0, expected={}, finished=True)
    assert result.path == ["a", "slow", "end"] and result.end == 10 and result.finished
    assert path_rows(result, snaps) == [("a", "1.0s", False), ("slow", "8.0s", False), ("end", "1.0s", False)]
    assert eta_text(result, 50, True) is None  # finished: no ETA


def test_a_live_runs_path_goes_through_the_remaining_work_by_expected_durations():
    snaps = {"a": snap("a", S.SUCCEEDED, 0, 1), "slow": snap("slow", S.RUNNING, 1), "quick": snap("quick", S.PENDING),
             "end": snap("end", S.PENDING), "lone": snap("lone", S.SUCCEEDED, 0, 2)}
    expected = {"slow": 4.0, "quick": 10.0, "end": 2.0}
    result = outlook(SHAPE, snaps, {}, now=2, started=0, expected=expected, finished=False)
    assert result.path == ["a", "quick", "end"]  # quick has not started: it ends at 12, slow at 5
    assert result.end == 14 and eta_text(result, 2, True) == "ETA 12.0s"
    assert eta_text(result, 10, True) == "ETA 4.0s"  # the header counts down between forecasts
    assert eta_text(result, 15, True) == "ETA: any moment"
    rows = path_rows(result, snaps)
    assert rows[0] == ("a", "1.0s", False) and rows[1] == ("quick", "10.0s", True)


def test_the_running_attempt_counts_from_its_own_start_after_a_retry():
    segs = {"slow": [Segment("slow", RUN, 1.0, 3.0, 1, S.RETRYING), Segment("slow", RUN, 4.0, None, 2)]}
    running = snap("slow", S.RUNNING, 1)
    assert attempt_start(segs["slow"], running, 6.0) == 4.0
    assert attempt_start(None, running, 6.0) == 1.0
    snaps = {"a": snap("a", S.SUCCEEDED, 0, 1), "slow": running, "quick": snap("quick", S.SUCCEEDED, 1, 2),
             "end": snap("end", S.PENDING), "lone": snap("lone", S.SUCCEEDED, 0, 1)}
    result = outlook(SHAPE, snaps, segs, now=6, started=0, expected={"slow": 5.0, "end": 1.0}, finished=False)
    assert result.spans["slow"][1] == 9.0 and result.end == 10.0


def test_failed_tasks_block_what_is_below_them_and_unknown_durations_give_a_lower_bound():
    snaps = {"a": snap("a", S.SUCCEEDED, 0, 1), "slow": snap("slow", S.FAILED, 1, 2),
             "quick": snap("quick", S.RUNNING, 1), "end": snap("end", S.SKIPPED), "lone": snap("lone", S.PENDING)}
    result = outlook(SHAPE, snaps, {}, now=3, started=0, expected={"quick": 4.0}, finished=False)
    assert "end" not in result.spans  # skipped below a failure: it will not run
    assert result.unknown == ("lone",) and result.end is None
    assert eta_text(result, 3, True) == "ETA ≥ 2.0s"
    assert eta_text(result, 3, False) == "ETA: no history"
    assert eta_text(None, 3, True) is None


def test_progress_against_the_expected_duration_and_unusually_long():
    assert progress(5, 10) == (0.5, False)
    assert progress(15, 10) == (1.0, False)
    assert progress(21, 10) == (1.0, True)  # over twice the median
    assert progress(5, None) is None and progress(5, 0) is None


def test_results_reused_from_an_earlier_run_did_not_run_and_are_done_at_the_start():
    snaps = {"a": snap("a", S.SUCCEEDED, reused=True), "slow": snap("slow", S.RUNNING, 5),
             "quick": snap("quick", S.SUCCEEDED, 5, 6), "end": snap("end", S.PENDING), "lone": snap("lone", S.SUCCEEDED, 5, 6)}
    result = outlook(SHAPE, snaps, {}, now=7, started=5, expected={"slow": 4.0, "end": 1.0}, finished=False)
    assert result.spans["a"] == (5, 5) and result.end == 10.0
