"""The footer: one line of the app's keys, drawn by one widget, that presses a key when it is clicked."""

from __future__ import annotations

from pilot_helpers import open_app, until

from tuidag.ui.screens.help import HelpScreen
from tuidag.ui.widgets.key_footer import KeyFooter


def footer_text(app) -> str:
    return str(app.footer.render())


def where(app, description: str) -> int:
    """The column of a key's description on the footer line."""
    return footer_text(app).index(description)


async def test_the_footer_shows_every_shown_key_and_is_one_widget(new_session):
    async with open_app(new_session({"a": "sleep 0.1"})) as (app, _pilot):
        text = footer_text(app)
        shown = [b for b in app.BINDINGS if b.show]
        assert [b.description for b in shown] == [
            "Help",
            "Cancel",
            "Cancel all",
            "Re-run",
            "Detail",
            "Pause",
            "Search",
            "Follow",
            "Wrap",
            "All logs",
            "Quit",
            "List",
        ]
        positions = [text.index(f" {app.get_key_display(b)} {b.description} ") for b in shown]
        assert positions == sorted(positions)  # in binding order
        assert text.rstrip().endswith("^p palette")
        assert not app.footer.children  # no widget per key: a change repaints a line, not the screen's layout


async def test_clicking_a_key_in_the_footer_presses_it(new_session):
    session = new_session({"a": "sleep 30", "b": {"run": "true", "depends_on": ["a"]}})
    async with open_app(session) as (app, pilot):
        await pilot.click(KeyFooter, offset=(where(app, "Pause"), 0))
        await until(pilot, lambda: app.model.paused, what="paused from the footer")
        await pilot.click(KeyFooter, offset=(where(app, "Help"), 0))
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help from the footer")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), what="help closed")
        gap = footer_text(app).index("^p") - 3  # blank space between the keys and the palette's key
        await pilot.click(KeyFooter, offset=(gap, 0))
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen) and app.model.paused  # a click on no key does nothing
