"""The graph fits the screen and stays navigable at every size: zoom (z / Z), orientation (o), packed layers, the
minimap, and the selection kept in view through all of it. Driven on the real app under Pilot."""

from __future__ import annotations

from pilot_helpers import in_view, open_app, pin_style, screen_text, until

from tuidag.control import server
from tuidag.ui.run_model import UsageSample
from tuidag.ui.widgets.graph.canvas import DagCanvas
from tuidag.views.layout.style import Orientation, Zoom

WORKERS = [f"worker-{i:02d}" for i in range(64)]
WIDE = {
    "setup": "true",
    **{w: {"run": "true", "depends_on": ["setup"]} for w in WORKERS},
    "gather": {"run": "true", "depends_on": WORKERS},
}
CHAIN = {f"step-{i:02d}": {"run": "true", "depends_on": [f"step-{i - 1:02d}"] if i else []} for i in range(20)}


async def test_z_and_o_step_through_every_zoom_and_orientation_keeping_the_selection_in_view(new_session):
    async with open_app(new_session(WIDE), start=False) as (app, pilot):
        await pilot.press("l", *["j"] * 40)  # a worker deep in the packed layer
        chosen = app.canvas.selected
        assert chosen.startswith("worker-")
        seen = set()
        for key in ["z", "z", "z", "o", "z", "z", "z", "Z", "o"]:
            await pilot.press(key)
            await until(pilot, lambda: in_view(app, chosen), what=f"{chosen} in view after {key}")
            seen.add((app.graph.zoom, app.graph.orientation))
            assert app.canvas.selected == chosen
            arrow = "→" if app.graph.orientation is Orientation.LR else "↓"
            assert app.canvas.border_title.endswith(f"{app.graph.zoom.value} {arrow}")
        assert seen == {(z, o) for z in Zoom for o in Orientation}


async def test_the_users_choice_sticks_through_a_resize_and_the_fit_follows_the_screen_until_then(new_session):
    async with open_app(new_session(CHAIN), start=False, size=(160, 45)) as (app, pilot):
        # a 20-step chain wraps into bands left to right: every step on screen, full tiles
        assert (app.graph.zoom, app.graph.orientation) == (Zoom.FULL, Orientation.LR)
        assert app.graph.fits(tuple(app.canvas.scrollable_content_region.size))
        await pilot.resize_terminal(40, 60)  # too narrow for full tiles side by side: the fit changes
        await until(pilot, lambda: app.canvas.size.width < 60, what="resized")
        assert app.graph.zoom is Zoom.COMPACT or app.graph.width <= app.canvas.scrollable_content_region.width
        await pilot.resize_terminal(160, 45)
        await until(pilot, lambda: app.canvas.size.width > 100, what="resized back")
        await pilot.press("o")
        choice = (app.graph.zoom, app.graph.orientation)
        assert choice[1] is Orientation.TD
        for size in ((80, 24), (220, 60), (160, 45)):
            await pilot.resize_terminal(*size)
            await until(pilot, lambda size=size: tuple(app.size) == size, what=f"resized to {size}")
            await pilot.pause()
            assert (app.graph.zoom, app.graph.orientation) == choice
            await until(pilot, lambda: in_view(app, app.canvas.selected), what="the selection in view")


async def test_arrows_move_through_a_packed_layer_in_reading_order_and_across_its_sub_columns(new_session):
    async with open_app(new_session(WIDE), start=False) as (app, pilot):
        await pin_style(app, pilot, Zoom.COMPACT)
        tiles = app.graph.tiles
        rows = len({tiles[w].y for w in WORKERS})
        assert rows < 64 and len({tiles[w].x for w in WORKERS}) > 1  # packed
        await pilot.press("l")
        assert app.canvas.selected in WORKERS
        app.canvas.select("worker-02")
        await pilot.press("k", "k", "k")  # up to the first worker, and no further
        assert app.canvas.selected == "worker-00"
        await pilot.press(*["j"] * rows)  # down the first sub-column and on to the top of the next
        assert app.canvas.selected == WORKERS[rows]
        assert tiles[WORKERS[rows]].y == tiles["worker-00"].y
        await pilot.press("h")  # back to the sub-column before, same row
        assert app.canvas.selected == "worker-00"
        await pilot.press("h")  # out of the block: the dependency
        assert app.canvas.selected == "setup"
        await pilot.press("l", *["l"] * 10)  # across every sub-column, then to what needs them
        assert app.canvas.selected == "gather"
        tile = tiles["worker-05"]
        x, y = app.canvas.scroll_offset
        await pilot.click(DagCanvas, offset=(1 + tile.x - x + 2, 1 + tile.y - y))
        assert app.canvas.selected == "worker-05"
        await until(pilot, lambda: app.log_pane.path == app.source.run.log_path("worker-05"), what="its log")


async def test_the_minimap_shows_where_the_view_is_only_when_the_graph_is_larger(new_session):
    async with open_app(new_session(WIDE), start=False, size=(160, 45)) as (app, pilot):
        assert app.graph.fits(app.canvas._view())
        region = app.canvas.scrollable_content_region
        assert app.canvas._minimap_box(region.width, region.height) is None
        await pin_style(app, pilot, Zoom.FULL)  # 64 full tiles: far taller than the canvas
        region = app.canvas.scrollable_content_region
        box = app.canvas._minimap_box(region.width, region.height)
        assert box is not None
        lines = screen_text(app).splitlines()
        top = region.y + box.y
        corner = [line[region.x + box.x : region.x + box.x + box.width] for line in lines[top : top + box.height]]
        assert sum(row.count("▪") for row in corner) >= 3, corner  # tiles drawn in it

        def lit_rows() -> list[int]:
            strips = [app.canvas._minimap_row(box.y + i, region.width) for i in range(box.height)]
            return [
                i
                for i, strip in enumerate(strips)
                if any(seg.style and seg.style.bgcolor and seg.style.bgcolor.name == "#4a4a70" for seg in strip)
            ]

        app.canvas.select("worker-00")  # the first worker, at the top
        await until(pilot, lambda: app.canvas.selected == "worker-00" and app.canvas.scroll_offset.y < 5, what="top")
        before, top_rows = app.canvas.scroll_offset.y, lit_rows()
        await pilot.press(*["j"] * 25)  # down its sub-column
        await until(pilot, lambda: app.canvas.scroll_offset.y > before + 10, what="scrolled down")
        assert top_rows and max(lit_rows()) > max(top_rows)  # the view's rectangle moved down the minimap


async def test_dots_show_the_selected_task_by_name_in_the_log_pane(new_session):
    tasks = {f"t{i:04d}": "true" for i in range(300)}
    async with open_app(new_session(tasks), start=False) as (app, pilot):
        assert app.graph.zoom is Zoom.DOTS  # 300 tasks: a heat map
        await pilot.press("j", "j", "l")
        name = app.canvas.selected
        await until(pilot, lambda: app.log_pane.title == name, what="the log pane follows")
        assert f"{name} · " in screen_text(app)


async def test_top_down_a_tiles_exit_never_cuts_its_details(new_session, monkeypatch):
    """The usage shown is the one the test gives: with the engine's sampler on, a real sample (taken a second after
    the start, before this one under load) made "usage applied" true at once and then showed instead."""
    monkeypatch.setattr(server, "USAGE_INTERVAL", 3600.0)  # the engine sends viewers no sample during the test
    session = new_session(
        {
            "busy": "sleep 30",
            "next": {"run": "true", "depends_on": ["busy"]},
            "last": {"run": "true", "depends_on": ["next"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await pin_style(app, pilot, Zoom.FULL, Orientation.TD)
        await until(pilot, lambda: app.model.snapshots["busy"].state.value == "RUNNING", what="busy running")
        app.engine_event(UsageSample({"busy": (12.0, 5 << 20)}))
        await until(pilot, lambda: app.model.usage.get("busy") == (12.0, 5 << 20), what="usage applied")
        bottom = app.canvas._lines_of("busy")[2].text
        details = bottom.index("cpu 12% mem 5.0M") + len("cpu 12% mem 5.0M")
        assert all(mark not in bottom or bottom.index(mark) > details for mark in "┬┳")
        w = app.graph.tiles["next"].width
        exit_in_middle = "╰" + "─" * (w // 2 - 1) + "┬" + "─" * (w - w // 2 - 2) + "╯"
        assert app.canvas._lines_of("next")[2].text == exit_in_middle  # nothing to cut
