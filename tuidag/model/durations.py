"""Durations as users write them: a number of seconds, or 500ms / 5s / 2m / 1h."""

from __future__ import annotations

import math
import re

from .errors import short_repr

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)?\s*$")
#: The longest duration a DAG may give: a year. Month-long training jobs are real; anything longer is a typo, and
#: past a few hundred years the clocks the engine waits on overflow.
MAX_DURATION = 365 * 24 * 3600.0


class DurationTooLong(ValueError):
    """A well-formed duration over MAX_DURATION."""

    LIMIT = "at most 8760h (a year) is allowed"


def parse_duration(value: object) -> float:
    """Seconds as a float; ValueError with a user-facing message otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 500ms, 5s, 2m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an int of hundreds of digits
            seconds = math.inf if value > 0 else -math.inf
    else:
        match = DURATION_RE.match(str(value))
        if not match:
            raise ValueError(f"bad duration {short_repr(value)}: expected a number of seconds or 500ms / 5s / 2m / 1h")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0 or math.isnan(seconds) or (seconds == math.inf and isinstance(value, float)):
        raise ValueError(f"bad duration {short_repr(value)}: must be a finite number >= 0")
    if seconds > MAX_DURATION:  # also a number of hundreds of digits, which overflowed to infinity
        raise DurationTooLong(f"bad duration {short_repr(value)}: {DurationTooLong.LIMIT}")
    return seconds


def format_duration(seconds: float | None) -> str:
    """Short human form for tables and tiles: 0.4s, 12.3s, 4m05s, 1h02m."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
