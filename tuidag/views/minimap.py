"""The minimap's cells: the whole graph shrunk to a few cells, each showing the most urgent state among the tasks
drawn there.

Kept up to date task by task: each cell counts its tasks per state, so a state change costs a couple of list
updates, not a pass over 5,000 tasks; and what it shows never depends on when it was last looked at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping


class MinimapGrid:
    """`rows` x `columns` cells over a `width` x `height` graph. `places[name]` is the (x, y) a task is drawn at;
    `rank_of(name)` is how urgent its state is now (0 most urgent, below `ranks`)."""

    def __init__(
        self,
        places: Mapping[str, tuple[int, int]],
        width: int,
        height: int,
        columns: int,
        rows: int,
        ranks: int,
        rank_of: Callable[[str], int],
    ):
        self.columns, self.rows = columns, rows
        self._rank_of = rank_of
        sx, sy = width / columns, height / rows
        self._cell: dict[str, tuple[int, int]] = {}
        self._rank: dict[str, int] = {}
        self._counts = [[[0] * ranks for _ in range(columns)] for _ in range(rows)]
        self.cells = [[-1] * columns for _ in range(rows)]  # per cell: the most urgent rank, -1 where no task is
        for name, (x, y) in places.items():
            cy, cx = min(rows - 1, int(y / sy)), min(columns - 1, int(x / sx))
            rank = rank_of(name)
            self._cell[name], self._rank[name] = (cy, cx), rank
            self._counts[cy][cx][rank] += 1
            if self.cells[cy][cx] < 0 or rank < self.cells[cy][cx]:
                self.cells[cy][cx] = rank

    def update(self, names: Iterable[str]) -> None:
        """These tasks may have changed state."""
        for name in names:
            old, new = self._rank[name], self._rank_of(name)
            if old == new:
                continue
            cy, cx = self._cell[name]
            counts = self._counts[cy][cx]
            counts[old] -= 1
            counts[new] += 1
            self._rank[name] = new
            self.cells[cy][cx] = next(rank for rank, n in enumerate(counts) if n)
