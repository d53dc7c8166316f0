"""The bottom border of a pane that takes the focus (the graph, the list, the timeline): its keys while it has the
focus, how to come back to it while it hasn't."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widget import Widget

if TYPE_CHECKING:  # mixed into a widget
    _Widget = Widget
else:
    _Widget = object


class FocusHint(_Widget):
    """Mixed into a widget with a border: `unfocused_hint` is a class attribute, `focused_hint()` may depend on the
    pane's state (the list names its sort order). Textual calls these handlers from any class of the widget's MRO."""

    unfocused_hint = ""

    def focused_hint(self) -> str:
        raise NotImplementedError

    def on_mount(self) -> None:
        self.border_subtitle = self.unfocused_hint

    def on_focus(self) -> None:
        self.border_subtitle = self.focused_hint()

    def on_blur(self) -> None:
        self.border_subtitle = self.unfocused_hint
