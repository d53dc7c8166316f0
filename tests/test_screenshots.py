"""The README's screenshots draw box characters joined, as a terminal does (#13: Textual's SVG, turned into PNG, left
gaps between rows: rounded corners open, vertical lines dashed, tiles that looked broken)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TILE = ["╭──╮", "│  │", "│  │", "╰──╯"]


def make():
    spec = importlib.util.spec_from_file_location("screenshots_make", REPO / "screenshots" / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(
    not (Path("/usr/share/fonts/truetype/dejavu") / "DejaVuSansMono.ttf").exists(),
    reason="the screenshots' font (DejaVu Sans Mono) is not installed",
)
def test_a_tiles_border_is_drawn_without_gaps():
    from rich.segment import Segment
    from rich.style import Style

    shots = make()
    white = Style(color="#ffffff", bgcolor="#000000")
    image = shots.draw([[Segment(line, white)] for line in TILE], len(TILE[0])).convert("L")
    cell_w, cell_h = image.width // len(TILE[0]), image.height // len(TILE)

    def lit(x: int, y: int) -> bool:
        return image.getpixel((x, y)) > 128

    # the vertical sides: some pixel column is lit from the middle of the top row to the middle of the bottom row
    for column in (0, len(TILE[0]) - 1):
        xs = range(column * cell_w, (column + 1) * cell_w)
        ys = range(cell_h // 2 + 2, (len(TILE) - 1) * cell_h + cell_h // 2 - 2)
        assert any(all(lit(x, y) for y in ys) for x in xs), f"a gap in the side in column {column}"
    # the top and the bottom: some pixel row is lit from the middle of the first cell to the middle of the last
    for row in (0, len(TILE) - 1):
        ys = range(row * cell_h, (row + 1) * cell_h)
        xs = range(cell_w // 2 + 2, (len(TILE[0]) - 1) * cell_w + cell_w // 2 - 2)
        assert any(all(lit(x, y) for x in xs) for y in ys), f"a gap in the edge in row {row}"
