"""The log pane: a Line-API view over one task's log file, or over the combined log of all tasks.

What the app mounts and calls (`yield LogView(id="log")`):

    show_file(path, title=None)               show one task's log file (it may not exist yet) and follow its end
    show_combined(source, title="all tasks")  show a `CombinedLog`; the view refreshes it while it is shown
    search(query) -> bool                     find `query` in the whole log (ignoring case and colours) from the top
                                              of the screen on, wrapping around; jump there and highlight it
    search_next() -> bool, search_prev() -> bool
    match_count -> (index | None, total, done)  which match is highlighted, of how many (counted over ticks)
    toggle_follow(), toggle_wrap()
    one_title_row = True                      the bottom border is hidden: put the subtitle's facts in the title
    scroll_home()                             the first line; following stops
    scroll_end()                              the last line; following resumes
    following, wrap, path, title, line_count, query, match_line   (read-only properties)

Keys of the widget itself: arrows / PgUp / PgDn scroll, Home = `scroll_home`, End = `scroll_end`. The letter keys
(/ n N f w g G) are the app's. The border title shows the title and the log's path, the subtitle the line count and
the modes. Following: new output scrolls into view only while the view is at the bottom; scrolling up stops it,
scrolling back to the bottom, End, G or f resume it.

Search: every match on screen is highlighted, the current one (and its line) more. The subtitle says which match it is
of how many (`3/17`): a `MatchCount` counts the matching lines of the whole log in slices, at most `COUNT_BUDGET` a
tick, with `…` after the total until it is done; it goes on counting as the log grows.

Why it stays fast with a 100 MB log being written flat out: nothing is read per line or posted per write. A 20 Hz
timer asks the `LogWatcher` flag whether anything changed, then indexes new bytes in 256 KiB slices for at most
~12 ms, so one tick never stalls the event loop and a backlog is caught up over a few ticks, repainting 10 times a
second meanwhile. Only visible lines are read (`os.pread`) and parsed for colours (`Text.from_ansi`); finished lines
stay rendered in a small LRU. Memory is the line-offset index (8 bytes a line) plus that cache.
`benchmarks/log_bench.py` measures it. The worst event-loop lags left are Python's full garbage collections of
Textual's objects (~100 ms on a 2-core VM); an app that calls `gc.freeze()` once it is up avoids them.

Wrapping keeps the scroll position in lines, not rows: in wrap mode `scroll_y` is the top line and the virtual
height is "the first line of the last screenful + one screen", so wrapping never needs the rows of every line.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Union

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...views.combined_log import CombinedLog
from ...views.log_index import LogIndex
from ...views.log_watcher import LogWatcher
from ...views.match_count import MatchCount
from ...views.terminal_text import printable

LogSource = Union[LogIndex, CombinedLog]
Row = tuple[list[Segment], int]
"""One screen row of a rendered line: its segments and their width in cells."""

TICK = 1 / 20
"""Seconds between checks for new output."""
TICK_BUDGET = 0.012
"""Seconds of indexing a tick may spend; the rest waits for the next tick."""
SLICE = 256 << 10
"""Bytes indexed per `refresh` call within a tick (small enough not to overrun the budget by much)."""
BUSY_PAINT_INTERVAL = 0.1
"""While a backlog is indexed, repaint at most this often: a full repaint of a 160x45 screen costs Textual ~30 ms."""
MAX_LINE_CHARS = 10_000
"""Longer lines are cut (with "…") when shown; search still sees all of them."""
CACHE_LINES = 256
"""Rendered lines kept: a few screens' worth, for scrolling back and forth."""
COUNT_BUDGET = 0.008
"""Seconds of counting search matches a tick may spend (a 100 MB log is counted over a few seconds)."""


class _Styles(NamedTuple):
    base: Style
    match: Style
    match_line: Style
    current_match: Style


class LogView(ScrollView, can_focus=True):
    """A scrollable, searchable, following view of a log that may be far larger than memory."""

    DEFAULT_CSS = """
    LogView {
        overflow-x: auto;
        overflow-y: auto;
        scrollbar-gutter: stable;
    }
    LogView.-wrap {
        overflow-x: hidden;
    }
    LogView > .logview--match {
        background: $warning 45%;
    }
    LogView > .logview--current-match {
        background: $warning;
        color: $background;
        text-style: bold;
    }
    LogView > .logview--match-line {
        background: $primary 30%;
    }
    """
    COMPONENT_CLASSES = {"logview--match", "logview--current-match", "logview--match-line"}

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._source: LogSource | None = None
        self._owned: LogIndex | None = None
        self._watcher: LogWatcher | None = None
        self._title = ""
        self._following = True
        self._wrap = False
        self._query = ""
        self._match: int | None = None  # counted like `dropped + i`, so it survives lines leaving a CombinedLog
        self._count: MatchCount | None = None
        self._one_title_row = False
        self._rendered: LRUCache[tuple, list[Row]] = LRUCache(CACHE_LINES)
        self._max_width = 0
        self._rows: list[tuple[int, Row]] = []  # wrap mode: the rows on screen and the line each belongs to
        self._rows_key: tuple | None = None
        self._scrolling_myself = False
        self._titles = ("", "")
        self._style_cache: _Styles | None = None
        self._shown = (-1, 0, 0)  # the source's (version, generation, dropped) when last presented
        self._shown_at = 0.0

    # ------------------------------------------------------------------------------------------------ interface
    @property
    def following(self) -> bool:
        """True while new output scrolls into view."""
        return self._following

    @property
    def wrap(self) -> bool:
        return self._wrap

    @property
    def path(self) -> Path | None:
        """The file shown, or None for a combined log or nothing."""
        return self._source.path if isinstance(self._source, LogIndex) else None

    @property
    def title(self) -> str:
        return self._title

    @property
    def line_count(self) -> int:
        return self._source.line_count if self._source is not None else 0

    @property
    def query(self) -> str:
        """The last search."""
        return self._query

    @property
    def match_line(self) -> int | None:
        """The line of the highlighted match (0-based), or None."""
        if self._match is None or self._source is None or self._match < self._source.dropped:
            return None
        return self._match - self._source.dropped

    @property
    def match_count(self) -> tuple[int | None, int, bool]:
        """(which match is highlighted, from 1, or None; how many lines match so far; whether the count is done)."""
        if self._count is None or self._source is None:
            return None, 0, True
        index, total = self._count.position(self._source, self.match_line)
        return index, total, self._count.counted(self._source)

    @property
    def one_title_row(self) -> bool:
        return self._one_title_row

    @one_title_row.setter
    def one_title_row(self, value: bool) -> None:
        """With the bottom border hidden (the pane maximised on a small screen), the title carries what the subtitle
        says, before the path (which is cut first)."""
        self._one_title_row = value
        self._titles = ("", "")
        self._update_titles()

    def show_file(self, path: Path, title: str | None = None) -> None:
        """Show one log file, following its end. The file may not exist yet: it shows up when it does."""
        self._show(LogIndex(Path(path)), title or Path(path).name, owned=True)

    def show_combined(self, source: CombinedLog, title: str = "all tasks") -> None:
        """Show the combined log of all tasks. The caller keeps adding tasks to `source`; this view refreshes it."""
        self._show(source, title, owned=False)

    def search(self, query: str) -> bool:
        """Find `query` from the top of the screen on, wrapping around; jump to it and highlight it.

        The whole log is searched (a file a chunk at a time), ignoring case and colour codes. False if no line has
        it. Searching stops following, so the match stays on screen."""
        self._query = query
        self._start_count()
        return self._show_match(self._find(self._top_line(), backwards=False))

    def search_next(self) -> bool:
        """The next match after the highlighted one (or after the top of the screen), wrapping around."""
        match = self.match_line
        return self._show_match(self._find(self._top_line() if match is None else match + 1, backwards=False))

    def search_prev(self) -> bool:
        """The match before the highlighted one (or before the top of the screen), wrapping around."""
        match = self.match_line
        return self._show_match(self._find(self._top_line() - 1 if match is None else match - 1, backwards=True))

    def toggle_follow(self) -> None:
        if self._following:
            self._set_following(False)
        else:
            self.scroll_end()

    def toggle_wrap(self) -> None:
        """Wrap long lines at the pane's width, or show them whole with horizontal scrolling. Keeps the top line."""
        top = self._top_line()
        self._wrap = not self._wrap
        self.set_class(self._wrap, "-wrap")
        self._update_virtual_size()
        with self._scrolling():
            if self._following:
                self.scroll_to(x=0, y=self.max_scroll_y, animate=False, force=True)
            else:
                self.scroll_to(x=0, y=top, animate=False, force=True)
        self._update_titles()
        self.refresh()

    def scroll_home(self, *, animate: bool = False, immediate: bool = True, **kwargs: Any) -> None:
        """The first line; following stops (the same keyword arguments as `Widget.scroll_home`)."""
        self._set_following(False)
        with self._scrolling():
            super().scroll_home(animate=animate, immediate=immediate, **kwargs)

    def scroll_end(self, *, animate: bool = False, immediate: bool = True, **kwargs: Any) -> None:
        """The last line; following resumes (the same keyword arguments as `Widget.scroll_end`)."""
        self._set_following(True)
        with self._scrolling():
            super().scroll_end(animate=animate, immediate=immediate, **kwargs)

    def action_scroll_home(self) -> None:
        self.scroll_home()

    def action_scroll_end(self) -> None:
        self.scroll_end()

    # ---------------------------------------------------------------------------------------------- lifecycle
    def on_mount(self) -> None:
        self.set_interval(TICK, self._on_tick, name="log-view-tick")

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._owned is not None:
            self._owned.close()

    def on_resize(self, event: events.Resize) -> None:
        self._update_virtual_size()
        if self._following:
            self._scroll_to_end()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_rendering()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """A scroll the user made decides following: at the bottom it follows, anywhere else it stays put."""
        super().watch_scroll_y(old_value, new_value)
        if not self._scrolling_myself and self._source is not None:
            self._set_following(round(new_value) >= self.max_scroll_y)

    # ------------------------------------------------------------------------------------------------ reading
    def _show(self, source: LogSource, title: str, *, owned: bool) -> None:
        if self._owned is not None and self._owned is not source:
            self._owned.close()
        self._source, self._owned, self._title = source, source if owned else None, title
        self._match = None
        self._start_count()
        self._max_width = 0
        self._forget_rendering()
        self._following = True
        self._shown = (-1, source.generation, source.dropped)
        self._watch(source.watched)
        self._index_slice()
        self._present()

    def _watch(self, paths: frozenset[Path]) -> None:
        if self._watcher is not None and self._watcher.paths == paths:
            return
        if self._watcher is not None:
            self._watcher.stop(timeout=0)  # it ends by itself within a few ms; don't wait on the UI thread
        self._watcher = LogWatcher(paths)
        self._watcher.start()

    def _on_tick(self) -> None:
        source = self._source
        if source is None:
            return
        watched = source.watched
        rewatched = self._watcher is None or self._watcher.paths != watched
        if rewatched:
            # The log file appeared, or a combined log gained a task in another folder: read now, for what was
            # written before the new watcher looked (waiting for its first event could mean the safety poll, 2 s).
            self._watch(watched)
        if rewatched or self._watcher.changed() or not source.caught_up:
            self._index_slice()
        if source.version != self._shown[0] and (
                source.caught_up or time.monotonic() - self._shown_at >= BUSY_PAINT_INTERVAL):
            self._present()
        if not self._wrap and self.virtual_size.width < self._max_width:
            self._update_virtual_size()  # a wider line was drawn: make it reachable by scrolling
        if self._following and self.scroll_offset.y != self.max_scroll_y:
            self._scroll_to_end()  # the viewport or a scrollbar changed under us
        if self._count is not None and not self._count.counted(source):
            self._count_slice()
            self._update_titles()

    def _index_slice(self) -> None:
        """Index what the log gained, for at most `TICK_BUDGET` seconds; the next ticks do the rest."""
        source = self._source
        assert source is not None
        deadline = time.perf_counter() + TICK_BUDGET
        while True:
            source.refresh(max_bytes=SLICE)
            if source.caught_up or time.perf_counter() >= deadline:
                break

    def _present(self) -> None:
        """Show what was indexed since the last time: sizes, the follow scroll, titles, one repaint."""
        source = self._source
        assert source is not None
        _, generation, dropped = self._shown
        self._shown, self._shown_at = (source.version, source.generation, source.dropped), time.monotonic()
        if source.generation != generation:  # the file was truncated or replaced: it is a new log
            self._match = None
        self._rows_key = None
        self._update_virtual_size()
        if self._following:
            self._scroll_to_end()
        elif source.dropped != dropped:  # lines left the front of a combined log: keep the same ones on screen
            with self._scrolling():
                self.scroll_to(y=max(0, self.scroll_offset.y - (source.dropped - dropped)), animate=False)
        self._update_titles()
        self.refresh()

    # -------------------------------------------------------------------------------------------- scrolling
    @contextmanager
    def _scrolling(self) -> Iterator[None]:
        """Scrolls made by the view itself (following, jumps) don't count as the user's."""
        self._scrolling_myself = True
        try:
            yield
        finally:
            self._scrolling_myself = False

    def _scroll_to_end(self) -> None:
        with self._scrolling():
            self.scroll_to(y=self.max_scroll_y, animate=False)

    def _set_following(self, following: bool) -> None:
        if following != self._following:
            self._following = following
            self._update_titles()

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

    # ------------------------------------------------------------------------------------------------ search
    def _start_count(self) -> None:
        """Count the matches of the search in the log shown, the first slice now (a small log is counted at once)."""
        self._count = MatchCount(self._query) if self._query and self._source is not None else None
        if self._count is not None:
            self._count_slice()

    def _count_slice(self) -> None:
        source, count = self._source, self._count
        assert source is not None and count is not None
        deadline = time.perf_counter() + COUNT_BUDGET
        while True:
            count.advance(source, SLICE)
            if count.counted(source) or time.perf_counter() >= deadline:
                break

    def _find(self, start: int, backwards: bool) -> int | None:
        source = self._source
        if source is None or not self._query or source.line_count == 0:
            return None
        hit = source.search(self._query, start, backwards)
        wrapped_start = source.line_count - 1 if backwards else 0
        if hit is None and start != wrapped_start:  # wrap around, as a pager does
            hit = source.search(self._query, wrapped_start, backwards)
        return hit

    def _show_match(self, line: int | None) -> bool:
        source = self._source
        self._match = None if line is None or source is None else source.dropped + line
        self._forget_rendering()
        if line is not None:
            self._set_following(False)
            self._scroll_into_view(line)
        self._update_titles()
        self.refresh()
        return line is not None

    def _scroll_into_view(self, line: int) -> None:
        top, height = self._top_line(), self.scrollable_content_region.height
        if self._wrap:
            self._wrapped_rows()
            if any(index == line for index, _ in self._rows):
                return
            target = line  # wrapped lines above could push it off screen: put it at the top
        else:
            if top <= line < top + height:
                return
            target = line - height // 2
        with self._scrolling():
            self.scroll_to(y=max(0, target), animate=False)

    # --------------------------------------------------------------------------------------------- rendering
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self._styles().base
        if self._source is None:
            return Strip.blank(width, base)
        if self._wrap:
            rows = self._wrapped_rows()
            return _fit(rows[y][1], 0, width, base) if y < len(rows) else Strip.blank(width, base)
        scroll_x, scroll_y = self.scroll_offset
        line = scroll_y + y
        if line >= self._source.line_count:
            return Strip.blank(width, base)
        return _fit(self._rows_of(line, None)[0], scroll_x, width, base)

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
            text.highlight_words([self._query], styles.current_match if is_match else styles.match,
                                 case_sensitive=False)
        return text

    def _styles(self) -> _Styles:
        """The widget's styles, looked up once per style change: `rich_style` walks the ancestors each time."""
        if self._style_cache is None:
            self._style_cache = _Styles(self.rich_style, self.get_component_rich_style("logview--match"),
                                        self.get_component_rich_style("logview--match-line"),
                                        self.get_component_rich_style("logview--current-match"))
        return self._style_cache

    def _forget_rendering(self) -> None:
        self._style_cache = None
        self._rendered.clear()
        self._rows_key = None

    def _update_titles(self) -> None:
        """Border title: what is shown and where it comes from; subtitle: size and modes."""
        source = self._source
        if source is None:
            return
        where = str(source.path) if isinstance(source, LogIndex) else f"{len(source.paths)} logs"
        parts = [f"{source.line_count:,} line{'' if source.line_count == 1 else 's'}", "following" if self._following else "paused (End follows)"]
        if self._wrap:
            parts.append("wrap")
        if self._query:
            parts.append(self._search_summary())
        if self._one_title_row:
            titles = (Text.assemble((self._title, "bold"), " · ", " · ".join(parts), " · ", (where, "dim")), Text())
        else:
            titles = (Text.assemble((self._title, "bold"), " · ", (where, "dim")), Text(" · ".join(parts)))
        title = titles[0]
        if (title.plain, titles[1].plain) != self._titles:  # setting a title repaints: only when it changed
            self.border_title, self.border_subtitle = titles
            self._titles = (title.plain, titles[1].plain)

    def _search_summary(self) -> str:
        """`“query” 3/17 at line 120`: `?` while the match's place is not counted yet, `…` while counting; or
        `17 matches` when none is highlighted (another log shown since), or `not found`."""
        match = self.match_line
        index, total, done = self.match_count
        more = "" if done else "…"
        if match is None:
            return f"“{self._query}” " + (f"{total:,} matches{more}" if total or not done else "not found")
        return f"“{self._query}” {'?' if index is None else index}/{total:,}{more} at line {match + 1:,}"


def set_virtual_size(view: ScrollView, size: Size) -> None:
    """`view.virtual_size = size`, without the layout of the whole screen that assignment asks for.

    The reactive is declared with `layout=True`: every change re-arranges every widget on the screen and repaints them
    all (~20 ms at 160x45), and a followed log changes it on every tick, a new selection on every key press. A
    `ScrollView`'s own size never depends on its virtual size (ours are sized by CSS), only its scrollbars do, so
    update just those, as the layout pass would (`ScrollView._size_updated`); a scrollbar that appears or disappears
    still asks for a layout itself. Before the view's first layout there is nothing to save: assign as usual."""
    if size == view.virtual_size:
        return
    if not view.size:
        view.virtual_size = size
        return
    view.set_reactive(ScrollView.virtual_size, size)
    view._scroll_update(size)
    view.refresh()


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
