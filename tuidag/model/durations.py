"""Durations as users write them: a number of seconds, or 500ms / 5s / 2m / 1h."""
from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds as a float; ValueError with a user-facing message otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 500ms, 5s, 2m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _RE.match(str(value))
        if not match:
            raise ValueError(f"bad duration {value!r}: expected a number of seconds or 500ms / 5s / 2m / 1h")
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"bad duration {value!r}: must be a finite number >= 0")
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
