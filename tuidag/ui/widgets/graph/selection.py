"""Moving the selection on the graph: arrow keys across a layer or along the edges, a click, and the least scroll
that shows the selected tile."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from textual import events
from textual.geometry import Region, Spacing
from textual.scroll_view import ScrollView

from ....views.layout.folding import Folding
from ....views.layout.layout import GraphLayout
from ....views.layout.style import Orientation
from ...messages import TaskSelected

if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class Selection(_ScrollView):
    """Mixed into `DagCanvas` (which sets up the state named here in its `__init__`): which task is selected."""

    #: Arrow keys by what they do in each orientation: across a layer, or back / on along the edges.
    _ACROSS = {Orientation.LR: ("up", "down"), Orientation.TD: ("left", "right")}
    _ALONG = {Orientation.LR: ("left", "right"), Orientation.TD: ("up", "down")}

    graph: GraphLayout | None
    selected: str | None
    on_select: Callable[[str], None] | None
    dependencies: Mapping[str, Sequence[str]]
    dependents: Mapping[str, Sequence[str]]
    folding: Folding
    _first_selection: bool

    if TYPE_CHECKING:  # the other parts of DagCanvas

        def refresh_tasks(self, names: Iterable[str]) -> None: ...
        def hint_selection(self) -> None: ...

    def select(self, name: str, *, scroll: bool = True) -> None:
        """Select `name`'s tile: an instance of a folded group selects the group's tile (`on_select` still gets the
        instance, whose log the app shows)."""
        self._first_selection = False
        if name in self.folding.groups and name not in self.folding.folded:  # an unfolded group: its first instance
            name = self.folding.groups[name][0]
        tile = self.folding.tile_of(name)
        if tile == self.selected:
            if tile != name and self.on_select is not None:
                self.on_select(name)
            return
        previous, self.selected = self.selected, tile
        self.refresh_tasks([n for n in (previous, tile) if n])
        self.hint_selection()
        if scroll:
            self.scroll_to_selected()
        if self.on_select is not None:
            self.on_select(name)
        else:
            self.post_message(TaskSelected(name))

    def scroll_to_selected(self) -> None:
        """Scroll the least that brings the selected tile (and a margin) into view."""
        if self.graph is None or self.selected is None or not self.scrollable_content_region:
            return
        tile = self.graph.tiles[self.selected]
        self.scroll_to_region(
            Region(tile.x, tile.y, tile.width, tile.height), spacing=Spacing(1, 4, 1, 4), animate=False, immediate=True
        )

    def action_move(self, direction: str) -> None:
        if self.selected is None or self.graph is None:
            return
        target = self._neighbour(self.graph, self.selected, direction)
        if target is not None:
            self.select(target)

    def _neighbour(self, graph: GraphLayout, name: str, direction: str) -> str | None:
        """Across a layer (up/down left to right, left/right top down): the next / previous task of the layer in
        reading order (in a block: on down a sub-column, then the top of the next). Along the edges: in a block, the
        next sub-column (or row) first; then the nearest dependency / dependent, preferring the closest layer, then
        the closest across."""
        tiles = graph.tiles
        tile = tiles[name]
        orientation = graph.orientation
        lr = orientation is Orientation.LR
        layer = graph.columns[tile.layer]

        def across(t) -> int:
            return t.y if lr else t.x

        def along(t) -> int:
            return t.x if lr else t.y

        if direction in self._ACROSS[orientation]:  # the next / previous in reading order
            i = layer.index(name) + (1 if direction in ("down", "right") else -1)
            return layer[i] if 0 <= i < len(layer) else None
        forward = direction in ("right", "down")
        if tile.packed:
            sign = 1 if forward else -1
            row = [
                tiles[n]
                for n in layer
                if across(tiles[n]) == across(tile) and (along(tiles[n]) - along(tile)) * sign > 0
            ]
            best = min(row, key=lambda t: abs(along(t) - along(tile)), default=None)
            if best is not None:
                return best.name
        candidates = self.dependents[name] if forward else self.dependencies[name]
        mid = (lambda t: t.mid) if lr else (lambda t: t.centre)
        return min(
            candidates, key=lambda n: (abs(tiles[n].layer - tile.layer), abs(mid(tiles[n]) - mid(tile))), default=None
        )

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or self.graph is None:
            return
        name = self.graph.tile_at(offset.x + self.scroll_offset.x, offset.y + self.scroll_offset.y)
        if name is not None:
            self.select(name, scroll=False)
