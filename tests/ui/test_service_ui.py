"""A service task in the UI: READY once its check passed (its own glyph on its tile and a count in the header) while
its dependent runs, and once stopped at the end it is how the run is meant to end: the header says it succeeded."""

from __future__ import annotations

from pilot_helpers import open_app, ui_states, until

from tuidag.model.service import ReadyCheck, ServiceSpec
from tuidag.model.state import TaskState
from tuidag.ui.state_style import LOOKS


async def test_a_ready_service_shows_as_ready_and_its_stop_reads_as_success(new_session, tmp_path):
    session = new_session(
        {
            "db": {"run": "echo up; exec sleep 60", "service": ServiceSpec(ReadyCheck("log", "^up$", interval=0.05))},
            "app": {"run": "while [ ! -f done ]; do sleep 0.02; done", "depends_on": ["db"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: ui_states(app) == {"db": "READY", "app": "RUNNING"}, what="db ready, app running")
        await pilot.pause()
        tile = "".join(strip.text for strip in app.canvas._lines_of("db"))
        assert LOOKS[TaskState.READY].glyph in tile and LOOKS[TaskState.READY].word in tile, tile
        counts = str(app.header.render())
        assert "1 ready" in counts, counts
        (tmp_path / "done").touch()
        await until(pilot, lambda: app.model.finished, timeout=20, what="the run ended")
        status = app.header._statuses()[0].plain
        assert status.startswith("✔ finished: 1 succeeded, 1 service stopped"), status
    assert session.exit_code(session.finish()) == 0
