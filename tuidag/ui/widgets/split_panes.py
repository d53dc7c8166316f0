"""The graph over the log pane, split where the user wants it: `+`/`-` (the app's keys call `step`), dragging the log
pane's top border with the mouse, or the log pane maximised (`toggle_maximised`).

The split is kept as the log pane's share of the height, not as rows, so a terminal resize keeps the proportions;
each pane keeps at least `MIN_ROWS` rows whatever the share (it is clamped again on every resize). Until the user
moves it, the split is the one the stylesheet gives.
"""

from __future__ import annotations

from textual import events
from textual.containers import Vertical
from textual.widget import Widget

MIN_ROWS = 5
"""Rows each pane keeps, its border included: a graph row or three log lines still show."""
STEPS = 10
"""`step(1)` moves the split by this fraction of the height (at least a row)."""


class SplitPanes(Vertical):
    """Panes over a bottom one (its last child), split where the user wants; of those above, one shows at a time.

    Maximised, the top pane is hidden and the bottom one gets the whole height (the class `-maximised`, which the
    stylesheet also uses to drop the bottom pane's bottom border)."""

    def __init__(self, *children: Widget, id: str | None = None) -> None:
        super().__init__(*children, id=id)
        self._share: float | None = None  # the bottom pane's share of the height, once the user moved the split
        self._dragging = False

    @property
    def tops(self) -> list[Widget]:
        """The panes above the split: the graph, and the list that may take its place (one shows at a time)."""
        return list(self.children[:-1])

    @property
    def bottom(self) -> Widget:
        return self.children[-1]

    @property
    def maximised(self) -> bool:
        return self.has_class("-maximised")

    @property
    def dragging(self) -> bool:
        return self._dragging

    def toggle_maximised(self) -> bool:
        """Give the bottom pane the whole height, or put the split back; True if now maximised."""
        self.toggle_class("-maximised")
        return self.maximised

    def step(self, steps: int) -> None:
        """Grow the bottom pane by `steps` steps (shrink it if negative), within the bounds."""
        height = self.size.height
        # From the share, not the pane's size: a key pressed again before the next layout must go on from this one.
        rows = self.bottom.outer_size.height if self._share is None else round(self._share * height)
        self.split_at(rows + steps * max(1, round(height / STEPS)))

    def split_at(self, bottom_rows: int) -> None:
        """Give the bottom pane `bottom_rows` rows (within the bounds) and remember it as a share of the height."""
        height = self.size.height
        if not height:
            return
        self._apply(self._clamp(bottom_rows, height), height)

    def on_resize(self, event: events.Resize) -> None:
        if self._share is not None:
            height = event.size.height
            self._apply(self._clamp(round(self._share * height), height), height)

    @staticmethod
    def _clamp(rows: int, height: int) -> int:
        return max(min(rows, height - MIN_ROWS), min(MIN_ROWS, height // 2))

    def _apply(self, bottom_rows: int, height: int) -> None:
        """As fractions of whole rows (exact), which also keep the proportions on a resize until `on_resize` clamps
        them again."""
        self._share = bottom_rows / height
        for top in self.tops:
            top.styles.height = f"{height - bottom_rows}fr"
        self.bottom.styles.height = f"{bottom_rows}fr"

    # ------------------------------------------------------------------------------------------- the mouse
    def on_mouse_down(self, event: events.MouseDown) -> None:
        """A press on the bottom pane's top border row starts a drag (it bubbles here from the pane)."""
        if event.button == 1 and not self.maximised and event.screen_y == self.bottom.region.y:
            self._dragging = True
            self.capture_mouse()
            self.screen.clear_selection()  # the screen began selecting text at the press: this is a drag instead
            event.stop()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self.split_at(self.region.bottom - event.screen_y)
            event.stop()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()
            event.stop()

    def on_mouse_release(self, event: events.MouseRelease) -> None:
        self._dragging = False
