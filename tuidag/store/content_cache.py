"""The content cache: every file a successful task made, kept under its hash in `content/` of the state dir, so a
task whose inputs match an earlier success but whose outputs are gone or differ (a `git checkout` of another branch
and back) gets them back without running.

Files are stored as hard links where the file system allows (no second copy of a 10 GB model), copies otherwise. A
hard link shares the file: a later attempt that rewrites an output in place changes the entry too, so an entry is
verified by its hash before every restore, and one that no longer matches is removed, never restored. Restores are
copies: restored by link, two outputs with the same content (or an output and the entry) would be one file, and a
task writing one would change the other.
The cache is kept under a size cap (`DEFAULT_MAX_SIZE`, or `$TUIDAG_CACHE_MAX_SIZE`), least recently used entries
removed first, and says so when it prunes.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from .hashing import hash_path
from .index import Index

FOLDER = "content"
DEFAULT_MAX_SIZE = 10 << 30  # 10 GiB
MAX_SIZE_ENV = "TUIDAG_CACHE_MAX_SIZE"


def parse_size(text: str) -> int:
    """`500M`, `10G`, `2T` or a number of bytes. Raises ValueError."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    factor = units.get(text[-1:], 1)
    number = float(text[:-1] if text[-1:] in units else text)
    if number < 0:
        raise ValueError(text)
    return int(number * factor)


def size_text(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} B"


def max_size(environ: dict[str, str] | None = None) -> int:
    value = (environ if environ is not None else os.environ).get(MAX_SIZE_ENV)
    try:
        return parse_size(value) if value else DEFAULT_MAX_SIZE
    except ValueError:
        return DEFAULT_MAX_SIZE


class ContentCache:
    def __init__(self, state_dir: Path, index: Index, on_pruned: Callable[[str], None] | None = None):
        self.root = state_dir / FOLDER
        self.index = index
        self.on_pruned = on_pruned  # told once when the cap made it remove entries

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def store(self, source: str, digest: str) -> int | None:
        """Keep `source` (whose content hashes to `digest`) in the cache; its size if a new entry was made."""
        target = self.path(digest)
        if target.is_file():
            return None
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = target.with_name(f".{digest}.{os.getpid()}.tmp")
        try:
            try:
                os.link(source, temporary)
            except OSError:  # another file system, or no hard links
                shutil.copyfile(source, temporary)
            os.replace(temporary, target)
        except OSError:
            temporary.unlink(missing_ok=True)
            return None
        return target.stat().st_size

    def restore(self, digest: str, destination: str) -> bool:
        """Put the entry `digest` at `destination` (replacing what is there). False, and the entry removed, when it
        no longer holds that content; False when it is gone."""
        entry = self.path(digest)
        try:
            if not stat.S_ISREG(os.lstat(entry).st_mode) or hash_path(str(entry)) != digest:
                self.remove([digest])
                return False
        except OSError:
            self.index.forget_blobs([digest])
            return False
        os.makedirs(os.path.dirname(destination) or ".", exist_ok=True)
        temporary = f"{destination}.tuidag-restore-{os.getpid()}"
        try:
            shutil.copyfile(entry, temporary)
            if hash_path(temporary) != digest:  # changed while it was copied
                raise OSError("the cache entry changed while it was restored")
            os.replace(temporary, destination)
        except OSError:
            if os.path.lexists(temporary):
                os.unlink(temporary)
            return False
        self.index.touch_blobs([digest])
        return True

    def remove(self, digests: list[str]) -> None:
        for digest in digests:
            self.path(digest).unlink(missing_ok=True)
        self.index.forget_blobs(digests)

    def size(self) -> tuple[int, int]:
        """(entries, bytes)."""
        blobs = self.index.blobs()
        return len(blobs), sum(size for _, size, _ in blobs)

    def prune(self, limit: int) -> tuple[int, int]:
        """Remove least recently used entries until the cache holds at most `limit` bytes: (entries, bytes)
        removed."""
        blobs = self.index.blobs()
        total = sum(size for _, size, _ in blobs)
        removed: list[str] = []
        freed = 0
        for digest, size, _ in blobs:
            if total - freed <= limit:
                break
            removed.append(digest)
            freed += size
        self.remove(removed)
        return len(removed), freed

    def keep_under_cap(self, limit: int) -> None:
        count, freed = self.prune(limit)
        if count and self.on_pruned is not None:
            self.on_pruned(
                f"the content cache reached its cap of {size_text(limit)}: removed its {count} least recently used "
                f"entries ({size_text(freed)}); `tuidag cache` shows it, ${MAX_SIZE_ENV} sets the cap"
            )
