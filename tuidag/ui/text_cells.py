"""Short texts for cells of a fixed width, shared by the graph's tiles and the list's rows."""

from __future__ import annotations


def fit(text: str, width: int) -> str:
    """`text` within `width` cells: cut with an ellipsis when longer."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def format_bytes(n: int) -> str:
    """A size in at most four cells: 512B, 1.5K, 12M, 3.2G."""
    value = float(n)
    for unit in "BKMG":
        if value < 1024 or unit == "G":
            break
        value /= 1024
    return f"{value:.0f}{unit}" if unit == "B" or value >= 10 else f"{value:.1f}{unit}"
