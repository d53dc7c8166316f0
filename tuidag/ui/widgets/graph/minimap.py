"""The graph's minimap: when the graph is larger than the canvas, a corner shows where the view is and where
things happen (a cell per block of the graph, in the colour of the most pressing state in it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ....model.state import TaskState
from ....views.layout.layout import GraphLayout
from ....views.minimap import MinimapGrid
from ...run_model import RunModel
from ...state_style import LOOKS

S = TaskState
MINIMAP_BG = "#26263a"
MINIMAP_VIEW_BG = "#4a4a70"
#: What a minimap cell shows when several tasks share it: the first of these states present.
_MINIMAP_ORDER = (
    S.FAILED,
    S.RUNNING,
    S.READY,
    S.CANCELLING,
    S.RETRYING,
    S.QUEUED,
    S.CANCELLED,
    S.SKIPPED,
    S.PENDING,
    S.SUCCEEDED,
    S.UP_TO_DATE,
    S.UNTARGETED,
)
_MINIMAP_RANK = {state: i for i, state in enumerate(_MINIMAP_ORDER)}


if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class MinimapCorner(_ScrollView):
    """Mixed into `DagCanvas` (which sets up the state named here in its `__init__`): its minimap."""

    graph: GraphLayout | None
    model: RunModel
    _minimap: MinimapGrid | None  # made when first shown, for the layout and size it was shown at

    if TYPE_CHECKING:  # the other parts of DagCanvas

        def state_of(self, name: str) -> TaskState: ...

    def _minimap_box(self, width: int, height: int) -> Region | None:
        """Where the minimap goes (bottom right of the visible canvas), or None when the whole graph is in view or
        the canvas is too small to spare the room."""
        graph = self.graph
        if graph is None or (graph.width <= width and graph.height <= height) or width < 60 or height < 12:
            return None
        w = max(6, min(24, width // 5))
        h = max(3, min(8, height // 3))
        # keep the graph's proportions (a cell is about twice as tall as wide) within that box
        ratio = (graph.height * 2) / max(1, graph.width)
        if ratio * w / 2 < h:
            h = max(2, min(h, round(ratio * w / 2)))
        else:
            w = max(4, min(w, round(h * 2 / max(ratio, 1e-9))))
        return Region(width - w, height - h, w, h)

    def _minimap_row(self, y: int, width: int) -> Strip | None:
        height = self.scrollable_content_region.height
        box = self._minimap_box(width, height)
        graph = self.graph
        if graph is None or box is None or not box.y <= y < box.y + box.height:  # (no box without a graph)
            return None
        minimap = self._minimap
        if minimap is None or (minimap.rows, minimap.columns) != (box.height, box.width):
            minimap = self._minimap = MinimapGrid(
                {name: (tile.x, tile.y) for name, tile in graph.tiles.items()},
                graph.width,
                graph.height,
                box.width,
                box.height,
                len(_MINIMAP_ORDER),
                lambda name: _MINIMAP_RANK[self.state_of(name)],
            )
        row = minimap.cells[y - box.y]
        sx, sy = graph.width / box.width, graph.height / box.height
        scroll_x, scroll_y = self.scroll_offset
        in_rows = scroll_y / sy <= y - box.y + 1 and (y - box.y) < (scroll_y + height) / sy
        first, last = scroll_x / sx, (scroll_x + width) / sx
        segments = []
        for cx, rank in enumerate(row):
            in_view = in_rows and first <= cx + 1 and cx < last
            bg = MINIMAP_VIEW_BG if in_view else MINIMAP_BG
            if rank < 0:
                segments.append(Segment(" ", Style(bgcolor=bg)))
            else:
                segments.append(Segment("▪", Style(color=LOOKS[_MINIMAP_ORDER[rank]].colour, bgcolor=bg)))
        return Strip(segments, box.width)

    def watch_scroll_x(self, old: float, new: float) -> None:
        super().watch_scroll_x(old, new)
        self._refresh_minimap()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._refresh_minimap()

    def _refresh_minimap(self) -> None:
        window = self.scrollable_content_region.size
        box = self._minimap_box(window.width, window.height)
        if box is not None:
            self.refresh(box)
