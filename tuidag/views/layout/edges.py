"""Edges as drawn: segments along, tracks across and arrows, in the layout's (along, across) frame, turned into
box-drawing text one piece of one screen line at a time (a big DAG's edges cover far more cells than a screen
shows). Every cell collects direction bits mapped to ┌┐└┘├┤┬┴┼, so fan-in and fan-out merge into trees."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

ARROW = "▶"  # an edge's end at its child, left to right
ARROW_DOWN = "▼"  # ... top down

_U, _D, _L, _R = 1, 2, 4, 8
_BOX = {
    _L | _R: "─",
    _U | _D: "│",
    _D | _R: "┌",
    _D | _L: "┐",
    _U | _R: "└",
    _U | _L: "┘",
    _U | _D | _R: "├",
    _U | _D | _L: "┤",
    _L | _R | _D: "┬",
    _L | _R | _U: "┴",
    _U | _D | _L | _R: "┼",
    _L: "─",
    _R: "─",
    _U: "│",
    _D: "│",
}
#: The same bits seen transposed (top down): left becomes up, right becomes down.
_BOX_TD = {
    bits: _BOX[(bits & _L and _U) | (bits & _R and _D) | (bits & _U and _L) | (bits & _D and _R)] for bits in _BOX
}


class EdgeDrawing:
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

    def track(self, x: int, track: Track) -> None:
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
                    bits[y] = (
                        bits.get(y, 0) | (_L if along > a or lead_in else 0) | (_R if along < b or lead_out else 0)
                    )
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


class Track:
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
            del self.tops[hits.start : hits.stop], self.blocks[hits.start : hits.stop]
        i = bisect_right(self.tops, lo)
        self.tops.insert(i, lo)
        self.blocks.insert(i, (lo, hi, key))


def span_track(lo: int, hi: int, key: object) -> Track:
    track = Track()
    track.add((lo, hi), key)
    return track
