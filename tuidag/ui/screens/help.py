"""The `?` screen: every key and what it does, built from the same bindings the footer and command palette use.

Grouped by where a key works (the graph, the log pane, anywhere). The list scrolls inside a dialog that never grows
past the terminal: at 80x24 every key stays reachable with ↑↓/j k/PgUp/PgDn, and the way out is always on screen.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

CHROME = 8  # rows of the dialog around the list: border 2, padding 2, title + margin 2, key line + margin 2
Section = tuple[str, list[tuple[str, str]]]  # (where the keys work, [(key, what it does)])


class HelpScreen(ModalScreen[None]):
    AUTO_FOCUS = "#help-keys"
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close"),
        Binding("j", "scroll('down')", "Down", show=False),
        Binding("k", "scroll('up')", "Up", show=False),
    ]

    def __init__(self, sections: list[Section]) -> None:
        super().__init__()
        self.sections = sections

    @property
    def keys(self) -> list[tuple[str, str]]:
        """Every (key, description) row, in order."""
        return [row for _, rows in self.sections for row in rows]

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold #ffaf00", justify="right", no_wrap=True)
        table.add_column()
        for i, (where, rows) in enumerate(self.sections):
            if i:
                table.add_row("", "")
            table.add_row("", Text(where, style="bold #a8a8c8"))
            for key, what in rows:
                table.add_row(key, what)
        with Vertical(id="dialog"):
            yield Static("[b]tuidag keys[/b]", id="question")
            yield Static(
                "[b]↑↓[/b] [b]PgUp[/b]/[b]PgDn[/b] scroll   [b]Esc[/b]/[b]?[/b] close   "
                "[b]^p[/b] palette: the same actions",
                id="keys",
            )
            with VerticalScroll(id="help-keys"):
                yield Static(table)

    def on_resize(self) -> None:
        """The list takes what the screen has left after the dialog's frame, title and key line (the dialog fits its
        content when there is room, and the list scrolls when there is not)."""
        self.query_one("#help-keys").styles.max_height = max(3, self.size.height - CHROME)

    def action_scroll(self, direction: str) -> None:
        scroller = self.query_one("#help-keys", VerticalScroll)
        scroller.scroll_down() if direction == "down" else scroller.scroll_up()

    def action_close(self) -> None:
        self.dismiss(None)
