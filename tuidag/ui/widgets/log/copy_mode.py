"""The log pane's copy mode: a cursor line, a selection of whole lines, and copying it to the clipboard.

As in vim's line-wise visual mode and tmux's copy mode (vi keys): `v` (the app's key) enters it with the cursor on
the last line on screen (or on the search match, when one is on screen) and a selection anchored there; j/k, the
arrows, PgUp/PgDn, g/G (Home/End) move the cursor and the selection follows it; `v` drops the selection (moves then
only move the cursor) or anchors a new one at the cursor, and so does Space (tmux's begin-selection); Shift+arrows
(or J/K) extend a selection from the cursor, for those who select that way; `y` copies the selected lines (the
cursor's line when nothing is selected) and leaves; Esc or `q` leave without copying. Dragging with the mouse
selects the lines it passes over (it enters copy mode); a click in copy mode moves the cursor there.

Following stops while copying (the lines stay put as output comes); leaving copy mode follows the end again when it
was following before, as tmux's copy mode does. Lines are counted like `dropped + i`, so a selection in the combined
log keeps its lines while old ones leave the front.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.segment import Segment
from textual import events
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ....views.log_copy import COPY_LIMIT, plain_lines
from ....views.log_lines import LogLines
from .rendering import Row, _Styles

if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


@dataclass
class CopyState:
    cursor: int
    anchor: int | None
    resume_following: bool


class LogCopyMode(_ScrollView):
    """Mixed into `LogView` (which sets up the state named here in its `__init__`): copy mode."""

    _source: LogLines | None
    _wrap: bool
    _following: bool
    _rows: list[tuple[int, Row]]
    _copy: CopyState | None
    _drag_from: int | None  # the line a press of the mouse's button was on, until it is released

    if TYPE_CHECKING:  # the other parts of LogView

        def _top_line(self) -> int: ...
        def _set_following(self, following: bool) -> None: ...
        def _update_titles(self) -> None: ...
        def _wrapped_rows(self) -> list[tuple[int, Row]]: ...
        def _scrolling(self) -> AbstractContextManager[None]: ...
        def _styles(self) -> _Styles: ...
        @property
        def match_line(self) -> int | None: ...
        @property
        def line_count(self) -> int: ...

    # ------------------------------------------------------------------------------------------------ interface
    @property
    def copying(self) -> bool:
        """True in copy mode."""
        return self._copy is not None

    @property
    def cursor_line(self) -> int | None:
        """The cursor's line (0-based) in copy mode, else None."""
        return None if self._copy is None else self._relative(self._copy.cursor)

    @property
    def selection(self) -> tuple[int, int] | None:
        """The first and last selected lines (0-based, both included), or None."""
        copy = self._copy
        if copy is None or copy.anchor is None:
            return None
        ends = sorted((self._relative(copy.anchor), self._relative(copy.cursor)))
        return ends[0], ends[1]

    def enter_copy_mode(self) -> bool:
        """Start copying at the last line on screen (or the match shown); False when there is nothing to copy."""
        source = self._source
        if source is None or source.line_count == 0:
            return False
        if self._copy is None:
            shown = self._lines_on_screen()
            match = self.match_line
            line = match if match is not None and match in shown else (shown[-1] if shown else source.line_count - 1)
            self._start_copy(line)
        return True

    def leave_copy_mode(self) -> None:
        copy, self._copy = self._copy, None
        if copy is None:
            return
        if copy.resume_following:
            self.scroll_end()
        self._update_titles()
        self.refresh()

    def copy_summary(self) -> str:
        """What the subtitle says in copy mode."""
        selection = self.selection
        count = 0 if selection is None else selection[1] - selection[0] + 1
        chosen = f"{count:,} line{'' if count == 1 else 's'} selected" if count else "no selection (v selects)"
        return f"COPY: {chosen} · y copies · esc leaves"

    # ------------------------------------------------------------------------------------------------ actions
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The copy-mode keys act only in copy mode; otherwise the key goes on to its other binding (scrolling, the
        app's keys)."""
        if action.startswith("copy_"):
            return self._copy is not None
        return True

    def action_copy_move(self, delta: int) -> None:
        self._move_cursor(self._cursor() + delta)

    def action_copy_page(self, direction: int) -> None:
        self._move_cursor(self._cursor() + direction * max(1, self.scrollable_content_region.height - 1))

    def action_copy_ends(self, direction: int) -> None:
        self._move_cursor(0 if direction < 0 else self.line_count - 1)

    def action_copy_extend(self, delta: int) -> None:
        """Shift+arrows: a selection from the cursor, or the one there is, grows or shrinks."""
        copy = self._copy
        assert copy is not None
        if copy.anchor is None:
            copy.anchor = copy.cursor
        self._move_cursor(self._cursor() + delta)

    def action_copy_toggle(self) -> None:
        """`v`: drop the selection, or anchor a new one at the cursor."""
        copy = self._copy
        assert copy is not None
        copy.anchor = copy.cursor if copy.anchor is None else None
        self._copy_changed()

    def action_copy_begin(self) -> None:
        """Space: anchor a new selection at the cursor."""
        copy = self._copy
        assert copy is not None
        copy.anchor = copy.cursor
        self._copy_changed()

    def action_copy_yank(self) -> None:
        """`y`: the selected lines (or the cursor's) to the clipboard, as plain text; leave copy mode."""
        source = self._source
        if source is None or source.line_count == 0:
            self.leave_copy_mode()
            return
        first, last = self.selection or (self._cursor(),) * 2
        copied = plain_lines(source, first, last)
        self.app.copy_to_clipboard(copied.text)
        self.leave_copy_mode()
        wanted = last - first + 1
        if copied.cut:
            self.app.notify(
                f"copied the first {copied.lines:,} of {wanted:,} lines: the clipboard takes {COPY_LIMIT >> 10} KiB "
                "at once (e opens the whole log in the pager)",
                severity="warning",
            )
        else:
            self.app.notify(f"copied {wanted:,} line{'' if wanted == 1 else 's'} to the clipboard", timeout=3)

    def action_copy_leave(self) -> None:
        self.leave_copy_mode()

    # ------------------------------------------------------------------------------------------------ the mouse
    def on_mouse_down(self, event: events.MouseDown) -> None:
        line = self._line_at(event)
        if event.button != 1 or line is None:
            return
        self._drag_from = line
        self.capture_mouse()
        if self._copy is not None:  # a click in copy mode: the cursor (and a new selection) there
            self._copy.cursor = self._copy.anchor = self._absolute(line)
            self._copy_changed()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        start = self._drag_from
        if start is None:
            return
        region = self.scrollable_content_region
        height, y = region.height, event.screen_y - region.y
        line: int | None
        if y < 0 or y >= height:  # dragged past an edge: the view scrolls a line at a time
            line = self._lines_on_screen()[0 if y < 0 else -1] + (-1 if y < 0 else 1)
        else:
            line = self._line_at(event)
        if line is None:
            return
        if self._copy is None:
            if line == start:
                return
            self._start_copy(start)
        self._move_cursor(line)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        self._drag_from = None
        self.release_mouse()

    # ------------------------------------------------------------------------------------------------ drawing
    def _mark_copy(self, line: int, strip: Strip) -> Strip:
        """Line `line`'s strip as copy mode shows it: the cursor's line and the selected ones lit."""
        copy = self._copy
        if copy is None:
            return strip
        styles = self._styles()
        if line == self._relative(copy.cursor):
            style = styles.cursor
        else:
            selection = self.selection
            if selection is None or not selection[0] <= line <= selection[1]:
                return strip
            style = styles.selection
        return Strip(Segment.apply_style(iter(strip), post_style=style), strip.cell_length)

    # ------------------------------------------------------------------------------------------------ inside
    def _start_copy(self, line: int) -> None:
        resume = self._following
        self._set_following(False)
        self._copy = CopyState(self._absolute(line), self._absolute(line), resume)
        self._copy_changed()

    def _match_shown(self, line: int) -> None:
        """A search found `line`: in copy mode the cursor goes there (as `n` does in vim's visual mode)."""
        if self._copy is not None:
            self._copy.cursor = self._absolute(line)
            self._copy_changed()

    def _cursor(self) -> int:
        assert self._copy is not None
        return self._relative(self._copy.cursor)

    def _relative(self, number: int) -> int:
        """A line counted like `dropped + i` as a line of the log now, within it."""
        source = self._source
        if source is None:
            return 0
        return max(0, min(number - source.dropped, source.line_count - 1))

    def _absolute(self, line: int) -> int:
        return line + (self._source.dropped if self._source is not None else 0)

    def _move_cursor(self, line: int) -> None:
        copy = self._copy
        if copy is None or self._source is None:
            return
        copy.cursor = self._absolute(max(0, min(line, self._source.line_count - 1)))
        self._show_cursor()
        self._copy_changed()

    def _copy_changed(self) -> None:
        self._update_titles()
        self.refresh()

    def _show_cursor(self) -> None:
        """Scroll the least that puts the cursor's line on screen (whole, when wrapped)."""
        line = self._cursor()
        top, height = self._top_line(), self.scrollable_content_region.height
        if line < top:
            target = line
        elif not self._wrap:
            target = top if line < top + height else line - height + 1
        else:
            target = top
            while target < line and not self._whole_on_screen(line, target):
                target += 1
        if target != top:
            with self._scrolling():
                self.scroll_to(y=target, animate=False, force=True)

    def _whole_on_screen(self, line: int, top: int) -> bool:
        with self._scrolling():
            self.scroll_to(y=top, animate=False, force=True)
        rows = self._wrapped_rows()
        lines = [index for index, _ in rows]
        return line in lines and (lines[-1] != line or len(rows) < self.scrollable_content_region.height)

    def _lines_on_screen(self) -> list[int]:
        if self._wrap:
            return sorted({line for line, _ in self._wrapped_rows()})
        top, count = self._top_line(), self.line_count
        return list(range(top, min(top + self.scrollable_content_region.height, count)))

    def _line_at(self, event: events.MouseEvent) -> int | None:
        """The line under the mouse, or None off the text (the border, the scrollbars, below the last line)."""
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        if self._wrap:
            rows = self._wrapped_rows()
            return rows[offset.y][0] if offset.y < len(rows) else None
        line = self._top_line() + offset.y
        return line if line < self.line_count else None
