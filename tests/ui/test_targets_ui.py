"""A run of some targets in the terminal UI, served and viewed as `tuidag run FILE TASK` shows it: the tasks outside
the targets are there (the DAG's shape stays readable) but faint in the graph, the list and the timeline, and the
header counts the targets' tasks, not the whole DAG."""

from __future__ import annotations

from pilot_helpers import open_app, screen_text, select, ui_states, until
from rich.segment import Segment

from dags import DIAMOND, make_dag
from slowness import patience
from tuidag.launch import RunSession
from tuidag.model.state import TaskState
from tuidag.ui.widgets.graph.tiles import HIDDEN_COLOUR
from tuidag.ui.widgets.timeline_rows import GRID_COLOUR

S = TaskState


def colours(segments: list[Segment]) -> set[str]:
    """The colours of the segments that draw something (spaces aside)."""
    return {seg.style.color.name for seg in segments if seg.style and seg.style.color and seg.text.strip()}


def graph_colours(app, name: str) -> set[str]:
    return colours([seg for strip in app.canvas._render_tile(name) for seg in strip])


def row_colours(widget, name: str) -> set[str]:
    return colours(list(widget.render_line(1 + widget.rows.index(name) - round(widget.scroll_y))))


def session_of(tmp_path, targets: list[str]) -> RunSession:
    return RunSession.create(make_dag(DIAMOND, workdir=tmp_path, kill_grace=0.5), tmp_path / "state", targets=targets)


async def test_tasks_outside_the_targets_are_faint_everywhere_and_the_header_counts_the_targets(tmp_path):
    """DIAMOND is a -> b, c -> d beside e; the target b needs a, and c, d, e are not targets."""
    async with open_app(session_of(tmp_path, ["b"])) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        assert ui_states(app) == {
            "a": "SUCCEEDED",
            "b": "SUCCEEDED",
            "c": "UNTARGETED",
            "d": "UNTARGETED",
            "e": "UNTARGETED",
        }
        for name in "cde":
            assert graph_colours(app, name) == {HIDDEN_COLOUR}, name
        assert HIDDEN_COLOUR not in graph_colours(app, "b")
        header = "✔ finished: all 2 succeeded, 3 not targets"
        await until(pilot, lambda: header in screen_text(app), what="the header's verdict")
        screen = screen_text(app)
        assert "not a target" in screen.split(header, 1)[1]  # the faint tiles still say why they did not run
        assert " 2/2  ✔ 2 done  – 3 not targets" in screen
        await pilot.press("L")
        await until(pilot, lambda: app.table.region.height > 0, what="the list on screen")
        await pilot.pause()
        assert row_colours(app.table, "d") == {HIDDEN_COLOUR}
        assert HIDDEN_COLOUR not in row_colours(app.table, "a")
        await pilot.press("L", "t")
        await until(pilot, lambda: app.timeline.region.height > 0, what="the timeline on screen")
        await pilot.pause()
        assert row_colours(app.timeline, "e") - {GRID_COLOUR} == {HIDDEN_COLOUR}  # its grid marks aside
        assert HIDDEN_COLOUR not in row_colours(app.timeline, "a")


async def test_r_on_a_task_outside_the_targets_says_how_to_run_it_and_changes_nothing(tmp_path):
    async with open_app(session_of(tmp_path, ["a"])) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await select(app, pilot, "e")
        await pilot.press("r")
        notice = "e is not a target of this run: start a run with it as a target to run it"
        await until(pilot, lambda: any(n.message == notice for n in app._notifications), what="the notice")
        assert ui_states(app)["e"] == "UNTARGETED" and app.model.snapshots["e"].attempt == 0


async def test_r_in_the_post_mortem_of_a_run_of_targets_lists_what_stays_outside_it(tmp_path):
    """The resumed run `r` offers is of the same targets: the confirmation lists the tasks outside them as such,
    not as tasks that "run again"."""
    from tuidag.control.remote import RemoteRun
    from tuidag.model.loader import load_dag
    from tuidag.ui.app import TuidagApp
    from tuidag.ui.screens.confirm import ConfirmScreen

    source = tmp_path / "dag.yaml"
    source.write_text(
        "tasks:\n  a: {run: 'true'}\n  b: {run: 'exit 1', depends_on: [a]}\n  c: {run: 'true', depends_on: [a]}\n"
    )
    session = RunSession.create(load_dag(source), tmp_path / "state", targets=["b"])
    session.scheduler.start()
    assert session.scheduler.wait(patience(30))
    session.finish()
    remote = RemoteRun.stored(session.run, session.store)
    try:
        app = TuidagApp(remote)
        async with app.run_test(headless=True, size=(160, 45)) as pilot:
            await pilot.pause()
            await pilot.press("r")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.items == ["a  (reused if unchanged)", "b  (runs again)", "c  (not a target)"]
    finally:
        remote.close()
