"""The timeline (`t`): in the graph's place, one row per task in the graph's order, waits and attempts as bars on one
time axis that zooms and scrolls, the selection and the log pane shared with the graph.

Most tests feed a told story (tests/ui/timeline_story.py) to an app whose run never starts, with a clock the test
moves; one runs a real DAG started before the app, as `tuidag run` does, for the journal seeding.
"""

from __future__ import annotations

import math
import time

from frozen_runs import T0, frozen_app
from pilot_helpers import open_app, pin_style, screen_text, until
from test_graph_snapshots import ML
from timeline_story import ML_STORY, NOW, tell

from slowness import patience
from tuidag.model.state import TaskState
from tuidag.model.timeline import SegmentKind
from tuidag.ui.widgets.graph.tiles import SELECTED_BG
from tuidag.views import timeline_layout as tl
from tuidag.views.layout.style import Orientation, Zoom

S = TaskState


def story_app(tmp_path, monkeypatch, now: list[float] | None = None, story: dict | None = None):
    """The ML DAG told up to NOW (or the time in `now[0]`, which the test may move on), its graph in full tiles
    (full timeline rows); `story` instead of ML_STORY."""
    now = now if now is not None else [NOW]
    app = frozen_app(ML, tmp_path, monkeypatch, now=NOW, name="ml")
    app.canvas.zoom_choice, app.canvas.orientation_choice = Zoom.FULL, Orientation.LR
    app.model.clock = lambda: T0 + now[0]
    app.events_told = tell(app, ML_STORY if story is None else story)
    return app


async def told(app, pilot) -> None:
    await until(pilot, lambda: app.model.snapshots["train-baseline"].state is S.SUCCEEDED, what="story applied")
    await pilot.pause()


async def show_timeline(app, pilot) -> None:
    await pilot.press("t")
    await until(pilot, lambda: app.timeline.region.height > 0, what="the timeline on screen")
    await pilot.pause()


def timeline_lines(app) -> list[str]:
    """The timeline's lines on the screen, inside its border: the axis first, then the rows in view."""
    region = app.timeline.region
    lines = screen_text(app).splitlines()[region.y + 1 : region.bottom - 1]
    return [line[region.x + 1 : region.right - 1] for line in lines]


def row_of(app, name: str) -> str:
    return next(line for line in timeline_lines(app)[1:] if line[2:].split()[:1] == [name])


def bars(row: str, glyph: str) -> int:
    """How many separate runs of `glyph` a row has."""
    return sum(1 for start, end, ch in tl.runs(list(row)) if ch == glyph)


def lit(app, name: str) -> bool:
    strip = app.timeline.render_line(1 + app.timeline.rows.index(name) - round(app.timeline.scroll_y))
    return all(seg.style.bgcolor and seg.style.bgcolor.name == SELECTED_BG for seg in strip)


async def test_t_swaps_the_graph_for_the_timeline_and_back_and_the_selection_and_log_follow(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        app.select_task("tokenize")
        await show_timeline(app, pilot)
        assert not app.canvas.display and app.focused is app.timeline
        assert app.timeline.rows == app.reading_order  # the graph's order, every task
        names = [line[2:].split()[0] for line in timeline_lines(app)[1:] if line.strip()]
        assert names == app.reading_order
        assert app.timeline.selected == "tokenize" and lit(app, "tokenize")
        assert "ml · 12 tasks · timeline from" in str(app.timeline.border_title)
        following = app.reading_order[app.reading_order.index("tokenize") + 1]
        await pilot.press("j")
        assert app.selected_task == app.timeline.selected == app.canvas.selected == following
        await until(pilot, lambda: app.log_pane.path == app.source.run.log_path(following), what="its log")
        await pilot.press("k", "tab")
        assert app.focused is app.log_pane and app.selected_task == "tokenize"
        await pilot.press("escape")  # back to the timeline, not to the hidden graph
        assert app.focused is app.timeline
        await pilot.press("t")
        assert app.canvas.display and not app.timeline.display and app.focused is app.canvas
        assert app.canvas.selected == "tokenize"
        await pilot.press("L", "t")  # from the list too: the timeline takes its place
        assert app.timeline.display and not app.table.display and not app.canvas.display
        await pilot.press("L")  # and the list takes the timeline's
        assert app.table.display and not app.timeline.display


async def test_each_attempt_is_its_own_bar_waits_are_shaded_and_a_running_bar_grows(tmp_path, monkeypatch):
    now = [NOW]
    app = story_app(tmp_path, monkeypatch, now)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        await show_timeline(app, pilot)
        tokenize = row_of(app, "tokenize")
        assert bars(tokenize, "█") == 2 and bars(tokenize, "░") == 2  # queued, attempt 1, retry delay, attempt 2
        assert tokenize.index("░") < tokenize.index("█")
        assert bars(row_of(app, "features"), "░") == 1  # waited 10 s for a slot
        assert "█" not in row_of(app, "evaluate")  # not started: no bar
        assert "40.0s" in row_of(app, "train-baseline")  # a full row says how long it took
        growing = row_of(app, "train-large").count("█")
        assert "50.0s" in row_of(app, "train-large")
        now[0] = NOW + 20  # a second tick later the bar and its duration have grown
        await until(pilot, lambda: row_of(app, "train-large").count("█") > growing, what="the bar grown")
        assert "1m10s" in row_of(app, "train-large")
        axis = timeline_lines(app)[0]
        assert "╵0s" in axis and "╵1m" in axis  # minutes on a run of minutes


async def test_z_Z_zoom_in_time_h_l_scroll_it_and_0_fits_the_whole_run_again(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        await show_timeline(app, pilot)
        offset, fitted, cells = app.timeline.view()
        assert offset == 0 and fitted * cells * tl.FIT_ROOM >= NOW  # the whole run in view
        await pilot.press("z", "z")
        offset, scale, _ = app.timeline.view()
        assert scale == tl.scale_step(fitted, -2) and offset > 0  # about the middle of the view
        ticks = [label for _, label in tl.ticks(offset, scale, cells)]
        assert all(label in timeline_lines(app)[0] for label in ticks[:-1])
        await pilot.press("l")
        assert app.timeline.view()[0] > offset
        await pilot.press(*"hhhhhhhhhh")
        assert app.timeline.view()[0] == 0  # not before the run's start
        await pilot.press("Z", "Z", "Z")
        assert app.timeline.view()[1] == tl.scale_step(fitted, 1)
        await pilot.press("0")
        assert app.timeline.view() == (0.0, fitted, cells)
        await pilot.press("t", "z")  # in the graph, z zooms the graph again
        assert app.graph.zoom is not None and app.timeline.time_scale is None


async def test_the_state_filter_lists_only_its_tasks_and_keeps_the_selection_listed(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        app.select_task("download")
        await show_timeline(app, pilot)
        await pilot.press("F")  # failed
        assert app.timeline.rows == [name for name in app.reading_order if name in ("download", "train-small")]
        assert "2 of 12 tasks" not in str(app.timeline.border_title)
        assert "1 of 12 tasks (filter: failed)" in str(app.timeline.border_title)
        await pilot.press("j")
        assert app.selected_task == "train-small"
        await pilot.press("F", "F", "F")  # all again
        assert app.timeline.rows == app.reading_order


async def test_rows_follow_the_graphs_zoom_dots_make_dense_rows_of_two_tasks(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        await pin_style(app, pilot, Zoom.DOTS)
        await show_timeline(app, pilot)
        assert app.timeline.density is tl.Density.DENSE
        assert app.timeline.virtual_size.height == 1 + math.ceil(12 / 2)
        lines = timeline_lines(app)
        rows = lines[1:]
        assert any("▀" in line or "▄" in line for line in rows) and not any("█" in line for line in rows)
        first, second = app.reading_order[:2]
        app.select_task(first)
        await pilot.press("j")
        assert app.selected_task == second and timeline_lines(app)[1].startswith("▄")  # the lower half, marked
        await pilot.press("t")
        await pin_style(app, pilot, Zoom.COMPACT)
        await show_timeline(app, pilot)
        assert app.timeline.density is tl.Density.COMPACT and "40.0s" not in row_of(app, "train-baseline")


async def test_a_click_selects_a_row(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        await show_timeline(app, pilot)
        third = app.timeline.rows[2]
        await pilot.click(app.timeline, offset=(5, 1 + 1 + 2))  # border, axis, third row
        assert app.selected_task == third


async def test_the_timeline_at_80x24_shows_the_axis_rows_and_its_keys(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(80, 24)) as pilot:
        await told(app, pilot)
        await show_timeline(app, pilot)
        lines = timeline_lines(app)
        assert len(lines) >= 6 and "╵0s" in lines[0]
        assert all(len(line) == app.timeline.region.width - 2 for line in lines)
        assert sum("█" in line for line in lines[1:]) >= 3
        keys = [key for _, rows in app.key_help() for key, _ in rows]
        assert {"z", "Z", "0", "t", "T"} <= set(keys)


async def test_the_timeline_of_a_run_started_before_the_app_has_each_wait_and_attempt_once(new_session):
    """The run starts before the app subscribes (as `tuidag run` does): what happened before comes from the
    journal, what happens after from the events, and nothing is recorded twice."""
    session = new_session({"first": "true", "second": {"run": "sleep 0.3", "depends_on": ["first"]}})
    session.scheduler.start()
    deadline = time.monotonic() + patience(10)
    while session.scheduler.snapshot()["first"].state is not S.SUCCEEDED:
        assert time.monotonic() < deadline, "first never finished"
        time.sleep(0.01)
    async with open_app(session) as (app, pilot):
        segments = app.model.timeline.segments
        assert [s.kind for s in segments["first"]] == [SegmentKind.WAITING, SegmentKind.RUNNING]
        await until(pilot, lambda: app.model.finished, what="the run's end")
        for name in ("first", "second"):
            runs = [s for s in segments[name] if s.kind is SegmentKind.RUNNING]
            assert len(runs) == 1 and runs[0].outcome is S.SUCCEEDED and runs[0].end is not None, segments[name]
        await show_timeline(app, pilot)
        assert bars(row_of(app, "second"), "█") == 1
