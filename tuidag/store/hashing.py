"""Content hashes of the files a task reads and makes, with a stat cache so an unchanged file is not read again.

The hash. Measured with `python benchmarks/hash_bench.py` (1 GiB of random bytes from the page cache, 1 MiB reads,
median of 3, on this 2-core machine shared with other work; xxhash and blake3 installed for it):

    hashlib.blake2b   2.14 s  (0.50 GB/s)      xxhash.xxh3_128   0.29 s  (3.71 GB/s)
    hashlib.sha256    0.86 s  (1.24 GB/s)      xxhash.xxh64      0.33 s  (3.23 GB/s)
    hashlib.sha1      0.78 s  (1.38 GB/s)      blake3 (1 thread) 0.49 s  (2.19 GB/s)
    hashlib.md5       1.80 s  (0.60 GB/s)      reading alone     0.22 s  (4.81 GB/s)

(an earlier, quieter run: sha256 0.85 s, xxh3_128 0.18 s, blake3 0.32 s, reading 0.15 s). With the stat cache,
64 files of 16 MiB take 0.58 s the first time and 1.2 ms again (no file read).

BLAKE3 is used when the `blake3` package is installed (`pip install 'tuidag[fast]'`): about 2-2.5 times sha256's
speed, and a cryptographic hash. xxh3 is faster still, but the content cache restores files by their hash, and xxh3's
collisions can be made on purpose (an input from someone else could make a cache entry stand for other bytes);
from disk rather than the page cache, reading takes most of the time anyway. Without it, hashlib's sha256 (only the
broken sha1 is faster here, by a tenth). Digests are cut to 128 bits; the algorithm is one of a task's facts and part
of the stat cache's key, so hashes made by the other one are never compared as if they were alike.

The stat cache (`hashes` in the state dir's index, index.py): a file whose size, mtime (ns), inode and device are
what they were when it was hashed is not read again. A file modified within a second before it was hashed may change
again within the file system's mtime granularity without its mtime moving, so its entry is not trusted: it is hashed
again next time (git's "racily clean" rule).
"""

from __future__ import annotations

import glob
import hashlib
import importlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol


def _fast() -> Callable[[], Any] | None:
    try:
        return importlib.import_module("blake3").blake3
    except ImportError:  # the optional dependency
        return None


_fast_hash = _fast()
ALGORITHM = "sha256" if _fast_hash is None else "blake3"

#: Digest length kept, in hex characters (128 bits).
HEX = 32
#: Nanoseconds within which a file modified before it was hashed is hashed again (mtime granularity).
RACY_NS = 1_000_000_000
_CHUNK = 1 << 20


def _new_hash() -> Any:
    return _fast_hash() if _fast_hash is not None else hashlib.sha256()


def hash_bytes(data: bytes) -> str:
    h = _new_hash()
    h.update(data)
    return h.hexdigest()[:HEX]


def hash_fd(fd: int) -> str:
    """The content hash of an open file, read from its start."""
    h = _new_hash()
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    os.lseek(fd, 0, os.SEEK_SET)
    while n := os.readv(fd, [buf]):
        h.update(view[:n])
    return h.hexdigest()[:HEX]


def hash_path(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return hash_fd(fd)
    finally:
        os.close(fd)


class Missing(Exception):
    """An input that is not there when the task is about to start: a path that does not exist, or a glob that
    matches no file. Its message says which, in the user's terms."""


class StatCache(Protocol):
    def known_hash(self, path: str, algorithm: str, key: tuple[int, int, int, int]) -> str | None: ...
    def remember_hash(self, path: str, algorithm: str, key: tuple[int, int, int, int], digest: str) -> None: ...


class Gate:
    """One thread at a time checks what the stat cache answers; a thread that has to read a file lets the others in
    while it reads (`reading`), so files of several tasks are still hashed at once (hashlib releases the GIL).

    Why: checking a known file is a few microseconds of Python, and pool threads doing it side by side only contend
    for the GIL and the locks they share. On the 1,000-task DAG of benchmarks/cache_bench.py with nothing changed
    (each task's 10 inputs and its output answered by the stat cache; tmpfs, 2 cores, load average 1.6), the
    engine took 0.44-0.47 s with `-j 8` against 0.21-0.23 s with `-j 1`; with the gate, 0.22-0.23 s with `-j 8`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = threading.local()

    def __enter__(self) -> None:
        self._lock.acquire()
        self._held.by_me = True

    def __exit__(self, *exc: object) -> None:
        self._held.by_me = False
        self._lock.release()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Let other threads in while this one reads a file (if it holds the gate)."""
        if not getattr(self._held, "by_me", False):
            yield
            return
        self.__exit__()
        try:
            yield
        finally:
            self.__enter__()


class Hasher:
    """Hashes files, reading only those whose stat changed since the stat cache saw them. `cache` is the index's
    table of earlier hashes (`index.Index`), or None for none; `gate`, a Gate held around checks (released while
    a file is read). Thread-safe as the index is."""

    def __init__(
        self, cache: StatCache | None = None, clock: Callable[[], int] = time.time_ns, gate: Gate | None = None
    ):
        self.cache = cache
        self.clock = clock
        self.gate = gate
        self.files_read = 0  # how many files were read (the others came from the stat cache), for tests and figures
        self._globs: dict[tuple[str, str], list[str]] | None = None  # (folder, pattern) -> matches, once kept

    def keep_globs(self) -> None:
        """Expand each glob once and give its matches to every task that lists it: only while nothing runs (`plan`),
        as a run's tasks make files a later task's glob must see."""
        self._globs = {}

    def _matches(self, root: str, pattern: str) -> list[str]:
        globs = self._globs
        if globs is not None and (root, pattern) in globs:
            return globs[(root, pattern)]
        matches = sorted(glob.glob(pattern, root_dir=root, recursive=True))
        if globs is not None:
            globs[(root, pattern)] = matches
        return matches

    def file(self, path: str, info: os.stat_result | None = None) -> str | None:
        """The hash of a regular file (symlinks followed), or None when there is none at `path`. `info`: its stat,
        when the caller has it. A file the stat cache knows costs one stat and no open."""
        if info is None:
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                return None
        if not stat.S_ISREG(info.st_mode):
            return None
        key = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev)
        if self.cache is not None:
            known = self.cache.known_hash(path, ALGORITHM, key)
            if known is not None:
                return known
        now = self.clock()
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            opened = os.fstat(fd)
            if (opened.st_ino, opened.st_dev) != (info.st_ino, info.st_dev):  # replaced meanwhile: hash what is there
                return self.file(path, opened) if stat.S_ISREG(opened.st_mode) else None
            if self.gate is not None:
                with self.gate.reading():
                    digest = hash_fd(fd)
            else:
                digest = hash_fd(fd)
            self.files_read += 1
        finally:
            os.close(fd)
        if self.cache is not None and info.st_mtime_ns < now - RACY_NS:
            self.cache.remember_hash(path, ALGORITHM, key, digest)
        return digest

    def tree(self, base: Path | str, entry: str) -> dict[str, str] | None:
        """Every file at `entry` (a file, or a folder's files at any depth), relative to `base` as written ->
        its hash; None when nothing is there."""
        path = os.path.normpath(os.path.join(base, entry))
        try:
            info = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISDIR(info.st_mode):
            found: dict[str, str] = {}
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in sorted(files):
                    full = os.path.join(root, name)
                    digest = self.file(full)
                    if digest is not None:
                        found[os.path.normpath(os.path.join(entry, os.path.relpath(full, path)))] = digest
            return found
        digest = self.file(path, info)
        return None if digest is None else {os.path.normpath(entry): digest}

    def inputs(self, base: Path, patterns: Iterable[str]) -> dict[str, str]:
        """Each input file (paths and globs relative to `base`, folders taken whole) -> its hash, sorted by path.
        Raises Missing for a path that does not exist or a glob that matches no file."""
        found: dict[str, str] = {}
        root = os.fspath(base)  # joined to each path: a str once, not a Path each time
        prefix = os.path.join(os.path.normpath(root), "") if os.path.isabs(root) else None
        for pattern in patterns:
            if "*" in pattern or "?" in pattern or "[" in pattern:  # glob.has_magic without a regex per path
                hashed = [self.tree(root, match) for match in self._matches(root, pattern)]
                if not any(hashed):
                    raise Missing(f"input '{pattern}' matches no file")
                for part in hashed:
                    found.update(part or {})
                continue
            marked = f"/{pattern}/"
            if prefix is None or "//" in marked or "/./" in marked or "/../" in marked:
                path, name = os.path.normpath(os.path.join(root, pattern)), os.path.normpath(pattern)
            else:  # a relative path already in normal form: the same strings without join and normpath
                path, name = prefix + pattern, pattern
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                raise Missing(f"input '{pattern}' does not exist") from None
            # A file (most inputs) straight to its hash; `tree` for a folder. Half the time of the checks of a
            # 1,000-task DAG with nothing changed went to its 11,000 files' paths, stats and dicts (profiled).
            if stat.S_ISREG(info.st_mode) and (digest := self.file(path, info)) is not None:
                found[name] = digest
                continue
            part = self.tree(root, pattern)
            if part is None:
                raise Missing(f"input '{pattern}' does not exist")
            found.update(part)
        return dict(sorted(found.items()))

    def outputs(self, base: Path, entries: Iterable[str]) -> dict[str, dict[str, str] | None]:
        """Each declared output -> its files and their hashes (None: not there)."""
        root = os.fspath(base)
        return {entry: self.tree(root, entry) for entry in entries}


def short(digest: str | None) -> str:
    """A hash as the user reads it in a reason: its first 8 characters."""
    return "none" if digest is None else digest[:8] + "…"
