"""Keeping Python's cyclic garbage collector out of the way of big, long-lived, acyclic structures.

A DAG of thousands of tasks means tens of thousands of objects (YAML nodes, specs, snapshots, tiles) that are built
once and live until exit. Left alone, the collector walks all of them again on every full pass: while they are being
built (which made loading quadratic) and during the run (pauses of ~0.1 s in the UI).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collections while building something that holds no reference cycles (collected or not, it all survives)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_survivors() -> None:
    """Move everything alive now into the permanent generation: full passes during the run skip it."""
    gc.freeze()
