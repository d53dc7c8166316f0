"""The minimap's cells follow every state change task by task and always equal a fresh count."""

from __future__ import annotations

import random

from tuidag.views.minimap import MinimapGrid


def fresh(places, width, height, columns, rows, rank):
    return MinimapGrid(places, width, height, columns, rows, 4, rank.__getitem__).cells


def test_cells_show_the_most_urgent_state_drawn_there_and_follow_changes():
    places = {"a": (0, 0), "b": (5, 0), "c": (50, 12), "d": (99, 19)}
    rank = {"a": 3, "b": 1, "c": 2, "d": 3}
    grid = MinimapGrid(places, 100, 20, 4, 2, 4, rank.__getitem__)
    assert grid.cells == [[1, -1, -1, -1], [-1, -1, 2, 3]]  # a and b share a cell: b's rank is more urgent
    rank["b"] = 3
    grid.update(["b"])
    assert grid.cells[0][0] == 3
    rank["a"] = 0
    grid.update(["a", "c"])  # c did not change: nothing moves
    assert grid.cells == [[0, -1, -1, -1], [-1, -1, 2, 3]]


def test_after_any_sequence_of_changes_the_cells_equal_a_fresh_grid():
    rng = random.Random(4)
    places = {f"t{i}": (rng.randrange(300), rng.randrange(80)) for i in range(500)}
    rank = {name: rng.randrange(4) for name in places}
    grid = MinimapGrid(places, 300, 80, 24, 8, 4, rank.__getitem__)
    for _ in range(50):
        changed = rng.sample(sorted(places), 20)
        for name in changed:
            rank[name] = rng.randrange(4)
        grid.update(changed)
        assert grid.cells == fresh(places, 300, 80, 24, 8, rank)
