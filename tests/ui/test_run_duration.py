"""A run's duration ends with its last task, however long the UI stays open on the finished run afterwards."""

from __future__ import annotations

import json
import time

from pilot_helpers import open_app, until

from tuidag.store.history import run_info


async def test_the_duration_does_not_include_the_time_the_finished_ui_stays_open(new_session):
    session = new_session({"a": "sleep 0.2", "b": {"run": "sleep 0.1", "depends_on": ["a"]}})
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        last_seen = app.model.elapsed()
        await pilot.pause(1.0)  # the user looks at the result for a while before quitting
        quit_at = time.time()
        await pilot.press("q")
    snapshots = session.scheduler.snapshot()
    last_end = max(s.finished_at for s in snapshots.values())
    summary = json.loads((session.run.path / "summary.json").read_text())
    assert summary["finished_at"] == last_end == session.finished_at
    assert summary["duration"] == last_end - session.started == session.duration
    assert session.duration >= 0.3  # two chained sleeps
    assert quit_at - session.started - session.duration >= 1.0  # not the second the app stayed open
    assert app.model.elapsed() == last_seen  # the header froze at the end, and agrees
    assert abs(last_seen - session.duration) < 0.5  # the engine's "finished" event follows the last task's end
    assert run_info(session.run).duration == summary["duration"]  # what `tuidag runs` shows
