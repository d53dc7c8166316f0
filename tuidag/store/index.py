"""The state dir's index of file contents (`index.sqlite`): the stat cache of file hashes, the record of every
successful attempt of a task that declares outputs (what it read, what it made), and the content cache's entries.

SQLite, because several tuidag processes may share a state dir (each run of a folder's DAGs) and every pool thread
of a run checks and records tasks: its locking makes each write whole, and a crash leaves the last committed state.
One connection per process, used under a lock (a task's check is milliseconds of index work beside its hashing,
which runs outside the lock).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
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


class Index:
    def __init__(self, state_dir: Path):
        path = state_dir / NAME
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)  # made 0600 by us, never through a planted link, before SQLite opens it
        self._db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # The stat cache.
    def known_hash(self, path: str, algorithm: str, key: tuple[int, int, int, int]) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT size, mtime_ns, ino, dev, digest FROM hashes WHERE path = ? AND algorithm = ?",
                (path, algorithm),
            ).fetchone()
        return row[4] if row is not None and tuple(row[:4]) == key else None

    def remember_hash(self, path: str, algorithm: str, key: tuple[int, int, int, int], digest: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?, ?, ?, ?)", (path, algorithm, *key, digest)
            )

    # Successes.
    def successes(self, task: str) -> list[Success]:
        """The task's recorded successes, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, at, facts, outputs, log, value FROM successes WHERE task = ? ORDER BY at DESC", (task,)
            ).fetchall()
        found = []
        for run_id, at, facts, outputs, log, value in rows:
            try:
                found.append(Success(run_id, at, json.loads(facts), json.loads(outputs), log, value))
            except ValueError:  # a damaged row: as if it were not there
                continue
        return found

    def record_success(self, task: str, facts_key: str, success: Success, blobs: dict[str, int] | None = None) -> None:
        """Record `success` (replacing one with the same facts) and the content cache entries it stored."""
        row = (task, facts_key, success.run_id, success.at, json.dumps(success.facts), json.dumps(success.outputs))
        with self._lock:
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
