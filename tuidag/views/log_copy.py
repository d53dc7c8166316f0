"""Lines of a log as a person reads them, for the clipboard: what the log pane's copy mode copies (no textual here).

A line is copied as it is shown: after its `\\r` overwrites, colour and every other escape sequence removed, other
control characters made visible (U+FFFD), so nothing a task printed can act on a terminal or a shell it is pasted
into. Lines are joined with `\\n`, without one after the last (a pasted command does not run by itself).

The copy is capped at `COPY_LIMIT` bytes: the clipboard is reached through OSC 52, one escape sequence carrying the
text in base64 (4/3 of its size), and terminals cap what they accept in one sequence (tmux at 1 MiB: a bigger one
is dropped whole and nothing is copied). 512 KiB of text is 683 KiB on the wire. A selection over the cap gets its
first lines that fit, and says so; reading stops at the cap, so a selection of 100,000 lines costs what the cap
costs, never the whole log: 0.04 s for lines of 40 characters, 0.14 s for 100,000 empty lines (which all fit).
"""

from __future__ import annotations

from typing import NamedTuple

from .log_lines import LogLines
from .terminal_text import printable, strip_ansi

COPY_LIMIT = 512 << 10
"""Bytes of UTF-8 text copied at most."""


class Copied(NamedTuple):
    text: str
    lines: int
    """Lines in `text` (the last one cut when a single line is over the cap)."""
    cut: bool
    """True when the selection did not fit: `text` holds its first `lines` lines."""


def plain_lines(source: LogLines, first: int, last: int, limit: int = COPY_LIMIT) -> Copied:
    """Lines `first` to `last` (both included, 0-based) of `source` as plain text, at most `limit` bytes of it."""
    parts: list[str] = []
    used = 0
    for i in range(first, last + 1):
        room = limit - used
        text = strip_ansi(printable(source.line(i, room + 1)))
        size = len(text.encode()) + (1 if parts else 0)
        if size > room:
            if not parts:  # one line longer than the cap: its beginning
                parts.append(text.encode()[:limit].decode(errors="ignore"))
            return Copied("\n".join(parts), len(parts), True)
        parts.append(text)
        used += size
    return Copied("\n".join(parts), len(parts), False)
