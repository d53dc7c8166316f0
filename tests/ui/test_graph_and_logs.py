"""Selection on the graph (keys and mouse), the log pane keys, focus switching and the batched event pipeline."""

from __future__ import annotations

import threading

from pilot_helpers import open_app, pin_style, ui_states, until

from dags import DIAMOND
from tuidag.engine.events import TaskEvent, TaskSnapshot
from tuidag.model.state import TaskState
from tuidag.ui.state_style import LOOKS
from tuidag.ui.widgets.graph.canvas import FOCUSED_HINT, UNFOCUSED_HINT, DagCanvas
from tuidag.views.layout.style import Zoom
from tuidag.views.terminal_text import strip_ansi


async def test_arrows_and_hjkl_move_along_columns_and_edges(new_session):
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        canvas = app.canvas
        assert app.focused is canvas
        assert app.graph.columns[0] == ["a", "e"] and app.graph.columns[1] == ["b", "c"]
        assert canvas.selected == "a"
        moves = [
            ("l", "b"),
            ("j", "c"),
            ("j", "c"),
            ("right", "d"),
            ("h", "b"),
            ("down", "c"),
            ("left", "a"),
            ("down", "e"),
            ("l", "e"),
            ("up", "a"),
            ("k", "a"),
            ("h", "a"),
        ]
        for key, expected in moves:
            await pilot.press(key)
            assert canvas.selected == expected, (key, expected)
        assert app.log_pane.path == app.source.run.log_path("a")


async def test_click_selects_a_tile_and_its_log(new_session):
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        tile = app.graph.tiles["d"]
        await pilot.click(DagCanvas, offset=(1 + tile.x + 3, 1 + tile.mid))  # 1: the canvas border
        assert app.canvas.selected == "d"
        await until(pilot, lambda: app.log_pane.path == app.source.run.log_path("d"), what="log of d")
        await pilot.click(DagCanvas, offset=(1 + tile.x - 2, 1 + tile.mid))  # the gap: nothing changes
        assert app.canvas.selected == "d"


async def test_large_graph_scrolls_to_keep_the_selection_visible(new_session):
    tasks = {f"t{i:03d}": "true" for i in range(60)}
    async with open_app(new_session(tasks), start=False) as (app, pilot):
        await pin_style(app, pilot, Zoom.FULL)  # 6 sub-columns of 10 tiles: 42 rows, more than the canvas shows
        await pilot.press(*["j"] * 9)
        assert app.canvas.selected == "t009"
        tile = app.graph.tiles["t009"]
        assert app.canvas.scroll_offset.y > 0
        assert app.canvas.scroll_offset.y <= tile.y
        assert tile.y + tile.height <= app.canvas.scroll_offset.y + app.canvas.scrollable_content_region.height


async def test_tab_switches_focus_between_graph_and_log(new_session):
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        assert app.focused is app.canvas
        await pilot.press("tab")
        assert app.focused is app.log_pane
        await pilot.press("j")  # the log pane has focus: the selection stays
        assert app.canvas.selected == "a"
        await pilot.press("tab")
        assert app.focused is app.canvas


async def test_search_next_previous_and_not_found(new_session):
    session = new_session(
        {
            "talk": "for i in $(seq 1 400); do echo line $i; done; echo needle one; "
            "for i in $(seq 1 400); do echo more $i; done; echo needle two"
        }
    )
    async with open_app(session) as (app, pilot):
        notes = []
        app.notify = lambda message, **kw: notes.append(message)
        await until(pilot, lambda: app.model.finished and app.log_pane.line_count >= 802, what="log written")
        lines = app.source.run.log_path("talk").read_text().splitlines()
        first, second = lines.index("needle one"), lines.index("needle two")
        await pilot.press("n")
        assert notes == ["nothing to repeat: search with / first"]
        await pilot.press("g", "slash")
        assert app.focused is app.search_bar
        await pilot.press(*"needle", "enter")
        assert app.focused is app.canvas and not app.search_bar.has_class("visible")  # back where the user was
        assert app.log_pane.match_line == first
        await pilot.press("n")
        assert app.log_pane.match_line == second
        await pilot.press("n")
        assert app.log_pane.match_line == first  # wraps around
        await pilot.press("N")
        assert app.log_pane.match_line == second
        await pilot.press("slash", "z", "z", "enter")
        assert notes[-1] == "not found: zz"
        await pilot.press("slash", "x", "escape")
        assert not app.search_bar.has_class("visible") and app.log_pane.search_text == "zz"


async def test_after_a_search_the_graph_keys_work_and_esc_returns_to_the_pane_the_user_was_in(new_session):
    """After `/`, focus used to stay on the log pane: j/k/↓ did nothing, Esc did not go back, while the graph still
    said `hjkl select`."""
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        assert app.canvas.border_subtitle == FOCUSED_HINT
        await pilot.press("slash", *"needle", "enter")
        assert app.focused is app.canvas and app.canvas.border_subtitle == FOCUSED_HINT
        await pilot.press("l")
        assert app.canvas.selected == "b"
        await pilot.press("slash", "x", "escape")
        assert app.focused is app.canvas and not app.search_bar.has_class("visible")
        await pilot.press("down")
        assert app.canvas.selected == "c"
        await pilot.press("tab")  # into the log pane: the graph's hint says how to come back
        assert app.focused is app.log_pane and app.canvas.border_subtitle == UNFOCUSED_HINT
        await pilot.press("slash", "x", "escape")
        assert app.focused is app.log_pane
        await pilot.press("slash", "x", "enter")
        assert app.focused is app.log_pane
        await pilot.press("escape")  # Esc in the log pane: back to the graph
        assert app.focused is app.canvas
        await pilot.press("k")
        assert app.canvas.selected == "b"


async def test_the_focused_pane_is_lit(new_session):
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        lit, dim = app.canvas.styles.border_top[1], app.log_pane.styles.border_top[1]
        assert lit != dim
        await pilot.press("tab")
        assert app.log_pane.styles.border_top[1] == lit and app.canvas.styles.border_top[1] == dim


async def test_follow_wrap_top_and_bottom(new_session):
    session = new_session({"talk": "for i in $(seq 1 300); do echo line $i $(printf 'x%.0s' $(seq 1 200)); done"})
    async with open_app(session) as (app, pilot):
        log = app.log_pane
        await until(pilot, lambda: app.model.finished and log.line_count >= 301, what="log written")
        assert log.following
        await pilot.press("g")
        assert not log.following and log.scroll_offset.y == 0
        await pilot.press("G")
        assert log.following and log.scroll_offset.y == log.max_scroll_y > 0
        await pilot.press("f")
        assert not log.following
        await pilot.press("f")
        assert log.following
        await pilot.press("w")
        assert log.wrap
        await pilot.press("w")
        assert not log.wrap


async def test_combined_view_interleaves_every_task_with_a_prefix(new_session):
    session = new_session(
        {
            "left": "echo from-left",
            "right": "echo from-right",
            "after": {"run": "echo from-after", "depends_on": ["left"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        await pilot.press("a")
        assert app.log_pane.title == "all tasks" and app.log_pane.path is None

        def lines() -> list[str]:
            return [strip_ansi(app.combined.line(i)) for i in range(app.combined.line_count)]

        await until(
            pilot,
            lambda: {"[left] from-left", "[right] from-right", "[after] from-after"} <= set(lines()),
            what="combined lines",
        )
        await pilot.press("j")  # selecting another task keeps the combined view
        assert app.log_pane.path is None
        await pilot.press("a")
        assert app.log_pane.path == app.source.run.log_path(app.canvas.selected)


async def test_engine_events_from_threads_are_applied_in_batches(new_session):
    """20,000 events pushed from a thread show up without the engine thread ever waiting on the UI."""
    async with open_app(new_session(DIAMOND), start=False) as (app, pilot):
        drains = []
        original = app.model.apply
        app.model.apply = lambda batch: drains.append(sum(isinstance(e, TaskEvent) for e in batch)) or original(batch)
        cycle = [TaskState.QUEUED, TaskState.RUNNING, TaskState.SUCCEEDED, TaskState.PENDING]

        def engine() -> None:
            old = TaskState.PENDING
            for seq in range(20_000):
                new = cycle[seq % 4]
                app.engine_event(TaskEvent(seq, 0.0, old, TaskSnapshot("b", new)))
                old = new

        thread = threading.Thread(target=engine)
        thread.start()
        thread.join()  # the engine side never waits for the UI: this returns with the UI loop still paused
        await until(pilot, lambda: sum(drains) == 20_000, what="every event applied")
        assert len([n for n in drains if n]) < 100  # batches, not one UI call per event
        assert app.model.snapshots["b"].state is TaskState.PENDING
        assert app.model.counts[TaskState.PENDING] == 5


async def test_a_running_tile_shows_the_cpu_and_memory_of_its_tree(new_session, tmp_path):
    stop = tmp_path / "stop"
    busy = f"sh -c 'while [ ! -e {stop} ]; do :; done' & wait"  # the load is in a child of the leader
    async with open_app(new_session({"busy": busy})) as (app, pilot):
        await until(pilot, lambda: app.model.usage.get("busy", (0, 0))[0] > 10, what="CPU % of the busy tree")
        _cpu, rss = app.model.usage["busy"]
        assert rss > 100_000
        snap = app.source.snapshot()["busy"]
        assert app.canvas._detail(snap, 16).startswith("cpu ") and "mem " in app.canvas._detail(snap, 16)
        stop.touch()
        await until(pilot, lambda: app.source.finished, what="the task to end")
        await until(pilot, lambda: "busy" not in app.model.usage, what="usage to be dropped")


def tile_text(app, name: str) -> list[str]:
    return [strip.text for strip in app.canvas._lines_of(name)]


async def test_a_tile_shows_the_meaningful_part_of_a_reason(new_session):
    """`interrupted by SIGINT` used to be cut to `interrupted by …`, hiding the signal."""
    session = new_session(
        {
            "slow": "sleep 30",
            "after": {"run": "true", "depends_on": ["slow"]},
            "a-task-with-a-long-name": "exit 4",
            "next": {"run": "true", "depends_on": ["a-task-with-a-long-name"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await until(
            pilot,
            lambda: ui_states(app)["slow"] == "RUNNING" and ui_states(app)["next"] == "SKIPPED",
            what="slow running, next skipped",
        )
        session.scheduler.cancel_all("interrupted by SIGINT")  # the reason a signal gives (launch.RunSession)
        await until(pilot, lambda: app.model.finished, what="run finished")
        width = app.graph.tiles["slow"].width
        for name in ("slow", "after"):
            bottom = tile_text(app, name)[2]
            assert "by SIGINT" in bottom and len(bottom) == width, bottom
        bottom = tile_text(app, "next")[2]
        assert "← a-task" in bottom and "failed" in bottom, bottom


async def test_a_tile_run_by_a_dask_worker_names_it(new_session):
    async with open_app(new_session({"a": "true"})) as (app, _pilot):
        snap = TaskSnapshot("a", TaskState.SUCCEEDED, worker="tcp://10.0.0.5:40123")
        assert app.canvas._detail(snap, 20) == "10.0.0.5:40123"
        assert app.canvas._detail(snap._replace(worker=None), 20) == ""
        running = snap._replace(state=TaskState.RUNNING, slots="gpu:1")  # named while it runs, after its slots
        assert app.canvas._detail(running, 30) == "gpu:1 10.0.0.5:40123"
        waiting = TaskSnapshot("a", TaskState.QUEUED, reason="waiting: no Dask worker has gpu=2")
        assert app.canvas._detail(waiting, 40) == "waiting: no Dask worker has gpu=2"


async def test_a_double_click_on_the_log_pane_selects_its_text_and_the_app_goes_on(new_session):
    """Textual selects a widget's text on a double click by calling its DOM `query("*")`; the log pane's search
    text, once named `query`, hid that method, and a double click raised TypeError and ended the app."""
    async with open_app(new_session({"a": "echo first line; echo second line; sleep 30"})) as (app, pilot):
        await until(pilot, lambda: app.log_pane.line_count >= 3, what="a's lines")
        assert await pilot.click(app.log_pane, offset=(2, 1), times=2)
        await pilot.pause()
        assert app.is_running and app.return_code is None
        await pilot.press("slash", "s", "e", "c", "o", "n", "d", "enter")
        assert app.log_pane.search_text == "second"


async def test_an_up_to_date_tile_names_its_run_and_a_tile_that_ran_says_why(new_session):
    async with open_app(new_session({"a": "true"})) as (app, _pilot):
        fresh = TaskSnapshot("a", TaskState.UP_TO_DATE, reason="up to date (run 20261204-1)")
        assert app.canvas._detail(fresh, 24) == "(run 20261204-1)"  # the state's own glyph and word say the rest
        ran = TaskSnapshot("a", TaskState.SUCCEEDED, reason="input data/x.csv changed")
        assert app.canvas._detail(ran, 24) == "input data/x.csv changed"
    assert len({(look.glyph, look.colour) for look in LOOKS.values()}) == len(TaskState)


async def test_an_up_to_date_task_shows_with_its_glyph_and_counts_as_done(new_session, tmp_path):
    tasks = {
        "make": {"run": "echo made > made.txt", "outputs": ("made.txt",)},
        "use": {"run": "cat made.txt", "depends_on": ["make"]},
    }
    first = new_session(tasks)
    first.scheduler.run()
    first.finish()
    async with open_app(new_session(tasks)) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert ui_states(app) == {"make": "UP_TO_DATE", "use": "SUCCEEDED"}
        tile = tile_text(app, "make")
        assert LOOKS[TaskState.UP_TO_DATE].glyph in "".join(tile) and "(run " in tile[2]
