"""A question with a few answers, each on a button with its own key (the viewer's quit: detach, stop the run,
back). It looks like the yes/no dialog; the default answer is the highlighted one, so Enter takes it, and Esc
always means "do nothing" (dismissed with None; an answer whose key is `Esc` is that one). Unlike the yes/no dialog
there is no list to scroll, so nothing is docked (with only docked children the dialog's height came out as
nothing)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ChoiceScreen(ModalScreen[str | None]):
    """`choices`: (answer, label, key) in the order shown; `default` is the answer Enter takes."""

    DEFAULT_CSS = """
    ChoiceScreen {
        align: center middle;
        background: #000000 50%;
    }
    ChoiceScreen #choice-question, ChoiceScreen #choice-answer {
        height: auto;
    }
    """
    BINDINGS = [
        Binding("escape", "answer('')", "Back", show=False),
        Binding("left,h", "app.focus_previous", "Other answer", show=False),
        Binding("right,l", "app.focus_next", "Other answer", show=False),
    ]

    def __init__(self, question: str, choices: list[tuple[str, str, str]], default: str, note: str = "") -> None:
        super().__init__()
        self.question = question
        self.choices = choices
        self.default = default
        self.note = note
        self._keys = {key: answer for answer, _label, key in choices}

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.question, id="choice-question")  # markup: whoever asks escapes what it names
            with Vertical(id="choice-answer"):
                if self.note:
                    yield Static(self.note, id="note", markup=False)
                with Horizontal(id="choices"):
                    for answer, label, key in self.choices:
                        yield Button(f"{label} ({key})", id=f"choice-{answer}", compact=True)
                keys = "   ".join(f"[b]{key}[/b] {label.lower()}" for _answer, label, key in self.choices)
                yield Static(f"{keys}   [b]Enter[/b] the highlighted answer", id="keys")

    def on_mount(self) -> None:
        self.query_one(f"#choice-{self.default}", Button).focus()

    def on_key(self, event) -> None:
        answer = self._keys.get(event.character or "")
        if answer is not None:
            event.stop()
            self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id is not None:  # every answer's button has its id
            self.dismiss(event.button.id.removeprefix("choice-"))

    def action_answer(self, answer: str) -> None:
        self.dismiss(answer or None)
