"""The layered graph and where its nodes go: a node per task, per block (a packed layer) and per dummy slot (where
an edge passes a layer it skips); the order within each layer (barycenter sweeps, fewest crossings kept); and each
slot's position across (pulled towards its neighbours, order and spacing kept)."""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Mapping, Sequence

from ...model.layering import longest_path_layers
from .shape import Block, DagShape, layer_counts, packing
from .style import DOTS_MIN_TASKS, LayoutStyle, Orientation, Zoom, tile_width

ORDER_SWEEPS = 4  # down+up barycenter sweep pairs, at most
SETTLED = 0.05  # a sweep pair that removes less than this share of the crossings left is the last one
POSITION_PASSES = 4  # down/up placement passes


class LayeredGraph:
    """The layered graph of nodes: a node is a task, a block (a packed layer) or a dummy slot. Real nodes (tasks and
    blocks) come first, in topological order; dummies after them. Coordinates here are (along, across)."""

    def __init__(self, deps: Mapping[str, Sequence[str]], style: LayoutStyle):
        self.style = style
        self.m = m = style.metrics
        self.lr = style.orientation is Orientation.LR
        self.task_layer = task_layer = longest_path_layers(deps.items())
        # A DAG small enough for its tiles to grow to the screen, or to wrap into bands, is weighed as the canvas
        # weighs it (a big one is not: working its shape out again would cost a big layout a third more).
        self.shape = DagShape(deps) if len(deps) < DOTS_MIN_TASKS else None
        self.tile_width = w = self.shape.tile_width(style) if self.shape else tile_width(list(deps), style)
        self.tile_across, self.tile_along = (m.tile_height, w) if self.lr else (w, m.tile_height)
        counts = layer_counts(task_layer)
        count = len(counts)
        members: list[list[str]] = [[] for _ in range(count)]
        for name in deps:
            members[task_layer[name]].append(name)
        grids = packing(counts, style, w)
        self.blocks: dict[int, tuple[int, Block]] = {}  # node -> (layer, grid)
        self.node_of: dict[str, int] = {}
        self.node_tasks: list[list[str]] = []
        self.layer: list[int] = []
        for name in deps:  # tasks in topological order; a block is made where its layer's first task comes
            lay = task_layer[name]
            grid = grids[lay]
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
        self.has_children = frozenset(d for name, ds in deps.items() for d in ds if self.node_of[d] not in self.blocks)
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
        nbrs = self.pred if direction > 0 else self.succ
        for li in rng:
            lay = self.layers[li]

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


def _isotonic(values: Sequence[float]) -> list[float]:
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
