"""The `:` / Ctrl+F finder: typing narrows the list, Enter jumps to the task (and its log), Esc changes nothing."""

from __future__ import annotations

from pilot_helpers import open_app, screen_text, until

from tuidag.ui.screens.finder import LIMIT, FinderScreen

TASKS = {
    "fetch": "true",
    "build-api-linux": {"run": "true", "depends_on": ["fetch"]},
    "build-web": {"run": "true", "depends_on": ["fetch"]},
    "lint": "true",
    "deploy.prod": {"run": "true", "depends_on": ["build-api-linux", "build-web"]},
}


def results(app) -> list[str]:
    return [m.name for m in app.screen.found.matches]


def log_shown(app, name: str) -> bool:
    return str(app.source.run.log_path(name)) in str(app.log_pane.border_title)


async def test_typing_narrows_and_enter_jumps_to_the_task_and_its_log(new_session):
    async with open_app(new_session(TASKS), start=False) as (app, pilot):
        await pilot.press("colon")
        assert isinstance(app.screen, FinderScreen)
        assert results(app) == app.reading_order  # an empty query lists every task in graph order
        await pilot.press(*"bal")
        assert results(app) == ["build-api-linux"]
        text = screen_text(app)
        assert "✔" not in text and "○ build-api-linux  pending" in text  # state glyph, name, state word
        line = app.screen.results.render_line(0)
        assert [seg.text for seg in line if seg.style.underline] == ["b", "a", "l"]  # b-uild a-pi l-inux
        await pilot.press("enter")
        assert not isinstance(app.screen, FinderScreen)
        assert app.selected_task == "build-api-linux" and app.focused is app.canvas
        await until(pilot, lambda: log_shown(app, "build-api-linux"), what="its log in the pane")


async def test_arrows_or_a_click_choose_in_the_list_and_ctrl_f_opens_it_too(new_session):
    async with open_app(new_session(TASKS), start=False) as (app, pilot):
        await pilot.press("ctrl+f", *"build")
        assert results(app) == ["build-web", "build-api-linux"]  # equally good: the shorter name first
        await pilot.press("down", "enter")
        assert app.selected_task == "build-api-linux"
        await pilot.press("colon", *"build")
        await pilot.click("#finder-results", offset=(5, 0))  # a click on a line jumps too
        assert not isinstance(app.screen, FinderScreen) and app.selected_task == "build-web"


async def test_escape_returns_to_where_the_user_was(new_session):
    async with open_app(new_session(TASKS), start=False) as (app, pilot):
        app.select_task("lint")
        await pilot.press("tab")
        assert app.focused is app.log_pane
        await pilot.press("colon", *"dep", "escape")
        assert not isinstance(app.screen, FinderScreen)
        assert app.selected_task == "lint" and app.focused is app.log_pane


async def test_no_match_says_so_and_enter_keeps_the_finder_open(new_session):
    async with open_app(new_session(TASKS), start=False) as (app, pilot):
        await pilot.press("colon", *"zzqFc", "right_square_bracket", "colon")  # the app's keys are letters here
        assert app.screen.query_one("#finder-query").value == "zzqFc]:"
        assert app.model.state_filter.word == "all" and isinstance(app.screen, FinderScreen)
        assert results(app) == []
        assert "no task name holds these letters" in screen_text(app)
        await pilot.press("enter")
        assert isinstance(app.screen, FinderScreen) and app.selected_task == "fetch"


async def test_five_thousand_tasks(new_session):
    """The finder lists the best matches of thousands and says how many matched (per-keystroke times were measured
    by hand, not asserted here)."""
    tasks = {f"shard-{i:04d}": "true" for i in range(5000)}
    async with open_app(new_session(tasks), start=False) as (app, pilot):
        await pilot.press("colon")
        assert len(results(app)) == LIMIT and "5000 of 5000 tasks" in screen_text(app)
        listed = app.screen.results
        await pilot.press("pagedown", "pagedown")
        assert listed.highlighted == 2 * listed.page > 0 and listed.scroll_offset.y > 0  # kept in view
        await pilot.press("pageup", "pageup", "up")
        assert listed.highlighted == 0 and listed.scroll_offset.y == 0
        await pilot.press(*"4999")
        assert results(app)[0] == "shard-4999"
        await pilot.press("backspace", "backspace")
        assert all(name.startswith("shard-49") for name in results(app))  # `49` as one run, at a word start
        assert "the best 100 are listed: type more to narrow" in screen_text(app)
        await pilot.press("5", "enter")
        assert app.selected_task == "shard-4950"
        tile = app.graph.tiles["shard-4950"]
        assert app.canvas.scroll_offset.y <= tile.y < app.canvas.scroll_offset.y + app.canvas.size.height
