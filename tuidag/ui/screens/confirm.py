"""A yes/no question over the run screen, listing what the action will affect (y/Enter confirms, n/Esc aborts)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

MAX_LISTED = 12


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, items: list[str], note: str = "") -> None:
        super().__init__()
        self.question = question
        self.items = items
        self.note = note

    def compose(self) -> ComposeResult:
        listed = [f"  • {item}" for item in self.items[:MAX_LISTED]]
        if len(self.items) > MAX_LISTED:
            listed.append(f"  … and {len(self.items) - MAX_LISTED} more")
        with Vertical(id="dialog"):
            yield Static(self.question, id="question")
            if listed:
                yield Static("\n".join(listed), id="items")
            if self.note:
                yield Static(self.note, id="note")
            yield Static("[b]y[/b]/[b]Enter[/b] confirm    [b]n[/b]/[b]Esc[/b] abort", id="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
