"""Content hashing for up-to-date checks: the hash functions on 1 GiB, and tuidag's hasher on 1 GiB of input files
the first time and again with the stat cache.

1. algorithms: one 1 GiB file of random bytes, read in 1 MiB chunks from the page cache (it is read once first) and
   hashed by hashlib's blake2b, sha256, sha1 and md5, and by xxhash (xxh3_128, xxh64) and blake3 when they are
   installed (`pip install xxhash blake3`); reading alone for the floor. Median of `--repeats`.
2. stat cache: 64 files of 16 MiB hashed by `tuidag.store.hashing.Hasher` with an index in a new state dir: the first
   time (every file read) and again (each file's stat matches: none read), as a run that finds nothing changed.

    python benchmarks/hash_bench.py [--dir /tmp] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuidag.store.hashing import ALGORITHM, Hasher
from tuidag.store.index import Index

CHUNK = 1 << 20
GIB = 1 << 30


def write_random(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        for _ in range(size // CHUNK):
            f.write(os.urandom(CHUNK))


def hash_file(path: Path, make: Callable[[], Any] | None) -> None:
    h = make() if make is not None else None
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            if h is not None:
                h.update(view[:n])


def candidates() -> dict[str, Callable[[], Any] | None]:
    found: dict[str, Callable[[], Any] | None] = {
        "hashlib.blake2b": hashlib.blake2b,
        "hashlib.sha256": hashlib.sha256,
        "hashlib.sha1": hashlib.sha1,
        "hashlib.md5": hashlib.md5,
    }
    for module, names in (("xxhash", ("xxh3_128", "xxh64")), ("blake3", ("blake3",))):
        try:
            imported = importlib.import_module(module)
        except ImportError:
            print(f"({module} is not installed: left out)")
            continue
        for name in names:
            found[f"{module}.{name}"] = getattr(imported, name)
    found["reading alone"] = None
    return found


def median_time(work: Callable[[], None], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tuidag-hash-bench-", dir=args.dir))
    try:
        big = base / "1g.bin"
        write_random(big, GIB)
        hash_file(big, None)  # into the page cache
        print("1. algorithms, 1 GiB from the page cache, median of", args.repeats)
        for name, make in candidates().items():
            seconds = median_time(lambda make=make: hash_file(big, make), args.repeats)
            print(f"   {name:18s} {seconds:6.3f} s  {GIB / seconds / 1e9:5.2f} GB/s")
        big.unlink()
        inputs = base / "inputs"
        inputs.mkdir()
        for i in range(64):
            write_random(inputs / f"part-{i:02d}.bin", 16 << 20)
            old = time.time() - 60  # written a minute ago: outside the stat cache's one-second window
            os.utime(inputs / f"part-{i:02d}.bin", (old, old))
        print(f"2. tuidag's hasher ({ALGORITHM}), 64 files of 16 MiB, median of", args.repeats)
        firsts, agains = [], []
        for _ in range(args.repeats):
            state = base / f"state-{len(firsts)}"
            index = Index(state)
            start = time.perf_counter()
            Hasher(index).inputs(base, ["inputs"])
            firsts.append(time.perf_counter() - start)
            hasher = Hasher(index)
            start = time.perf_counter()
            hasher.inputs(base, ["inputs"])
            agains.append(time.perf_counter() - start)
            assert hasher.files_read == 0
            index.close()
        print(f"   first time         {statistics.median(firsts):6.3f} s")
        print(f"   with the stat cache {statistics.median(agains) * 1000:5.1f} ms (no file read)")
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
