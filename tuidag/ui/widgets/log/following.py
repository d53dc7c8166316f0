"""How the log pane keeps up with a log being written: a watcher, indexing in slices per tick, and following its end.

Following: new output scrolls into view only while the view is at the bottom; scrolling up stops it, scrolling back
to the bottom, End, G or f resume it.

Why it stays fast with a 100 MB log being written flat out: nothing is read per line or posted per write. A 20 Hz
timer asks the `LogWatcher` flag whether anything changed, then indexes new bytes in 256 KiB slices for at most
~12 ms, so one tick never stalls the event loop and a backlog is caught up over a few ticks, repainting 10 times a
second meanwhile. `benchmarks/log_bench.py` measures it. The worst event-loop lags left are Python's full garbage
collections of Textual's objects (~100 ms on a 2-core VM); an app that calls `gc.freeze()` once it is up avoids them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.scroll_view import ScrollView

from ....views.log_lines import LogLines
from ....views.log_watcher import LogWatcher
from ....views.match_count import MatchCount

if TYPE_CHECKING:
    from .copy_mode import CopyState

TICK = 1 / 20
"""Seconds between checks for new output."""
TICK_BUDGET = 0.012
"""Seconds of indexing a tick may spend; the rest waits for the next tick."""
SLICE = 256 << 10
"""Bytes indexed per `refresh` call within a tick (small enough not to overrun the budget by much)."""
BUSY_PAINT_INTERVAL = 0.1
"""While a backlog is indexed, repaint at most this often: a full repaint of a 160x45 screen costs Textual ~30 ms."""


if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class LogFollowing(_ScrollView):
    """Mixed into `LogView` (which sets up the state named here in its `__init__`): reading new output as it comes,
    and the scrolls that follow it."""

    _source: LogLines | None
    _watcher: LogWatcher | None
    _following: bool
    _wrap: bool
    _max_width: int
    _match: int | None
    _count: MatchCount | None
    _rows_key: tuple | None
    _scrolling_myself: bool
    _shown: tuple[int, int, int]  # the source's (version, generation, dropped) when last presented
    _shown_at: float
    _copy: CopyState | None

    if TYPE_CHECKING:  # the other parts of LogView

        def _update_virtual_size(self) -> None: ...
        def _update_titles(self) -> None: ...
        def _count_slice(self) -> None: ...

    @property
    def following(self) -> bool:
        """True while new output scrolls into view."""
        return self._following

    def toggle_follow(self) -> None:
        if self._following:
            self._set_following(False)
        else:
            self.scroll_end()

    def scroll_home(self, *, animate: bool = False, immediate: bool = True, **kwargs: Any) -> None:
        """The first line; following stops (the same keyword arguments as `Widget.scroll_home`)."""
        self._set_following(False)
        with self._scrolling():
            super().scroll_home(animate=animate, immediate=immediate, **kwargs)

    def scroll_end(self, *, animate: bool = False, immediate: bool = True, **kwargs: Any) -> None:
        """The last line; following resumes (the same keyword arguments as `Widget.scroll_end`)."""
        self._set_following(True)
        with self._scrolling():
            super().scroll_end(animate=animate, immediate=immediate, **kwargs)

    def action_scroll_home(self) -> None:
        self.scroll_home()

    def action_scroll_end(self) -> None:
        self.scroll_end()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """A scroll the user made decides following: at the bottom it follows, anywhere else it stays put."""
        super().watch_scroll_y(old_value, new_value)
        if not self._scrolling_myself and self._source is not None:
            self._set_following(round(new_value) >= self.max_scroll_y)

    # ------------------------------------------------------------------------------------------------ reading
    def _watch(self, paths: frozenset[Path]) -> None:
        if self._watcher is not None and self._watcher.paths == paths:
            return
        if self._watcher is not None:
            self._watcher.stop(timeout=0)  # it ends by itself within a few ms; don't wait on the UI thread
        self._watcher = LogWatcher(paths)
        self._watcher.start()

    def _on_tick(self) -> None:
        source = self._source
        if source is None:
            return
        watched = source.watched
        watcher = self._watcher
        if watcher is None or watcher.paths != watched:
            # The log file appeared, or a combined log gained a task in another folder: read now, for what was
            # written before the new watcher looked (waiting for its first event could mean the safety poll, 2 s).
            self._watch(watched)
            changed = True
        else:
            changed = watcher.changed()
        if changed or not source.caught_up:
            self._index_slice()
        if source.version != self._shown[0] and (
            source.caught_up or time.monotonic() - self._shown_at >= BUSY_PAINT_INTERVAL
        ):
            self._present()
        if not self._wrap and self.virtual_size.width < self._max_width:
            self._update_virtual_size()  # a wider line was drawn: make it reachable by scrolling
        if self._following and self.scroll_offset.y != self.max_scroll_y:
            self._scroll_to_end()  # the viewport or a scrollbar changed under us
        if self._count is not None and not self._count.counted(source):
            self._count_slice()
            self._update_titles()

    def _index_slice(self) -> None:
        """Index what the log gained, for at most `TICK_BUDGET` seconds; the next ticks do the rest."""
        source = self._source
        assert source is not None
        deadline = time.perf_counter() + TICK_BUDGET
        while True:
            source.refresh(max_bytes=SLICE)
            if source.caught_up or time.perf_counter() >= deadline:
                break

    def _present(self) -> None:
        """Show what was indexed since the last time: sizes, the follow scroll, titles, one repaint."""
        source = self._source
        assert source is not None
        _, generation, dropped = self._shown
        self._shown, self._shown_at = (source.version, source.generation, source.dropped), time.monotonic()
        if source.generation != generation:  # the file was truncated or replaced: it is a new log
            self._match = None
        self._rows_key = None
        self._update_virtual_size()
        if self._following:
            self._scroll_to_end()
        elif source.dropped != dropped:  # lines left the front of a combined log: keep the same ones on screen
            with self._scrolling():
                self.scroll_to(y=max(0, self.scroll_offset.y - (source.dropped - dropped)), animate=False)
        self._update_titles()
        self.refresh()

    # -------------------------------------------------------------------------------------------- scrolling
    @contextmanager
    def _scrolling(self) -> Iterator[None]:
        """Scrolls made by the view itself (following, jumps) don't count as the user's."""
        self._scrolling_myself = True
        try:
            yield
        finally:
            self._scrolling_myself = False

    def _scroll_to_end(self) -> None:
        with self._scrolling():
            self.scroll_to(y=self.max_scroll_y, animate=False)

    def _set_following(self, following: bool) -> None:
        if following and self._copy is not None:
            return  # copy mode keeps the lines still (leaving it follows again, if it was following)
        if following != self._following:
            self._following = following
            self._update_titles()
