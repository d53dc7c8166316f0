"""What the log pane reads, whichever log it shows, and the display rules every such log follows (no textual here).

Two kinds of log implement `LogLines`: one task's file indexed in place (`log_index.LogIndex`) and many tasks' files
interleaved into a bounded ring (`combined_log.CombinedLog`). The log pane (ui/widgets/log/) and the match
count (match_count.py) read logs through it.

Display rules shared by both: a bare `\\r` overwrites the line (only the text after the last one is shown, so
progress bars don't pile up), an incomplete last line is shown and updated as it grows, invalid UTF-8 is replaced,
ANSI escapes are kept in `line()` for rendering and ignored by `search()`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

CHUNK = 1 << 20
"""Bytes read per `os.pread` while indexing or searching."""

LONG_LINE_SEARCH_CHARS = 8 << 20
"""Lines longer than a chunk are searched in their first this many characters only (bounds memory)."""


@runtime_checkable
class LogLines(Protocol):
    """Lines numbered from 0, the last ones possibly incomplete (their text can still change). `dropped` counts
    lines that fell off the front, so `dropped + i` numbers a line for good; `generation` changes when the lines are
    renumbered (a log truncated or replaced, a new filter); `version` changes whenever what is shown changes."""

    dropped: int
    generation: int
    version: int
    caught_up: bool
    """False while `refresh(max_bytes)` left bytes unread."""

    @property
    def watched(self) -> frozenset[Path]:
        """The files or folders whose changes mean `refresh` has something to read."""
        ...

    @property
    def line_count(self) -> int: ...

    @property
    def complete_lines(self) -> int:
        """Lines whose text can no longer change; the incomplete ones follow them."""
        ...

    def refresh(self, max_bytes: int | None = None) -> int:
        """Read what was written since the last call (about `max_bytes` of it); return how many lines were added."""
        ...

    def line(self, i: int, max_chars: int | None = None) -> str:
        """Line `i` as displayed (ANSI kept), at most `max_chars` characters of it."""
        ...

    def search(self, query: str, start_line: int, backwards: bool = False) -> int | None:
        """The first line from `start_line` on (or back from it) containing `query`, ignoring case and ANSI."""
        ...

    def matching_lines(self, query: str, first: int, max_bytes: int = CHUNK) -> tuple[list[int], int]:
        """The complete lines from `first` on, about `max_bytes` of them, that `search` would find `query` in; and
        the line to go on from."""
        ...


def decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def clamp_start(start_line: int, line_count: int, backwards: bool) -> int | None:
    """Where a search from `start_line` really starts, or None if it runs off the log at once."""
    if backwards:
        return min(start_line, line_count - 1) if start_line >= 0 and line_count else None
    return max(start_line, 0) if start_line < line_count else None
