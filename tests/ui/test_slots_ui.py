"""Resource slots in the UI: a running tile shows the slots it holds, the header the slots in use per kind, a task
waiting only for slots says so on its tile, and the list's SLOTS column appears."""

from __future__ import annotations

from pilot_helpers import open_app, screen_text, until
from test_list_view import row_of, show_list, titles

from slowness import patience
from tuidag.launch import RunSession
from tuidag.model.loader import load_dag
from tuidag.model.resources import resolve

SLOTTED = f"""\
resources: {{gpu: 2, db: 1}}
tasks:
  hold:
    run: for i in $(seq {round(patience(30) / 0.01)}); do [ -e go ] && break; sleep 0.01; done
    resources: {{gpu: 2}}
  waiter:
    run: 'true'
    resources: {{gpu: 1}}
"""


async def test_tiles_header_and_list_show_slots(tmp_path):
    path = tmp_path / "dag.yaml"
    path.write_text(SLOTTED)
    session = RunSession.create(resolve(load_dag(path)), tmp_path / "state")
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: "gpu:0,1" in screen_text(app), what="the running tile's slots")
        await until(pilot, lambda: "waiting for gpu" in screen_text(app), what="the waiting tile's reason")
        await until(pilot, lambda: "gpu 2/2  db 0/1" in screen_text(app).splitlines()[1], what="slots in the header")
        await show_list(pilot, app)
        await until(pilot, lambda: "SLOTS" in titles(app), what="the slots column")
        assert "gpu:0,1" in row_of(app, "hold")
        (tmp_path / "go").touch()
        await until(pilot, lambda: app.model.finished, what="the run's end")
        assert app.model.snapshots["waiter"].slots == "gpu:0"
        await until(pilot, lambda: "gpu 0/2  db 0/1" in screen_text(app).splitlines()[1], what="slots given back")


async def test_narrow_header_drops_the_slots_before_the_counts(tmp_path):
    path = tmp_path / "dag.yaml"
    path.write_text(SLOTTED)
    session = RunSession.create(resolve(load_dag(path)), tmp_path / "state")
    async with open_app(session, size=(60, 24)) as (app, pilot):
        await until(pilot, lambda: app.model.snapshots["hold"].state.value == "RUNNING", what="hold running")
        header = app.header._second_line(60).plain
        assert "gpu 2/2" in header and "1 running" in header, header
        narrow = app.header._second_line(34).plain
        assert "gpu" not in narrow and "1 running" in narrow, narrow
        (tmp_path / "go").touch()
