"""The finder's results: one line per matching task (state glyph, the name with the matched letters lit, state word).

A Line-API widget that draws only the visible lines, straight from segments: the list changes on every keystroke,
and Textual's `OptionList` spent as long building and measuring a hundred options (~10 ms) as the search itself. Its
height comes from CSS, never from the matches, so a new list is a repaint, not a layout of the screen.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...views.fuzzy import Match
from ..run_model import RunModel
from ..state_style import LOOKS
from .virtual_size import set_virtual_size

MATCHED = Style(bold=True, underline=True, color="#ffaf00")
HIGHLIGHT = Style(bgcolor="#303048", bold=True)


class MatchList(ScrollView, can_focus=False):
    DEFAULT_CSS = """
    MatchList {
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }
    """

    def __init__(self, model: RunModel, on_choose: Callable[[str], object], *, id: str | None = None):
        """`on_choose(name)` is called when a line is clicked."""
        super().__init__(id=id)
        self.model = model
        self.on_choose = on_choose
        self.matches: list[Match] = []
        self.highlighted: int | None = None

    def set_matches(self, matches: list[Match]) -> None:
        """Show these matches from the top, the first one highlighted."""
        self.matches = matches
        self.highlighted = 0 if matches else None
        set_virtual_size(self, Size(0, len(matches)))
        self.scroll_to(y=0, animate=False, immediate=True)
        self.refresh()

    @property
    def chosen(self) -> str | None:
        return None if self.highlighted is None else self.matches[self.highlighted].name

    def move(self, lines: int) -> None:
        """Move the highlight by `lines` (a page is the visible height), stopping at either end."""
        if self.highlighted is None:
            return
        self.highlighted = max(0, min(len(self.matches) - 1, self.highlighted + lines))
        self.scroll_to_region(Region(0, self.highlighted, 1, 1), animate=False, immediate=True)
        self.refresh()

    @property
    def page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def render_line(self, y: int) -> Strip:
        index = y + self.scroll_offset.y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self.matches):
            return Strip.blank(width, base)
        match = self.matches[index]
        if index == self.highlighted:
            base += HIGHLIGHT
        look = LOOKS[self.model.snapshots[match.name].state]
        colour = base + Style(color=look.colour)
        segments = [Segment(" ", base), Segment(look.glyph, colour), Segment(" ", base)]
        name, lit, start = match.name, base + MATCHED, 0
        for p in match.positions:
            if p > start:
                segments.append(Segment(name[start:p], base))
            segments.append(Segment(name[p], lit))
            start = p + 1
        segments += [Segment(name[start:] + "  ", base), Segment(look.word, colour)]
        return Strip(segments).crop_extend(0, width, base)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and 0 <= offset.y + self.scroll_offset.y < len(self.matches):
            self.on_choose(self.matches[offset.y + self.scroll_offset.y].name)
