"""Keys typed faster than the screen changes: a terminal delivers `t z` in one read, so the second key reaches the
app before anything the first one did was painted. Each test posts its keys at once, as the terminal driver does,
to a viewer on a run served over its control socket (what `tuidag run` opens)."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
from pilot_helpers import until
from textual import events

from dags import make_dag, served_run
from tuidag.control.remote import RemoteRun
from tuidag.ui.app import TuidagApp
from tuidag.ui.widgets.log.view import LogView
from tuidag.views.layout.style import Zoom


@pytest.fixture
def served(tmp_path):
    dag = make_dag(
        {
            "first": "echo first; sleep 60",
            "second": {"run": "true", "depends_on": ["first"]},
            "third": "echo third; sleep 60",
        },
        workdir=tmp_path,
        kill_grace=0.5,
    )
    with served_run(dag, tmp_path) as session:
        yield session


@asynccontextmanager
async def viewer(session):
    remote = RemoteRun.attach(session.run, session.store)
    app = TuidagApp(remote)
    try:
        async with app.run_test(headless=True, size=(160, 45)) as pilot:
            await until(pilot, lambda: app.graph is not None, what="the graph laid out")
            yield app, pilot
    finally:
        remote.close()


def type_at_once(app: TuidagApp, *keys: str) -> None:
    """The keys in the app's queue together, as the driver posts what one read of the terminal held."""
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))


async def test_Z_typed_right_after_t_zooms_the_timeline_not_the_graph_behind_it(served):
    async with viewer(served) as (app, pilot):
        type_at_once(app, "t", "Z")  # zoom out (a young run is shown whole, at the finest scale)
        await until(pilot, lambda: app.timeline.time_scale is not None, what="the timeline zoomed")
        assert app.timeline.active and app.focused is app.timeline
        assert app.graph.zoom is Zoom.FULL and app.canvas.zoom_choice is None  # the graph was not touched


async def test_keys_typed_right_after_L_act_on_the_list_and_after_L_again_on_the_graph(served):
    async with viewer(served) as (app, pilot):
        type_at_once(app, "L", "s")  # the list, sorted by its first column
        await until(pilot, lambda: app.table.active and app.table.sort_key is not None, what="the list sorted")
        assert app.canvas.zoom_choice is None
        type_at_once(app, "L", "z")  # the graph back, zoomed
        await until(pilot, lambda: app.graph.zoom is Zoom.COMPACT, what="the graph zoomed")
        assert not app.table.active and app.focused is app.canvas


async def test_keys_typed_right_after_escape_in_the_log_pane_reach_the_graph(served):
    async with viewer(served) as (app, pilot):
        await pilot.press("tab")
        await until(pilot, lambda: isinstance(app.focused, LogView), what="the log pane focused")
        type_at_once(app, "escape", "z")  # back to the graph, zoomed
        await until(pilot, lambda: app.graph.zoom is Zoom.COMPACT, what="the graph zoomed")
        assert app.focused is app.canvas
