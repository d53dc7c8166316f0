"""What a layout is made for: the zoom level (how much of a task a tile shows), the orientation, the screen it
should fit, and the sizes in cells each zoom and orientation gives tiles and gaps."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

DOTS_MIN_TASKS = 200  # fewer tasks than this are never shown as dots on their own: their names matter more


class Zoom(Enum):
    """How much of a task a tile shows; `z` / `Z` step through them."""

    FULL = "full"  # a bordered box: name, state and duration, details
    COMPACT = "compact"  # one line: glyph, name, duration
    DOTS = "dots"  # one cell, coloured by state: a heat map of thousands

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
    name_room: int  # width = name + this, within [min_width, max_width]
    slot_gap: int
    row_gap: int
    min_gap: int
    lead: int
    block_pad: int  # cells between a block's bracket and its tiles, along (the bracket's own cell included)


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


def tile_width(names: Sequence[str], style: LayoutStyle) -> int:
    m = style.metrics
    return min(m.max_width, max([m.min_width] + [len(n) + m.name_room for n in names]))
