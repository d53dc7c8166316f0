"""The interleaved `[task] line` output of many task logs, in bounded memory (no textual here).

`CombinedLog` keeps a ring of the most recent lines (older ones are counted in `dropped`) and is a `LogLines`
(log_lines.py), read like one task's `LogIndex`; `show_only` narrows it to some tasks' lines without reading anything
again.
"""

from __future__ import annotations

import heapq
import itertools
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .log_lines import CHUNK, clamp_start, decode
from .terminal_text import strip_ansi, visible_part


class _Tail:
    """How far one task's log has been read, its incomplete last line, and what is known of when its unread bytes
    were written: between `since` (the time of the last write seen, at offset `offset`, or the task's start) and
    `until` (the file's modification time when the bytes up to `end` were first seen)."""

    __slots__ = (
        "behind",
        "end",
        "identity",
        "offset",
        "path",
        "pending",
        "prefix",
        "rank",
        "since",
        "start",
        "started",
        "task",
        "until",
    )

    def __init__(self, task: str, path: Path, prefix: str, rank: int, started: float | None) -> None:
        self.task, self.path, self.prefix, self.rank, self.started = task, path, prefix, rank, started
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        self.pending = b""
        self.behind = True
        self.since = self.until = 0.0
        self.start = self.end = 0  # the bytes [start, end) were written between `since` and `until`

    def chunks(self, limit: int | None) -> Iterator[bytes]:
        """New bytes, a chunk at a time, up to the size the file had when this started and at most `limit`.

        The file is opened per call: a combined view may follow hundreds of files, most of them finished."""
        try:
            stat = os.stat(self.path)
        except OSError:
            self.behind = False
            return
        if (stat.st_dev, stat.st_ino) != self.identity or stat.st_size < self.offset:
            # First seen: written since the task started. Replaced or truncated: since the last write seen.
            since = self.until if self.identity is not None else self.started
            self.identity, self.offset, self.pending = (stat.st_dev, stat.st_ino), 0, b""
            self.start = self.end = 0
            self.until = stat.st_mtime if since is None else min(since, stat.st_mtime)
        if self.offset >= self.end and stat.st_size > self.end:  # a new stretch of unread bytes
            self.since, self.until = self.until, max(self.until, stat.st_mtime)
            self.start, self.end = self.end, stat.st_size
        end = self.end if limit is None else min(self.end, self.offset + limit)
        if end > self.offset:
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                self.behind = False  # unreadable: nothing to catch up with until it changes
                return
            try:
                while self.offset < end and (data := os.pread(fd, min(CHUNK, end - self.offset), self.offset)):
                    self.offset += len(data)
                    yield data
            finally:
                os.close(fd)
        self.behind = self.offset < stat.st_size

    def written_at(self, offset: int) -> float:
        """When the byte before `offset` was written, as far as can be known: spread evenly over the stretch."""
        span = self.end - self.start
        if span <= 0 or offset >= self.end:
            return self.until
        return self.since + (self.until - self.since) * (offset - self.start) / span


class CombinedLog:
    """The interleaved output of many task logs, each line prefixed `[task] ` (in the task's colour, if given), in
    bounded memory.

    Complete lines go to a ring of at most `max_lines` lines and `max_chars` characters (each line cut to
    `max_line_chars`); what falls off the front is counted in `dropped`, so `dropped + i` numbers a line for good.
    Each task's incomplete last line is shown after the ring, as in a terminal, until its newline arrives.

    Lines of different tasks are ordered by when they were written, as far as the files tell: a stretch of bytes read
    in one go was written between the time of the last write seen before it (at first, the task's start) and the
    file's modification time, and its lines are placed evenly over that interval. Followed live, a stretch spans one
    refresh, so this is the order of arrival; a backlog (the view opened late, or a task added late) interleaves with
    the other tasks' lines by those estimates instead of coming in one block. Lines wait in a heap until no file
    still being caught up with could hold an earlier one.

    `show_only(tasks)` shows just those tasks' lines: each line in the ring remembers its task, so the shown lines are
    picked from the ring (in its order), and new ones as they are placed. The lines are then renumbered: `generation`
    is bumped and `dropped` counts only shown lines that fell off the front.
    """

    def __init__(
        self,
        paths: Mapping[str, Path] | None = None,
        *,
        max_lines: int = 100_000,
        max_chars: int = 64 << 20,
        max_line_chars: int = 16 << 10,
    ) -> None:
        self.max_lines, self.max_chars, self.max_line_chars = max_lines, max_chars, max_line_chars
        self.dropped = 0  # lines shown that fell off the front (or were never placed: see `_forget_oldest_waiting`)
        self.generation = 0  # bumped when the lines are renumbered: a new filter
        self.version = 0
        self.caught_up = True
        self._tails: dict[str, _Tail] = {}
        self._ring: deque[str] = deque()  # every task's lines; `_owners` has each one's task
        self._owners: deque[str] = deque()
        self._lines = self._ring  # the lines shown: the ring itself, or under a filter the shown tasks' lines of it
        self._shown_tasks: frozenset[str] | None = None
        self._chars = 0
        self._partials: list[str] = []
        # Lines not placed yet, a heap of (written at, task's rank, offset of the line's end, line, task): equal times
        # go in the order the tasks were added, whatever order the files happened to be read in.
        self._waiting: list[tuple[float, int, int, str, str]] = []
        self._waiting_chars = 0
        for task, path in (paths or {}).items():
            self.add(task, path)

    def add(self, task: str, path: Path, *, started: float | None = None, colour: int | None = None) -> None:
        """Follow `task`'s log too (from its start). `started`: when the task started (wall clock), which places
        its first lines; `colour`: an SGR colour number for its prefix. Adding a task again with the same path
        changes nothing."""
        path = Path(path)
        if task not in self._tails or self._tails[task].path != path:
            prefix = f"[{task}] " if colour is None else f"\x1b[{colour}m[{task}]\x1b[0m "
            self._tails[task] = _Tail(task, path, prefix, len(self._tails), started)
            self.caught_up = False

    @property
    def paths(self) -> dict[str, Path]:
        return {task: tail.path for task, tail in self._tails.items()}

    @property
    def shown_tasks(self) -> frozenset[str] | None:
        """The tasks whose lines are shown, or None for all."""
        return self._shown_tasks

    def show_only(self, tasks: Iterable[str] | None) -> None:
        """Show only the lines of `tasks` (None: every task's), in the same order; tasks added later count too.

        The ring is filtered again, no file is read. The shown lines are renumbered from 0 (`generation` changes)."""
        shown = None if tasks is None else frozenset(tasks)
        if shown == self._shown_tasks:
            return
        self._shown_tasks = shown
        if shown is None:
            self._lines = self._ring
        else:
            self._lines = deque(line for line, task in zip(self._ring, self._owners) if task in shown)
        self.dropped = 0
        self._partials = self._shown_partials()
        self.generation += 1
        self.version += 1

    @property
    def watched(self) -> frozenset[Path]:
        """What to watch for changes of these logs: their folders."""
        return frozenset(tail.path.parent for tail in self._tails.values())

    @property
    def line_count(self) -> int:
        return len(self._lines) + len(self._partials)

    @property
    def complete_lines(self) -> int:
        """Lines whose text can no longer change; the incomplete ones follow them."""
        return len(self._lines)

    def refresh(self, max_bytes: int | None = None) -> int:
        """Read what the files gained (about `max_bytes` in all, shared among them); return how many lines were
        added, counting the ones that fell off the front."""
        before = self.dropped + self.line_count
        share = None if max_bytes is None else max(max_bytes // max(1, len(self._tails)), 1 << 16)
        read = False
        fresh: list[tuple[_Tail, int, list[bytes]]] = []  # (tail, offset of the first line, complete raw lines)
        for tail in self._tails.values():
            for data in tail.chunks(share):
                fresh.append(self._take(tail, data))
                read = True
        behind = [tail for tail in self._tails.values() if tail.behind]
        self.caught_up = not behind
        writers = {id(tail) for tail, _, _ in fresh}
        if not self._waiting and len(writers) <= 1 and all(id(tail) in writers for tail in behind):
            for tail, _, raws in fresh:  # one task wrote and no other is behind: nothing to interleave
                for raw in raws:
                    self._append(tail.prefix + self._decode_line(raw), tail.task)
        else:
            self._wait(fresh)
        if self._waiting:
            self._place()
        if read:
            self._partials = self._shown_partials()
            self.version += 1
        return self.dropped + self.line_count - before

    def _shown_partials(self) -> list[str]:
        """Each shown task's incomplete last line, once its file is caught up with."""
        shown = self._shown_tasks
        return [
            tail.prefix + self._decode_line(tail.pending)
            for tail in self._tails.values()
            if visible_part(tail.pending) and not tail.behind and (shown is None or tail.task in shown)
        ]

    def _take(self, tail: _Tail, data: bytes) -> tuple[_Tail, int, list[bytes]]:
        """The complete lines `data` (which ends at `tail.offset`) finishes, and the file offset they start at."""
        buffered = tail.pending + data
        *complete, tail.pending = buffered.split(b"\n")
        first = tail.offset - len(buffered)
        if len(tail.pending) > 4 * self.max_line_chars:
            self._bound_pending(tail, complete)
        return tail, first, complete

    def _bound_pending(self, tail: _Tail, complete: list[bytes]) -> None:
        """Keep an endless unterminated line bounded: drop what a `\\r` overwrote, or else emit it as a line."""
        tail.pending = tail.pending[tail.pending.rstrip(b"\r").rfind(b"\r") + 1 :]
        if len(tail.pending) > 4 * self.max_line_chars:
            complete.append(tail.pending)
            tail.pending = b""

    def _wait(self, fresh: list[tuple[_Tail, int, list[bytes]]]) -> None:
        """Give the lines read their time of writing and put them in the heap of lines to place."""
        waiting = self._waiting
        for tail, offset, raws in fresh:
            for raw in raws:
                offset += len(raw) + 1
                line = tail.prefix + self._decode_line(raw)
                heapq.heappush(waiting, (tail.written_at(offset), tail.rank, offset, line, tail.task))
                self._waiting_chars += len(line)
        if len(waiting) > 2 * self.max_lines or self._waiting_chars > 2 * self.max_chars:
            self._forget_oldest_waiting()

    def _place(self) -> None:
        """Move to the ring, oldest first, the waiting lines no unread byte of a file being caught up with can
        precede."""
        behind = [tail.written_at(tail.offset) for tail in self._tails.values() if tail.behind]
        horizon = min(behind, default=float("inf"))
        waiting = self._waiting
        while waiting and waiting[0][0] <= horizon:
            _, _, _, line, task = heapq.heappop(waiting)
            self._waiting_chars -= len(line)
            self._append(line, task)

    def _forget_oldest_waiting(self) -> None:
        """A backlog far larger than the ring: only its newest lines could ever be shown."""
        waiting = sorted(self._waiting)
        keep, chars = 0, 0
        for entry in reversed(waiting):
            if keep >= self.max_lines or (chars + len(entry[3]) > self.max_chars and keep):
                break
            keep, chars = keep + 1, chars + len(entry[3])
        if self._shown_tasks is None:  # lines of a filtered view are counted when they really leave it
            self.dropped += len(waiting) - keep
        self._waiting, self._waiting_chars = waiting[len(waiting) - keep :], chars  # sorted: still a heap

    def _decode_line(self, raw: bytes) -> str:
        return decode(visible_part(raw)[: 4 * self.max_line_chars])[: self.max_line_chars]

    def _append(self, line: str, task: str) -> None:
        ring, owners, shown = self._ring, self._owners, self._shown_tasks
        ring.append(line)
        owners.append(task)
        self._chars += len(line)
        if shown is not None and task in shown:
            self._lines.append(line)
        while len(ring) > self.max_lines or (self._chars > self.max_chars and len(ring) > 1):
            self._chars -= len(ring.popleft())
            if shown is None:
                self.dropped += 1
            elif owners[0] in shown:  # the oldest shown line is this one: the shown lines keep the ring's order
                self._lines.popleft()
                self.dropped += 1
            owners.popleft()

    def line(self, i: int, max_chars: int | None = None) -> str:
        """Line `i` (counted from the oldest line still kept), at most `max_chars` characters of it."""
        if not 0 <= i < self.line_count:
            raise IndexError(i)
        complete = len(self._lines)
        text = self._lines[i] if i < complete else self._partials[i - complete]
        return text[:max_chars]

    def search(self, query: str, start_line: int, backwards: bool = False) -> int | None:
        """The first line from `start_line` on (or back from it) containing `query`, ignoring case and ANSI."""
        needle = query.lower()
        first = clamp_start(start_line, self.line_count, backwards)
        if not needle or first is None:
            return None
        lines = [*self._lines, *self._partials]  # a snapshot: indexing a deque in a loop is slow
        order = range(first, -1, -1) if backwards else range(first, len(lines))
        return next((i for i in order if needle in strip_ansi(lines[i]).lower()), None)

    def matching_lines(self, query: str, first: int, max_bytes: int = CHUNK) -> tuple[list[int], int]:
        """The complete lines from `first` on, about `max_bytes` of them (at least one), containing `query` as
        `search` finds it; and the line to go on from."""
        needle, end = query.lower(), len(self._lines)
        if first >= end or not needle:
            return [], max(first, end)
        hits, size, line = [], 0, first
        for text in itertools.islice(self._lines, first, end):
            if needle in strip_ansi(text).lower():
                hits.append(line)
            line, size = line + 1, size + len(text)
            if size >= max_bytes:
                break
        return hits, line

    def __repr__(self) -> str:
        return f"CombinedLog(tasks={len(self._tails)}, lines={self.line_count}, dropped={self.dropped})"
