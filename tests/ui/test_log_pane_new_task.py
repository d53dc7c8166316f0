"""The log pane of a task selected before its log exists shows the task's output as it is written.

The watcher's safety poll (which hid the defect: the first line came ~2 s late, when the poll caught it) is made an
hour long here, so only the file-system events and the pane's own reading of a newly appeared file can show lines.
"""

from __future__ import annotations

from functools import partial

from pilot_helpers import open_app, select, until

from tuidag.ui.widgets.log import following
from tuidag.views.log_watcher import LogWatcher


def gated_late_task(new_session, monkeypatch, gate: str, late: str):
    """A run whose task `late` (running `late`) starts once the file `gate` exists, with the watcher's safety poll an
    hour away."""
    monkeypatch.setattr(following, "LogWatcher", partial(LogWatcher, safety_interval=3600))
    return new_session(
        {"gate": f"while [ ! -f {gate} ]; do sleep 0.01; done", "late": {"run": late, "depends_on": ["gate"]}}
    )


def pane_rows(app) -> list[str]:
    pane = app.log_pane
    return [pane.render_line(y).text.rstrip() for y in range(pane.scrollable_content_region.height)]


async def test_a_selected_task_shows_its_output_as_it_starts_and_as_it_goes_on(new_session, tmp_path, monkeypatch):
    session = gated_late_task(
        new_session,
        monkeypatch,
        "go1",
        "echo first line; while [ ! -f go2 ]; do sleep 0.01; done; echo second line; exit 7",
    )
    async with open_app(session) as (app, pilot):
        await select(app, pilot, "late")
        log = session.run.log_path("late")
        assert app.log_pane.path == log and not log.exists()
        (tmp_path / "go1").touch()
        await until(pilot, lambda: "first line" in pane_rows(app), what="the first line on screen")
        (tmp_path / "go2").touch()
        await until(pilot, lambda: app.model.snapshots["late"].state.value == "FAILED", what="late's end")
        await until(pilot, lambda: "second line" in pane_rows(app), what="the last line on screen")
        body = [row for row in pane_rows(app) if row and not row.startswith("=== tuidag")]
        assert body[:2] == ["first line", "second line"]


def _deaf(watcher: LogWatcher, paths: list[str]) -> None:
    """A watch that is set up but never reports a change (an event lost, or one that comes too late)."""
    watcher._stop.wait()


async def test_the_first_lines_show_without_any_file_system_event(new_session, tmp_path, monkeypatch):
    """The lines a task writes as it starts, before the pane's watch on its new file can have been set up, are shown
    by the pane's own reading of the new file: here no event ever comes and the safety poll is an hour away, so the
    timing of the watcher's thread can't hide a pane that waits for events (it did: 2 s late)."""
    monkeypatch.setattr(LogWatcher, "_run", _deaf)
    session = gated_late_task(
        new_session, monkeypatch, "go", "echo first line; echo second line; while [ ! -f stop ]; do sleep 0.01; done"
    )
    async with open_app(session) as (app, pilot):
        await select(app, pilot, "late")
        assert not session.run.log_path("late").exists()
        (tmp_path / "go").touch()
        await until(pilot, lambda: "second line" in pane_rows(app), timeout=5, what="the first lines on screen")
        assert [row for row in pane_rows(app) if row and not row.startswith("=== tuidag")][:2] == [
            "first line",
            "second line",
        ]
        (tmp_path / "stop").touch()
