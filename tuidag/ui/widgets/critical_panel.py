"""The side panel `x` opens: the critical path, first task first, each with its duration, and how long it is in all.

On a finished run the durations are what happened; on a live run a task not finished yet shows the forecast's
duration, marked `~` (its expected duration from earlier runs, or what it has run so far when longer). The path is
the app's to work out (views/run_outlook.py); this only shows it, within the rows it has.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...model.counts import counted
from ...model.durations import format_duration
from ...views.run_outlook import Outlook
from ..state_style import CRITICAL_COLOUR
from ..text_cells import fit

MAX_ROWS = 500  # a path of thousands of tasks lists its start and end (the middle is counted)


class CriticalPathPanel(Static):
    _shown: tuple[Outlook | None, list[tuple[str, str, bool]], str | None] | None = None

    def on_resize(self) -> None:
        """The rows are fitted to the panel's width: again at a new width. The first path is often shown before the
        panel just mounted has one (its rows then fitted to 32 cells, and left so until the next outlook)."""
        if self._shown is not None:
            self.show_path(*self._shown)

    def show_path(self, result: Outlook | None, rows: list[tuple[str, str, bool]], note: str | None) -> None:
        """`rows` from `run_outlook.path_rows`; `note` says why there is no path, or what the ETA is."""
        self._shown = (result, rows, note)
        width = max(10, (self.content_region.width or 32))
        text = Text(no_wrap=True, overflow="crop")
        if result is None or not rows:
            text.append(
                "no critical path yet: nothing has run" if result is not None else "working it out…", style="dim"
            )
        else:
            first, last = result.spans[result.path[0]][0], result.spans[result.path[-1]][1]
            word = "ran" if result.finished else "forecast"
            text.append(f"{counted(len(rows), 'task')}, {format_duration(last - first)} ({word})\n", style="bold")
            shown = rows if len(rows) <= MAX_ROWS else [*rows[: MAX_ROWS // 2], None, *rows[-MAX_ROWS // 2 :]]
            for row in shown:
                if row is None:
                    text.append(f"  … {len(rows) - MAX_ROWS:,} more\n", style="dim")
                    continue
                name, duration, forecast = row
                right = ("~" if forecast else " ") + duration
                room = width - len(right) - 3
                text.append("◆ ", style=CRITICAL_COLOUR)
                text.append(fit(name, room).ljust(room))
                text.append(" " + right + "\n", style="dim" if forecast else "")
        if note:
            text.append(note, style="dim")
        self.update(text)
