"""The graph: one Line-API `ScrollView` drawing every tile and edge of the DAG.

One widget for the whole graph rather than a widget per task: 2,000 tiles draw a first frame in a fraction of a
second and a state change repaints only that tile's region. Geometry and edges come from the pure
`views.graph_layout`; this widget only paints the visible part of each line, caches each tile's three rendered lines
until the task changes, and moves the selection.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size, Spacing
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...engine.events import TaskSnapshot
from ...model.durations import format_duration
from ...model.state import TaskState
from ...views.graph_layout import GraphLayout
from ..messages import TaskSelected
from ..run_model import RunModel
from ..state_style import LOOKS
from ..text_cells import fit as _fit, format_bytes as _bytes

S = TaskState
EDGE_COLOUR = "#767699"
SELECTED_BG = "#303048"
_LIGHT = dict(tl="╭", tr="╮", bl="╰", br="╯", h="─", v="│", out="├")
_HEAVY = dict(tl="┏", tr="┓", bl="┗", br="┛", h="━", v="┃", out="┣")
MAX_CACHED_LINES = 512  # drawn canvas lines kept (a few screens): many more Strips would slow the garbage collector
_UPSTREAM = re.compile(r"^upstream '(.+)' failed$")
_INTERRUPTED = re.compile(r"^(?:cancelled: )?interrupted by (\S+)")
# The subtitle says what the arrows do here, and only while they do: with the log pane focused they scroll it.
FOCUSED_HINT = "←↑↓→ hjkl select · c cancel · r re-run"
UNFOCUSED_HINT = "esc/tab: back to the graph"


class DagCanvas(ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "move('up')", "Up", show=False, tooltip="Select the task above in the same column"),
        Binding("down,j", "move('down')", "Down", show=False, tooltip="Select the task below in the same column"),
        Binding("left,h", "move('left')", "Dependency", show=False,
                tooltip="Select the nearest dependency (what this task needs)"),
        Binding("right,l", "move('right')", "Dependent", show=False,
                tooltip="Select the nearest dependent (what needs this task)"),
    ]

    def __init__(self, graph: GraphLayout, model: RunModel, dependencies: Mapping[str, Sequence[str]],
                 dependents: Mapping[str, Sequence[str]], *, on_select: Callable[[str], None] | None = None,
                 id: str | None = None):
        """`on_select(name)`, if given, is called as soon as the selection moves, instead of posting `TaskSelected`:
        what it changes (the log pane) is then painted in the same frame as the new selection, not one later."""
        super().__init__(id=id)
        self.on_select = on_select
        self.graph = graph
        self.model = model
        self.dependencies = dependencies
        self.dependents = dependents
        self.selected: str | None = next((c[0] for c in graph.columns if c), None)
        self._tile_lines: dict[str, list[Strip]] = {}
        self._line_cache: dict[int, Strip] = {}  # canvas line -> its visible part, drawn for `_lines_key`
        self._lines_key: tuple[int, int] | None = None  # (scroll_x, width) the cached lines were drawn for
        self._style_cache: tuple[Style, Style] | None = None

    def on_mount(self) -> None:
        self.virtual_size = Size(self.graph.width, self.graph.height)
        self.border_subtitle = UNFOCUSED_HINT
        if self.selected:
            self.post_message(TaskSelected(self.selected))

    def on_focus(self) -> None:
        self.border_subtitle = FOCUSED_HINT

    def on_blur(self) -> None:
        self.border_subtitle = UNFOCUSED_HINT

    # -------------------------------------------------------------------------------------------------- painting
    def render_line(self, y: int) -> Strip:
        """One line of the visible part of the canvas. Lines are kept until a tile on them changes (or the width, the
        horizontal scroll or the styles do): scrolling by a few lines, as moving the selection does, then only draws
        the lines that came into view."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        line = y + scroll_y
        if (scroll_x, width) != self._lines_key:
            self._lines_key = (scroll_x, width)
            self._line_cache.clear()
        strip = self._line_cache.get(line)
        if strip is None:
            if len(self._line_cache) >= MAX_CACHED_LINES:
                self._line_cache.clear()
            strip = self._line_cache[line] = self._draw_line(line, scroll_x, width)
        return strip

    def _draw_line(self, line: int, left: int, width: int) -> Strip:
        base, edge_style = self._styles()
        if not 0 <= line < self.graph.height:
            return Strip.blank(width, base)
        right = left + width
        pieces: list[tuple[int, list[Segment]]] = [
            (x, [Segment(text, edge_style)]) for x, text in self.graph.edge_runs(line, left, right)]
        tiles = self.graph.tiles
        for name in self.graph.line_tiles[line]:
            tile = tiles[name]
            if tile.x < right and tile.x + tile.width > left:
                strip = self._lines_of(name)[line - tile.y]
                start = max(tile.x, left)
                pieces.append((start, list(strip.crop(start - tile.x, min(tile.width, right - tile.x)))))
        pieces.sort(key=lambda p: p[0])
        segments: list[Segment] = []
        pos = left
        for x, part in pieces:
            if x > pos:
                segments.append(Segment(" " * (x - pos), base))
            segments.extend(part)
            pos = x + sum(len(seg.text) for seg in part)
        return Strip(segments, pos - left).crop_extend(0, width, base)

    def _styles(self) -> tuple[Style, Style]:
        """The widget's base style and the edges' style, looked up once per style change: `rich_style` walks the
        ancestors on every call, which cost more than drawing the line itself."""
        if self._style_cache is None:
            base = self.rich_style
            self._style_cache = (base, base + Style(color=EDGE_COLOUR))
        return self._style_cache

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_cache = None
        self._tile_lines.clear()  # tiles are drawn on the widget's background
        self._line_cache.clear()

    def _lines_of(self, name: str) -> list[Strip]:
        lines = self._tile_lines.get(name)
        if lines is None:
            lines = self._tile_lines[name] = self._render_tile(name)
        return lines

    def _render_tile(self, name: str) -> list[Strip]:
        """Three lines: the name in the top border, state glyph + word + duration (+ attempt) in the middle, details
        (live CPU/memory, exit code, reason) in the bottom border. The selected tile gets a heavy, lit border."""
        snap = self.model.snapshots[name]
        look = LOOKS[snap.state]
        width = self.graph.tiles[name].width
        selected = name == self.selected
        box = _HEAVY if selected else _LIGHT
        base = self._styles()[0] + (Style(bgcolor=SELECTED_BG) if selected else Style())
        border = base + Style(color=look.colour, bold=selected)
        inner = width - 2

        title = _fit(name, inner - 4)
        top = [Segment(box["tl"] + box["h"] + " ", border), Segment(title, base + Style(bold=True)),
               Segment(" " + box["h"] * (inner - 3 - len(title)) + box["tr"], border)]

        room = inner - 4  # " ● " before the text, " " after it
        right = ((f"#{snap.attempt} " if snap.attempt > 1 else "") + _duration(snap, self.model.clock()))[:room]
        word = _fit(look.word, room - len(right) - 1 if right else room)
        text = " " + word + " " * (room - len(word) - len(right)) + right + " "
        out = box["out"] if name in self.graph.has_children else box["v"]
        middle = [Segment(box["v"], border), Segment(" ", base), Segment(look.glyph, border), Segment(text, base),
                  Segment(out, border)]

        detail = self._detail(snap, inner - 4)
        bottom = [Segment(box["bl"] + box["h"], border)]
        if detail:
            bottom += [Segment(" ", border), Segment(detail, base + Style(dim=not selected)), Segment(" ", border)]
        bottom.append(Segment(box["h"] * (inner - 1 - (len(detail) + 2 if detail else 0)) + box["br"], border))
        return [Strip(top, width), Strip(middle, width), Strip(bottom, width)]

    def _detail(self, snap: TaskSnapshot, width: int) -> str:
        """What the bottom border says, within `width` cells."""
        if snap.state is S.RUNNING:
            usage = self.model.usage.get(snap.name)
            if usage is not None:
                return _fit(f"cpu {usage[0]:.0f}% mem {_bytes(usage[1])}", width)
            return _fit(f"pid {snap.pid}", width) if snap.pid else ""
        if snap.state is S.FAILED and snap.exit_code is not None:
            code = f"exit {snap.exit_code}"
            if snap.reason in (None, f"exit code {snap.exit_code}"):
                return _fit(code, width)
            return _fit(f"{code} {_short_reason(snap.reason, width - len(code) - 1)}", width)
        if snap.state is S.SUCCEEDED:
            return "reused" if snap.reused else ""
        return _short_reason(snap.reason or "", width)

    def refresh_tasks(self, names: Iterable[str]) -> None:
        """Repaint these tiles only (their cached lines are rebuilt on the next paint)."""
        tiles = self.graph.tiles
        tile_lines, line_cache = self._tile_lines, self._line_cache
        scroll_x, scroll_y = self.scroll_offset
        window = self.scrollable_content_region.size
        left, top, right, bottom = scroll_x, scroll_y, scroll_x + window.width, scroll_y + window.height
        for name in names:
            tile_lines.pop(name, None)
            tile = tiles[name]
            x, y, width, height = tile.x, tile.y, tile.width, tile.height
            for line in range(y, y + height):
                line_cache.pop(line, None)
            if x < right and x + width > left and y < bottom and y + height > top:
                self.refresh(Region(x - scroll_x, y - scroll_y, width, height))

    # ------------------------------------------------------------------------------------------------- selection
    def select(self, name: str, *, scroll: bool = True) -> None:
        if name == self.selected:
            return
        previous, self.selected = self.selected, name
        self.refresh_tasks([n for n in (previous, name) if n])
        if scroll:
            self.scroll_to_selected()
        if self.on_select is not None:
            self.on_select(name)
        else:
            self.post_message(TaskSelected(name))

    def scroll_to_selected(self) -> None:
        """Scroll the least that brings the selected tile (and a margin) into view."""
        if self.selected is None or not self.scrollable_content_region:
            return
        tile = self.graph.tiles[self.selected]
        self.scroll_to_region(Region(tile.x, tile.y, tile.width, tile.height), spacing=Spacing(1, 4, 1, 4),
                              animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        """Also the first layout: a selection far down a tall column is shown at start, and after any resize."""
        self.scroll_to_selected()

    def action_move(self, direction: str) -> None:
        if self.selected is None:
            return
        target = self._neighbour(self.selected, direction)
        if target is not None:
            self.select(target)

    def _neighbour(self, name: str, direction: str) -> str | None:
        """Up/down: the next tile in the same column. Left/right: the nearest dependency/dependent, preferring the
        closest column, then the closest row."""
        tile = self.graph.tiles[name]
        if direction in ("up", "down"):
            column = self.graph.columns[tile.layer]
            i = column.index(name) + (1 if direction == "down" else -1)
            return column[i] if 0 <= i < len(column) else None
        candidates = self.dependencies[name] if direction == "left" else self.dependents[name]
        tiles = self.graph.tiles
        return min(candidates, key=lambda n: (abs(tiles[n].layer - tile.layer), abs(tiles[n].mid - tile.mid)),
                   default=None)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        name = self.graph.tile_at(offset.x + self.scroll_offset.x, offset.y + self.scroll_offset.y)
        if name is not None:
            self.select(name, scroll=False)


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
    return _fit(reason.removeprefix("cancelled: ").removeprefix("cancelled ").removeprefix("raised "), width)


def _duration(snap: TaskSnapshot, now: float) -> str:
    seconds = snap.duration(now)
    return "" if seconds is None else format_duration(seconds)

