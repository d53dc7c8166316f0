"""Edges routed between the placed layers, and the layout made of it all: each parent's track in the gap after
its layer, a block's brackets (its bus), the connectors of a graph wrapped into bands, and the tiles."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from .bands import WRAP_EXIT, WRAP_MARGIN, choose_cuts
from .edges import EdgeDrawing, Track, span_track
from .layout import GraphLayout, Tile
from .placement import LayeredGraph


class RoutedGraph(LayeredGraph):
    """A layered graph, ordered and placed, that routes its edges and turns into a `GraphLayout`."""

    def route(self) -> GraphLayout:
        wraps = self._stack_bands(self._band_cuts())  # layer -> the row its band's connector runs on
        mid = [self.top[v] + self.mid_offset(v) for v in range(len(self.layer))]
        edges = EdgeDrawing(transposed=not self.lr)
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
        gaps = [self._route_gap(lay, mid, 0, EdgeDrawing()) for lay in self.layers[:-1]]  # measured, not drawn
        return choose_cuts(
            depths,
            gaps,
            {li for li in range(len(self.layers) - 1) if self._cuttable(li)},
            self.style.view[0] - WRAP_MARGIN - WRAP_EXIT,
        )

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
        for last in [*sorted(cuts), len(self.layers) - 1]:
            nodes = [v for lay in self.layers[first : last + 1] for v in lay]
            low = min(self.top[v] for v in nodes)
            high = max(self.top[v] + self.across(v) for v in nodes)
            for v in nodes:
                self.top[v] += offset - low
            rows[last] = offset + high - low
            offset, first = rows[last] + 1, last + 1
        del rows[len(self.layers) - 1]
        return rows

    def _wrap(self, u: int, gx: int, mid: list[int], row: int, edges: EdgeDrawing) -> None:
        """The connector from u (the last task of a band, its right side at gx) to its children at the start of the
        next band: right, down to `row`, left to the margin, down, and into each child."""
        exit_x = gx + WRAP_EXIT - 1
        edges.hline(mid[u], gx, exit_x, lead_in=True)
        edges.track(exit_x, span_track(mid[u], row, ("wrap", u)))
        edges.hline(row, 0, exit_x)
        kids = self.succ[u]
        edges.track(0, span_track(row, max(mid[c] for c in kids), ("wrap", u)))
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
            tiles[name] = self._tile(
                name,
                layer,
                along + m.block_pad + line * (self.tile_along + m.row_gap),
                top + 1 + slot * (self.tile_across + m.slot_gap),
                packed=True,
            )
        return tiles

    def _brackets(self, v: int, x: int, mid: int, edges: EdgeDrawing) -> None:
        """A block's bus: a bracket on each side spanning the block, which its edges meet at the middle (none for a
        block no edge meets: there is no bus to draw)."""
        if not self.pred[v] and not self.succ[v]:
            return
        lo, hi = self.top[v], self.top[v] + self.across(v) - 1
        for bx, inward in ((x, True), (x + self.along(v) - 1, False)):
            bar = Track()
            bar.add((lo, hi), ("block", v))
            edges.track(bx, bar)
            for y in (lo, hi):  # the corners turn towards the tiles
                edges.hline(y, bx, bx, lead_out=inward, lead_in=not inward)
            if self.pred[v] if inward else self.succ[v]:
                edges.hline(mid, bx, bx, lead_in=inward, lead_out=not inward)

    def _route_gap(self, lay: list[int], mid: list[int], gx: int, edges: EdgeDrawing) -> int:
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

    def _track_constraints(
        self, lay: list[int], mid: list[int], spans: dict[int, tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """(a, b): a's track must be before b's. Where parent a leaves and child c arrives on the same line, c's
        other parents must join c's line after where a turns, or a's line would seem to feed them too."""
        leaving = {mid[u]: u for u in lay if u in spans}
        pairs: list[tuple[int, int]] = []
        parents_of: dict[int, list[int]] = {}
        for u in spans:
            for c in self.succ[u]:
                parents_of.setdefault(c, []).append(u)
        for c, parents in parents_of.items():
            a = leaving.get(mid[c])
            if a is not None:
                pairs.extend((a, b) for b in parents if b != a)
        return pairs


def _assign_tracks(
    spans: dict[int, tuple[int, int]], kids: Sequence[list[int]], before: list[tuple[int, int]]
) -> tuple[dict[int, int], list[Track]]:
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
    tracks: list[Track] = []
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
            tracks.append(Track())
        tracks[t].add(spans[u], key)
        placed[u] = t
        for b in succ[u]:
            if b not in placed:
                indeg[b] -= 1
                floor[b] = max(floor[b], t + 1)
                if indeg[b] == 0:
                    heapq.heappush(ready, (spans[b], b))
    return placed, tracks
