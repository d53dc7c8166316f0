"""The log pane's border: the title says what is shown and where it comes from, the subtitle its size and modes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.scroll_view import ScrollView

from ....views.combined_log import CombinedLog
from ....views.log_index import LogIndex
from ....views.log_lines import LogLines

if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class LogTitles(_ScrollView):
    """Mixed into `LogView` (which sets up the state named here in its `__init__`): its border's title and subtitle."""

    _source: LogLines | None
    _title: str
    _following: bool
    _wrap: bool
    _query: str
    _one_title_row: bool
    _titles: tuple[str, str]  # the plain text of the titles set last

    if TYPE_CHECKING:  # the other parts of LogView

        def _search_summary(self) -> str: ...
        def copy_summary(self) -> str: ...
        @property
        def copying(self) -> bool: ...

    @property
    def title(self) -> str:
        return self._title

    @property
    def one_title_row(self) -> bool:
        return self._one_title_row

    @one_title_row.setter
    def one_title_row(self, value: bool) -> None:
        """With the bottom border hidden (the pane maximised on a small screen), the title carries what the subtitle
        says, before the path (which is cut first)."""
        self._one_title_row = value
        self._titles = ("", "")
        self._update_titles()

    def _update_titles(self) -> None:
        """Border title: what is shown and where it comes from; subtitle: size and modes."""
        source = self._source
        if source is None:
            return
        where = _where(source)
        parts = [
            f"{source.line_count:,} line{'' if source.line_count == 1 else 's'}",
            "following" if self._following else "paused (End follows)",
        ]
        if self.copying:  # first, and instead of "paused": what copy mode's keys do matters more now
            parts[:2] = [self.copy_summary(), parts[0]]
        if self._wrap:
            parts.append("wrap")
        if self._query:
            parts.append(self._search_summary())
        if self._one_title_row:
            titles = (Text.assemble((self._title, "bold"), " · ", " · ".join(parts), " · ", (where, "dim")), Text())
        else:
            titles = (Text.assemble((self._title, "bold"), " · ", (where, "dim")), Text(" · ".join(parts)))
        title = titles[0]
        if (title.plain, titles[1].plain) != self._titles:  # setting a title repaints: only when it changed
            self.border_title, self.border_subtitle = titles
            self._titles = (title.plain, titles[1].plain)


def _where(source: LogLines) -> str:
    """Where the lines shown come from: the file's path, or how many tasks' logs are combined."""
    if isinstance(source, LogIndex):
        return str(source.path)
    if isinstance(source, CombinedLog):
        return f"{len(source.paths)} logs"
    return ""
