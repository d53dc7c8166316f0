"""A small real file system for tests of a full disk: a tmpfs of a given size, mounted for one test."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(path: Path, size: str = "1m") -> Iterator[Path]:
    """Mount a `size` tmpfs at `path` (made here) for the block's duration; skip the test where that's not allowed
    (mounting needs root, or CAP_SYS_ADMIN in a user namespace)."""
    path.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"can't mount a {size} tmpfs here ({proc.stderr.strip() or 'mount failed'}): needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
