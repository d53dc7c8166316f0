"""The `:` / Ctrl+F finder: type part of a task's name, Enter jumps to the task, Esc returns to where you were.

The query goes to `views.fuzzy` on every keystroke; only the best `LIMIT` matches are listed (typing narrows faster
than scrolling through thousands), with a line saying how many matched in all. The list shows each task's state as
the run is now, from the model, as it is drawn. Focus stays in the input: ↑↓ PgUp PgDn move in the list.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ...views.fuzzy import Found, FuzzyFinder
from ..run_model import RunModel
from ..widgets.match_list import MatchList

LIMIT = 100


class FinderScreen(ModalScreen[str | None]):
    """Dismissed with the chosen task's name, or None (Esc)."""

    AUTO_FOCUS = "#finder-query"
    # Every size is fixed by CSS, none by content: a keystroke then repaints the list and the count line only. A
    # layout (what `height: auto` asks for on every change) re-renders the whole screen behind the dialog, ~20 ms.
    # (The see-through backdrop is in app.tcss: the app's `Screen` rule there would win over one here.)
    DEFAULT_CSS = """
    #finder {
        width: 84;
        max-width: 100%;
        height: 26;
        max-height: 100%;
        border: round #00afd7;
        border-title-color: #ffffff;
        background: #1c1c2a;
    }
    #finder-query {
        border: none;
        width: 1fr;
        height: 1;
        padding: 0 1;
        background: #303048;
    }
    #finder-results {
        height: 1fr;
        background: #1c1c2a;
    }
    #finder-count {
        dock: bottom;
        height: 1;
        color: #9e9e9e;
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "close", "Back", tooltip="Close the finder, nothing changes"),
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
    ]

    def __init__(self, finder: FuzzyFinder, model: RunModel) -> None:
        super().__init__()
        self.finder = finder
        self.model = model
        self.found = Found([], 0)
        self.results = MatchList(model, self.dismiss, id="finder-results")

    def compose(self) -> ComposeResult:
        with Vertical(id="finder") as frame:
            frame.border_title = "find a task"
            yield Input(placeholder="type part of a name: Enter jumps to it, Esc returns", id="finder-query")
            yield self.results
            yield Static(id="finder-count")

    def on_mount(self) -> None:
        self.show("")

    @on(Input.Changed, "#finder-query")
    def _query_changed(self, event: Input.Changed) -> None:
        self.show(event.value)

    def show(self, query: str) -> None:
        """List the best matches of `query`, the best one highlighted."""
        self.found = self.finder.search(query, LIMIT)
        self.results.set_matches(self.found.matches)
        total = len(self.finder.names)
        shown = len(self.found.matches)
        if not self.found.count:
            count = f"no task name holds these letters in this order (of {total})"
        elif shown < self.found.count:
            count = f"{self.found.count} of {total} tasks match; the best {shown} are listed: type more to narrow"
        else:
            count = f"{self.found.count:,} of {total:,} tasks" + (" match" if query.strip() else "")
        self.query_one("#finder-count", Static).update(count, layout=False)

    def action_move(self, lines: int) -> None:
        self.results.move(lines)

    def action_page(self, direction: int) -> None:
        self.results.move(direction * self.results.page)

    @on(Input.Submitted, "#finder-query")
    def _submitted(self) -> None:
        if self.results.chosen is None:
            self.app.bell()
        else:
            self.dismiss(self.results.chosen)

    def action_close(self) -> None:
        self.dismiss(None)
