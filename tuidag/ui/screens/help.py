"""The `?` screen: every key and what it does, built from the same bindings the footer and command palette use."""
from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold #ffaf00", justify="right")
        table.add_column()
        for key, what in self.keys:
            table.add_row(key, what)
        with Vertical(id="dialog"):
            yield Static("[b]tuidag keys[/b]", id="question")
            yield Static(table, id="items")
            yield Static("Ctrl+P opens the command palette with the same actions.   Esc/? closes this help.",
                         id="keys")

    def action_close(self) -> None:
        self.dismiss(None)
