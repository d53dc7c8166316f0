"""A layout as plain text: tiles with their names, edges and arrows (how the layout's tests read it)."""

from __future__ import annotations

from .layout import GraphLayout, Tile
from .style import Orientation


def tile_text(tile: Tile, has_children: bool, orientation: Orientation = Orientation.LR) -> list[str]:
    """A tile as plain text. Full: the name in the top border, the exit mark where edges leave; compact: a
    placeholder glyph and the name; dots: one cell."""
    w = tile.width
    if tile.height == 1:
        return ["□"] if w == 1 else [_fit("□ " + tile.name, w).ljust(w)]
    title = _fit(tile.name, w - 6)
    top = "╭─ " + title + " " + "─" * (w - 5 - len(title)) + "╮"
    exit_right = has_children and orientation is Orientation.LR
    middle = "│" + " " * (w - 2) + ("├" if exit_right else "│")
    bottom = "╰" + "─" * (w - 2) + "╯"
    if has_children and orientation is Orientation.TD:
        bottom = bottom[: w // 2] + "┬" + bottom[w // 2 + 1 :]
    return [top, middle, bottom]


def render_text(layout: GraphLayout) -> list[str]:
    """The whole layout as plain text lines (trailing spaces stripped): tiles with names, edges, arrows."""
    rows = [[" "] * layout.width for _ in range(layout.height)]
    for y in range(layout.height):
        for x, text in layout.edge_runs(y):
            rows[y][x : x + len(text)] = text
    for tile in layout.tiles.values():
        for dy, text in enumerate(tile_text(tile, tile.name in layout.has_children, layout.orientation)):
            rows[tile.y + dy][tile.x : tile.x + tile.width] = text
    return ["".join(r).rstrip() for r in rows]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
