"""The list view (`L`): one row per task, sortable and filtered, sharing the selection and the keys with the graph.

Driven under Pilot on real runs; rows are read from the composed screen, as the user sees them.
"""

from __future__ import annotations

import re

from pilot_helpers import in_view, open_app, screen_text, select, ui_states, until
from test_controls import long_task, wait_pids

from dags import DIAMOND, alive
from tuidag.engine.events import TaskSnapshot
from tuidag.model.state import TaskState
from tuidag.ui.run_model import StateFilter
from tuidag.ui.screens.confirm import ConfirmScreen
from tuidag.ui.state_style import LOOKS
from tuidag.ui.widgets.graph.tiles import SELECTED_BG
from tuidag.ui.widgets.task_table import TaskTable

ALL_TITLES = ["STATE", "NAME", "DURATION", "ATTEMPT", "EXIT", "CPU", "MEM"]
STATES = {(look.glyph, look.word) for look in LOOKS.values()}


def table_lines(app) -> list[str]:
    """The list's lines on the screen, inside its border: the header first, then the rows in view."""
    region = app.table.region
    lines = screen_text(app).splitlines()[region.y + 1 : region.bottom - 1]
    return [line[region.x + 1 : region.right - 1] for line in lines]


def titles(app) -> list[str]:
    return re.findall(r"[A-Z]+", table_lines(app)[0])


def listed(app) -> list[str]:
    """Task names in the order the rows show them (a row starts with the state's glyph and word, then the name)."""
    return [cells[2] for cells in map(str.split, table_lines(app)[1:]) if tuple(cells[:2]) in STATES]


def row_of(app, name: str) -> str:
    return next(line for line in table_lines(app)[1:] if line.split()[2:3] == [name])


def lit(app, name: str) -> bool:
    """The task's row is drawn on the selection's background."""
    strip = app.table.render_line(1 + app.table.rows.index(name) - round(app.table.scroll_y))
    return all(seg.style.bgcolor and seg.style.bgcolor.name == SELECTED_BG for seg in strip)


def graph_order(app) -> list[str]:
    return [name for column in app.graph.columns for name in column]


async def show_list(pilot, app) -> None:
    await pilot.press("L")
    await until(pilot, lambda: app.table.region.height > 0, what="the list on screen")


async def resize(pilot, app, width: int, height: int) -> None:
    """Resize the terminal and wait until the list is laid out at the new width. In between, the screen is already
    the new size while the list keeps its old width, its header cut at the screen's edge: under load (load average
    20) a check saw that header ('STATE', 'NAME', the name then taking all the slack) as the narrow layout."""
    await pilot.resize_terminal(width, height)
    await until(pilot, lambda: app.table.region.width == width, what=f"the list laid out at {width} columns")


async def test_L_swaps_the_graph_for_the_list_and_back_keeping_the_selection(new_session):
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        await select(app, pilot, "c")
        await show_list(pilot, app)
        assert not app.canvas.display and app.focused is app.table
        assert listed(app) == graph_order(app)  # the default order is the graph's, layer by layer
        assert app.selected_task == app.table.selected == "c"
        assert app.table.border_title == "test · 5 tasks"
        await pilot.press("tab")
        assert app.focused is app.log_pane
        await pilot.press("escape")  # back to the list, not to the hidden graph
        assert app.focused is app.table
        await pilot.press("slash", "x", "escape")
        assert app.focused is app.table  # a search leaves the user in the list
        await pilot.press("L")
        assert app.canvas.display and not app.table.display and app.focused is app.canvas
        assert app.selected_task == "c"
        await pilot.press("k")  # the graph's keys work again
        assert app.canvas.selected == "b"


async def test_every_column_at_160_columns_and_the_least_important_go_first_when_narrow(new_session):
    long_names = {f"a-task-with-a-rather-long-name-{i}": "true" for i in range(3)}
    async with open_app(new_session(long_names), start=False) as (app, pilot):
        await show_list(pilot, app)
        assert titles(app) == ["STATE", "NAME", *ALL_TITLES[2:]]
        await resize(pilot, app, 80, 24)
        assert titles(app) == ["STATE", "NAME", "DURATION", "EXIT", "CPU", "MEM"]
        assert "a-task-with-a-rather-long-name-0" in row_of(app, "a-task-with-a-rather-long-name-0")  # not cut
        await resize(pilot, app, 60, 24)
        assert titles(app) == ["STATE", "NAME", "DURATION"]


async def test_a_column_only_some_tasks_have_appears_once_one_has_a_value(new_session):
    """Slots and worker are shown only when a task has them (no executor reports them yet: a snapshot type that
    carries a worker stands in for one that will)."""

    class OnAWorker(TaskSnapshot):
        worker = "node-7"

    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        await show_list(pilot, app)
        assert "WORKER" not in titles(app) and "SLOTS" not in titles(app)
        app.model.snapshots["b"] = OnAWorker(*app.model.snapshots["b"])
        app.table.refresh_tasks(["b"])
        await until(pilot, lambda: "WORKER" in titles(app), what="the worker column")
        assert "node-7" in row_of(app, "b") and "node-7" not in row_of(app, "c")
        assert "SLOTS" not in titles(app)


async def test_columns_are_sized_by_their_content_at_160_columns_not_the_name_by_the_slack(new_session):
    """A worker's address whole (it was cut to `tcp://127.0.0…`) and the name as wide as the longest name (it took
    about 80 cells): the columns are sized by what they hold, the rest of the width stays blank."""

    class OnAWorker(TaskSnapshot):
        worker = "tcp://127.0.0.1:45221"

    tasks = {"download-imagenet-subset": "true", "train": {"run": "true", "depends_on": ["download-imagenet-subset"]}}
    async with open_app(new_session(tasks), start=False) as (app, pilot):
        await show_list(pilot, app)
        app.model.snapshots["train"] = OnAWorker(*app.model.snapshots["train"])
        app.table.refresh_tasks(["train"])
        await until(pilot, lambda: "WORKER" in titles(app), what="the worker column")
        header = table_lines(app)[0]
        assert header.index("DURATION") - header.index("NAME") <= len("download-imagenet-subset") + 10
        assert "tcp://127.0.0.1:45221" in row_of(app, "train")
        await resize(pilot, app, 80, 24)  # narrow: the least important columns go, the name stays whole
        assert "ATTEMPT" not in titles(app)
        assert "download-imagenet-subset" in row_of(app, "download-imagenet-subset")


RACE = {
    "step-10": "sleep 0.4",
    "step-2": "exit 3",
    "alpha": "sleep 0.2",
    "omega": {"run": "true", "depends_on": ["step-2"]},
    "mid": "sleep 0.1",
}


async def test_sorting_by_name_state_and_duration_both_ways_by_key_and_by_header_click(new_session):
    async with open_app(new_session(RACE)) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        await show_list(pilot, app)
        snaps = app.model.snapshots
        order = graph_order(app)
        assert listed(app) == order
        selected = app.table.selected
        assert selected == "step-2"  # the run's first failure, selected for the user
        await pilot.press("s")  # state: in the header's order (done before failed before skipped), ties as in the graph
        assert "STATE▲" in table_lines(app)[0]
        assert listed(app) == [n for n in order if snaps[n].state is TaskState.SUCCEEDED] + ["step-2", "omega"]
        await pilot.press("s")
        assert "NAME▲" in table_lines(app)[0]
        assert listed(app) == ["alpha", "mid", "omega", "step-2", "step-10"]  # numbers sort as numbers
        await pilot.press("S")
        assert "NAME▼" in table_lines(app)[0]
        assert listed(app) == ["step-10", "step-2", "omega", "mid", "alpha"]
        await pilot.press("s")  # duration: the longest first; the task that never ran last
        assert "DURATION▼" in table_lines(app)[0]
        ran = sorted((n for n in order if snaps[n].started_at is not None), key=lambda n: -snaps[n].duration(0))
        assert listed(app)[0] == "step-10" and listed(app) == [*ran, "omega"]
        await pilot.press("S")
        assert listed(app) == [*ran[::-1], "omega"]  # still last the other way round

        header = table_lines(app)[0]
        await pilot.click(TaskTable, offset=(1 + header.index("NAME") + 1, 1))  # 1: the border
        assert "NAME▲" in table_lines(app)[0] and listed(app)[0] == "alpha"
        await pilot.click(TaskTable, offset=(1 + header.index("NAME") + 1, 1))
        assert "NAME▼" in table_lines(app)[0] and listed(app)[0] == "step-10"
        assert app.table.selected == selected  # sorting never moves the selection to another task


async def test_the_selection_is_shared_with_the_graph_and_the_log_pane_follows(new_session):
    tasks = {f"t{i:02d}": "true" for i in range(60)}
    async with open_app(new_session(tasks), start=False) as (app, pilot):
        await select(app, pilot, "t03")
        await show_list(pilot, app)
        await pilot.press("j", "j")
        assert app.table.selected == app.canvas.selected == app.selected_task == "t05"
        assert lit(app, "t05") and not lit(app, "t03") and not lit(app, "t04")
        assert app.log_pane.path == app.source.run.log_path("t05")
        await pilot.press("k", "down")
        assert app.selected_task == "t05"
        await pilot.press("end")
        assert app.selected_task == "t59" and "t59" in listed(app)  # scrolled into view
        assert app.log_pane.path == app.source.run.log_path("t59")
        await pilot.press("home", "pagedown")
        page = listed(app)
        assert app.selected_task == page[-1] and page[0] == "t00"  # a page down: the last row in view
        await pilot.press("home")
        await pilot.click(TaskTable, offset=(20, 1 + 1 + 4))  # the fifth row
        assert app.selected_task == "t04" == app.canvas.selected
        assert app.log_pane.path == app.source.run.log_path("t04")
        app.select_task("t42")  # as the finder would
        await pilot.pause()
        assert app.table.selected == app.canvas.selected == "t42" and "t42" in listed(app)
        await pilot.press("L")
        assert app.canvas.selected == "t42"
        await until(pilot, lambda: in_view(app, "t42"), what="the graph scrolled to the selection made in the list")


async def test_c_in_the_list_cancels_the_selected_branch_and_r_runs_it_again(new_session, tmp_path):
    session = new_session({"other": "true", "a": long_task("a"), "b": {"run": "true", "depends_on": ["a"]}})
    async with open_app(session) as (app, pilot):
        procs = await wait_pids(pilot, tmp_path / "a.pids")
        await show_list(pilot, app)
        await pilot.press("s", "s")  # by name: a, b, other
        await pilot.press("home")
        assert app.selected_task == "a" and app.canvas.selected == "a"
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen) and app.screen.items == ["a  (running)", "b  (pending)"]
        await pilot.press("y")
        await until(pilot, lambda: ui_states(app)["a"] == ui_states(app)["b"] == "CANCELLED", what="branch cancelled")
        assert not any(alive(pid, ct) for pid, ct in procs)
        await until(pilot, lambda: "cancelled" in row_of(app, "a"), what="the row to say so")
        await pilot.press("r")
        await until(
            pilot,
            lambda: ui_states(app)["a"] == "RUNNING" and app.model.snapshots["a"].attempt == 2,
            what="a running again",
        )
        await until(
            pilot,
            lambda: re.search(r"running\s+a\s.*\s2\s", row_of(app, "a")) is not None,
            what="the row to show the second attempt",
        )


async def test_the_state_filter_applies_to_the_list(new_session):
    tasks = {"ok-1": "true", "bad-1": "exit 2", "ok-2": "true", "bad-2": "exit 5", "ok-3": "true"}
    async with open_app(new_session(tasks)) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        await show_list(pilot, app)
        await pilot.press("end")  # ok-3: the filter will hide it
        app.model.state_filter = StateFilter.FAILED
        app.table.refilter()
        await pilot.pause()
        assert listed(app) == ["bad-1", "bad-2"]
        assert app.table.border_title == "test · 2 of 5 tasks (filter: failed)"
        assert app.selected_task == "bad-1" == app.canvas.selected  # the hidden selection moved to a shown row
        app.select_task("ok-2")  # from elsewhere (the finder): listed while selected, so keys act on what is shown
        await pilot.pause()
        assert listed(app) == ["bad-1", "ok-2", "bad-2"] and app.selected_task == "ok-2"
        app.select_task("bad-2")
        await until(pilot, lambda: listed(app) == ["bad-1", "bad-2"], what="ok-2 unlisted once left")
        assert re.search(r"failed\s+bad-2\s.*\s5\s", row_of(app, "bad-2"))  # its exit code
        app.model.state_filter = StateFilter.RUNNING
        app.table.refilter()
        await pilot.pause()
        assert listed(app) == [] and "no running tasks" in table_lines(app)[1]
        assert app.selected_task is None
        await pilot.press("c", "r")  # nothing selected: nothing asked, nothing done
        assert not isinstance(app.screen, ConfirmScreen)
        app.model.state_filter = StateFilter.ALL
        app.table.refilter()
        await pilot.pause()
        assert listed(app) == graph_order(app) and app.table.border_title == "test · 5 tasks"


async def test_rows_follow_the_run_live(new_session, tmp_path):
    def gated(name: str) -> str:
        return f"while [ ! -e {tmp_path / name} ]; do sleep 0.02; done"

    tasks = {"first": gated("go-1"), "second": gated("go-2"), "after": {"run": "true", "depends_on": ["first"]}}
    async with open_app(new_session(tasks)) as (app, pilot):
        await show_list(pilot, app)
        await until(
            pilot,
            lambda: "running" in row_of(app, "first") and "pending" in row_of(app, "after"),
            what="first running, after pending",
        )
        await until(
            pilot,
            lambda: re.search(r"\d%\s+[\d.]+[KMG]", row_of(app, "first")) is not None,
            what="CPU and memory of the running task",
        )
        app.select_task("first")
        app.model.state_filter = StateFilter.RUNNING
        app.table.refilter()
        await pilot.pause()
        assert sorted(listed(app)) == ["first", "second"] and app.selected_task == "first"
        (tmp_path / "go-1").touch()
        await until(
            pilot, lambda: "done" in row_of(app, "first") and ui_states(app)["after"] == "SUCCEEDED", what="first done"
        )
        # The selected task stays listed while selected (its row does not vanish under the user)...
        await until(
            pilot,
            lambda: app.table.border_title == "test · 1 of 3 tasks (filter: running)",
            what="the list re-filtered",
        )
        assert "first" in listed(app) and app.selected_task == "first"
        app.select_task("second")
        # ...and goes once the selection has moved on.
        await until(pilot, lambda: listed(app) == ["second"], what="only the running task listed")


async def test_a_sort_by_state_reorders_as_states_change(new_session, tmp_path):
    gate = tmp_path / "go"
    tasks = {"slow": f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 1", "quick": "true"}
    async with open_app(new_session(tasks)) as (app, pilot):
        await until(pilot, lambda: ui_states(app) == {"slow": "RUNNING", "quick": "SUCCEEDED"}, what="quick done")
        await show_list(pilot, app)
        await pilot.press("s")
        assert listed(app) == ["slow", "quick"]  # running before done
        gate.touch()
        await until(pilot, lambda: ui_states(app)["slow"] == "FAILED", what="slow failed")
        await until(pilot, lambda: listed(app) == ["quick", "slow"], what="rows re-sorted")  # done before failed
        assert app.table.selected == app.canvas.selected
