"""How the log pane draws: the Line API's `render_line`, each line parsed for colours once and cached, wrapping.

Only visible lines are read (`os.pread`) and parsed for colours (`Text.from_ansi`); finished lines stay rendered in a
small LRU. Memory is the line-offset index (8 bytes a line) plus that cache.

Wrapping keeps the scroll position in lines, not rows: in wrap mode `scroll_y` is the top line and the virtual
height is "the first line of the last screenful + one screen", so wrapping never needs the rows of every line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ....views.log_lines import LogLines
from ....views.terminal_text import printable
from ..virtual_size import set_virtual_size

Row = tuple[list[Segment], int]
"""One screen row of a rendered line: its segments and their width in cells."""

MAX_LINE_CHARS = 10_000
"""Longer lines are cut (with "…") when shown; search still sees all of them."""
CACHE_LINES = 256
"""Rendered lines kept: a few screens' worth, for scrolling back and forth."""


class _Styles(NamedTuple):
    base: Style
    match: Style
    match_line: Style
    current_match: Style
    selection: Style
    cursor: Style


if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class LogRendering(_ScrollView):
    """Mixed into `LogView` (which sets up the state named here in its `__init__`): its drawing."""

    _source: LogLines | None
    _wrap: bool
    _query: str
    _match: int | None
    _rendered: LRUCache[tuple, list[Row]]
    _max_width: int
    _rows: list[tuple[int, Row]]  # wrap mode: the rows on screen and the line each belongs to
    _rows_key: tuple | None
    _style_cache: _Styles | None

    if TYPE_CHECKING:  # the other parts of LogView

        def _mark_copy(self, line: int, strip: Strip) -> Strip: ...

    @property
    def line_count(self) -> int:
        return self._source.line_count if self._source is not None else 0

    def _top_line(self) -> int:
        return self.scroll_offset.y

    def _update_virtual_size(self) -> None:
        width, height = self.scrollable_content_region.size
        if self._wrap:  # the last screenful starts at the largest scroll_y
            size = Size(width, self._wrap_bottom_line(width, height) + height)
        else:
            size = Size(self._max_width, self.line_count)
        set_virtual_size(self, size)

    def _wrap_bottom_line(self, width: int, height: int) -> int:
        """The first line of the last screenful when wrapped: lines from it to the end fill at most `height` rows."""
        count = self.line_count
        rows, line = 0, count
        while line > 0:
            rows += len(self._rows_of(line - 1, width))
            if rows > height:
                break
            line -= 1
        return min(line, max(count - 1, 0))

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self._styles().base
        if self._source is None:
            return Strip.blank(width, base)
        if self._wrap:
            rows = self._wrapped_rows()
            if y >= len(rows):
                return Strip.blank(width, base)
            return self._mark_copy(rows[y][0], _fit(rows[y][1], 0, width, base))
        scroll_x, scroll_y = self.scroll_offset
        line = scroll_y + y
        if line >= self._source.line_count:
            return Strip.blank(width, base)
        return self._mark_copy(line, _fit(self._rows_of(line, None)[0], scroll_x, width, base))

    def _wrapped_rows(self) -> list[tuple[int, Row]]:
        """The screen's rows in wrap mode, from the top line down, computed once per change."""
        source = self._source
        width, height = self.scrollable_content_region.size
        top = self._top_line()
        key = (top, width, height, source.version if source else None, self._query, self._match)
        if key != self._rows_key:
            rows: list[tuple[int, Row]] = []
            line = top
            while source is not None and len(rows) < height and line < source.line_count:
                rows.extend((line, row) for row in self._rows_of(line, width))
                line += 1
            self._rows, self._rows_key = rows[:height], key
        return self._rows

    def _rows_of(self, line: int, wrap_width: int | None) -> list[Row]:
        """Line `line` rendered: one row, or several when wrapped at `wrap_width`. Finished lines are cached.

        The cache holds segments, not Strips: a Strip carries seven little caches of its own (and keeps its crops),
        and thousands of them made each full garbage collection take over 100 ms while following a fast log."""
        source = self._source
        assert source is not None
        number = source.dropped + line
        key = (source.generation, number, wrap_width)
        cacheable = line < source.complete_lines
        rows = self._rendered.get(key) if cacheable else None
        if rows is None:
            text = self._line_text(line, number == self._match)
            segments, length = list(text.render(self.app.console)), text.cell_len
            self._max_width = max(self._max_width, length)
            rows = [(segments, length)] if wrap_width is None else _wrap(segments, length, max(1, wrap_width))
            if cacheable:
                self._rendered.set(key, rows)
        return rows

    def _line_text(self, line: int, is_match: bool) -> Text:
        """The line parsed for colours, cut if very long, with the search highlighted."""
        assert self._source is not None
        styles = self._styles()
        raw = self._source.line(line, MAX_LINE_CHARS + 1)
        text = Text.from_ansi(printable(raw[:MAX_LINE_CHARS]), end="", no_wrap=True)
        text.expand_tabs()
        if len(raw) > MAX_LINE_CHARS:
            text.append(" …", Style(dim=True))
        text.stylize_before(styles.base)
        if is_match:
            text.stylize(styles.match_line)
        if self._query:
            text.highlight_words(
                [self._query], styles.current_match if is_match else styles.match, case_sensitive=False
            )
        return text

    def _styles(self) -> _Styles:
        """The widget's styles, looked up once per style change: `rich_style` walks the ancestors each time."""
        if self._style_cache is None:
            self._style_cache = _Styles(
                self.rich_style,
                self.get_component_rich_style("logview--match"),
                self.get_component_rich_style("logview--match-line"),
                self.get_component_rich_style("logview--current-match"),
                _background_of(self.get_component_rich_style("logview--selection")),
                _background_of(self.get_component_rich_style("logview--cursor")),
            )
        return self._style_cache

    def _forget_rendering(self) -> None:
        self._style_cache = None
        self._rendered.clear()
        self._rows_key = None


def _background_of(style: Style) -> Style:
    """Only the background of a component's style (blended over the widget's, as Textual resolves it): copy mode
    lights its lines without taking their colours away."""
    return Style(bgcolor=style.bgcolor)


def _wrap(segments: list[Segment], length: int, width: int) -> list[Row]:
    """Cut a rendered line into rows of `width` cells (character wrapping: log lines are rarely prose)."""
    if length <= width:
        return [(segments, length)]
    strips = Strip(segments, length).divide([*range(width, length, width), length])
    return [(list(strip), strip.cell_length) for strip in strips]


def _fit(row: Row, x: int, width: int, style: Style) -> Strip:
    """The part of `row` from cell `x` that fills `width` cells. The common case (short line, no horizontal scroll)
    makes one Strip where `crop_extend` would make three."""
    segments, length = row
    if x == 0 and length <= width:
        return Strip([*segments, Segment(" " * (width - length), style)] if length < width else segments, width)
    return Strip(segments, length).crop_extend(x, x + width, style)
