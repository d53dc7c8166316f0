"""The state dir's index of file contents (`index.sqlite`): the stat cache of file hashes, the record of every
successful attempt of a task that declares outputs (what it read, what it made), and the content cache's entries.

SQLite, because several tuidag processes may share a state dir (each run of a folder's DAGs) and every pool thread
of a run checks and records tasks: its locking makes each write whole, and a crash leaves the last committed state.
One connection per process, used under a lock. The stat cache and the DAG's successes are read once into memory (a
query per file was most of a 1,000-task up-to-date run: 11,000 queries, 1.9 s) and new hashes are written in batches,
one transaction each (`synchronous=NORMAL`: a crash of the machine may lose the last ones, which costs hashing
those files again, never a wrong answer).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

NAME = "index.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS hashes (
    path TEXT NOT NULL, algorithm TEXT NOT NULL, size INTEGER, mtime_ns INTEGER, ino INTEGER, dev INTEGER,
    digest TEXT NOT NULL, PRIMARY KEY (path, algorithm));
CREATE TABLE IF NOT EXISTS successes (
    task TEXT NOT NULL, facts_key TEXT NOT NULL, run_id TEXT NOT NULL, at REAL NOT NULL, facts TEXT NOT NULL,
    outputs TEXT NOT NULL, log TEXT, value TEXT, PRIMARY KEY (task, facts_key));
CREATE INDEX IF NOT EXISTS successes_by_time ON successes (task, at);
CREATE TABLE IF NOT EXISTS blobs (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, used_at REAL NOT NULL);
"""
#: Earlier successes kept per task: enough to go back and forth between a few branches; older ones are dropped.
KEPT_PER_TASK = 20


class Success(NamedTuple):
    """An earlier successful attempt of a task: the facts it ran with, the outputs it made (entry -> file ->
    hash), the run it was in and where its log was."""

    run_id: str
    at: float
    facts: dict[str, Any]
    outputs: dict[str, dict[str, str]]
    log: str | None
    value: str | None = "null"  # a callable's return value as JSON (None: not kept, it was not plain JSON)
    key: str = ""  # model.freshness.facts_key(facts), as recorded


class Index:
    def __init__(self, state_dir: Path):
        path = state_dir / NAME
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = _open(path)
        except sqlite3.DatabaseError as exc:  # not a database (a damaged file): put aside, start a new one
            aside = path.with_name(f"{NAME}.damaged-{int(time.time())}")
            os.replace(path, aside)
            print(
                f"tuidag: warning: {path}: not an index tuidag can read ({exc}): moved to {aside.name}, a new one is "
                "made (every task with outputs runs once)",
                file=sys.stderr,
            )
            self._db = _open(path)
        self._hashes: dict[str, dict[str, tuple]] = {}  # algorithm -> path -> its row of `hashes` (read on first use)
        self._new_hashes: list[tuple[str, str, int, int, int, int, str]] = []  # not written yet
        self._successes: dict[str, list[Success]] = {}  # task -> its successes, newest first (`preload`)
        self._prefix: str | None = None  # the tasks whose successes were preloaded start with this

    def close(self) -> None:
        with self._lock:
            self._flush_hashes()
            self._db.close()

    # The stat cache.
    def known_hash(self, path: str, algorithm: str, key: tuple[int, int, int, int]) -> str | None:
        """The hash of `path` when its stat `key` is the one it was hashed with. Read without the lock once the table
        is loaded (a dict lookup is atomic): every pool thread asks for each of its task's files, and taking the lock
        for each of the 11,000 lookups of a 1,000-task up-to-date run made the threads queue on it."""
        hashes = self._hashes.get(algorithm)
        if hashes is None:
            hashes = self._load_hashes(algorithm)
        row = hashes.get(path)  # (path, size, mtime_ns, ino, dev, digest)
        return row[5] if row is not None and row[1:5] == key else None

    def _load_hashes(self, algorithm: str) -> dict[str, tuple]:
        """The stat cache of `algorithm`, path -> row, built without a Python loop over the rows (11,000 rows: 7 ms,
        against 9 ms with a comprehension making a key and a value per row)."""
        with self._lock:
            if algorithm not in self._hashes:
                rows = self._db.execute(
                    "SELECT path, size, mtime_ns, ino, dev, digest FROM hashes WHERE algorithm = ?", (algorithm,)
                ).fetchall()
                self._hashes[algorithm] = dict(zip(map(itemgetter(0), rows), rows))
            return self._hashes[algorithm]

    def remember_hash(self, path: str, algorithm: str, key: tuple[int, int, int, int], digest: str) -> None:
        with self._lock:
            if algorithm in self._hashes:
                self._hashes[algorithm][path] = (path, *key, digest)
            self._new_hashes.append((path, algorithm, *key, digest))
            if len(self._new_hashes) >= 1000:
                self._flush_hashes()

    def _flush_hashes(self) -> None:
        if self._new_hashes:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?, ?, ?, ?)", self._new_hashes)
            self._db.execute("COMMIT")
            self._new_hashes = []

    # Successes.
    def preload(self, prefix: str) -> None:
        """Read the successes of every task whose key starts with `prefix` (a DAG's) in one query."""
        with self._lock:
            rows = self._db.execute(
                "SELECT task, facts_key, run_id, at, facts, outputs, log, value FROM successes "
                "WHERE task >= ? AND task < ? ORDER BY at DESC",
                (prefix, prefix + "\uffff"),
            ).fetchall()
            successes: dict[str, list[Success]] = {}
            for task, *row in rows:
                success = _success(row)
                if success is not None:
                    successes.setdefault(task, []).append(success)
            self._successes, self._prefix = successes, prefix

    def successes(self, task: str) -> list[Success]:
        """The task's recorded successes, newest first."""
        if self._prefix is not None and task.startswith(self._prefix):  # preloaded: no lock (as in `known_hash`)
            return list(self._successes.get(task, ()))
        with self._lock:
            rows = self._db.execute(
                "SELECT facts_key, run_id, at, facts, outputs, log, value FROM successes WHERE task = ? "
                "ORDER BY at DESC",
                (task,),
            ).fetchall()
        return [success for row in rows if (success := _success(row)) is not None]

    def record_success(self, task: str, facts_key: str, success: Success, blobs: dict[str, int] | None = None) -> None:
        """Record `success` (replacing one with the same facts) and the content cache entries it stored."""
        row = (task, facts_key, success.run_id, success.at, json.dumps(success.facts), json.dumps(success.outputs))
        with self._lock:
            self._flush_hashes()
            if self._prefix is not None and task.startswith(self._prefix):
                kept = [s for s in self._successes.get(task, ()) if s.key != facts_key]
                self._successes[task] = [success._replace(key=facts_key), *kept][:KEPT_PER_TASK]
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO successes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (*row, success.log, success.value),
                )
                self._db.execute(
                    "DELETE FROM successes WHERE task = ? AND facts_key NOT IN (SELECT facts_key FROM successes "
                    "WHERE task = ? ORDER BY at DESC LIMIT ?)",
                    (task, task, KEPT_PER_TASK),
                )
                for digest, size in (blobs or {}).items():
                    self._db.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?, ?)", (digest, size, time.time()))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # The content cache's entries (content_cache.py holds the files).
    def touch_blobs(self, digests: list[str]) -> None:
        with self._lock:
            self._db.executemany("UPDATE blobs SET used_at = ? WHERE digest = ?", [(time.time(), d) for d in digests])

    def blobs(self) -> list[tuple[str, int, float]]:
        """(digest, size, last used), least recently used first."""
        with self._lock:
            return self._db.execute("SELECT digest, size, used_at FROM blobs ORDER BY used_at").fetchall()

    def forget_blobs(self, digests: list[str]) -> None:
        with self._lock:
            self._db.executemany("DELETE FROM blobs WHERE digest = ?", [(d,) for d in digests])


def _open(path: Path) -> sqlite3.Connection:
    """The index at `path`, made 0600 by tuidag (never through a planted link) before SQLite opens it, with its
    tables. Raises sqlite3.DatabaseError for a file that is not one."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.close(fd)
    db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
    except BaseException:
        db.close()
        raise
    return db


def _success(row: tuple) -> Success | None:
    """A row of `successes` (from facts_key on), or None for a damaged one: as if it were not there."""
    key, run_id, at, facts, outputs, log, value = row
    try:
        return Success(run_id, at, json.loads(facts), json.loads(outputs), log, value, key)
    except ValueError:
        return None
