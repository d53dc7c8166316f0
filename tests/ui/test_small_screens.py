"""Every screen at 80x24 and the selection kept in view: the app driven under Pilot at the sizes users have.

A narrow screen must degrade by priority (the least important things go first, with a hint that more exists), never
by cutting whatever happens to come last; the selected tile is scrolled into view at start, on a resize and on every
move. The same checks run in a real 80x24 terminal in test_tmux.py.
"""

from __future__ import annotations

from pilot_helpers import in_view, open_app, pin_style, screen_text, select, until

from tuidag.ui.screens.confirm import ConfirmScreen
from tuidag.ui.screens.help import HelpScreen
from tuidag.views.layout.style import Zoom

SMALL = (80, 24)
# A setup task in front of a layer too big to fit even packed (as full tiles), then a gather task.
WORKERS = [f"worker-with-a-rather-long-name-{i:03d}" for i in range(150)]
WIDE = {
    "setup": "true",
    **{name: {"run": "true", "depends_on": ["setup"]} for name in WORKERS},
    "gather": {"run": "true", "depends_on": WORKERS},
}
CHAIN = {
    "prepare": "true",
    **{f"step-{i}": {"run": "true", "depends_on": [f"step-{i - 1}" if i else "prepare"]} for i in range(6)},
}


async def test_the_selection_is_in_view_at_start_on_resize_and_on_every_move(new_session):
    async with open_app(new_session(WIDE), start=False, size=(220, 60)) as (app, pilot):
        assert app.canvas.selected == "setup"
        await until(pilot, lambda: in_view(app, "setup"), what="setup in view at start")
        await pin_style(app, pilot, Zoom.FULL)
        # below the first screen (the packed layer is centred on it): it must have been scrolled to
        assert app.graph.tiles["setup"].y > app.canvas.scrollable_content_region.height
        await until(pilot, lambda: in_view(app, "setup"), what="setup in view after a zoom")
        await pilot.resize_terminal(*SMALL)
        await until(pilot, lambda: in_view(app, "setup"), what="setup in view after a resize")
        for key in ["l"] + ["j"] * 40 + ["k"] * 5 + ["l"] * 8:
            await pilot.press(key)
            assert in_view(app, app.canvas.selected), (key, app.canvas.selected)
            if app.canvas.selected == "gather":
                break
        assert app.canvas.selected == "gather"


async def test_a_resize_keeps_a_selection_on_the_right_in_view(new_session):
    async with open_app(new_session(CHAIN), start=False, size=(160, 45)) as (app, pilot):
        await select(app, pilot, "step-3")
        assert in_view(app, "step-3") and app.canvas.scroll_offset.x == 0
        await pilot.resize_terminal(*SMALL)
        await until(pilot, lambda: in_view(app, "step-3"), what="step-3 in view at 80 columns")
        await pilot.resize_terminal(160, 45)
        await until(pilot, lambda: in_view(app, "step-3"), what="step-3 in view again")


MANY = {f"task-{i:02d}": "sleep 30" for i in range(20)}


async def test_header_keeps_status_progress_and_counts_at_80_columns(new_session):
    async with open_app(new_session(MANY, max_parallel=4), size=SMALL) as (app, pilot):
        await until(pilot, lambda: app.model.counts and len(app.model.running()) == 4, what="4 running")
        app.header.refresh()
        await pilot.pause()
        first, second = screen_text(app).splitlines()[:2]
        assert "● running" in first and "elapsed" in first
        assert "━" in second and "0/20" in second and "4 running" in second and "16 queued" in second
        await pilot.press("p")
        await until(pilot, lambda: app.model.paused, what="paused")
        app.header.refresh()
        await pilot.pause()
        first, second = screen_text(app).splitlines()[:2]
        assert "PAUSED" in first and "p resumes" in first and "0/20" in second
        await pilot.press("C", "y")
        await until(pilot, lambda: app.model.finished, what="finished")
        app.header.refresh()
        await pilot.pause()
        first, second = screen_text(app).splitlines()[:2]
        assert "✘ finished: 20 cancelled" in first and "elapsed" in first  # was wrapped onto the second line
        assert "20/20" in second and "20 cancelled" in second


async def test_footer_drops_the_least_important_keys_and_says_so(new_session):
    async with open_app(new_session({"a": "true"}), start=False, size=SMALL) as (app, pilot):
        footer = screen_text(app).splitlines()[-1]
        assert len(footer.rstrip()) <= 80
        for kept in ("? Help", "c Cancel", "r Re-run", "p Pause", "q Quit", "^p"):
            assert kept in footer, kept
        assert "… 5 more" in footer and "w Wrap" not in footer
        await pilot.click("KeyFooter", offset=(footer.index("… 5 more") + 1, 0))  # the hint opens the help
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help from the '… more' key")


async def test_help_fits_80x24_scrolls_to_every_key_and_lists_the_log_pane_keys(new_session):
    async with open_app(new_session({"a": "true"}), start=False, size=SMALL) as (app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "Esc/? close" in text  # the way out is on screen
        assert all(len(line.rstrip()) <= 80 for line in text.splitlines())
        described = " ".join(what for _, what in app.screen.keys)
        assert "PgUp PgDn" in [key for key, _ in app.screen.keys] and "first line" in described
        seen = text
        for _ in range(10):  # scroll through with the keys the help names
            await pilot.press("pagedown")
            seen += screen_text(app)
        for row in (
            "Toggle wrapping",
            "top of the log",
            "bottom of the log",
            "combined view",
            "Quit;",
            "Stop every task now",
        ):
            assert row in seen, row
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_a_confirmation_keeps_its_answer_row_on_screen_at_80x24(new_session):
    async with open_app(new_session(MANY, max_parallel=4), size=SMALL) as (app, pilot):
        await until(pilot, lambda: len(app.model.running()) == 4, what="4 running")
        await pilot.press("C")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.pause()
        text = screen_text(app)
        assert "Cancel every unfinished task?" in text
        assert "No (n/Esc)" in text and "Yes (y)" in text and "n/Esc abort" in text and "Enter" in text
        assert all(len(line.rstrip()) <= 80 for line in text.splitlines())
        assert app.screen.focused.id == "no"  # the safe answer is highlighted
        await pilot.press("enter")
        assert not isinstance(app.screen, ConfirmScreen) and len(app.model.running()) == 4
