"""`x` (the critical path in the graph, the timeline and a side panel), the header's ETA from earlier runs, and a
running tile's progress against its expected duration. Real runs in one state dir (the second run learns from the
first), and the told story of the timeline tests with a clock the test sets."""

from __future__ import annotations

import pytest
from pilot_helpers import open_app, screen_text, until
from test_timeline import row_of, show_timeline, story_app, told
from timeline_story import ML_STORY

from tuidag.model.state import TaskState
from tuidag.store.journal import read_journal
from tuidag.ui.state_style import CRITICAL_COLOUR

S = TaskState
BRANCHES = {
    "a": "true",
    "slow": {"run": "sleep 0.4", "depends_on": ["a"]},
    "quick": {"run": "true", "depends_on": ["a"]},
    "end": {"run": "true", "depends_on": ["slow", "quick"]},
}


def panel_text(app) -> str:
    region = app.critical_panel.region
    lines = screen_text(app).splitlines()[region.y : region.bottom]
    return "\n".join(line[region.x : region.right] for line in lines)


async def test_x_on_a_finished_run_highlights_and_lists_the_chain_that_set_its_length(new_session):
    async with open_app(new_session(BRANCHES)) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await pilot.press("x")
        await until(pilot, lambda: app.canvas.critical, what="the path worked out")
        assert app.canvas.critical == {"a", "slow", "end"} and app._outlook.path == ["a", "slow", "end"]
        text = panel_text(app)
        assert "3 tasks" in text and "(ran)" in text
        lines = [line for line in text.splitlines() if "◆" in line]
        assert [line.split("◆")[1].split()[0] for line in lines] == ["a", "slow", "end"]
        assert "0.4s" in lines[1] or "0.5s" in lines[1]  # slow's own duration
        tile = app.canvas._render_box("slow")[0]
        assert any(seg.text.strip() == "slow" and seg.style.color.name == CRITICAL_COLOUR for seg in tile)
        await show_timeline(app, pilot)
        assert app.timeline.critical == {"a", "slow", "end"}
        await pilot.press("x")
        assert not app.canvas.critical and not app.timeline.critical and not app.critical_panel.display


async def test_the_panel_fits_its_rows_to_its_width_again_when_the_terminal_is_resized(new_session):
    """Each row is fitted to the panel's width (30% of the screen): a new width fits them again, durations kept at
    the right edge. (The first path was also often fitted before the just-mounted panel had a width.)"""
    async with open_app(new_session(BRANCHES)) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await pilot.press("x")
        await until(pilot, lambda: app.canvas.critical, what="the path worked out")
        for columns, lines in [(100, 40), (160, 45)]:
            await pilot.resize_terminal(columns, lines)
            width = max(26, min(44, columns * 3 // 10))  # app.tcss: 30%, 26 to 44 columns
            await until(pilot, lambda w=width: app.critical_panel.region.width == w, what="the panel's new width")
            await pilot.pause()
            rows = [line for line in panel_text(app).splitlines() if "◆" in line]
            assert len(rows) == 3
            right = app.critical_panel.content_region.right - app.critical_panel.region.x
            assert all(row[:right].rstrip().endswith("s") and len(row[:right].rstrip()) == right for row in rows), rows


async def test_x_on_a_live_run_follows_the_forecast(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        await pilot.press("x")
        await until(pilot, lambda: app.timeline.critical, what="the path worked out")
        # train-small failed: what is below it will not run; the run's end is train-large's, still running
        assert app._outlook.path == ["download", "prepare-data", "features", "train-large"]
        text = panel_text(app)
        assert "(forecast)" in text and "no history" in text
        assert "~" in next(line for line in text.splitlines() if "train-large" in line)  # not finished: a forecast
        await show_timeline(app, pilot)
        assert "train-large" in row_of(app, "train-large")
        assert "ETA" not in screen_text(app).splitlines()[0]  # the run never started: no durations were read


def took(session, task: str) -> float:
    """How long the task's (one) attempt ran, as its run's journal says: from its RUNNING to its SUCCEEDED record."""
    at = {
        rec["to"]: rec["t"]
        for rec in read_journal(session.run.journal)
        if rec.get("type") == "task" and rec.get("task") == task and rec.get("to") in ("RUNNING", "SUCCEEDED")
    }
    return at["SUCCEEDED"] - at["RUNNING"]


async def test_the_eta_says_no_history_then_learns_from_the_first_run(new_session, tmp_path):
    """The first run's task runs until the header said "no history": a 0.6 s task ended, under load, before the
    durations were read (in a thread) and the header first said anything, and a finished run forecasts nothing."""
    gate = tmp_path / "go"
    first = new_session({"work": f"while [ ! -e {gate} ]; do sleep 0.01; done"})
    async with open_app(first) as (app, pilot):
        await until(pilot, lambda: "ETA: no history" in screen_text(app).splitlines()[0], what="no history")
        gate.touch()
        await until(pilot, lambda: app.model.finished, what="the first run's end")
        # finished: nothing to forecast (the header repaints at most every HEADER_INTERVAL)
        await until(pilot, lambda: "ETA" not in screen_text(app).splitlines()[0], what="no ETA once finished")
    usual = took(first, "work")
    # The same task with another command, running until the test ends: no history of this definition, so its name's
    # is used (the first run's), and it runs past twice that.
    async with open_app(new_session({"work": "sleep 600"})) as (app, pilot):
        await until(pilot, lambda: app._expected is not None, what="the durations read")
        assert app._expected["work"] == pytest.approx(usual)
        await until(pilot, lambda: "ETA " in screen_text(app).splitlines()[0], what="an ETA")
        header = screen_text(app).splitlines()[0]
        assert "ETA: no history" not in header and "elapsed" in header
        await until(
            pilot,
            lambda: "long" in "".join(seg.text for seg in app.canvas._render_box("work")[1]),
            timeout=10 + 3 * usual,
            what="the tile says it runs long",
        )


async def test_a_running_tile_shows_its_progress_against_the_expected_duration(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)  # train-large has run 50 s
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        app.canvas.expected = {"train-large": 100.0}
        app.canvas.refresh_tasks(["train-large"])
        middle = "".join(seg.text for seg in app.canvas._render_box("train-large")[1])
        bar = middle.split("●")[1].split("50.0s")[0].strip()
        assert set(bar) == {"━", "─"} and abs(bar.count("━") - bar.count("─")) <= 1  # half way
        app.canvas.expected = {"train-large": 20.0}
        middle = "".join(seg.text for seg in app.canvas._render_box("train-large")[1])
        assert "long 2.5×" in middle  # within the tile's width
        assert "█" not in "".join(seg.text for seg in app.canvas._render_box("train-baseline")[1])


ML_EXPECTED = {
    "download": 20.0,
    "prepare-data": 25.0,
    "tokenize": 15.0,
    "features": 35.0,
    "train-small": 20.0,
    "train-large": 80.0,
    "train-baseline": 40.0,
    "evaluate": 30.0,
    "report": 10.0,
    "export": 10.0,
    "publish": 5.0,
    "notify": 1.0,
}


async def test_with_history_the_timeline_draws_what_is_still_to_come_and_the_header_an_eta(tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)  # train-small failed, so evaluate and below will not run
    async with app.run_test(size=(160, 45)) as pilot:
        await told(app, pilot)
        app._expected_loaded(ML_EXPECTED)  # as if read from earlier runs
        await until(pilot, lambda: app.timeline.forecast, what="the forecast worked out")
        # train-large started at 100 s and takes 80: 30 s left at 150 s
        assert "ETA 00:03:00 (in 30.0s)" in screen_text(app).splitlines()[0]
        await show_timeline(app, pilot)
        row = row_of(app, "train-large")
        assert row.rindex("█") + 1 == row.index("┄")  # from now on, the forecast
        assert row[row.rindex("┄") + 1 :].startswith(" 50.0s")  # and the duration so far after it
        assert "┄" not in row_of(app, "evaluate")  # below a failure: it will not run
        assert "┄" not in row_of(app, "train-baseline")  # done


async def test_a_pending_task_with_history_has_its_forecast_drawn(tmp_path, monkeypatch):
    story = {name: changes for name, changes in ML_STORY.items() if name != "train-small"}
    app = story_app(tmp_path, monkeypatch, story=story)  # train-small not started: nothing failed
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.model.snapshots["train-baseline"].state is S.SUCCEEDED, what="told")
        app._expected_loaded(ML_EXPECTED)
        await until(pilot, lambda: app.timeline.forecast, what="the forecast worked out")
        await show_timeline(app, pilot)
        assert "┄" in row_of(app, "evaluate") and "█" not in row_of(app, "evaluate")
        end = app.timeline.forecast["notify"][1] - app.model.started
        _, scale, cells = app.timeline.view()
        assert end <= scale * cells  # the fitted view reaches the forecast's end
