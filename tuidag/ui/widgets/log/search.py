"""Searching the log pane: find a query in the whole log, jump to it, and count its matches over ticks.

Every match on screen is highlighted, the current one (and its line) more. The subtitle says which match it is of
how many (`3/17`): a `MatchCount` counts the matching lines of the whole log in slices, at most `COUNT_BUDGET` a
tick, with `…` after the total until it is done; it goes on counting as the log grows.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from textual.scroll_view import ScrollView

from ....views.log_lines import LogLines
from ....views.match_count import MatchCount
from .following import SLICE
from .rendering import Row

COUNT_BUDGET = 0.008
"""Seconds of counting search matches a tick may spend (a 100 MB log is counted over a few seconds)."""


if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class LogSearch(_ScrollView):
    """Mixed into `LogView` (which sets up the state named here in its `__init__`): search and its match count."""

    _source: LogLines | None
    _wrap: bool
    _query: str
    _match: int | None  # counted like `dropped + i`, so it survives lines leaving a CombinedLog
    _count: MatchCount | None
    _rows: list[tuple[int, Row]]

    if TYPE_CHECKING:  # the other parts of LogView

        def _top_line(self) -> int: ...
        def _forget_rendering(self) -> None: ...
        def _set_following(self, following: bool) -> None: ...
        def _update_titles(self) -> None: ...
        def _wrapped_rows(self) -> list[tuple[int, Row]]: ...
        def _scrolling(self) -> AbstractContextManager[None]: ...
        def _match_shown(self, line: int) -> None: ...
        @property
        def cursor_line(self) -> int | None: ...

    @property
    def search_text(self) -> str:
        """The last search (not `query`: that is Textual's DOM query, which its select-all calls on a double click)."""
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

    def search(self, query: str) -> bool:
        """Find `query` from the top of the screen on, wrapping around; jump to it and highlight it.

        The whole log is searched (a file a chunk at a time), ignoring case and colour codes. False if no line has
        it. Searching stops following, so the match stays on screen. In copy mode it starts after the cursor."""
        self._query = query
        self._start_count()
        cursor = self.cursor_line
        return self._show_match(self._find(self._top_line() if cursor is None else cursor + 1, backwards=False))

    def search_next(self) -> bool:
        """The next match after the highlighted one (or after the top of the screen; in copy mode after the cursor),
        wrapping around."""
        match = self.cursor_line if self.cursor_line is not None else self.match_line
        return self._show_match(self._find(self._top_line() if match is None else match + 1, backwards=False))

    def search_prev(self) -> bool:
        """The match before the highlighted one (or before the top of the screen; in copy mode before the cursor),
        wrapping around."""
        match = self.cursor_line if self.cursor_line is not None else self.match_line
        return self._show_match(self._find(self._top_line() - 1 if match is None else match - 1, backwards=True))

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
            self._match_shown(line)
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

    def _search_summary(self) -> str:
        """`“query” 3/17 at line 120`: `?` while the match's place is not counted yet, `…` while counting; or
        `17 matches` when none is highlighted (another log shown since), or `not found`."""
        match = self.match_line
        index, total, done = self.match_count
        more = "" if done else "…"
        if match is None:
            return f"“{self._query}” " + (f"{total:,} matches{more}" if total or not done else "not found")
        return f"“{self._query}” {'?' if index is None else index}/{total:,}{more} at line {match + 1:,}"
