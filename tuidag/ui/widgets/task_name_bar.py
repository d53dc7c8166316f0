"""The `t` prompt of the combined view: Enter shows only the tasks whose names contain the text (empty: every task),
Esc gives up."""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.widgets import Input


class TaskNameBar(Input):
    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, on_close: Callable[[], None], *, placeholder: str, id: str) -> None:
        super().__init__(placeholder=placeholder, id=id)
        self._on_close = on_close

    def action_close(self) -> None:
        self._on_close()
