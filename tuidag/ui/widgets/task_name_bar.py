"""The `t` prompt of the combined view: Enter shows only the tasks whose names contain the text (empty: every task),
Esc gives up."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


class TaskNameBar(Input):
    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def action_close(self) -> None:
        self.app.close_task_name_bar()
