"""A yes/no question over the run screen, listing what the action will affect.

The safe answer is the default, as in k9s: the dialog opens with "No" highlighted, so Enter (or Esc, or n) keeps
things as they are; confirming takes `y`, or moving to "Yes" first. The question and the answer row are docked, so
on a small terminal the list of tasks shrinks and scrolls, never the way to answer.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

MAX_LISTED = 12


class ConfirmScreen(ModalScreen[bool]):
    AUTO_FOCUS = "#no"
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
        Binding("left,right,h,l", "app.focus_next", "Other answer", show=False),
    ]

    def __init__(self, question: str, items: list[str], note: str = "", *, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question = question
        self.items = items
        self.note = note
        self.yes, self.no = yes, no

    def compose(self) -> ComposeResult:
        listed = [f"  • {item}" for item in self.items[:MAX_LISTED]]
        if len(self.items) > MAX_LISTED:
            listed.append(f"  … and {len(self.items) - MAX_LISTED} more")
        with Vertical(id="dialog"):
            yield Static(self.question, id="question")  # markup: whoever asks escapes what it names
            with Vertical(id="answer"):
                if self.note:
                    yield Static(self.note, id="note", markup=False)
                with Horizontal(id="choices"):
                    yield Button(f"{self.no} (n/Esc)", id="no", compact=True)
                    yield Button(f"{self.yes} (y)", id="yes", compact=True)
                yield Static(
                    "[b]y[/b] confirm   [b]n[/b]/[b]Esc[/b] abort   [b]Enter[/b] the highlighted answer", id="keys"
                )
            if listed:
                with VerticalScroll(id="items", can_focus=False):
                    yield Static("\n".join(listed), markup=False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
