"""The log pane's size: maximised with `m` (20 log lines at 80x24), the split moved with `+`/`-` or by dragging the
log pane's top border, and the split kept in proportion when the terminal is resized."""

from __future__ import annotations

import re

from pilot_helpers import open_app, screen_text, select, until

from tuidag.ui.widgets.split_panes import MIN_ROWS

SMALL = (80, 24)
CHAIN = {"numbers": "seq 1 100", "after": {"run": "echo after", "depends_on": ["numbers"]}}


def longest_run_of_numbers(text: str) -> list[int]:
    """The longest run of consecutive numbers shown one per row, each alone in its row of the log pane (the
    scrollbar at the right end aside)."""
    numbers = [int(m.group(1)) if (m := re.match(r"│(\d+) ", row)) else None for row in text.splitlines()]
    best: list[int] = []
    run: list[int] = []
    for number in numbers:
        run = (
            [*run, number]
            if number is not None and run and number == run[-1] + 1
            else ([number] if number is not None else [])
        )
        best = max(best, run, key=len)
    return best


async def test_m_maximises_the_log_pane_to_20_lines_at_80x24_and_back(new_session):
    async with open_app(new_session(CHAIN), size=SMALL) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await select(app, pilot, "numbers")
        await until(pilot, lambda: app.log_pane.line_count == 101, what="the log read")  # its header line too
        split = app.log_pane.outer_size.height
        assert len(longest_run_of_numbers(screen_text(app))) < 10
        await pilot.press("m")
        await pilot.pause()
        text = screen_text(app)
        assert len(longest_run_of_numbers(text)) >= 20 and longest_run_of_numbers(text)[-1] == 100
        assert not app.canvas.display or app.canvas.region.height == 0
        assert app.focused is app.log_pane
        await pilot.press("escape")  # no graph to go back to: the keys stay with the log
        assert app.focused is app.log_pane
        title_row = text.splitlines()[2]
        assert "numbers · 101 lines · following" in title_row  # what the hidden subtitle row said
        await pilot.press("g", "down")  # past tuidag's header line
        assert longest_run_of_numbers(screen_text(app)) == list(range(1, 21))
        await pilot.press("m")
        await pilot.pause()
        assert app.log_pane.outer_size.height == split and app.canvas.region.height > 0
        assert app.focused is app.canvas  # back where the keys were
        assert "101 lines" in str(app.log_pane.border_subtitle) and "101 lines" not in str(app.log_pane.border_title)


async def test_plus_and_minus_move_the_split_within_bounds_and_a_resize_keeps_it(new_session):
    async with open_app(new_session(CHAIN), start=False, size=SMALL) as (app, pilot):
        panes = app.panes.size.height
        assert panes == 21
        rows = app.log_pane.outer_size.height
        await pilot.press("plus")
        assert app.log_pane.outer_size.height == rows + 2  # a tenth of the height a step
        await pilot.press("minus", "minus")
        assert app.log_pane.outer_size.height == rows - 2
        await pilot.press(*["minus"] * 10)
        assert app.log_pane.outer_size.height == MIN_ROWS
        await pilot.press(*["plus"] * 10)
        assert app.log_pane.outer_size.height == panes - MIN_ROWS and app.canvas.outer_size.height == MIN_ROWS
        await pilot.press("minus", "minus", "minus")
        share = app.log_pane.outer_size.height / panes
        await pilot.resize_terminal(160, 45)
        await until(pilot, lambda: app.panes.size.height == 42, what="the new size")
        await pilot.pause()
        assert abs(app.log_pane.outer_size.height - share * 42) <= 1  # the same proportion
        await pilot.resize_terminal(80, 12)  # too small for that share: both keep their rows
        await until(pilot, lambda: app.panes.size.height == 9, what="the tiny size")
        await pilot.pause()
        assert app.log_pane.outer_size.height >= 4 and app.canvas.outer_size.height >= 4
        await pilot.press("m", "minus")  # from maximised, minus goes back to the split
        assert not app.panes.maximised


async def test_dragging_the_log_panes_top_border_moves_the_split(new_session):
    async with open_app(new_session(CHAIN), start=False, size=SMALL) as (app, pilot):
        top = app.log_pane.region.y
        assert await pilot.mouse_down(app.log_pane, offset=(10, 0))
        assert app.panes.dragging
        await pilot.hover(offset=(10, top - 6))  # screen coordinates: the mouse is captured while dragging
        assert app.log_pane.region.y == top - 6
        await pilot.hover(offset=(10, 23))  # past the bottom: the log pane keeps its least rows
        assert app.log_pane.outer_size.height == MIN_ROWS
        await pilot.hover(offset=(10, top - 3))
        await pilot.mouse_up(offset=(10, top - 3))
        assert not app.panes.dragging and app.log_pane.region.y == top - 3
        assert not app.screen.selections  # dragging the border selected no text
        await pilot.hover(offset=(10, 20))  # the drag is over: moving the mouse changes nothing
        assert app.log_pane.region.y == top - 3
        await pilot.mouse_down(app.log_pane, offset=(10, 2))  # inside the pane, not on its border: no drag
        await pilot.hover(offset=(10, 20))
        await pilot.mouse_up(offset=(10, 20))
        assert not app.panes.dragging and app.log_pane.region.y == top - 3


async def test_the_list_and_the_log_pane_share_the_split_and_m_works_from_either(new_session):
    """The list takes the graph's place in the split: `m` maximises the log over it, and the split keys move the
    list's border like the graph's. (Once `L` had been pressed, `m` did nothing: the panes took the list for the
    log pane.)"""
    async with open_app(new_session(CHAIN), start=False, size=SMALL) as (app, pilot):
        await pilot.press("plus")
        split = app.log_pane.outer_size.height
        await pilot.press("L")
        assert app.table.region.height > 0 and app.canvas.region.height == 0
        assert app.log_pane.outer_size.height == split  # the list keeps the split the user chose
        await pilot.press("m")
        await pilot.pause()
        assert app.table.region.height == 0 and app.canvas.region.height == 0 and app.log_pane.outer_size.height == 21
        await pilot.press("m")
        await pilot.pause()
        assert app.table.region.height > 0 and app.log_pane.outer_size.height == split
        await pilot.press("minus")
        assert app.log_pane.outer_size.height < split
        await pilot.press("L")  # the graph back, then m again
        await pilot.press("m")
        await pilot.pause()
        assert app.canvas.region.height == 0 and app.table.region.height == 0 and app.log_pane.outer_size.height == 21
        await pilot.press("m")
        await pilot.pause()
        assert app.canvas.region.height > 0 and app.table.region.height == 0
