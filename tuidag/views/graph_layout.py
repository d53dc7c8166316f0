"""Where every task goes on the graph canvas and how the edges between them are drawn, as plain text.

A pure function of the DAG and a `LayoutStyle` (no textual), so the UI canvas only paints and the geometry is
unit-testable as text.

- Layers are longest-path layers: dependencies flow left to right (`Orientation.LR`) or top down (`TD`). The layout
  is computed in one frame of reference, "across" (the axis a layer's tasks stack along: rows in LR) and "along"
  (the axis layers follow each other on: columns in LR), and turned into screen cells at the end, so both
  orientations share every step below. A task's box is a `Tile`: a bordered box (`Zoom.FULL`), one line
  (`COMPACT`), or one cell (`DOTS`).
- A layer with more tasks than fit across the screen is packed into a block, a grid of several sub-columns (rows in
  TD) that fills the screen the other way; the edges into and out of it meet one bracket on each side, a bus,
  instead of one line per task.
- An edge that skips layers passes through the skipped ones on a "dummy" slot (a one-cell pass-through); the long
  edges of one node share their dummies until they reach their children, so a fan-out over several layers is one
  line.
- The order within a layer comes from a few barycenter sweeps, keeping the order with the fewest crossings.
- Positions across pull each slot towards its neighbours (down and up passes); within a layer the order is kept and
  slots never overlap, solved exactly per layer by isotonic regression (pool adjacent violators).
- Edges are routed in the gap between two layers: each parent gets a track, shared by parents whose spans don't
  meet and by parents whose only child is the same node (a bus into it). Every cell collects direction bits mapped
  to box-drawing characters, so fan-in and fan-out merge into trees of ┌┐└┘├┤┬┴┼ with an arrow at the child. Tracks
  are ordered so that a parent's line never runs into another parent's junction on its own row: read along the
  edges, a line only joins what it really feeds.
- Edge text is made per line on demand and cached: a big DAG's edges cover far more cells than a screen shows.
- Left to right, a graph wider than the screen wraps into bands stacked down it where it can (`graph_bands`): a
  long chain reads like lines of text, each band's end joined to the next band's start.
"""
from __future__ import annotations

import heapq
import math
import os
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache, partial
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Sequence

from .graph_bands import WRAP_EXIT, WRAP_MARGIN, choose_cuts

ORDER_SWEEPS = 4     # down+up barycenter sweep pairs, at most
SETTLED = 0.05       # a sweep pair that removes less than this share of the crossings left is the last one
POSITION_PASSES = 4  # down/up placement passes
ARROW = "▶"          # an edge's end at its child, left to right
ARROW_DOWN = "▼"     # ... top down
LAYOUT_FORMAT = 2    # of `GraphLayout.to_data`, for the layout cache
EDGE_CHUNK = 256     # edge text is made and cached per line in pieces this wide: a screen needs one or two
DOTS_MIN_TASKS = 200  # fewer tasks than this are never shown as dots on their own: their names matter more
DETAIL_WIDTH = 34    # full tiles grow to this where the screen has room: `gpu:0,1 cpu 100% mem 12.3G` in the border
TRACK_SPARE = 3      # cells a gap between layers may need beyond the narrowest, for its edges' tracks

_U, _D, _L, _R = 1, 2, 4, 8
_BOX = {
    _L | _R: "─", _U | _D: "│", _D | _R: "┌", _D | _L: "┐", _U | _R: "└", _U | _L: "┘",
    _U | _D | _R: "├", _U | _D | _L: "┤", _L | _R | _D: "┬", _L | _R | _U: "┴", _U | _D | _L | _R: "┼",
    _L: "─", _R: "─", _U: "│", _D: "│",
}
#: The same bits seen transposed (top down): left becomes up, right becomes down.
_BOX_TD = {bits: _BOX[(bits & _L and _U) | (bits & _R and _D) | (bits & _U and _L) | (bits & _D and _R)]
           for bits in _BOX}


class Zoom(Enum):
    """How much of a task a tile shows; `z` / `Z` step through them."""

    FULL = "full"        # a bordered box: name, state and duration, details
    COMPACT = "compact"  # one line: glyph, name, duration
    DOTS = "dots"        # one cell, coloured by state: a heat map of thousands

    def step(self, by: int) -> Zoom:
        members = list(Zoom)
        return members[min(len(members) - 1, max(0, members.index(self) + by))]


class Orientation(Enum):
    LR = "left to right"
    TD = "top down"

    def other(self) -> Orientation:
        return Orientation.TD if self is Orientation.LR else Orientation.LR


class Metrics(NamedTuple):
    """Sizes in screen cells of one zoom level in one orientation. `slot_gap` is left between two slots of a layer
    (across), `row_gap` between two rows of a block (along); a gap between layers is `lead` cells more than its
    tracks, and at least `min_gap`."""

    tile_height: int
    min_width: int
    max_width: int
    name_room: int   # width = name + this, within [min_width, max_width]
    slot_gap: int
    row_gap: int
    min_gap: int
    lead: int
    block_pad: int   # cells between a block's bracket and its tiles, along (the bracket's own cell included)


_METRICS = {
    (Zoom.FULL, Orientation.LR): Metrics(3, 22, 32, 6, 1, 2, 6, 4, 2),
    (Zoom.FULL, Orientation.TD): Metrics(3, 22, 32, 6, 2, 1, 3, 2, 1),
    (Zoom.COMPACT, Orientation.LR): Metrics(1, 14, 28, 10, 0, 2, 4, 4, 2),
    (Zoom.COMPACT, Orientation.TD): Metrics(1, 14, 28, 10, 2, 0, 2, 2, 1),
    (Zoom.DOTS, Orientation.LR): Metrics(1, 1, 1, 0, 0, 0, 3, 2, 1),
    (Zoom.DOTS, Orientation.TD): Metrics(1, 1, 1, 0, 0, 0, 2, 2, 1),
}


@dataclass(frozen=True, slots=True)
class LayoutStyle:
    """What a layout is made for: zoom level, orientation, and the screen it should fit (blocks are packed for it).
    `view` = (columns, rows) of the canvas; (0, 0) packs nothing."""

    zoom: Zoom = Zoom.FULL
    orientation: Orientation = Orientation.LR
    view: tuple[int, int] = (0, 0)

    @property
    def metrics(self) -> Metrics:
        return _METRICS[self.zoom, self.orientation]


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

    def __init__(self, style: LayoutStyle, tiles: dict[str, Tile], columns: list[list[str]], width: int, height: int,
                 edges: _EdgeDrawing, has_children: frozenset[str]):
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
        return (style, tiles, self.columns, self.width, self.height, self.has_children,
                e.transposed, e.hsegs, e.track_xs, e.tracks, e.arrows)

    @classmethod
    def from_data(cls, data: tuple) -> GraphLayout:
        style, tiles, columns, width, height, has_children, transposed, hsegs, track_xs, tracks, arrows = data
        edges = _EdgeDrawing(transposed)
        edges.hsegs, edges.track_xs, edges.tracks, edges.arrows = hsegs, track_xs, tracks, arrows
        zoom, orientation, view = style
        return cls(LayoutStyle(Zoom(zoom), Orientation[orientation], tuple(view)), {t[0]: Tile(*t) for t in tiles},
                   columns, width, height, edges, frozenset(has_children))

    def edge_runs(self, y: int, start: int = 0, end: int | None = None) -> list[tuple[int, str]]:
        """(x, text) runs of edge characters on canvas line y between columns start and end, sorted by x."""
        end = self.width if end is None else min(end, self.width)
        runs: list[tuple[int, str]] = []
        for chunk in range(start // EDGE_CHUNK, (end - 1) // EDGE_CHUNK + 1):
            for x, text in self._chunk_runs(y, chunk):
                if x < start:
                    text, x = text[start - x:], start
                if x + len(text) > end:
                    text = text[:end - x]
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


def layout_dag(dag, style: LayoutStyle = LayoutStyle(), *, cache_dir: Path | None = None) -> GraphLayout:
    """Lay out a `DagSpec` (anything with `.tasks[name].depends_on` and `.topological_order`). With a `cache_dir`
    (the state dir's cache) the layout of a graph laid out before for the same packing is read back instead: a
    layout is a pure function of the names, the edges and the style, and a DAG of 1,000 tasks takes ~50 ms to lay
    out, a fifth of the app's start-up."""
    deps = dag_deps(dag)
    if cache_dir is None:
        return layout_graph(deps, style)
    from ..model.cache import code_stamp, read_entry, sha1, write_entry

    key = sha1(repr((LAYOUT_FORMAT, code_stamp(os.path.dirname(__file__)), style.zoom.value, style.orientation.name,
                     layout_key(deps, style), list(deps.items()))).encode()).hexdigest()
    entry = cache_dir / f"layout-{key[:20]}.marshal"
    record = read_entry(entry, key)
    if record is not None:
        try:
            return GraphLayout.from_data(record[1])
        except Exception:  # a record of the right key but not of this shape: lay it out again
            pass
    layout = layout_graph(deps, style)
    write_entry(entry, (key, layout.to_data()))
    return layout


def layout_key(deps: Mapping[str, Sequence[str]], style: LayoutStyle) -> tuple:
    """Which layers a layout for `style` packs, and how, and the width it may wrap into bands at: besides the graph,
    the zoom and the orientation, all a layout depends on (the view only through this), so two styles with the same
    key make the same layout."""
    return DagShape(deps).key(style)


def may_band(style: LayoutStyle, tasks: int) -> bool:
    """Whether a layout for `style` may wrap into bands: left to right, on a known screen, tiles with names (a
    graph of hundreds of tasks is a map to scroll, not a pipeline to read)."""
    return (style.orientation is Orientation.LR and style.zoom is not Zoom.DOTS and style.view[0] > 0
            and tasks < DOTS_MIN_TASKS)


def dag_deps(dag) -> dict[str, Sequence[str]]:
    return {name: dag.tasks[name].depends_on for name in dag.topological_order}


def layout_graph(deps: Mapping[str, Sequence[str]], style: LayoutStyle = LayoutStyle()) -> GraphLayout:
    """Lay out a DAG given as name -> dependencies, in a topological order (dependencies before dependents)."""
    graph = _Graph(deps, style)
    graph.order()
    graph.place()
    return graph.route()


def choose_style(deps: Mapping[str, Sequence[str]], view: tuple[int, int], shape: DagShape | None = None,
                 lay_out: Callable[[LayoutStyle], GraphLayout] | None = None) -> LayoutStyle:
    """The style a run starts in on a canvas of `view` (columns, rows): the most detailed zoom at which the whole DAG
    fits, in the orientation that fits (left to right first). Thousands of tasks that fit no other way are dots. If
    nothing fits, of the styles that need no sideways scrolling (a deep chain reads top down) the one with the fewest
    screens to scroll through, the more detailed of two about as long; else compact.

    A DAG of hundreds of tasks or more is not laid out four ways to choose: sizes are estimated from its layers, a few
    milliseconds on 5,000 tasks where a layout takes a few hundred. `lay_out(style)`, if given, is how layouts are
    made (the canvas passes the one that keeps them, so the chosen one is not laid out again)."""
    shape = shape or DagShape(deps)
    lay_out = lay_out or partial(layout_graph, deps)
    detailed = [LayoutStyle(z, o, view) for z in (Zoom.FULL, Zoom.COMPACT) for o in Orientation]
    if len(deps) < DOTS_MIN_TASKS:  # small enough to lay out each way (a few ms): exact, tracks included
        sizes = {style: (layout.width, layout.height) for style in detailed
                 for layout in [lay_out(style)]}
    else:
        sizes = {style: shape.size(style) for style in detailed}
    for style in detailed:
        if _within(sizes[style], view):
            return style
    if len(deps) >= DOTS_MIN_TASKS:
        dots = [LayoutStyle(Zoom.DOTS, o, view) for o in Orientation]
        return min(dots, key=lambda s: _overflow(shape.size(s), view))
    upright = [style for style in detailed if sizes[style][0] <= view[0]]  # no sideways scrolling
    if upright:  # the fewest screens to scroll through; the more detailed of two about as long
        fewest = min(_overflow(sizes[s], view) for s in upright)
        return next(s for s in upright if _overflow(sizes[s], view) <= fewest * 1.25)
    return min(detailed[2:], key=lambda s: _overflow(sizes[s], view))


def _within(size: tuple[int, int], view: tuple[int, int]) -> bool:
    return size[0] <= view[0] and size[1] <= view[1]


def _overflow(size: tuple[int, int], view: tuple[int, int]) -> float:
    """How many screens the layout needs (1 = fits)."""
    return max(1.0, size[0] / max(1, view[0])) * max(1.0, size[1] / max(1, view[1]))


def tile_width(names: Sequence[str], style: LayoutStyle) -> int:
    m = style.metrics
    return min(m.max_width, max([m.min_width] + [len(n) + m.name_room for n in names]))


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
        bottom = bottom[:w // 2] + "┬" + bottom[w // 2 + 1:]
    return [top, middle, bottom]


def render_text(layout: GraphLayout) -> list[str]:
    """The whole layout as plain text lines (trailing spaces stripped): tiles with names, edges, arrows."""
    rows = [[" "] * layout.width for _ in range(layout.height)]
    for y in range(layout.height):
        for x, text in layout.edge_runs(y):
            rows[y][x:x + len(text)] = text
    for tile in layout.tiles.values():
        for dy, text in enumerate(tile_text(tile, tile.name in layout.has_children, layout.orientation)):
            rows[tile.y + dy][tile.x:tile.x + tile.width] = text
    return ["".join(r).rstrip() for r in rows]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def _layers(deps: Mapping[str, Sequence[str]]) -> dict[str, int]:
    layer: dict[str, int] = {}
    for name, ds in deps.items():
        layer[name] = 1 + max(layer[d] for d in ds) if ds else 0
    return layer


class _Block(NamedTuple):
    """A packed layer's grid: `lines` sub-columns (LR) or rows (TD) of up to `per_line` tiles each."""

    lines: int
    per_line: int


def _packing(counts: Sequence[int], style: LayoutStyle, width: int) -> tuple[_Block | None, ...]:
    """Per layer of `counts[i]` tiles of `width` cells: its block on `style.view`, or None where the layer fits
    across unpacked. Sideways scrolling is what a grid must avoid: left to right, the blocks share the width the
    unpacked layers leave (in proportion to their tasks) and grow downwards; top down, a block's rows are as wide
    as the screen and it grows downwards too. As dots, every layer of more than one task is a block: thousands of
    one-cell tasks with an edge each would be all edges."""
    m, view = style.metrics, style.view
    if not view[0] or not view[1]:
        return (None,) * len(counts)
    lr = style.orientation is Orientation.LR
    across_room, along_room = (view[1], view[0]) if lr else (view[0], view[1])
    size_across, size_along = (m.tile_height, width) if lr else (width, m.tile_height)
    fit_across = max(1, (across_room - 2 + m.slot_gap) // (size_across + m.slot_gap))  # - 2: the bracket's corners
    packed = [n * (size_across + m.slot_gap) - m.slot_gap > across_room for n in counts]
    if style.zoom is Zoom.DOTS:  # a heat map: each layer's dots in one block, one bus between layers
        packed = [n > 1 for n in counts]
    if not lr:
        lines = [math.ceil(n / fit_across) for n in counts]
        return tuple(_Block(k, math.ceil(n / k)) if p else None for n, k, p in zip(counts, lines, packed))
    fixed = sum(size_along if not p else 2 * m.block_pad - m.row_gap for p in packed) + m.min_gap * (len(counts) - 1)
    room = max(0, along_room - fixed)
    share = sum(n for n, p in zip(counts, packed) if p)
    blocks: list[_Block | None] = []
    for n, p in zip(counts, packed):
        if not p:
            blocks.append(None)
            continue
        lines = max(1, min(math.ceil(n / fit_across), (room * n // share) // (size_along + m.row_gap)))
        blocks.append(_Block(lines, math.ceil(n / lines)))
    return tuple(blocks)


def _layer_counts(layer: Mapping[str, int]) -> list[int]:
    counts = [0] * (max(layer.values(), default=-1) + 1)
    for v in layer.values():
        counts[v] += 1
    return counts


class DagShape:
    """What styles are weighed by, worked out once per DAG: tasks and pass-through slots per layer, tile widths.
    The canvas keeps one, so a key that changes the style doesn't walk 5,000 tasks again to learn what it packs."""

    def __init__(self, deps: Mapping[str, Sequence[str]]):
        self.layer = _layers(deps)
        self.tasks = _layer_counts(self.layer)
        self.dummies = [0] * len(self.tasks)
        far: dict[str, int] = {}
        for name, ds in deps.items():
            for d in ds:
                far[d] = max(far.get(d, 0), self.layer[name])
        for d, end in far.items():
            for lay in range(self.layer[d] + 1, end):
                self.dummies[lay] += 1
        self.names = list(deps)
        self._widths: dict[LayoutStyle, int] = {}

    def tile_width(self, style: LayoutStyle) -> int:
        """Wide enough for the longest name (within the zoom's bounds); full tiles wider still, up to DETAIL_WIDTH,
        while the graph fits the screen so (with a few cells a gap to spare for the edges' tracks): the bottom
        border's details (`gpu:0 cpu 12% mem 1.2G`) were cut at 20 cells with 100 columns free."""
        width = self._widths.get(style)
        if width is None:
            width = tile_width(self.names, style)
            if style.zoom is Zoom.FULL and style.view[0] and len(self.names) < DOTS_MIN_TASKS:
                base = self._size(style, width)
                spare = (len(self.tasks) - 1) * TRACK_SPARE if style.orientation is Orientation.LR else 0
                width = next((w for w in range(DETAIL_WIDTH, width, -1)
                              if (size := self._size(style, w))[0] + spare <= style.view[0]
                              and size[1] <= max(style.view[1], base[1])), width)
            self._widths[style] = width
        return width

    def packing(self, style: LayoutStyle) -> tuple[_Block | None, ...]:
        return _packing(self.tasks, style, self.tile_width(style))

    def key(self, style: LayoutStyle) -> tuple:
        """What a layout for `style` depends on besides the graph, zoom and orientation (see `layout_key`)."""
        return self.packing(style), self.tile_width(style), (style.view[0] if self.bands(style) else None)

    def bands(self, style: LayoutStyle) -> bool:
        """Whether a layout for `style` wraps into bands: it may, and it is wider than the screen as estimated (so a
        resize of a graph that fits keeps its layout)."""
        return may_band(style, len(self.names)) and self.size(style)[0] > style.view[0]

    def size(self, style: LayoutStyle) -> tuple[int, int]:
        """The layout's size (columns, rows) in `style`, estimated: the gaps at their narrowest."""
        return self._size(style, self.tile_width(style))

    def _size(self, style: LayoutStyle, w: int) -> tuple[int, int]:
        m = style.metrics
        lr = style.orientation is Orientation.LR
        size_across, size_along = (m.tile_height, w) if lr else (w, m.tile_height)
        along = across = 0
        for n, dummies, block in zip(self.tasks, self.dummies, _packing(self.tasks, style, w)):
            if block is None:
                span = n * (size_across + m.slot_gap)
                depth = size_along
            else:
                span = block.per_line * (size_across + m.slot_gap) + 2
                depth = block.lines * (size_along + m.row_gap) - m.row_gap + 2 * m.block_pad
            across = max(across, span + dummies * (1 + m.slot_gap) - m.slot_gap)
            along += depth + m.min_gap
        along -= m.min_gap if self.tasks else 0
        return (along, across) if lr else (across, along)


class _Graph:
    """The layered graph of nodes: a node is a task, a block (a packed layer) or a dummy slot. Real nodes (tasks and
    blocks) come first, in topological order; dummies after them. Coordinates here are (along, across)."""

    def __init__(self, deps: Mapping[str, Sequence[str]], style: LayoutStyle):
        self.style = style
        self.m = m = style.metrics
        self.lr = style.orientation is Orientation.LR
        self.task_layer = task_layer = _layers(deps)
        # A DAG small enough for its tiles to grow to the screen, or to wrap into bands, is weighed as the canvas
        # weighs it (a big one is not: working its shape out again would cost a big layout a third more).
        self.shape = DagShape(deps) if len(deps) < DOTS_MIN_TASKS else None
        self.tile_width = w = self.shape.tile_width(style) if self.shape else tile_width(list(deps), style)
        self.tile_across, self.tile_along = (m.tile_height, w) if self.lr else (w, m.tile_height)
        counts = _layer_counts(task_layer)
        count = len(counts)
        members: list[list[str]] = [[] for _ in range(count)]
        for name in deps:
            members[task_layer[name]].append(name)
        packing = _packing(counts, style, w)
        self.blocks: dict[int, tuple[int, _Block]] = {}  # node -> (layer, grid)
        self.node_of: dict[str, int] = {}
        self.node_tasks: list[list[str]] = []
        self.layer: list[int] = []
        for name in deps:  # tasks in topological order; a block is made where its layer's first task comes
            lay = task_layer[name]
            grid = packing[lay]
            if grid is None:
                self.node_of[name] = len(self.layer)
                self.node_tasks.append([name])
                self.layer.append(lay)
            elif members[lay][0] == name:
                node = len(self.layer)
                self.blocks[node] = (lay, grid)
                self.node_tasks.append(members[lay])
                self.layer.append(lay)
                for member in members[lay]:
                    self.node_of[member] = node
        self.real = n = len(self.layer)
        self.succ: list[list[int]] = [[] for _ in range(n)]
        self.pred: list[list[int]] = [[] for _ in range(n)]
        self.has_children = frozenset(d for name, ds in deps.items() for d in ds
                                      if self.node_of[d] not in self.blocks)
        children: list[dict[int, None]] = [{} for _ in range(n)]  # ordered sets
        for name, ds in deps.items():
            for d in ds:
                children[self.node_of[d]][self.node_of[name]] = None
        # As dots, each layer is one node and only edges to the next layer are drawn: a bus from each layer to the
        # next reads as the run's flow; thousands of long edges would read as noise.
        self.heatmap = style.zoom is Zoom.DOTS
        for u in range(n):
            kids = list(children[u])
            if self.heatmap:
                kids = [c for c in kids if self.layer[c] == self.layer[u] + 1]
            self._connect(u, kids)
        self.layers: list[list[int]] = [[] for _ in range(count)]
        for v in range(len(self.layer)):
            self.layers[self.layer[v]].append(v)  # real nodes in topological order, then dummies
        self.y = [0.0] * len(self.layer)

    def _connect(self, u: int, kids: list[int]) -> None:
        """Edges of u to its children; long edges go through one shared dummy per skipped layer."""
        by_layer: dict[int, list[int]] = {}
        for c in kids:
            by_layer.setdefault(self.layer[c], []).append(c)
        far = max(by_layer, default=self.layer[u])
        prev = u
        for lay in range(self.layer[u] + 1, far + 1):
            for c in by_layer.get(lay, ()):
                self._edge(prev, c)
            if lay < far:
                dummy = len(self.layer)
                self.layer.append(lay)
                self.succ.append([])
                self.pred.append([])
                self._edge(prev, dummy)
                prev = dummy

    def _edge(self, a: int, b: int) -> None:
        self.succ[a].append(b)
        self.pred[b].append(a)

    def across(self, v: int) -> int:
        """A node's size across its layer."""
        if v >= self.real:
            return 1
        block = self.blocks.get(v)
        if block is None:
            return self.tile_across
        return block[1].per_line * (self.tile_across + self.m.slot_gap) - self.m.slot_gap + 2

    def along(self, v: int) -> int:
        """A node's size along (dummies take whatever their layer's is)."""
        if v >= self.real:
            return 0
        block = self.blocks.get(v)
        if block is None:
            return self.tile_along
        return block[1].lines * (self.tile_along + self.m.row_gap) - self.m.row_gap + 2 * self.m.block_pad

    def mid_offset(self, v: int) -> int:
        """Where edges meet a node, from its top (LR) or left (TD): the middle, but at a one-line tile's glyph top
        down (its name is left-aligned)."""
        if v >= self.real or (not self.lr and self.style.zoom is Zoom.COMPACT and v not in self.blocks):
            return 0
        return self.across(v) // 2

    # ------------------------------------------------------------------------------------------ order in layers
    def order(self) -> None:
        pos = self._positions()
        best, best_crossings = [list(lay) for lay in self.layers], self._crossings(pos)
        for _ in range(ORDER_SWEEPS):
            improved, round_start = False, best_crossings
            for direction in (1, -1):
                self._sweep(direction, pos)
                crossings = self._crossings(pos)
                if crossings < best_crossings:
                    best, best_crossings, improved = [list(lay) for lay in self.layers], crossings, True
            # Stop after a round that found nothing better, or only a little: on big graphs the first round removes
            # most crossings and each later one a few percent, each costing as much as the first.
            if best_crossings == 0 or not improved or best_crossings > (1 - SETTLED) * round_start:
                break
        self.layers = best

    def _positions(self) -> list[int]:
        pos = [0] * len(self.layer)
        for lay in self.layers:
            for i, v in enumerate(lay):
                pos[v] = i
        return pos

    def _sweep(self, direction: int, pos: list[int]) -> None:
        rng = range(1, len(self.layers)) if direction > 0 else range(len(self.layers) - 2, -1, -1)
        for li in rng:
            lay = self.layers[li]
            nbrs = self.pred if direction > 0 else self.succ

            def key(v: int) -> float:
                ns = nbrs[v]
                return sum([pos[n] for n in ns]) / len(ns) if ns else float(pos[v])

            lay.sort(key=key)
            for i, v in enumerate(lay):
                pos[v] = i

    def _crossings(self, pos: list[int]) -> int:
        """Edge crossings between adjacent layers: with the edges sorted by where they start, every earlier edge
        that ends further down crosses this one (counted with C-level bisect and insort, not a Python loop)."""
        total = 0
        for lay in self.layers[:-1]:
            ends = sorted((pos[u], pos[v]) for u in lay for v in self.succ[u])
            seen: list[int] = []
            for _, b in ends:
                total += len(seen) - bisect_right(seen, b)
                insort(seen, b)
        return total

    # ------------------------------------------------------------------------------------------------ placement
    def place(self) -> None:
        gap = self.m.slot_gap
        self._mids = [self.mid_offset(v) for v in range(self.real)]
        for lay in self.layers:
            top = 0
            for v in lay:
                self.y[v] = top
                top += self.across(v) + gap
        if self.heatmap:  # one node a layer, centred on the widest
            widest = max(map(self.across, range(len(self.layer))), default=0)
            self.top = [(widest - self.across(v)) // 2 for v in range(len(self.layer))]
            return
        for p in range(POSITION_PASSES):
            down = p % 2 == 0
            order = self.layers[1:] if down else self.layers[-2::-1]
            for lay in order:
                self._place_layer(lay, self.pred if down else self.succ)
        low = min((self.y[v] for v in range(len(self.layer))), default=0)
        self.top = [int(self.y[v] - low) for v in range(len(self.layer))]

    def _place_layer(self, lay: list[int], nbrs: list[list[int]]) -> None:
        """Move each slot towards the mean mid of its neighbours, keeping order and spacing (least squares)."""
        offsets, desired = [], []
        off = 0
        y, gap = self.y, self.m.slot_gap
        mids = self._mids
        real = self.real
        for v in lay:
            ns = nbrs[v]
            half = mids[v] if v < real else 0
            if ns:
                mid = sum([y[n] + (mids[n] if n < real else 0) for n in ns]) / len(ns)
            else:
                mid = y[v] + half
            offsets.append(off)
            desired.append(round(mid) - half - off)
            off += self.across(v) + gap
        for v, z, o in zip(lay, _isotonic(desired), offsets):
            self.y[v] = round(z) + o

    # ----------------------------------------------------------------------------------------------- routing
    def route(self) -> GraphLayout:
        wraps = self._stack_bands(self._band_cuts())  # layer -> the row its band's connector runs on
        mid = [self.top[v] + self.mid_offset(v) for v in range(len(self.layer))]
        edges = _EdgeDrawing(transposed=not self.lr)
        x = margin = WRAP_MARGIN if wraps else 0
        widest = 0
        col_x = []
        for li, lay in enumerate(self.layers):
            col_x.append(x)
            depth = self._depth(lay)
            for v in lay:
                if v >= self.real:  # a dummy: the edge passes straight through the layer
                    edges.hline(mid[v], x, x + depth - 1, lead_in=True, lead_out=True)
                elif v in self.blocks:
                    self._brackets(v, x, mid[v], edges)
                elif self.along(v) < depth:  # a tile in a layer with a deeper block: its line reaches the gap
                    edges.hline(mid[v], x + self.along(v), x + depth - 1, lead_in=True, lead_out=True)
            x += depth
            if li in wraps:
                self._wrap(lay[0], x, mid, wraps[li], edges)
                widest, x = max(widest, x + WRAP_EXIT), margin
            elif li + 1 < len(self.layers):
                x += self._route_gap(lay, mid, x, edges)
        x = max(x, widest)
        if wraps:  # the bands' tracks went in band by band: in order along again, as the drawing looks them up
            ordered = sorted(zip(edges.track_xs, edges.tracks), key=lambda pair: pair[0])
            edges.track_xs, edges.tracks = [tx for tx, _ in ordered], [t for _, t in ordered]
        across = max((self.top[v] + self.across(v) for v in range(len(self.layer))), default=0)
        tiles: dict[str, Tile] = {}
        columns: list[list[str]] = []
        for li, lay in enumerate(self.layers):
            column: list[str] = []
            for v in lay:
                if v >= self.real:
                    continue
                names = self.node_tasks[v]
                column.extend(names)
                if v in self.blocks:
                    tiles.update(self._block_tiles(v, col_x[li], self.top[v]))
                else:
                    tiles[names[0]] = self._tile(names[0], li, col_x[li], self.top[v])
            columns.append(column)
        width, height = (x, across) if self.lr else (across, x)
        return GraphLayout(self.style, tiles, columns, width, height, edges, self.has_children)

    def _depth(self, lay: list[int]) -> int:
        return max([self.along(v) for v in lay], default=0) or self.tile_along

    # -------------------------------------------------------------------------------------------------- bands
    def _band_cuts(self) -> set[int]:
        """The layers after which the graph wraps to a new band (none when it fits the screen's width as it is)."""
        if self.shape is None or not self.shape.bands(self.style):
            return set()
        depths = [self._depth(lay) for lay in self.layers]
        mid = [self.top[v] + self.mid_offset(v) for v in range(len(self.layer))]
        gaps = [self._route_gap(lay, mid, 0, _EdgeDrawing()) for lay in self.layers[:-1]]  # measured, not drawn
        return choose_cuts(depths, gaps, {li for li in range(len(self.layers) - 1) if self._cuttable(li)},
                           self.style.view[0] - WRAP_MARGIN - WRAP_EXIT)

    def _cuttable(self, li: int) -> bool:
        """A band may end after layer li when its only node is one task whose edges all end in the next layer, on
        tasks (no edge passes over the cut, and one connector feeds the next band)."""
        lay = self.layers[li]
        if len(lay) != 1 or lay[0] >= self.real or lay[0] in self.blocks:
            return False
        kids = self.succ[lay[0]]
        return bool(kids) and all(c < self.real and c not in self.blocks and self.layer[c] == li + 1 for c in kids)

    def _stack_bands(self, cuts: set[int]) -> dict[int, int]:
        """Move each band's nodes across so the bands stack, each below the previous one's connector row. Returns
        layer -> connector row for the layers a band ends after."""
        rows: dict[int, int] = {}
        if not cuts:
            return rows
        offset, first = 0, 0
        for last in sorted(cuts) + [len(self.layers) - 1]:
            nodes = [v for lay in self.layers[first:last + 1] for v in lay]
            low = min(self.top[v] for v in nodes)
            high = max(self.top[v] + self.across(v) for v in nodes)
            for v in nodes:
                self.top[v] += offset - low
            rows[last] = offset + high - low
            offset, first = rows[last] + 1, last + 1
        del rows[len(self.layers) - 1]
        return rows

    def _wrap(self, u: int, gx: int, mid: list[int], row: int, edges: _EdgeDrawing) -> None:
        """The connector from u (the last task of a band, its right side at gx) to its children at the start of the
        next band: right, down to `row`, left to the margin, down, and into each child."""
        exit_x = gx + WRAP_EXIT - 1
        edges.hline(mid[u], gx, exit_x, lead_in=True)
        edges.track(exit_x, _span_track(mid[u], row, ("wrap", u)))
        edges.hline(row, 0, exit_x)
        kids = self.succ[u]
        edges.track(0, _span_track(row, max(mid[c] for c in kids), ("wrap", u)))
        for c in kids:
            edges.hline(mid[c], 0, WRAP_MARGIN - 1, lead_out=True)
            edges.arrows.setdefault(mid[c], set()).add(WRAP_MARGIN - 1)

    def _tile(self, name: str, layer: int, along: int, across: int, packed: bool = False) -> Tile:
        x, y = (along, across) if self.lr else (across, along)
        return Tile(name, layer, x, y, self.tile_width, self.m.tile_height, packed)

    def _block_tiles(self, v: int, along: int, top: int) -> dict[str, Tile]:
        """A block's tiles in reading order: down each sub-column (left to right), across each row (top down)."""
        layer, grid = self.blocks[v]
        m = self.m
        tiles = {}
        for i, name in enumerate(self.node_tasks[v]):
            line, slot = divmod(i, grid.per_line)
            tiles[name] = self._tile(name, layer, along + m.block_pad + line * (self.tile_along + m.row_gap),
                                     top + 1 + slot * (self.tile_across + m.slot_gap), packed=True)
        return tiles

    def _brackets(self, v: int, x: int, mid: int, edges: _EdgeDrawing) -> None:
        """A block's bus: a bracket on each side spanning the block, which its edges meet at the middle (none for a
        block no edge meets: there is no bus to draw)."""
        if not self.pred[v] and not self.succ[v]:
            return
        lo, hi = self.top[v], self.top[v] + self.across(v) - 1
        for bx, inward in ((x, True), (x + self.along(v) - 1, False)):
            bar = _Track()
            bar.add((lo, hi), ("block", v))
            edges.track(bx, bar)
            for y in (lo, hi):  # the corners turn towards the tiles
                edges.hline(y, bx, bx, lead_out=inward, lead_in=not inward)
            if self.pred[v] if inward else self.succ[v]:
                edges.hline(mid, bx, bx, lead_in=inward, lead_out=not inward)

    def _route_gap(self, lay: list[int], mid: list[int], gx: int, edges: _EdgeDrawing) -> int:
        """Draw the edges leaving `lay` into the gap starting at gx; return the gap's size."""
        spans: dict[int, tuple[int, int]] = {}
        straight: list[int] = []
        for u in lay:
            kids = self.succ[u]
            if not kids:
                continue
            rows = [mid[u]] + [mid[c] for c in kids]
            lo, hi = min(rows), max(rows)
            if lo == hi:
                straight.append(u)
            else:
                spans[u] = (lo, hi)
        track, tracks = _assign_tracks(spans, self.succ, self._track_constraints(lay, mid, spans))
        gap = max(self.m.min_gap, len(tracks) + self.m.lead)
        first = gx + 1 + (gap - 2 - len(tracks)) // 2
        end = gx + gap - 1
        for t, column in enumerate(tracks):
            edges.track(first + t, column)
        for u in straight:
            edges.hline(mid[u], gx, end, lead_in=True, lead_out=True)
        entry: dict[int, int] = {}  # child -> nearest track feeding it
        for u in spans:
            tx = first + track[u]
            edges.hline(mid[u], gx, tx, lead_in=True)
            for c in self.succ[u]:
                entry[c] = min(entry.get(c, tx), tx)
        for c, tx in entry.items():
            edges.hline(mid[c], tx, end, lead_out=True)
        for u in [*spans, *straight]:
            for c in self.succ[u]:
                if c < self.real:
                    edges.arrows.setdefault(mid[c], set()).add(end)
        return gap

    def _track_constraints(self, lay: list[int], mid: list[int],
                           spans: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
        """(a, b): a's track must be before b's. Where parent a leaves and child c arrives on the same line, c's
        other parents must join c's line after where a turns, or a's line would seem to feed them too."""
        leaving = {mid[u]: u for u in lay if u in spans}
        pairs = []
        parents_of: dict[int, list[int]] = {}
        for u in spans:
            for c in self.succ[u]:
                parents_of.setdefault(c, []).append(u)
        for c, parents in parents_of.items():
            a = leaving.get(mid[c])
            if a is not None:
                pairs.extend((a, b) for b in parents if b != a)
        return pairs


class _EdgeDrawing:
    """Edges as segments along (`hsegs`, by their line across), tracks across (blocks of lines at one position
    along) and arrow cells, in the layout's (along, across) frame; `runs(y, x0, x1)` turns a piece of one screen
    line into text, touching only what lies in that piece. Transposed (top down), a screen line is a position along:
    segments along become vertical, tracks horizontal."""

    def __init__(self, transposed: bool = False) -> None:
        self.transposed = transposed
        self.hsegs: dict[int, list[tuple[int, int, bool, bool]]] = {}  # across -> (along1, along2, lead_in, lead_out)
        self.track_xs: list[int] = []  # tracks are added in order along
        self.tracks: list[tuple[list[int], list[tuple[int, int, object]]]] = []  # (tops, blocks) at track_xs[i]
        self.arrows: dict[int, set[int]] = {}  # across -> positions along
        self._arrows_along: dict[int, set[int]] | None = None

    def hline(self, y: int, x1: int, x2: int, *, lead_in: bool = False, lead_out: bool = False) -> None:
        self.hsegs.setdefault(y, []).append((x1, x2, lead_in, lead_out))

    def track(self, x: int, track: _Track) -> None:
        self.track_xs.append(x)
        self.tracks.append((track.tops, track.blocks))

    def runs(self, y: int, x0: int, x1: int) -> list[tuple[int, str]]:
        if self.transposed:
            bits, arrows = self._column_bits(y, x0, x1)
            box, arrow = _BOX_TD, ARROW_DOWN
        else:
            bits, arrows = self._line_bits(y, x0, x1)
            box, arrow = _BOX, ARROW
        runs: list[tuple[int, str]] = []
        for x in sorted(bits.keys() | arrows):
            char = arrow if x in arrows else box[bits[x]]
            if runs and runs[-1][0] + len(runs[-1][1]) == x:
                runs[-1] = (runs[-1][0], runs[-1][1] + char)
            else:
                runs.append((x, char))
        return runs

    def _line_bits(self, y: int, x0: int, x1: int) -> tuple[dict[int, int], set[int]]:
        """Cells (x0 <= along < x1) of one line across."""
        bits: dict[int, int] = {}
        for a, b, lead_in, lead_out in self.hsegs.get(y, ()):
            for x in range(max(a, x0), min(b, x1 - 1) + 1):
                bits[x] = bits.get(x, 0) | (_L if x > a or lead_in else 0) | (_R if x < b or lead_out else 0)
        first, last = bisect_left(self.track_xs, x0), bisect_left(self.track_xs, x1)
        for x, (tops, blocks) in zip(self.track_xs[first:last], self.tracks[first:last]):
            i = bisect_right(tops, y) - 1
            if i >= 0 and blocks[i][1] >= y:
                lo, hi, _ = blocks[i]
                bits[x] = bits.get(x, 0) | (_U if y > lo else 0) | (_D if y < hi else 0)
        return bits, {x for x in self.arrows.get(y, ()) if x0 <= x < x1}

    def _column_bits(self, along: int, y0: int, y1: int) -> tuple[dict[int, int], set[int]]:
        """Cells (y0 <= across < y1) at one position along, in the untransposed frame's bits."""
        bits: dict[int, int] = {}
        hsegs = self.hsegs
        for y in range(y0, y1):
            for a, b, lead_in, lead_out in hsegs.get(y, ()):
                if a <= along <= b:
                    bits[y] = bits.get(y, 0) | (_L if along > a or lead_in else 0) | (_R if along < b or lead_out
                                                                                     else 0)
        for i in range(bisect_left(self.track_xs, along), bisect_right(self.track_xs, along)):
            tops, blocks = self.tracks[i]
            j = max(0, bisect_right(tops, y0) - 1)
            while j < len(blocks) and blocks[j][0] < y1:
                lo, hi, _ = blocks[j]
                for y in range(max(lo, y0), min(hi, y1 - 1) + 1):
                    bits[y] = bits.get(y, 0) | (_U if y > lo else 0) | (_D if y < hi else 0)
                j += 1
        if self._arrows_along is None:
            self._arrows_along = {}
            for y, xs in self.arrows.items():
                for x in xs:
                    self._arrows_along.setdefault(x, set()).add(y)
        return bits, {y for y in self._arrows_along.get(along, ()) if y0 <= y < y1}


def _assign_tracks(spans: dict[int, tuple[int, int]], kids: Sequence[list[int]],
                   before: list[tuple[int, int]]) -> tuple[dict[int, int], list[_Track]]:
    """Give each parent a track index: left-of constraints first (cycles broken by taking the topmost span), then
    the lowest track free over the parent's vertical span. `kids[u]`: u's children. Returns the track of each
    parent and the tracks."""
    succ: dict[int, list[int]] = {u: [] for u in spans}
    indeg = {u: 0 for u in spans}
    for a, b in set(before):
        succ[a].append(b)
        indeg[b] += 1
    ready = [(spans[u], u) for u in spans if indeg[u] == 0]
    everyone = sorted((spans[u], u) for u in spans)
    heapq.heapify(ready)
    placed: dict[int, int] = {}
    floor = dict.fromkeys(spans, 0)
    tracks: list[_Track] = []
    while len(placed) < len(spans):
        while ready and ready[0][1] in placed:
            heapq.heappop(ready)
        if ready:
            u = heapq.heappop(ready)[1]
        else:  # a cycle of constraints: take the topmost span left
            u = next(v for _, v in everyone if v not in placed)
        t = floor[u]
        key = next(iter(kids[u])) if len(kids[u]) == 1 else ("parent", u)
        while t < len(tracks) and not tracks[t].fits(spans[u], key):
            t += 1
        if t == len(tracks):
            tracks.append(_Track())
        tracks[t].add(spans[u], key)
        placed[u] = t
        for b in succ[u]:
            if b not in placed:
                indeg[b] -= 1
                floor[b] = max(floor[b], t + 1)
                if indeg[b] == 0:
                    heapq.heappush(ready, (spans[b], b))
    return placed, tracks


class _Track:
    """The vertical lines sharing one track column: disjoint blocks sorted by top row. Parents whose only child is
    the same task form one block (a bus merging into that child); any other overlap would make one parent's line
    seem to feed another's children."""

    def __init__(self) -> None:
        self.tops: list[int] = []
        self.blocks: list[tuple[int, int, object]] = []  # (top, bottom, key)

    def _overlapping(self, lo: int, hi: int) -> range:
        i = bisect_right(self.tops, hi)  # blocks starting at or above our bottom; their bottoms are sorted too
        j = i
        while j > 0 and self.blocks[j - 1][1] >= lo:
            j -= 1
        return range(j, i)

    def fits(self, span: tuple[int, int], key: object) -> bool:
        lo, hi = span
        blocks = self.blocks
        i = bisect_right(self.tops, hi)  # blocks starting at or above our bottom; their bottoms are sorted too
        while i > 0:
            i -= 1
            if blocks[i][1] < lo:
                return True
            if blocks[i][2] != key:
                return False
        return True

    def add(self, span: tuple[int, int], key: object) -> None:
        lo, hi = span
        hits = self._overlapping(lo, hi)
        if hits:
            lo = min(lo, self.blocks[hits.start][0])
            hi = max(hi, self.blocks[hits.stop - 1][1])
            del self.tops[hits.start:hits.stop], self.blocks[hits.start:hits.stop]
        i = bisect_right(self.tops, lo)
        self.tops.insert(i, lo)
        self.blocks.insert(i, (lo, hi, key))


def _span_track(lo: int, hi: int, key: object) -> _Track:
    track = _Track()
    track.add((lo, hi), key)
    return track


def _isotonic(values: list[float]) -> list[float]:
    """The non-decreasing sequence closest (least squares) to `values`: pool adjacent violators."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, n2 = blocks.pop()
            m1, n1 = blocks[-1]
            blocks[-1] = [(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2]
    out: list[float] = []
    for mean, count in blocks:
        out.extend([mean] * int(count))
    return out
