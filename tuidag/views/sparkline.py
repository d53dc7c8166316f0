"""Numbers as a one-line chart of block characters, lowest to highest: how `tuidag runs` shows durations over time."""

from __future__ import annotations

from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float]) -> str:
    """One block per value, scaled from the smallest (▁) to the largest (█); all equal: all middle height, since
    there is no change to show."""
    if not values:
        return ""
    low, high = min(values), max(values)
    if high - low <= 0:
        return BLOCKS[len(BLOCKS) // 2 - 1] * len(values)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[round((v - low) / (high - low) * top)] for v in values)
