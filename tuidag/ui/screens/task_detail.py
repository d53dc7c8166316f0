"""The `i` screen: a task's whole story (views/task_detail.py builds it, as `tuidag show --task` prints it).

Its dependencies and dependents are links: ↑↓ move between them, Enter (or a click) jumps to one (the graph selects
it and the detail shows it), Esc returns to the graph. The text wraps within the screen and scrolls (PgUp/PgDn), so
a long command or reason is read whole at 80x24 too. Every string is the run's own text, already made safe by
`detail_lines`, and drawn as `Text`: never parsed as markup.

While the run goes on, the detail follows it: durations tick every second, and the journal is read again when the
task's state changes (not every second: a big run's journal is tens of MB).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from ...control.run_source import RunSource
from ...engine.events import TaskSnapshot
from ...model.state import TaskState
from ...views.task_detail import LABEL_WIDTH, Line, detail_lines, task_detail
from ..state_style import LOOKS

LABEL_STYLE = "bold #a8a8c8"
CHROME = 2  # rows of the frame around the text: its border
REFRESH = 1.0  # seconds between repaints of a running task's detail (its durations)


def _rows(lines: list[Line]) -> Group:
    """Lines as a grid of label and text: the text wraps under itself, never under the labels; the head's lines
    (the task, its state) across the whole width."""
    table = Table.grid(padding=(0, 1), expand=True)
    table.add_column(width=LABEL_WIDTH - 1, no_wrap=True, style=LABEL_STYLE)
    table.add_column(ratio=1, overflow="fold")
    heads = [Text(line.text, style="bold", overflow="fold") for line in lines if line.kind == "head"]
    for line in lines:
        if line.kind != "head":
            table.add_row(Text(line.label), Text(line.text))
    return Group(*heads, table)


class DetailLink(Static, can_focus=True):
    """A dependency or dependent: Enter or a click jumps to it."""

    DEFAULT_CSS = """
    DetailLink { height: auto; }
    DetailLink:focus { background: #303060; }
    """

    def __init__(self, line: Line, state: TaskState | None, on_choose: Callable[[str], None]) -> None:
        super().__init__()
        self.line = line
        self.state = state
        self.on_choose = on_choose

    def render(self) -> Table:
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(width=LABEL_WIDTH - 1, no_wrap=True, style=LABEL_STYLE)
        table.add_column(ratio=1, overflow="fold")
        text = Text(self.line.text)
        if self.state is not None:
            look = LOOKS[self.state]
            text = Text.assemble(Text(f"{look.glyph} ", style=look.style), text, Text(f"  {look.word}", style="dim"))
        table.add_row(Text(self.line.label), text)
        return table

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.on_choose(self.line.task or "")


class TaskDetailScreen(ModalScreen[str | None]):
    """Dismissed with a task to jump to (a dependency or dependent the user chose), or None (Esc)."""

    AUTO_FOCUS = "DetailLink"
    DEFAULT_CSS = """
    TaskDetailScreen {
        align: center top;
        background: #121218;
    }
    #detail {
        width: 120;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: round #00afd7;
        border-title-color: #ffffff;
        border-subtitle-color: #ffaf00;
        background: #1c1c2a;
        padding: 0 1;
    }
    #detail-body {
        height: auto;
        scrollbar-size-vertical: 1;
    }
    #detail-body > Static { height: auto; }
    """
    BINDINGS = [
        Binding("escape,i,q", "close", "Close", tooltip="Close the detail"),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "end(-1)", "Top", show=False),
        Binding("end", "end(1)", "Bottom", show=False),
        Binding("enter", "choose", "Jump", show=False),
    ]

    def __init__(self, source: RunSource, name: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.source = source
        self.task_name = name
        self.clock = clock
        self._snap: TaskSnapshot | None = source.snapshot().get(name)
        self._story = source.story(name)
        self.facts = self._facts()
        self.lines = detail_lines(self.facts)
        self.body = VerticalScroll(id="detail-body")

    def _facts(self) -> dict[str, Any]:
        return task_detail(self.source, self.task_name, now=self.clock(), story=self._story)

    @property
    def text(self) -> str:
        """What the detail says, as plain lines (the tests read it)."""
        return "\n".join(f"{line.label:<{LABEL_WIDTH}}{line.text}" for line in self.lines)

    def compose(self) -> ComposeResult:
        with Vertical(id="detail") as frame:
            frame.border_title = "task detail"
            frame.border_subtitle = "↑↓ dependencies · Enter jumps · PgUp/PgDn scroll · Esc closes"
            with self.body:
                yield from self._widgets()

    def _widgets(self) -> list[Widget]:
        """Runs of text lines as one Static each, a link for each dependency and dependent."""
        snaps = self.source.snapshot()
        widgets: list[Widget] = []
        run: list[Line] = []
        for line in self.lines:
            if line.kind == "dependency" and line.task is not None:
                if run:
                    widgets.append(Static(_rows(run)))
                    run = []
                snap = snaps.get(line.task)
                widgets.append(DetailLink(line, snap.state if snap else None, self._choose))
            else:
                run.append(line)
        if run:
            widgets.append(Static(_rows(run)))
        return widgets

    def on_resize(self) -> None:
        """The text takes what the screen has left inside the frame: it scrolls when it does not fit."""
        self.body.styles.max_height = max(3, self.size.height - CHROME)

    def on_mount(self) -> None:
        if self.source.live:
            self.set_interval(REFRESH, self._follow)

    def _follow(self) -> None:
        """Repaint the text (durations); read the journal again when the task changed."""
        snaps = self.source.snapshot()
        for link in self.links:  # what the task depends on, and what needs it, go on too
            linked = snaps.get(link.line.task or "")
            if linked is not None and linked.state is not link.state:
                link.state = linked.state
                link.refresh()
        snap = snaps.get(self.task_name)
        if snap != self._snap:
            self._snap = snap
            self._story = self.source.story(self.task_name)
        elif snap is not None and snap.state.terminal:
            return
        self.facts = self._facts()
        lines = detail_lines(self.facts)
        if lines == self.lines:
            return
        self.lines = lines
        texts = [w for w in self.body.children if type(w) is Static]
        runs: list[list[Line]] = [[]]
        for line in lines:
            if line.kind == "dependency" and line.task is not None:
                runs.append([])
            else:
                runs[-1].append(line)
        for widget, run in zip(texts, [r for r in runs if r], strict=False):
            widget.update(_rows(run))

    # ------------------------------------------------------------------------------------------------------ keys
    @property
    def links(self) -> list[DetailLink]:
        return list(self.body.query(DetailLink))

    def action_move(self, step: int) -> None:
        """Between the links when there are some; else scroll a line."""
        links = self.links
        if not links:
            self.body.scroll_relative(y=step, animate=False)
            return
        focused = self.focused
        here = links.index(focused) if focused in links else (-1 if step > 0 else len(links))
        target = links[max(0, min(len(links) - 1, here + step))]
        target.focus()
        target.scroll_visible(animate=False)

    def action_page(self, step: int) -> None:
        (self.body.scroll_page_down if step > 0 else self.body.scroll_page_up)(animate=False)

    def action_end(self, step: int) -> None:
        (self.body.scroll_end if step > 0 else self.body.scroll_home)(animate=False)

    def action_choose(self) -> None:
        if isinstance(self.focused, DetailLink):
            self._choose(self.focused.line.task or "")

    def _choose(self, name: str) -> None:
        if name in self.source.dag.tasks:
            self.dismiss(name)

    def action_close(self) -> None:
        self.dismiss(None)
