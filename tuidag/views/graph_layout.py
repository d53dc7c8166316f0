"""Where every task's tile goes on the graph canvas and how the edges between them are drawn, as plain text.

A pure function of the DAG (no textual), so the UI canvas only paints and the geometry is unit-testable as text.

- Columns are longest-path layers: dependencies flow left to right.
- An edge that skips layers passes through the skipped columns on a "dummy" slot (a one-line pass-through); the long
  edges of one task share their dummies until they reach their children, so a fan-out over several layers is one line.
- The order within a column comes from a few barycenter sweeps, keeping the order with the fewest crossings.
- Vertical positions pull each slot towards its neighbours' rows (down and up passes); within a column the order is
  kept and slots never overlap, solved exactly per column by isotonic regression (pool adjacent violators).
- Edges are routed in the gap between two columns: each parent gets a vertical track, shared by parents whose vertical
  spans don't meet and by parents whose only child is the same task (a bus into it). Every cell collects direction
  bits mapped to box-drawing characters, so fan-in and fan-out merge into trees of ┌┐└┘├┤┬┴┼ with an arrow at the
  child. Tracks are ordered so that a parent's line never runs into another parent's junction on its own row: read
  left to right, a line only joins what it really feeds.
- Edge text is made per line on demand and cached: a big DAG's edges cover far more cells than a screen shows.
"""
from __future__ import annotations

import heapq
import os
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

TILE_HEIGHT = 3      # border+name, state line, border+detail
MIN_TILE_WIDTH = 22
MAX_TILE_WIDTH = 32
MIN_GAP = 6          # columns between two layers: lead-out, tracks, lead-in, arrow
ROW_GAP = 1          # blank lines between two slots of a column
ORDER_SWEEPS = 4     # down+up barycenter sweep pairs, at most
SETTLED = 0.05       # a sweep pair that removes less than this share of the crossings left is the last one
POSITION_PASSES = 4  # down/up vertical placement passes
ARROW = "▶"
LAYOUT_FORMAT = 1    # of `GraphLayout.to_data`, for the layout cache
EDGE_CHUNK = 256     # edge text is made and cached per line in pieces this wide: a screen needs one or two

_U, _D, _L, _R = 1, 2, 4, 8
_BOX = {
    _L | _R: "─", _U | _D: "│", _D | _R: "┌", _D | _L: "┐", _U | _R: "└", _U | _L: "┘",
    _U | _D | _R: "├", _U | _D | _L: "┤", _L | _R | _D: "┬", _L | _R | _U: "┴", _U | _D | _L | _R: "┼",
    _L: "─", _R: "─", _U: "│", _D: "│",
}


@dataclass(frozen=True, slots=True)
class Tile:
    """A task's box on the canvas, in canvas cells."""

    name: str
    layer: int
    x: int
    y: int
    width: int
    height: int = TILE_HEIGHT

    @property
    def mid(self) -> int:
        """The row edges attach to."""
        return self.y + self.height // 2

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height


class GraphLayout:
    """The placed graph: tiles, the lookups the canvas needs, and the edge text of any piece of a canvas line."""

    def __init__(self, tiles: dict[str, Tile], columns: list[list[str]], width: int, height: int, tile_width: int,
                 edges: "_EdgeDrawing", has_children: frozenset[str]):
        self.tiles = tiles
        self.columns = columns  # task names per layer, top to bottom
        self.width = width
        self.height = height
        self.tile_width = tile_width
        self.has_children = has_children
        self._edges = edges
        self._chunk_runs = lru_cache(maxsize=4096)(self._chunk)
        self.line_tiles: list[list[str]] = [[] for _ in range(height)]  # per line: tiles crossing it, by x
        for column in columns:
            for name in column:
                tile = tiles[name]
                for y in range(tile.y, tile.y + tile.height):
                    self.line_tiles[y].append(name)

    def to_data(self) -> tuple:
        """The layout as plain data (for `marshal`); `from_data` makes the same layout from it."""
        e = self._edges
        tiles = [(t.name, t.layer, t.x, t.y, t.width) for t in self.tiles.values()]
        return (tiles, self.columns, self.width, self.height, self.tile_width, self.has_children,
                e.hsegs, e.track_xs, e.tracks, e.arrows)

    @classmethod
    def from_data(cls, data: tuple) -> GraphLayout:
        tiles, columns, width, height, tile_width, has_children, hsegs, track_xs, tracks, arrows = data
        edges = _EdgeDrawing()
        edges.hsegs, edges.track_xs, edges.tracks, edges.arrows = hsegs, track_xs, tracks, arrows
        return cls({t[0]: Tile(*t) for t in tiles}, columns, width, height, tile_width, edges, frozenset(has_children))

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


def layout_dag(dag, cache_dir: Path | None = None) -> GraphLayout:
    """Lay out a `DagSpec` (anything with `.tasks[name].depends_on` and `.topological_order`). With a `cache_dir`
    (the state dir's cache) the layout of a graph laid out before is read back instead: a layout is a pure function
    of the names and edges, and a DAG of 1,000 tasks takes ~50 ms to lay out, a fifth of the app's start-up."""
    deps = {name: dag.tasks[name].depends_on for name in dag.topological_order}
    if cache_dir is None:
        return layout_graph(deps)
    from ..model.cache import code_stamp, read_entry, sha1, write_entry

    key = sha1(repr((LAYOUT_FORMAT, code_stamp(os.path.dirname(__file__)), list(deps.items()))).encode()).hexdigest()
    entry = cache_dir / f"layout-{key[:20]}.marshal"
    record = read_entry(entry, key)
    if record is not None:
        try:
            return GraphLayout.from_data(record[1])
        except Exception:  # a record of the right key but not of this shape: lay it out again
            pass
    layout = layout_graph(deps)
    write_entry(entry, (key, layout.to_data()))
    return layout


def layout_graph(deps: Mapping[str, Sequence[str]]) -> GraphLayout:
    """Lay out a DAG given as name -> dependencies, in a topological order (dependencies before dependents)."""
    graph = _Graph(deps)
    graph.order()
    graph.place_rows()
    return graph.route()


def tile_text(tile: Tile, has_children: bool) -> list[str]:
    """A tile's box as plain text: the name in the top border, the edge attachment on the middle row."""
    w = tile.width
    title = _fit(tile.name, w - 6)
    top = "╭─ " + title + " " + "─" * (w - 5 - len(title)) + "╮"
    middle = "│" + " " * (w - 2) + ("├" if has_children else "│")
    bottom = "╰" + "─" * (w - 2) + "╯"
    return [top, middle, bottom]


def render_text(layout: GraphLayout) -> list[str]:
    """The whole layout as plain text lines (trailing spaces stripped): tiles with names, edges, arrows."""
    rows = [[" "] * layout.width for _ in range(layout.height)]
    for y in range(layout.height):
        for x, text in layout.edge_runs(y):
            rows[y][x:x + len(text)] = text
    for tile in layout.tiles.values():
        for dy, text in enumerate(tile_text(tile, tile.name in layout.has_children)):
            rows[tile.y + dy][tile.x:tile.x + tile.width] = text
    return ["".join(r).rstrip() for r in rows]


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


class _Graph:
    """The layered graph with dummy slots; nodes are ints, real tasks first (in topological order)."""

    def __init__(self, deps: Mapping[str, Sequence[str]]):
        self.names = list(deps)
        index = {name: i for i, name in enumerate(self.names)}
        n = len(self.names)
        self.real = n
        layer = [0] * n
        for i, name in enumerate(self.names):
            ds = deps[name]
            layer[i] = 1 + max(layer[index[d]] for d in ds) if ds else 0
        self.layer = layer
        self.succ: list[list[int]] = [[] for _ in range(n)]
        self.pred: list[list[int]] = [[] for _ in range(n)]
        self.has_children = frozenset(d for ds in deps.values() for d in ds)
        children: list[list[int]] = [[] for _ in range(n)]
        for i, name in enumerate(self.names):
            for d in deps[name]:
                children[index[d]].append(i)
        for u in range(n):
            self._connect(u, children[u])
        count = max(layer, default=-1) + 1
        self.layers: list[list[int]] = [[] for _ in range(count)]
        for v in range(len(self.layer)):
            self.layers[self.layer[v]].append(v)  # real tasks in topological order, then dummies
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

    def height_of(self, v: int) -> int:
        return TILE_HEIGHT if v < self.real else 1

    def mid_offset(self, v: int) -> int:
        return TILE_HEIGHT // 2 if v < self.real else 0

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

    # ---------------------------------------------------------------------------------------- vertical placement
    def place_rows(self) -> None:
        for lay in self.layers:
            top = 0
            for v in lay:
                self.y[v] = top
                top += self.height_of(v) + ROW_GAP
        for p in range(POSITION_PASSES):
            down = p % 2 == 0
            order = self.layers[1:] if down else self.layers[-2::-1]
            for lay in order:
                self._place_layer(lay, self.pred if down else self.succ)
        low = min((self.y[v] for v in range(len(self.layer))), default=0)
        self.top = [int(self.y[v] - low) for v in range(len(self.layer))]

    def _place_layer(self, lay: list[int], nbrs: list[list[int]]) -> None:
        """Move each slot towards the mean mid-row of its neighbours, keeping order and spacing (least squares)."""
        offsets, desired = [], []
        off = 0
        y, real, half = self.y, self.real, TILE_HEIGHT // 2
        for v in lay:
            ns = nbrs[v]
            if ns:
                mid = sum([y[n] + (half if n < real else 0) for n in ns]) / len(ns)
            else:
                mid = y[v] + (half if v < real else 0)
            offsets.append(off)
            desired.append(round(mid) - (half if v < real else 0) - off)
            off += (TILE_HEIGHT if v < real else 1) + ROW_GAP
        for v, z, o in zip(lay, _isotonic(desired), offsets):
            self.y[v] = round(z) + o

    # ----------------------------------------------------------------------------------------------- routing
    def route(self) -> GraphLayout:
        tile_width = min(MAX_TILE_WIDTH, max([MIN_TILE_WIDTH] + [len(n) + 6 for n in self.names]))
        mid = [self.top[v] + self.mid_offset(v) for v in range(len(self.layer))]
        edges = _EdgeDrawing()
        x = 0
        col_x = []
        for li, lay in enumerate(self.layers):
            col_x.append(x)
            for v in lay:
                if v >= self.real:  # a dummy: the edge passes straight through the column
                    edges.hline(mid[v], x, x + tile_width - 1, lead_in=True, lead_out=True)
            x += tile_width
            if li + 1 < len(self.layers):
                x += self._route_gap(lay, mid, x, edges)
        height = max((self.top[v] + self.height_of(v) for v in range(len(self.layer))), default=0)
        tiles: dict[str, Tile] = {}
        columns: list[list[str]] = []
        for li, lay in enumerate(self.layers):
            columns.append([self.names[v] for v in lay if v < self.real])
            for v in lay:
                if v < self.real:
                    tiles[self.names[v]] = Tile(self.names[v], li, col_x[li], self.top[v], tile_width)
        return GraphLayout(tiles, columns, x, height, tile_width, edges, self.has_children)

    def _route_gap(self, lay: list[int], mid: list[int], gx: int, edges: "_EdgeDrawing") -> int:
        """Draw the edges leaving `lay` into the gap starting at column gx; return the gap width."""
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
        gap = max(MIN_GAP, len(tracks) + 4)
        first = gx + 1 + (gap - 2 - len(tracks)) // 2
        end = gx + gap - 1
        for t, column in enumerate(tracks):
            edges.track(first + t, column)
        for u in straight:
            edges.hline(mid[u], gx, end, lead_in=True, lead_out=True)
        entry: dict[int, int] = {}  # child -> leftmost track feeding it
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
        """(a, b): a's track must be left of b's. On a row where parent a leaves and child c arrives, c's other
        parents must join c's line to the right of where a turns, or a's line would seem to feed them too."""
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
    """Edges as horizontal segments, vertical track blocks and arrow cells; `runs(y, x0, x1)` turns a piece of one
    line into text, touching only what lies in that piece."""

    def __init__(self) -> None:
        self.hsegs: dict[int, list[tuple[int, int, bool, bool]]] = {}  # y -> (x1, x2, lead_in, lead_out)
        self.track_xs: list[int] = []  # tracks are added left to right
        self.tracks: list[tuple[list[int], list[tuple[int, int, object]]]] = []  # (tops, blocks) at track_xs[i]
        self.arrows: dict[int, set[int]] = {}

    def hline(self, y: int, x1: int, x2: int, *, lead_in: bool = False, lead_out: bool = False) -> None:
        self.hsegs.setdefault(y, []).append((x1, x2, lead_in, lead_out))

    def track(self, x: int, track: "_Track") -> None:
        self.track_xs.append(x)
        self.tracks.append((track.tops, track.blocks))

    def runs(self, y: int, x0: int, x1: int) -> list[tuple[int, str]]:
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
        arrows = {x for x in self.arrows.get(y, ()) if x0 <= x < x1}
        runs: list[tuple[int, str]] = []
        for x in sorted(bits.keys() | arrows):
            char = ARROW if x in arrows else _BOX[bits[x]]
            if runs and runs[-1][0] + len(runs[-1][1]) == x:
                runs[-1] = (runs[-1][0], runs[-1][1] + char)
            else:
                runs.append((x, char))
        return runs


def _assign_tracks(spans: dict[int, tuple[int, int]], kids: Sequence[list[int]],
                   before: list[tuple[int, int]]) -> tuple[dict[int, int], list["_Track"]]:
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
