"""The keys that move the selection through a pane of one task a row (the list, the timeline): one set of keys and
one way to answer them, so both panes behave alike. A pane lists `*ROW_KEYS` in its BINDINGS (Textual merges the
BINDINGS of widget classes only) and derives from `RowSelection` for the actions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.binding import Binding

ROW_KEYS = [
    Binding("up,k", "move(-1)", "Up", show=False, tooltip="Select the task above"),
    Binding("down,j", "move(1)", "Down", show=False, tooltip="Select the task below"),
    Binding("pageup", "page(-1)", "Page up", show=False, tooltip="Select a page up"),
    Binding("pagedown", "page(1)", "Page down", show=False, tooltip="Select a page down"),
    Binding("home", "ends(-1)", "First", show=False, tooltip="Select the first task"),
    Binding("end", "ends(1)", "Last", show=False, tooltip="Select the last task"),
]


class RowSelection:
    """The actions of ROW_KEYS. The pane has `rows` (task names, in order), `_index` (name -> position in `rows`),
    `selected`, `select(name)` and `page` (rows in view); `tasks_per_row` is more than 1 where a row shows several."""

    rows: list[str]
    _index: dict[str, int]
    selected: str | None

    if TYPE_CHECKING:  # the pane's

        @property
        def page(self) -> int: ...
        def select(self, name: str, *, scroll: bool = True) -> None: ...

    @property
    def tasks_per_row(self) -> int:
        return 1

    def _move_to(self, i: int) -> None:
        if self.rows:
            self.select(self.rows[max(0, min(i, len(self.rows) - 1))])

    def _current(self) -> int:
        return self._index.get(self.selected, 0) if self.selected else 0

    def action_move(self, delta: int) -> None:
        self._move_to(self._current() + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self._current() + direction * max(1, self.page - 1) * self.tasks_per_row)

    def action_ends(self, direction: int) -> None:
        self._move_to(0 if direction < 0 else len(self.rows) - 1)
