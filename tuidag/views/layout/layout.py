"""The placed graph as the canvas reads it: tiles, the lookups it needs, and the edge text of any piece of a canvas
line, made on demand and cached; as plain data for the layout cache."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .edges import EdgeDrawing
from .style import LayoutStyle, Orientation, Zoom

EDGE_CHUNK = 256  # edge text is made and cached per line in pieces this wide: a screen needs one or two


@dataclass(frozen=True, slots=True)
class Tile:
    """A task's box on the canvas, in canvas cells. `packed`: it sits in a block (its edges meet the block's)."""

    name: str
    layer: int
    x: int
    y: int
    width: int
    height: int = 3
    packed: bool = False

    @property
    def mid(self) -> int:
        """The row edges attach to (left to right)."""
        return self.y + self.height // 2

    @property
    def centre(self) -> int:
        """The column edges attach to (top down)."""
        return self.x + self.width // 2

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height


class GraphLayout:
    """The placed graph: tiles, the lookups the canvas needs, and the edge text of any piece of a canvas line."""

    def __init__(
        self,
        style: LayoutStyle,
        tiles: dict[str, Tile],
        columns: list[list[str]],
        width: int,
        height: int,
        edges: EdgeDrawing,
        has_children: frozenset[str],
    ):
        self.style = style
        self.tiles = tiles
        self.columns = columns  # task names per layer, in reading order
        self.width = width
        self.height = height
        self.has_children = has_children  # tasks not in a block that have children (their tiles mark the exit)
        self._edges = edges
        self._chunk_runs = lru_cache(maxsize=4096)(self._chunk)
        self.line_tiles: list[list[str]] = [[] for _ in range(height)]  # per line: tiles crossing it, by x
        for tile in sorted(tiles.values(), key=lambda t: t.x):
            for y in range(tile.y, tile.y + tile.height):
                self.line_tiles[y].append(tile.name)

    @property
    def zoom(self) -> Zoom:
        return self.style.zoom

    @property
    def orientation(self) -> Orientation:
        return self.style.orientation

    def to_data(self) -> tuple:
        """The layout as plain data (for `marshal`); `from_data` makes the same layout from it."""
        e = self._edges
        tiles = [(t.name, t.layer, t.x, t.y, t.width, t.height, t.packed) for t in self.tiles.values()]
        style = (self.style.zoom.value, self.style.orientation.name, self.style.view)
        return (
            style,
            tiles,
            self.columns,
            self.width,
            self.height,
            self.has_children,
            e.transposed,
            e.hsegs,
            e.track_xs,
            e.tracks,
            e.arrows,
        )

    @classmethod
    def from_data(cls, data: tuple) -> GraphLayout:
        style, tiles, columns, width, height, has_children, transposed, hsegs, track_xs, tracks, arrows = data
        edges = EdgeDrawing(transposed)
        edges.hsegs, edges.track_xs, edges.tracks, edges.arrows = hsegs, track_xs, tracks, arrows
        zoom, orientation, view = style
        return cls(
            LayoutStyle(Zoom(zoom), Orientation[orientation], tuple(view)),
            {t[0]: Tile(*t) for t in tiles},
            columns,
            width,
            height,
            edges,
            frozenset(has_children),
        )

    def edge_runs(self, y: int, start: int = 0, end: int | None = None) -> list[tuple[int, str]]:
        """(x, text) runs of edge characters on canvas line y between columns start and end, sorted by x."""
        end = self.width if end is None else min(end, self.width)
        runs: list[tuple[int, str]] = []
        for chunk in range(start // EDGE_CHUNK, (end - 1) // EDGE_CHUNK + 1):
            for x, text in self._chunk_runs(y, chunk):
                if x < start:
                    text, x = text[start - x :], start
                if x + len(text) > end:
                    text = text[: end - x]
                if text:
                    runs.append((x, text))
        return runs

    def _chunk(self, y: int, chunk: int) -> list[tuple[int, str]]:
        return self._edges.runs(y, chunk * EDGE_CHUNK, (chunk + 1) * EDGE_CHUNK)

    def tile_at(self, x: int, y: int) -> str | None:
        if not 0 <= y < self.height:
            return None
        for name in self.line_tiles[y]:
            if self.tiles[name].contains(x, y):
                return name
        return None

    def fits(self, view: tuple[int, int]) -> bool:
        return self.width <= view[0] and self.height <= view[1]
