"""What styles are weighed by: a DAG's shape (tasks and pass-through slots per layer, tile widths), which layers a
style packs into blocks and how, whether it wraps into bands, and the size a layout will have, estimated without
laying it out."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ...model.layering import longest_path_layers
from .style import DOTS_MIN_TASKS, LayoutStyle, Orientation, Zoom, tile_width

DETAIL_WIDTH = 34  # full tiles grow to this where the screen has room: `gpu:0,1 cpu 100% mem 12.3G` in the border
TRACK_SPARE = 3  # cells a gap between layers may need beyond the narrowest, for its edges' tracks


def may_band(style: LayoutStyle, tasks: int) -> bool:
    """Whether a layout for `style` may wrap into bands: left to right, on a known screen, tiles with names (a
    graph of hundreds of tasks is a map to scroll, not a pipeline to read)."""
    return (
        style.orientation is Orientation.LR
        and style.zoom is not Zoom.DOTS
        and style.view[0] > 0
        and tasks < DOTS_MIN_TASKS
    )


class Block(NamedTuple):
    """A packed layer's grid: `lines` sub-columns (LR) or rows (TD) of up to `per_line` tiles each."""

    lines: int
    per_line: int


def packing(counts: Sequence[int], style: LayoutStyle, width: int) -> tuple[Block | None, ...]:
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
        return tuple(Block(k, math.ceil(n / k)) if p else None for n, k, p in zip(counts, lines, packed))
    fixed = sum(size_along if not p else 2 * m.block_pad - m.row_gap for p in packed) + m.min_gap * (len(counts) - 1)
    room = max(0, along_room - fixed)
    share = sum(n for n, p in zip(counts, packed) if p)
    blocks: list[Block | None] = []
    for n, p in zip(counts, packed):
        if not p:
            blocks.append(None)
            continue
        rows = max(1, min(math.ceil(n / fit_across), (room * n // share) // (size_along + m.row_gap)))
        blocks.append(Block(rows, math.ceil(n / rows)))
    return tuple(blocks)


def layer_counts(layer: Mapping[str, int]) -> list[int]:
    counts = [0] * (max(layer.values(), default=-1) + 1)
    for v in layer.values():
        counts[v] += 1
    return counts


class DagShape:
    """What styles are weighed by, worked out once per DAG: tasks and pass-through slots per layer, tile widths.
    The canvas keeps one, so a key that changes the style doesn't walk 5,000 tasks again to learn what it packs."""

    def __init__(self, deps: Mapping[str, Sequence[str]]):
        self.layer = longest_path_layers(deps.items())
        self.tasks = layer_counts(self.layer)
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
                width = next(
                    (
                        w
                        for w in range(DETAIL_WIDTH, width, -1)
                        if (size := self._size(style, w))[0] + spare <= style.view[0]
                        and size[1] <= max(style.view[1], base[1])
                    ),
                    width,
                )
            self._widths[style] = width
        return width

    def packing(self, style: LayoutStyle) -> tuple[Block | None, ...]:
        return packing(self.tasks, style, self.tile_width(style))

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
        for n, dummies, block in zip(self.tasks, self.dummies, packing(self.tasks, style, w)):
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
