"""The timeline as snapshots: full rows of a told run (waits, a retry, a failure, a task running), the same at
80x24, zoomed in and scrolled, with the critical path (`x`), with a forecast from history (the ETA in the header,
what is still to come drawn faint), and 500 tasks in dense rows. Clocks are frozen and the time zone is UTC (the title
says when the run started).

Update after an intended change with `pytest tests/ui/test_timeline_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

import time

import pytest
from frozen_runs import frozen_app
from pilot_helpers import until
from test_graph_snapshots import random_dag
from test_timeline import story_app, told
from timeline_story import ML_STORY, tell

from tuidag.model.state import TaskState
from tuidag.views.layout.style import Orientation, Zoom

S = TaskState


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def shown_with(app, *keys: str, select: str | None = None):
    async def run_before(pilot) -> None:
        await told(app, pilot)
        if select:
            app.select_task(select)
        await pilot.press("t", *keys)
        await until(pilot, lambda: app.timeline.region.height > 0, what="the timeline on screen")
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(160, 45), (80, 24)], ids=["160x45", "80x24"])
def test_full_rows_of_a_told_run(snap_compare, tmp_path, monkeypatch, size):
    app = story_app(tmp_path, monkeypatch)
    assert snap_compare(app, terminal_size=size, run_before=shown_with(app, select="tokenize"))


def test_zoomed_in_and_scrolled(snap_compare, tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    assert snap_compare(app, terminal_size=(160, 45), run_before=shown_with(app, "z", "z", "h", select="tokenize"))


def test_the_critical_path_highlighted_and_listed(snap_compare, tmp_path, monkeypatch):
    app = story_app(tmp_path, monkeypatch)
    shown = shown_with(app, "x", select="tokenize")

    async def run_before(pilot) -> None:
        await shown(pilot)
        await until(pilot, lambda: app.timeline.critical, what="the path worked out")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


def test_the_forecast_of_a_run_with_history(snap_compare, tmp_path, monkeypatch):
    from test_critical_path_and_eta import ML_EXPECTED

    story = {name: changes for name, changes in ML_STORY.items() if name != "train-small"}
    app = story_app(tmp_path, monkeypatch, story=story)

    async def run_before(pilot) -> None:
        await until(pilot, lambda: app.model.snapshots["train-baseline"].state is S.SUCCEEDED, what="told")
        app._expected_loaded(ML_EXPECTED)
        await until(pilot, lambda: app.timeline.forecast, what="the forecast worked out")
        await pilot.press("t")
        await until(pilot, lambda: app.timeline.region.height > 0, what="the timeline on screen")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)


def dense_story(names: list[str]) -> dict:
    """The first 300 tasks done (every 37th failed, every 11th retried once), the next 6 running, the rest pending."""
    story = {}
    for i, name in enumerate(names[:306]):
        start = i * 0.4
        run = start + i % 3
        end = run + 2 + i % 7
        if i >= 300:
            story[name] = [(start, S.QUEUED, 0), (run, S.RUNNING, 1)]
        elif i % 11 == 0:
            story[name] = [
                (start, S.QUEUED, 0),
                (run, S.RUNNING, 1),
                (end, S.RETRYING, 1),
                (end + 1, S.RUNNING, 2),
                (end + 3, S.SUCCEEDED, 2),
            ]
        else:
            outcome = S.FAILED if i % 37 == 5 else S.SUCCEEDED
            story[name] = [(start, S.QUEUED, 0), (run, S.RUNNING, 1), (end, outcome, 1)]
    return story


def test_500_tasks_in_dense_rows(snap_compare, tmp_path, monkeypatch):
    tasks = random_dag()
    app = frozen_app(tasks, tmp_path, monkeypatch, now=130.0, name="random500")
    app.canvas.zoom_choice, app.canvas.orientation_choice = Zoom.DOTS, Orientation.LR
    tell(app, dense_story(list(tasks)))
    last = list(tasks)[305]

    async def run_before(pilot) -> None:
        await until(pilot, lambda: app.model.snapshots[last].state is S.RUNNING, what="story applied")
        app.select_task(next(iter(tasks)))
        await pilot.press("t")
        await until(pilot, lambda: app.timeline.region.height > 0, what="the timeline on screen")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 45), run_before=run_before)
