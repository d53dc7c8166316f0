"""Counting the lines of a log that a search finds, a slice at a time (no textual here).

The log pane shows "match 3 of 17" for a search. A log may be 100 MB and still growing, so the count is never taken in
one go: `advance` reads about one slice of complete lines (the UI calls it from a timer within a time budget), and
the lines counted so far are kept as the numbers of the matching lines, which answers both "how many" and "which one
is this" (a bisection). Lines are numbered as the log pane numbers them, `dropped + i`, so a combined log losing lines
at its front keeps the count right; a log renumbered (truncated, replaced, filtered: its `generation` changed) is
counted again from its start. Incomplete last lines can still change: they are looked at on every question instead.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left

from .log_lines import LONG_LINE_SEARCH_CHARS, LogLines
from .terminal_text import strip_ansi


class MatchCount:
    """The lines of one log that contain `query` (ignoring case and colours, as the log's `search` does)."""

    def __init__(self, query: str) -> None:
        self.query = query
        self._needle = query.lower()
        self._hits = array("q")  # numbers (`dropped + i`) of the matching complete lines counted so far, ascending
        self._next = 0  # the number of the first complete line not counted yet
        self._generation: int | None = None

    def counted(self, source: LogLines) -> bool:
        """Every complete line of `source` is counted."""
        return self._generation == source.generation and self._next >= source.dropped + source.complete_lines

    def advance(self, source: LogLines, max_bytes: int) -> None:
        """Count about `max_bytes` more of `source`'s complete lines."""
        if self._generation != source.generation:
            self._generation, self._hits, self._next = source.generation, array("q"), source.dropped
        dropped = source.dropped
        first = max(self._next - dropped, 0)
        hits, after = source.matching_lines(self.query, first, max_bytes)
        self._hits.extend(dropped + line for line in hits)
        self._next = dropped + after

    def position(self, source: LogLines, line: int | None) -> tuple[int | None, int]:
        """(which match line `line` is, from 1, or None if it is none or not counted yet; how many there are so far)."""
        if self._generation != source.generation:
            return None, 0
        hits, dropped, complete = self._hits, source.dropped, source.complete_lines
        gone = bisect_left(hits, dropped)  # counted lines that have left the front of the log since
        counted = len(hits) - gone
        partial = [
            i
            for i in range(complete, source.line_count)
            if self._needle in strip_ansi(source.line(i, LONG_LINE_SEARCH_CHARS)).lower()
        ]
        total = counted + len(partial)
        if line is None:
            return None, total
        if line >= complete:
            if line not in partial or not self.counted(source):
                return None, total
            return counted + partial.index(line) + 1, total
        number = dropped + line
        at = bisect_left(hits, number)
        return (at - gone + 1 if at < len(hits) and hits[at] == number else None), total
