"""The timeline's geometry as text: the scale and the axis adapt from seconds to hours, each wait and attempt covers
the cells of its time (at least one), attempts win over waits, and the rows follow the filter."""

from __future__ import annotations

from tuidag.engine.events import TaskSnapshot
from tuidag.model.state import TaskState
from tuidag.model.timeline import Segment, SegmentKind
from tuidag.views import timeline_layout as tl

S = TaskState
RUN, WAIT = SegmentKind.RUNNING, SegmentKind.WAITING


def test_the_fitted_scale_is_the_finest_round_one_that_leaves_room():
    assert tl.fit_scale(9, 100) == 0.1  # 9 s in 90 cells
    assert tl.fit_scale(10, 100) == 0.15  # 10 s would fill the room of 0.1 s a cell
    assert tl.fit_scale(14.6, 80) == 0.3  # a 15 s run on 80 columns takes 49 of them, not a third
    assert tl.fit_scale(3 * 3600, 100) == 120.0
    assert tl.fit_scale(0, 100) == tl.SCALES[0]
    assert tl.fit_scale(10**9, 100) == tl.SCALES[-1]


def test_zoom_steps_walk_the_ladder_and_stop_at_its_ends():
    assert tl.scale_step(1.0, -1) == 0.75 and tl.scale_step(1.0, 1) == 1.5
    assert all(b / a <= 1.5 for a, b in zip(tl.SCALES, tl.SCALES[1:]))  # no rung wastes more than a third
    assert tl.scale_step(tl.SCALES[0], -1) == tl.SCALES[0]
    assert tl.scale_step(tl.SCALES[-1], 3) == tl.SCALES[-1]


def test_the_axis_reads_seconds_then_minutes_then_hours():
    assert [label for _, label in tl.ticks(0, 1.0, 80)] == ["0s", "10s", "20s", "30s", "40s", "50s", "1m", "1m10s"]
    assert [label for _, label in tl.ticks(0, 30.0, 80)][:4] == ["0s", "5m", "10m", "15m"]
    assert [label for _, label in tl.ticks(0, 900.0, 80)][:4] == ["0s", "3h", "6h", "9h"]
    assert [label for _, label in tl.ticks(0, 0.05, 40)] == ["0s", "0.5s", "1s", "1.5s"]
    # ticks at least MIN_TICK_GAP cells apart, on the cells of their times
    assert [x for x, _ in tl.ticks(0, 1.0, 40)] == [0, 10, 20, 30]


def test_ticks_of_a_view_that_starts_later_are_at_their_own_cells():
    assert tl.ticks(25, 1.0, 30) == [(5, "30s"), (15, "40s"), (25, "50s")]


def test_the_axis_line_puts_each_label_on_its_tick_and_drops_one_with_no_room():
    line = tl.axis_text(0, 1.0, 30)
    assert line == "╵0s       ╵10s      ╵20s      "
    assert len(tl.axis_text(0, 1.0, 7)) == 7
    assert tl.axis_text(3590, 1.0, 30) == "╵59m50s   ╵1h       ╵1h00m10s "


def test_labels_of_long_times():
    assert tl.tick_label(3610) == "1h00m10s" and tl.tick_label(90) == "1m30s"
    assert tl.tick_label(3600) == "1h" and tl.tick_label(5400) == "1h30m"
    assert tl.tick_label(86400 + 7200) == "1d02h" and tl.scale_label(0.05) == "50ms" and tl.scale_label(60) == "1m"


def test_a_row_shows_its_wait_and_each_attempt_where_they_happened():
    segs = [
        Segment("a", WAIT, 100.0, 102.0, 1),
        Segment("a", RUN, 102.0, 105.0, 1, S.RETRYING),
        Segment("a", WAIT, 105.0, 106.0, 2),
        Segment("a", RUN, 106.0, None, 2),
    ]
    paints = tl.row_paints(segs, S.RUNNING, left=100.0, scale=1.0, cells=12, now=109.0)
    text = "".join("." if p is None else "w" if p.kind is WAIT else p.state.value[0] for p in paints)
    assert text == "wwRRRwRRR..."  # RETRYING (the attempt that failed), then the live attempt as the task runs
    assert paints[3].state is S.RETRYING and paints[7].state is S.RUNNING


def test_a_short_attempt_takes_one_cell_and_wins_over_a_wait_in_it():
    segs = [Segment("a", WAIT, 0.0, 0.4, 1), Segment("a", RUN, 0.4, 0.41, 1, S.SUCCEEDED)]
    paints = tl.row_paints(segs, S.SUCCEEDED, left=0.0, scale=1.0, cells=3, now=5.0)
    assert paints == [tl.Paint(RUN, S.SUCCEEDED), None, None]


def test_segments_out_of_view_leave_the_row_empty_and_those_across_its_edges_are_cut():
    segs = [Segment("a", RUN, 0.0, 5.0, 1, S.SUCCEEDED), Segment("a", RUN, 8.0, 30.0, 2, S.FAILED)]
    paints = tl.row_paints(segs, S.FAILED, left=10.0, scale=1.0, cells=5, now=50.0)
    assert paints == [tl.Paint(RUN, S.FAILED)] * 5
    assert tl.row_paints(segs, S.FAILED, left=40.0, scale=1.0, cells=5, now=50.0) == [None] * 5


def test_runs_group_equal_cells():
    assert tl.runs([None, None, 1, 1, 2]) == [(0, 2, None), (2, 4, 1), (4, 5, 2)]
    assert tl.runs([]) == []


def test_rows_follow_the_filter_and_keep_the_selection():
    order = ["a", "b", "c", "d"]
    assert tl.rows_of(order, None, "b") == order
    assert tl.rows_of(order, {"a": True, "b": False, "c": True, "d": False}, "d") == ["a", "c", "d"]


def test_a_task_the_recorder_never_saw_is_drawn_from_its_snapshot():
    done = TaskSnapshot("a", S.SUCCEEDED, attempt=2, started_at=10.0, finished_at=12.0)
    assert tl.snapshot_segments(done) == [Segment("a", RUN, 10.0, 12.0, 2, S.SUCCEEDED)]
    assert tl.snapshot_segments(TaskSnapshot("b", S.RUNNING, attempt=1, started_at=10.0)) == [
        Segment("b", RUN, 10.0, None, 1, None)
    ]
    assert tl.snapshot_segments(TaskSnapshot("c", S.PENDING)) == []
    assert tl.snapshot_segments(done._replace(reused=True)) == []


def test_the_span_reaches_now_while_something_goes_on():
    segs = {"a": [Segment("a", RUN, 5.0, 9.0, 1, S.SUCCEEDED)], "b": [Segment("b", RUN, 9.0, None, 1)]}
    snaps = {"a": TaskSnapshot("a", S.SUCCEEDED), "b": TaskSnapshot("b", S.RUNNING)}
    assert tl.time_span(segs, snaps, 0.0, now=20.0) == 20.0
    segs["b"] = [Segment("b", RUN, 9.0, 11.0, 1, S.FAILED)]
    assert tl.time_span(segs, snaps, 0.0, now=20.0) == 11.0
    assert tl.time_span({}, {}, 3.0, now=20.0) == 3.0


def test_density_per_row_and_name_column():
    assert tl.Density.DENSE.per_row == 2 and tl.Density.FULL.per_row == 1
    assert tl.Density.DENSE.name_width(30, 100) == 0
    assert tl.Density.FULL.name_width(40, 160) == 28 and tl.Density.COMPACT.name_width(40, 160) == 14
    assert tl.Density.FULL.name_width(3, 160) == 4


def test_the_forecast_covers_what_is_still_to_come_from_now():
    assert tl.forecast_cells((10.0, 30.0), left=0.0, scale=1.0, cells=40, now=20.0) == (20, 30)  # running: the rest
    assert tl.forecast_cells((25.0, 27.5), left=0.0, scale=1.0, cells=40, now=20.0) == (25, 28)  # not started: all
    assert tl.forecast_cells((5.0, 15.0), left=0.0, scale=1.0, cells=40, now=20.0) is None  # in the past
    assert tl.forecast_cells((25.0, 25.0), left=0.0, scale=1.0, cells=40, now=20.0) is None  # no history
    assert tl.forecast_cells((50.0, 60.0), left=0.0, scale=1.0, cells=40, now=20.0) is None  # out of view
