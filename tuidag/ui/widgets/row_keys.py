"""The keys that move the selection through a pane of one task a row (the list, the timeline): one set, so both
panes answer them alike. A pane with these bindings implements `move(step)`, `page(step)` and `ends(step)`."""
from __future__ import annotations

from textual.binding import Binding

ROW_KEYS = [
        Binding("up,k", "move(-1)", "Up", show=False, tooltip="Select the task above"),
        Binding("down,j", "move(1)", "Down", show=False, tooltip="Select the task below"),
        Binding("pageup", "page(-1)", "Page up", show=False, tooltip="Select a page up"),
        Binding("pagedown", "page(1)", "Page down", show=False, tooltip="Select a page down"),
        Binding("home", "ends(-1)", "First", show=False, tooltip="Select the first task"),
        Binding("end", "ends(1)", "Last", show=False, tooltip="Select the last task"),
]
