"""What a graph tile says: a box of three lines, one line or a dot, by zoom level; the state, duration and attempt,
a running task's progress against its usual duration, its live CPU and memory, and why it ended.

Each tile's lines are drawn once and kept until the task changes (the canvas drops them then); dots that look the
same share one segment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ....engine.events import TaskSnapshot
from ....model.durations import format_duration
from ....model.state import TaskState
from ....views.eta import attempt_start, progress
from ....views.group_progress import GroupSummary, summarise
from ....views.layout.folding import Folding
from ....views.layout.layout import GraphLayout
from ....views.layout.style import Orientation, Zoom
from ...run_model import RunModel
from ...state_style import CRITICAL_COLOUR, LONG_COLOUR, LOOKS
from ...text_cells import fit as _fit
from ...text_cells import format_bytes as _bytes

S = TaskState
SELECTED_BG = "#303048"
_LIGHT = dict(tl="╭", tr="╮", bl="╰", br="╯", h="─", v="│", out="├", down="┬")
_HEAVY = dict(tl="┏", tr="┓", bl="┗", br="┛", h="━", v="┃", out="┣", down="┳")
HIDDEN_COLOUR = "#4a4a5a"  # tasks the state filter hides keep their place, drawn in this
PROGRESS_TODO = "#3a3a55"  # the part of a running task's expected duration still to go
CRITICAL_DOT_BG = "#5f4400"
_UPSTREAM = re.compile(r"^upstream '(.+)' failed$")
_INTERRUPTED = re.compile(r"^(?:cancelled: )?interrupted by (\S+)")


if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class TileDrawing(_ScrollView):
    """Mixed into `DagCanvas` (which sets up the state named here in its `__init__`): its tiles' lines."""

    graph: GraphLayout | None
    model: RunModel
    selected: str | None
    critical: frozenset[str]
    expected: Mapping[str, float]
    _tile_lines: dict[str, list[Strip]]
    _dots: dict[tuple, Segment]
    folding: Folding

    if TYPE_CHECKING:  # the other parts of DagCanvas

        def _styles(self) -> tuple[Style, Style]: ...
        def refresh_tasks(self, names: Iterable[str]) -> None: ...

    @property
    def _drawn_layout(self) -> GraphLayout:
        """The layout tiles are drawn for: the canvas draws none before it has one."""
        assert self.graph is not None, "a tile drawn before the canvas was laid out"
        return self.graph

    def _lines_of(self, name: str) -> list[Strip]:
        lines = self._tile_lines.get(name)
        if lines is None:
            lines = self._tile_lines[name] = self._render_tile(name)
        return lines

    def _render_tile(self, name: str) -> list[Strip]:
        zoom = self._drawn_layout.zoom
        if name in self.folding.folded:
            from .group_tile import draw_group  # (it draws with this module's borders)

            return draw_group(self, name, zoom)
        if zoom is Zoom.DOTS:
            return [Strip([self._dot(name)], 1)]
        if zoom is Zoom.COMPACT:
            return [self._render_line_tile(name)]
        return self._render_box(name)

    def _dot(self, name: str) -> Segment:
        """One cell: the state's glyph in its colour; the selected one reversed, a hidden one a faint dot. Segments
        are shared by every dot that looks the same (a few dozen looks for thousands of dots)."""
        state = self.state_of(name)
        key = (state, name == self.selected, self.lit(name), name in self.critical)
        segment = self._dots.get(key)
        if segment is None:
            look, base = LOOKS[state], self._styles()[0]
            if not key[2]:
                segment = Segment("·", base + Style(color=HIDDEN_COLOUR))
            elif key[1]:
                segment = Segment(look.glyph, Style(color="#000000", bgcolor=look.colour, bold=True))
            else:
                segment = Segment(
                    look.glyph, base + Style(color=look.colour, bgcolor=CRITICAL_DOT_BG if key[3] else None)
                )
            self._dots[key] = segment
        return segment

    def state_of(self, name: str) -> TaskState:
        """A tile's state: its task's, or a folded group's most urgent of its instances'."""
        if name in self.folding.folded:
            return self.group_summary(name).state
        return self.model.snapshots[name].state

    def lit(self, name: str) -> bool:
        """Drawn in its colours (see `RunModel.lit`): a group while any of its instances is."""
        if name in self.folding.folded:
            return any(self.model.lit(i) for i in self.folding.groups[name])
        return self.model.lit(name)

    def group_summary(self, name: str) -> GroupSummary:
        snapshots = self.model.snapshots
        return summarise((snapshots[i] for i in self.folding.groups[name]), self.model.clock())

    def _render_line_tile(self, name: str) -> Strip:
        """One line: glyph, name, duration (or attempt), the selected one lit."""
        snap = self.model.snapshots[name]
        look = LOOKS[snap.state]
        width = self._drawn_layout.tiles[name].width
        selected = name == self.selected
        base = self._styles()[0] + (Style(bgcolor=SELECTED_BG) if selected else Style())
        shown = self.model.lit(name)
        colour = look.colour if shown else HIDDEN_COLOUR
        right = (
            (f"#{snap.attempt} " if snap.attempt > 1 else "")
            + self._progress_word(snap)
            + _duration(snap, self.model.clock())
        )
        right = right[: max(0, width - 4)]
        title = _fit(name, width - 3 - (len(right) + 1 if right else 0))
        critical = name in self.critical and shown
        text_style = base + Style(
            bold=selected or critical, color=CRITICAL_COLOUR if critical else None if shown else HIDDEN_COLOUR
        )
        gap = width - 2 - len(title) - len(right) - (1 if right else 0)
        segments = [
            Segment(look.glyph if shown else "·", base + Style(color=colour, bold=selected)),
            Segment(" " + title, text_style),
            Segment(" " * max(0, gap), base),
        ]
        if right:
            segments.append(
                Segment(right + " ", base + Style(dim=not selected, color=None if shown else HIDDEN_COLOUR))
            )
        return Strip(segments, width).crop_extend(0, width, base)

    def _render_box(self, name: str) -> list[Strip]:
        """Three lines: the name in the top border, state glyph + word + duration (+ attempt) in the middle, details
        (live CPU/memory, exit code, reason) in the bottom border. The selected tile gets a heavy, lit border; one the
        state filter hides keeps its place, faint. Edges leave on the right (left to right) or at the bottom."""
        snap = self.model.snapshots[name]
        look = LOOKS[snap.state]
        graph = self._drawn_layout
        tile = graph.tiles[name]
        width = tile.width
        selected = name == self.selected
        shown = self.model.lit(name)
        box = _HEAVY if selected else _LIGHT
        base = self._styles()[0] + (Style(bgcolor=SELECTED_BG) if selected else Style())
        if not shown:
            base += Style(color=HIDDEN_COLOUR)
        border = base + Style(color=look.colour if shown else HIDDEN_COLOUR, bold=selected)
        inner = width - 2
        exits = name in graph.has_children
        down = exits and graph.orientation is Orientation.TD

        title = _fit(name, inner - 4)
        title_style = base + Style(bold=True, color=CRITICAL_COLOUR if name in self.critical and shown else None)
        top = [
            Segment(box["tl"] + box["h"] + " ", border),
            Segment(title, title_style),
            Segment(" " + box["h"] * (inner - 3 - len(title)) + box["tr"], border),
        ]

        room = inner - 4  # " ● " before the text, " " after it
        right = ((f"#{snap.attempt} " if snap.attempt > 1 else "") + _duration(snap, self.model.clock()))[:room]
        word_room = room - len(right) - 1 if right else room
        bar = self._progress_bar(snap, word_room, base) if shown else None
        if bar is None:
            word = _fit(look.word, word_room)
            text = [Segment(" " + word + " " * (room - len(word) - len(right)) + right + " ", base)]
        else:
            text = [Segment(" ", base), *bar, Segment(" " * (room - word_room - len(right)) + right + " ", base)]
        out = box["out"] if exits and not down else box["v"]
        middle = [
            Segment(box["v"], border),
            Segment(" ", base),
            Segment(look.glyph, border),
            *text,
            Segment(out, border),
        ]

        detail = self._detail(snap, inner - 4)
        bottom = [Segment(box["bl"] + box["h"], border)]
        if detail:
            bottom += [Segment(" ", border), Segment(detail, base + Style(dim=not selected)), Segment(" ", border)]
        bottom.append(Segment(box["h"] * (inner - 1 - (len(detail) + 2 if detail else 0)) + box["br"], border))
        bottom_strip = Strip(bottom, width)
        mid = width // 2
        if down and (not detail or 3 + len(detail) < mid):  # the exit in the middle of the bottom border, where
            # the details leave it room (else the edge just starts below them)
            bottom_strip = Strip.join(
                [bottom_strip.crop(0, mid), Strip([Segment(box["down"], border)], 1), bottom_strip.crop(mid + 1, width)]
            )
        return [Strip(top, width), Strip(middle, width), bottom_strip]

    def _progress_of(self, snap: TaskSnapshot) -> tuple[float, float, bool] | None:
        """(elapsed / expected, fraction done capped at 1, unusually long) of a running task with history."""
        if snap.state is not S.RUNNING:
            return None
        expected = self.expected.get(snap.name)
        now = self.model.clock()
        elapsed = now - attempt_start(snap, now)
        done = progress(elapsed, expected)
        return None if done is None or expected is None else (elapsed / expected, *done)

    def _progress_bar(self, snap: TaskSnapshot, cells: int, base: Style) -> list[Segment] | None:
        """A running task's progress against its expected duration, `cells` wide: a bar, or, past twice its median,
        how many times that it has run so far."""
        measured = self._progress_of(snap)
        if measured is None or cells < 4:
            return None
        ratio, done, long = measured
        if long:
            words = next((w for w in (f"long: {ratio:.1f}× usual", f"long {ratio:.1f}×") if len(w) <= cells), "long")
            return [Segment(_fit(words, cells).ljust(cells), base + Style(color=LONG_COLOUR, bold=True))]
        filled = round(done * cells)
        return [
            Segment("━" * filled, base + Style(color=LOOKS[S.RUNNING].colour)),
            Segment("─" * (cells - filled), base + Style(color=PROGRESS_TODO)),
        ]

    def _progress_word(self, snap: TaskSnapshot) -> str:
        """A one-line tile's progress: `40% `, or `long 2.3× ` past twice the median."""
        measured = self._progress_of(snap)
        if measured is None:
            return ""
        ratio, done, long = measured
        return f"long {ratio:.1f}× " if long else f"{done * 100:.0f}% "

    def set_critical(self, tasks: Iterable[str]) -> None:
        """Highlight these tasks (the critical path), or none; repaint the tiles that changed."""
        tasks = frozenset(tasks)
        changed = tasks ^ self.critical
        self.critical = tasks
        if changed:
            self._dots.clear()
            self.refresh_tasks(changed)

    def _detail(self, snap: TaskSnapshot, width: int) -> str:
        """What the bottom border says, within `width` cells."""
        if snap.state is S.RUNNING:
            usage = self.model.usage.get(snap.name)
            if usage is not None:
                text = f"cpu {usage[0]:.0f}% mem {_bytes(usage[1])}"
            else:
                text = f"pid {snap.pid}" if snap.pid else ""
            if snap.worker:  # a Dask worker's process is not this machine's: where it runs is what is known
                text = _worker_name(snap.worker)
            if snap.slots:  # first: which GPU a task has matters more than its pid
                text = f"{snap.slots} {text}".rstrip()
            return _fit(text, width)
        if snap.state is S.FAILED and snap.exit_code is not None:
            code = f"exit {snap.exit_code}"
            if snap.reason in (None, f"exit code {snap.exit_code}"):
                return _fit(code, width)
            return _fit(f"{code} {_short_reason(snap.reason, width - len(code) - 1)}", width)
        if snap.state is S.SUCCEEDED:
            if snap.reused:
                return "reused"
            # The Dask worker that ran it (host:port; None for a local run), else why it ran (a task with outputs).
            return _fit(_worker_name(snap.worker), width) if snap.worker else _short_reason(snap.reason or "", width)
        return _short_reason(snap.reason or "", width)


def _worker_name(worker: str) -> str:
    """A Dask worker as a tile names it: `tcp://10.0.0.5:40123` -> `10.0.0.5:40123`."""
    return worker.partition("://")[2] or worker


def _short_reason(reason: str, width: int) -> str:
    """A reason as the engine words it, shortened to its meaningful part within `width` cells: the state word is
    already on the tile, so `cancelled: tuidag quit` shows `tuidag quit`, `interrupted by SIGINT` shows `by SIGINT`
    (not `interrupted by …`), and an upstream failure keeps `failed` while the task's name is cut."""
    upstream = _UPSTREAM.match(reason)
    if upstream:
        name = upstream.group(1)
        room = width - len("← ") - len(" failed")
        return f"← {_fit(name, room)} failed" if room >= 4 or len(name) <= room else _fit(f"← {name}", width)
    interrupted = _INTERRUPTED.match(reason)
    if interrupted:
        reason = f"by {interrupted.group(1)}"
    for prefix in ("cancelled: ", "cancelled ", "raised ", "up to date "):
        reason = reason.removeprefix(prefix)
    return _fit(reason, width)


def _duration(snap: TaskSnapshot, now: float) -> str:
    seconds = snap.duration(now)
    return "" if seconds is None else format_duration(seconds)
