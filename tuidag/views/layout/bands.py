"""Where a long graph laid out left to right wraps into bands, as text wraps into lines.

A pipeline of 20-40 steps is common; left to right it is far wider than any screen, and top down far taller. Cut
into bands stacked down the screen, a 20-step chain shows every step at 160x45 in full tiles. A band ends after a
layer of one task whose edges all go to the next layer (no edge skips over the cut), so exactly one connector runs
from the end of a band back to the start of the next one, like a line break: out of the last task's right side, down
to a row of its own below the band, left to the margin, down, and into the next band's first tasks.

Plain arithmetic on the layers' sizes (no textual, no layout objects): `routing` measures, asks where to cut,
and draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

WRAP_MARGIN = 2  # cells left of every band: the connector comes down the first, its arrow in the second
WRAP_EXIT = 2  # cells right of a band's last task: the connector leaves it and turns down


def choose_cuts(depths: Sequence[int], gaps: Sequence[int], candidates: AbstractSet[int], width: int) -> set[int]:
    """The layers after which a new band starts, so that each band fits `width` cells: `depths[i]` is layer i's size
    along, `gaps[i]` the gap after it, `candidates` the layers a band may end after. Bands are filled greedily, each
    cut at the last candidate that keeps it within the width; a band with no such candidate runs on (wider)."""
    cuts: set[int] = set()
    if not depths:
        return cuts
    start, used = 0, depths[0]
    for layer in range(1, len(depths)):
        need = used + gaps[layer - 1] + depths[layer]
        if need > width:
            possible = [c for c in candidates if start <= c < layer]
            if possible:
                cut = max(possible)
                cuts.add(cut)
                start = cut + 1
                used = sum(depths[start : layer + 1]) + sum(gaps[start:layer])
                continue
        used = need
    return cuts
