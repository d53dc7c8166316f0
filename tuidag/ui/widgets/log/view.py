"""The log pane: a Line-API view over one task's log file, or over the combined log of all tasks.

What the app mounts and calls (`yield LogView(id="log")`):

    show_file(path, title=None)               show one task's log file (it may not exist yet) and follow its end
    show_combined(source, title="all tasks")  show a `CombinedLog`; the view refreshes it while it is shown
    search(query) -> bool                     find `query` in the whole log (ignoring case and colours) from the top
                                              of the screen on, wrapping around; jump there and highlight it
    search_next() -> bool, search_prev() -> bool
    match_count -> (index | None, total, done)  which match is highlighted, of how many (counted over ticks)
    toggle_follow(), toggle_wrap()
    enter_copy_mode() -> bool, leave_copy_mode()   copy mode (copy_mode.py); False when there is nothing to copy
    copying, cursor_line, selection           (read-only properties of copy mode)
    one_title_row = True                      the bottom border is hidden: put the subtitle's facts in the title
    scroll_home()                             the first line; following stops
    scroll_end()                              the last line; following resumes
    following, wrap, path, title, line_count, query, match_line   (read-only properties)

Keys of the widget itself: arrows / PgUp / PgDn scroll, Home = `scroll_home`, End = `scroll_end`; in copy mode they
and j k g G v Space y Esc q are copy mode's (copy_mode.py). The other letter keys (/ n N f w, and g G v outside copy
mode) are the app's. The border title shows the title and the log's path, the subtitle the line count and
the modes.

This module holds the widget, what it shows and its life; what it does is in modules of their own, mixed in:
`following` (reading new output as it comes, following the end), `search` (search and its match count),
`rendering` (the Line API, the cache of rendered lines, wrapping), `titles` (the border) and `copy_mode` (a cursor
and a selection of lines to copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.scroll_view import ScrollView

from ....views.combined_log import CombinedLog
from ....views.log_index import LogIndex
from ....views.log_lines import LogLines
from ....views.log_watcher import LogWatcher
from ....views.match_count import MatchCount
from .copy_mode import CopyState, LogCopyMode
from .following import TICK, LogFollowing
from .rendering import CACHE_LINES, LogRendering, Row, _Styles
from .search import LogSearch
from .titles import LogTitles


class LogView(LogFollowing, LogSearch, LogCopyMode, LogTitles, LogRendering, ScrollView, can_focus=True):
    """A scrollable, searchable, following view of a log that may be far larger than memory."""

    # Copy mode's keys act in copy mode only (`check_action`); otherwise a key goes on to the next binding of the
    # same key here (Textual's scrolling, listed again since these replace it) or to the app's.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "copy_move(-1)", "Line up", show=False),
        Binding("up", "scroll_up", show=False),
        Binding("down,j", "copy_move(1)", "Line down", show=False),
        Binding("down", "scroll_down", show=False),
        Binding("pageup", "copy_page(-1)", "Page up", show=False),
        Binding("pageup", "page_up", show=False),
        Binding("pagedown", "copy_page(1)", "Page down", show=False),
        Binding("pagedown", "page_down", show=False),
        Binding("home,g", "copy_ends(-1)", "First line", show=False),
        Binding("home", "scroll_home", show=False),
        Binding("end,G", "copy_ends(1)", "Last line", show=False),
        Binding("end", "scroll_end", show=False),
        Binding("shift+up,K", "copy_extend(-1)", "Select up", show=False),
        Binding("shift+down,J", "copy_extend(1)", "Select down", show=False),
        Binding("v", "copy_toggle", "Select", show=False),
        Binding("space", "copy_begin", "Select from here", show=False),
        Binding("y", "copy_yank", "Copy", show=False),
        Binding("escape,q", "copy_leave", "Leave copy mode", show=False),
    ]
    ALLOW_SELECT = False  # copy mode selects whole lines; Textual's own selection would fight its mouse drags

    DEFAULT_CSS = """
    LogView {
        overflow-x: auto;
        overflow-y: auto;
        scrollbar-gutter: stable;
    }
    LogView.-wrap {
        overflow-x: hidden;
    }
    LogView > .logview--match {
        background: $warning 45%;
    }
    LogView > .logview--current-match {
        background: $warning;
        color: $background;
        text-style: bold;
    }
    LogView > .logview--match-line {
        background: $primary 30%;
    }
    LogView > .logview--selection {
        background: $secondary 35%;
    }
    LogView > .logview--cursor {
        background: $secondary 70%;
    }
    """
    COMPONENT_CLASSES = {
        "logview--match",
        "logview--current-match",
        "logview--match-line",
        "logview--selection",
        "logview--cursor",
    }

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._source: LogLines | None = None
        self._owned: LogIndex | None = None
        self._watcher: LogWatcher | None = None
        self._title = ""
        self._following = True
        self._wrap = False
        self._query = ""
        self._match: int | None = None  # counted like `dropped + i`, so it survives lines leaving a CombinedLog
        self._count: MatchCount | None = None
        self._one_title_row = False
        self._rendered: LRUCache[tuple, list[Row]] = LRUCache(CACHE_LINES)
        self._max_width = 0
        self._rows: list[tuple[int, Row]] = []  # wrap mode: the rows on screen and the line each belongs to
        self._rows_key: tuple | None = None
        self._scrolling_myself = False
        self._titles = ("", "")
        self._style_cache: _Styles | None = None
        self._shown = (-1, 0, 0)  # the source's (version, generation, dropped) when last presented
        self._shown_at = 0.0
        self._copy: CopyState | None = None
        self._drag_from: int | None = None

    # ------------------------------------------------------------------------------------------------ interface
    @property
    def wrap(self) -> bool:
        return self._wrap

    @property
    def path(self) -> Path | None:
        """The file shown, or None for a combined log or nothing."""
        return self._source.path if isinstance(self._source, LogIndex) else None

    def show_file(self, path: Path, title: str | None = None) -> None:
        """Show one log file, following its end. The file may not exist yet: it shows up when it does."""
        self._show(LogIndex(Path(path)), title or Path(path).name, owned=True)

    def show_combined(self, source: CombinedLog, title: str = "all tasks") -> None:
        """Show the combined log of all tasks. The caller keeps adding tasks to `source`; this view refreshes it."""
        self._show(source, title, owned=False)

    def toggle_wrap(self) -> None:
        """Wrap long lines at the pane's width, or show them whole with horizontal scrolling. Keeps the top line."""
        top = self._top_line()
        self._wrap = not self._wrap
        self.set_class(self._wrap, "-wrap")
        self._update_virtual_size()
        with self._scrolling():
            if self._following:
                self.scroll_to(x=0, y=self.max_scroll_y, animate=False, force=True)
            else:
                self.scroll_to(x=0, y=top, animate=False, force=True)
        self._update_titles()
        self.refresh()

    # ---------------------------------------------------------------------------------------------- lifecycle
    def on_mount(self) -> None:
        self.set_interval(TICK, self._on_tick, name="log-view-tick")

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
        if self._owned is not None:
            self._owned.close()

    def on_resize(self, event: events.Resize) -> None:
        self._update_virtual_size()
        if self._following:
            self._scroll_to_end()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_rendering()

    def _show(self, source: LogLines, title: str, *, owned: bool) -> None:
        if self._owned is not None and self._owned is not source:
            self._owned.close()
        self._source, self._title = source, title
        self._copy = self._drag_from = None  # copy mode was about the log shown before
        self._owned = source if owned and isinstance(source, LogIndex) else None
        self._match = None
        self._start_count()
        self._max_width = 0
        self._forget_rendering()
        self._following = True
        self._shown = (-1, source.generation, source.dropped)
        self._watch(source.watched)
        self._index_slice()
        self._present()
