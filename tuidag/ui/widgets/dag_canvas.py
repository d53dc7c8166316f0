"""The graph: one Line-API `ScrollView` drawing every tile and edge of the DAG.

One widget for the whole graph rather than a widget per task: 2,000 tiles draw a first frame in a fraction of a
second and a state change repaints only that tile's region. Geometry and edges come from the pure
`views.graph_layout`; this widget only paints the visible part of each line, caches each tile's rendered lines
until the task changes, and moves the selection.

The layout is made for the canvas's size once it has one: the zoom level and orientation that fit the DAG (until the
user picks them with `z` / `Z` / `o`, which then stick), with wide layers packed for this screen. A resize lays it
out again only when that changes what is packed; layouts already made are kept. When the graph is larger than the
canvas a minimap in the corner shows where the view is and where things happen.
"""
from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region, Size, Spacing
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...engine.events import TaskSnapshot
from ...model.durations import format_duration
from ...model.state import TaskState
from ...views.layout.choice import choose_style
from ...views.layout.layout import GraphLayout
from ...views.layout.shape import DagShape
from ...views.layout.style import LayoutStyle, Orientation, Zoom
from ...views.minimap import MinimapGrid
from ...views.eta import attempt_start, progress
from ..messages import TaskSelected
from ..run_model import RunModel
from ..state_style import CRITICAL_COLOUR, LONG_COLOUR, LOOKS
from ..text_cells import fit as _fit, format_bytes as _bytes
from .focus_hint import FocusHint

S = TaskState
EDGE_COLOUR = "#767699"
SELECTED_BG = "#303048"
_LIGHT = dict(tl="╭", tr="╮", bl="╰", br="╯", h="─", v="│", out="├", down="┬")
_HEAVY = dict(tl="┏", tr="┓", bl="┗", br="┛", h="━", v="┃", out="┣", down="┳")
MINIMAP_BG = "#26263a"
MINIMAP_VIEW_BG = "#4a4a70"
HIDDEN_COLOUR = "#4a4a5a"  # tasks the state filter hides keep their place, drawn in this
PROGRESS_TODO = "#3a3a55"  # the part of a running task's expected duration still to go
CRITICAL_DOT_BG = "#5f4400"
#: What a minimap cell shows when several tasks share it: the first of these states present.
_MINIMAP_ORDER = (S.FAILED, S.RUNNING, S.CANCELLING, S.RETRYING, S.QUEUED, S.CANCELLED, S.SKIPPED, S.PENDING,
                  S.SUCCEEDED)
_MINIMAP_RANK = {state: i for i, state in enumerate(_MINIMAP_ORDER)}
MAX_CACHED_LINES = 512  # drawn canvas lines kept (a few screens): many more Strips would slow the garbage collector
_UPSTREAM = re.compile(r"^upstream '(.+)' failed$")
_INTERRUPTED = re.compile(r"^(?:cancelled: )?interrupted by (\S+)")
# The subtitle says what the arrows do here, and only while they do: with the log pane focused they scroll it.
FOCUSED_HINT = "←↑↓→ hjkl select · c cancel · r re-run · z zoom · o turn"
UNFOCUSED_HINT = "esc/tab: back to the graph"


class DagCanvas(FocusHint, ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "move('up')", "Up", show=False,
                tooltip="Left to right: the task above in the layer. Top down: the nearest dependency"),
        Binding("down,j", "move('down')", "Down", show=False,
                tooltip="Left to right: the task below in the layer. Top down: the nearest dependent"),
        Binding("left,h", "move('left')", "Left", show=False,
                tooltip="Left to right: the nearest dependency (what this task needs). Top down: the task to the left"),
        Binding("right,l", "move('right')", "Right", show=False,
                tooltip="Left to right: the nearest dependent (what needs this task). Top down: the task to the right"),
        Binding("z", "zoom(1)", "Zoom", show=False, tooltip="Next zoom level: full tiles, one-line tiles, dots (the choice sticks)"),
        Binding("Z", "zoom(-1)", "Zoom back", show=False, tooltip="Previous zoom level"),
        Binding("o", "turn", "Turn", show=False, tooltip="Turn the graph: left to right or top down (the choice sticks)"),
    ]
    #: Arrow keys by what they do in each orientation: across a layer, or back / on along the edges.
    _ACROSS = {Orientation.LR: ("up", "down"), Orientation.TD: ("left", "right")}
    _ALONG = {Orientation.LR: ("left", "right"), Orientation.TD: ("up", "down")}

    def __init__(self, deps: Mapping[str, Sequence[str]], layout: Callable[[LayoutStyle], GraphLayout], model: RunModel,
                 dependencies: Mapping[str, Sequence[str]], dependents: Mapping[str, Sequence[str]], *,
                 on_select: Callable[[str], None] | None = None, id: str | None = None):
        """`layout(style)` lays the DAG out (the app's, with its cache). `on_select(name)`, if given, is called as
        soon as the selection moves, instead of posting `TaskSelected`: what it changes (the log pane) is then
        painted in the same frame as the new selection, not one later."""
        super().__init__(id=id)
        self.on_select = on_select
        self.deps = deps
        self._layout = layout
        self.model = model
        self.dependencies = dependencies
        self.dependents = dependents
        self.graph: GraphLayout | None = None  # laid out for the canvas's size on the first resize
        self.zoom_choice: Zoom | None = None  # the user's, once they pressed z / Z / o: it sticks for the run
        self.orientation_choice: Orientation | None = None
        self._layouts: dict[tuple, GraphLayout] = {}
        self._shape = DagShape(deps)
        self.selected: str | None = None  # the first task of the first layer, once laid out
        self._first_selection = True  # until something selects a task, a new layout selects its first one
        self.title_prefix = ""
        self._tile_lines: dict[str, list[Strip]] = {}
        self._line_cache: dict[int, Strip] = {}  # canvas line -> its visible part, drawn for `_lines_key`
        self._lines_key: tuple[int, int] | None = None  # (scroll_x, width) the cached lines were drawn for
        self._style_cache: tuple[Style, Style] | None = None
        self._dots: dict[tuple, Segment] = {}  # (state, selected, shown) -> a dot's segment
        self._minimap: MinimapGrid | None = None  # made when first shown, for the layout and size it was shown at
        self.critical: frozenset[str] = frozenset()  # the critical path's tasks, highlighted (the app's `x`)
        self.expected: Mapping[str, float] = {}  # task -> expected seconds: running tiles show their progress

    unfocused_hint = UNFOCUSED_HINT

    def focused_hint(self) -> str:
        return FOCUSED_HINT

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
        minimap = self._minimap_row(y, width)
        if minimap is not None:
            strip = Strip.join([strip.crop(0, width - minimap.cell_length), minimap])
        return strip

    def _draw_line(self, line: int, left: int, width: int) -> Strip:
        base, edge_style = self._styles()
        if self.graph is None or not 0 <= line < self.graph.height:
            return Strip.blank(width, base)
        right = left + width
        pieces: list[tuple[int, list[Segment]]] = [
            (x, [Segment(text, edge_style)]) for x, text in self.graph.edge_runs(line, left, right)]
        tiles = self.graph.tiles
        if self.graph.zoom is Zoom.DOTS:  # a cell a task, hundreds a line: one shared segment each
            dot = self._dot
            for name in self.graph.line_tiles[line]:
                x = tiles[name].x
                if left <= x < right:
                    pieces.append((x, [dot(name)]))
        else:
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
        return Strip(Segment.simplify(segments), pos - left).crop_extend(0, width, base)

    def _styles(self) -> tuple[Style, Style]:
        """The widget's base style and the edges' style, looked up once per style change: `rich_style` walks the
        ancestors on every call, which cost more than drawing the line itself."""
        if self._style_cache is None:
            base = self.rich_style
            self._style_cache = (base, base + Style(color=EDGE_COLOUR))
        return self._style_cache

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self._style_cache is not None and self.rich_style == self._style_cache[0]:
            return  # shown again after the list or the timeline, focused...: it looks the same, drawn lines hold
        self._style_cache = None
        self._dots.clear()
        self.refresh_all()  # tiles are drawn on the widget's background

    def refresh_all(self) -> None:
        """Draw every tile again (the state filter changed which tasks are dimmed, or the styles changed)."""
        self._tile_lines.clear()
        self._line_cache.clear()
        self._minimap = None
        self.refresh()

    def _lines_of(self, name: str) -> list[Strip]:
        lines = self._tile_lines.get(name)
        if lines is None:
            lines = self._tile_lines[name] = self._render_tile(name)
        return lines

    def _render_tile(self, name: str) -> list[Strip]:
        zoom = self.graph.zoom
        if zoom is Zoom.DOTS:
            return [Strip([self._dot(name)], 1)]
        if zoom is Zoom.COMPACT:
            return [self._render_line_tile(name)]
        return self._render_box(name)

    def _dot(self, name: str) -> Segment:
        """One cell: the state's glyph in its colour; the selected one reversed, a hidden one a faint dot. Segments
        are shared by every dot that looks the same (a few dozen looks for thousands of dots)."""
        state = self.model.snapshots[name].state
        key = (state, name == self.selected, self.model.shown(name), name in self.critical)
        segment = self._dots.get(key)
        if segment is None:
            look, base = LOOKS[state], self._styles()[0]
            if not key[2]:
                segment = Segment("·", base + Style(color=HIDDEN_COLOUR))
            elif key[1]:
                segment = Segment(look.glyph, Style(color="#000000", bgcolor=look.colour, bold=True))
            else:
                segment = Segment(look.glyph, base + Style(color=look.colour,
                                                           bgcolor=CRITICAL_DOT_BG if key[3] else None))
            self._dots[key] = segment
        return segment

    def _render_line_tile(self, name: str) -> Strip:
        """One line: glyph, name, duration (or attempt), the selected one lit."""
        snap = self.model.snapshots[name]
        look = LOOKS[snap.state]
        width = self.graph.tiles[name].width
        selected = name == self.selected
        base = self._styles()[0] + (Style(bgcolor=SELECTED_BG) if selected else Style())
        shown = self.model.shown(name)
        colour = look.colour if shown else HIDDEN_COLOUR
        right = ((f"#{snap.attempt} " if snap.attempt > 1 else "") + self._progress_word(snap)
                 + _duration(snap, self.model.clock()))
        right = right[:max(0, width - 4)]
        title = _fit(name, width - 3 - (len(right) + 1 if right else 0))
        critical = name in self.critical and shown
        text_style = base + Style(bold=selected or critical,
                                  color=CRITICAL_COLOUR if critical else None if shown else HIDDEN_COLOUR)
        gap = width - 2 - len(title) - len(right) - (1 if right else 0)
        segments = [Segment(look.glyph if shown else "·", base + Style(color=colour, bold=selected)),
                    Segment(" " + title, text_style), Segment(" " * max(0, gap), base)]
        if right:
            segments.append(Segment(right + " ", base + Style(dim=not selected, color=None if shown else HIDDEN_COLOUR)))
        return Strip(segments, width).crop_extend(0, width, base)

    def _render_box(self, name: str) -> list[Strip]:
        """Three lines: the name in the top border, state glyph + word + duration (+ attempt) in the middle, details
        (live CPU/memory, exit code, reason) in the bottom border. The selected tile gets a heavy, lit border; one the
        state filter hides keeps its place, faint. Edges leave on the right (left to right) or at the bottom."""
        snap = self.model.snapshots[name]
        look = LOOKS[snap.state]
        tile = self.graph.tiles[name]
        width = tile.width
        selected = name == self.selected
        shown = self.model.shown(name)
        box = _HEAVY if selected else _LIGHT
        base = self._styles()[0] + (Style(bgcolor=SELECTED_BG) if selected else Style())
        if not shown:
            base += Style(color=HIDDEN_COLOUR)
        border = base + Style(color=look.colour if shown else HIDDEN_COLOUR, bold=selected)
        inner = width - 2
        exits = name in self.graph.has_children
        down = exits and self.graph.orientation is Orientation.TD

        title = _fit(name, inner - 4)
        title_style = base + Style(bold=True, color=CRITICAL_COLOUR if name in self.critical and shown else None)
        top = [Segment(box["tl"] + box["h"] + " ", border), Segment(title, title_style),
               Segment(" " + box["h"] * (inner - 3 - len(title)) + box["tr"], border)]

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
        middle = [Segment(box["v"], border), Segment(" ", base), Segment(look.glyph, border), *text,
                  Segment(out, border)]

        detail = self._detail(snap, inner - 4)
        bottom = [Segment(box["bl"] + box["h"], border)]
        if detail:
            bottom += [Segment(" ", border), Segment(detail, base + Style(dim=not selected)), Segment(" ", border)]
        bottom.append(Segment(box["h"] * (inner - 1 - (len(detail) + 2 if detail else 0)) + box["br"], border))
        bottom_strip = Strip(bottom, width)
        mid = width // 2
        if down and (not detail or 3 + len(detail) < mid):  # the exit in the middle of the bottom border, where
            # the details leave it room (else the edge just starts below them)
            bottom_strip = Strip.join([bottom_strip.crop(0, mid), Strip([Segment(box["down"], border)], 1),
                                       bottom_strip.crop(mid + 1, width)])
        return [Strip(top, width), Strip(middle, width), bottom_strip]

    def _progress_of(self, snap: TaskSnapshot) -> tuple[float, float, bool] | None:
        """(elapsed / expected, fraction done capped at 1, unusually long) of a running task with history."""
        if snap.state is not S.RUNNING:
            return None
        expected = self.expected.get(snap.name)
        now = self.model.clock()
        elapsed = now - attempt_start(snap, now)
        done = progress(elapsed, expected)
        return None if done is None else (elapsed / expected, *done)

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
        return [Segment("━" * filled, base + Style(color=LOOKS[S.RUNNING].colour)),
                Segment("─" * (cells - filled), base + Style(color=PROGRESS_TODO))]

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
            # The Dask worker that ran it (host:port; None for a local run).
            return _fit(_worker_name(snap.worker), width) if snap.worker else ""
        return _short_reason(snap.reason or "", width)

    def refresh_tasks(self, names: Iterable[str]) -> None:
        """Repaint these tiles only (their cached lines are rebuilt on the next paint)."""
        if self.graph is None:
            return
        names = list(names)  # read twice: for the tiles and for the minimap
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
        if names and self._minimap is not None:
            self._minimap.update(names)
            box = self._minimap_box(window.width, window.height)
            if box is not None:
                self.refresh(box)

    # ----------------------------------------------------------------------------------------- layout and zoom
    def _view(self) -> tuple[int, int]:
        """The canvas's inner size, the screen a layout is made for."""
        region = self.content_region
        return region.width, region.height

    def relayout(self) -> None:
        """Lay the graph out for the canvas's size and the zoom and orientation in force (the user's, or those that
        fit best); keep the current layout if the new one would be the same."""
        view = self._view()
        if view[0] <= 0 or view[1] <= 0:  # hidden (the log pane is maximised): nothing to fit
            return
        fitted = None
        if self.zoom_choice is None or self.orientation_choice is None:
            fitted = choose_style(self.deps, view, self._shape, self._laid_out)
        zoom = self.zoom_choice or fitted.zoom
        orientation = self.orientation_choice or fitted.orientation
        graph = self._laid_out(LayoutStyle(zoom, orientation, view))
        if graph is self.graph:
            return
        self.graph = graph
        if self._first_selection:  # nothing chosen yet: the first task as this layout reads
            first = next((c[0] for c in graph.columns if c), None)
            if first is not None and first != self.selected:
                self.selected = first
                self.post_message(TaskSelected(first))
        self.virtual_size = Size(graph.width, graph.height)
        self._tile_lines.clear()
        self._line_cache.clear()
        self._minimap = None
        self._update_title()
        self.scroll_to_selected()  # now, not after a frame of the new layout at the old scroll: one repaint, not two
        self.refresh()
        self.call_after_refresh(self.scroll_to_selected)  # in case the scrollbars changed the room

    def _laid_out(self, style: LayoutStyle) -> GraphLayout:
        """The layout for `style`, made once per zoom, orientation, packing and band width (a resize that lays out
        alike reuses it)."""
        key = (style.zoom, style.orientation, self._shape.key(style))
        graph = self._layouts.get(key)
        if graph is None:
            graph = self._layouts[key] = self._layout(style)
        return graph

    def _update_title(self) -> None:
        if self.graph is None:
            return
        arrow = "→" if self.graph.orientation is Orientation.LR else "↓"
        # Content, not a str: a str title is parsed as markup, and the prefix holds the DAG's name
        self.border_title = Content(f"{self.title_prefix} · {self.graph.zoom.value} {arrow}".lstrip(" ·"))

    def action_zoom(self, step: int) -> None:
        """z / Z: the next / previous zoom level, round the three."""
        if self.graph is None:
            return
        levels = list(Zoom)
        self.zoom_choice = levels[(levels.index(self.graph.zoom) + step) % len(levels)]
        self.orientation_choice = self.graph.orientation
        self.relayout()

    def action_turn(self) -> None:
        """o: left to right <-> top down."""
        if self.graph is None:
            return
        self.orientation_choice = self.graph.orientation.other()
        self.zoom_choice = self.graph.zoom
        self.relayout()

    # ------------------------------------------------------------------------------------------------- minimap
    def _minimap_box(self, width: int, height: int) -> Region | None:
        """Where the minimap goes (bottom right of the visible canvas), or None when the whole graph is in view or
        the canvas is too small to spare the room."""
        graph = self.graph
        if graph is None or (graph.width <= width and graph.height <= height) or width < 60 or height < 12:
            return None
        w = max(6, min(24, width // 5))
        h = max(3, min(8, height // 3))
        # keep the graph's proportions (a cell is about twice as tall as wide) within that box
        ratio = (graph.height * 2) / max(1, graph.width)
        if ratio * w / 2 < h:
            h = max(2, min(h, round(ratio * w / 2)))
        else:
            w = max(4, min(w, round(h * 2 / max(ratio, 1e-9))))
        return Region(width - w, height - h, w, h)

    def _minimap_row(self, y: int, width: int) -> Strip | None:
        height = self.scrollable_content_region.height
        box = self._minimap_box(width, height)
        if box is None or not box.y <= y < box.y + box.height:
            return None
        graph = self.graph
        minimap = self._minimap
        if minimap is None or (minimap.rows, minimap.columns) != (box.height, box.width):
            snapshots = self.model.snapshots
            minimap = self._minimap = MinimapGrid(
                {name: (tile.x, tile.y) for name, tile in graph.tiles.items()}, graph.width, graph.height,
                box.width, box.height, len(_MINIMAP_ORDER), lambda name: _MINIMAP_RANK[snapshots[name].state])
        row = minimap.cells[y - box.y]
        sx, sy = graph.width / box.width, graph.height / box.height
        scroll_x, scroll_y = self.scroll_offset
        in_rows = scroll_y / sy <= y - box.y + 1 and (y - box.y) < (scroll_y + height) / sy
        first, last = scroll_x / sx, (scroll_x + width) / sx
        segments = []
        for cx, rank in enumerate(row):
            in_view = in_rows and first <= cx + 1 and cx < last
            bg = MINIMAP_VIEW_BG if in_view else MINIMAP_BG
            if rank < 0:
                segments.append(Segment(" ", Style(bgcolor=bg)))
            else:
                segments.append(Segment("▪", Style(color=LOOKS[_MINIMAP_ORDER[rank]].colour, bgcolor=bg)))
        return Strip(segments, box.width)

    def watch_scroll_x(self, old: float, new: float) -> None:
        super().watch_scroll_x(old, new)
        self._refresh_minimap()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._refresh_minimap()

    def _refresh_minimap(self) -> None:
        window = self.scrollable_content_region.size
        box = self._minimap_box(window.width, window.height)
        if box is not None:
            self.refresh(box)

    # ------------------------------------------------------------------------------------------------ selection
    def select(self, name: str, *, scroll: bool = True) -> None:
        self._first_selection = False
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
        if self.graph is None or self.selected is None or not self.scrollable_content_region:
            return
        tile = self.graph.tiles[self.selected]
        self.scroll_to_region(Region(tile.x, tile.y, tile.width, tile.height), spacing=Spacing(1, 4, 1, 4),
                              animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        """Also the first layout: the graph is laid out for this size, and the selection is shown at start (far down
        a tall column, say) and after any resize."""
        self.relayout()
        self.scroll_to_selected()

    def action_move(self, direction: str) -> None:
        if self.selected is None or self.graph is None:
            return
        target = self._neighbour(self.selected, direction)
        if target is not None:
            self.select(target)

    def _neighbour(self, name: str, direction: str) -> str | None:
        """Across a layer (up/down left to right, left/right top down): the next / previous task of the layer in
        reading order (in a block: on down a sub-column, then the top of the next). Along the edges: in a block, the
        next sub-column (or row) first; then the nearest dependency / dependent, preferring the closest layer, then
        the closest across."""
        graph = self.graph
        tiles = graph.tiles
        tile = tiles[name]
        orientation = graph.orientation
        lr = orientation is Orientation.LR
        layer = graph.columns[tile.layer]

        def across(t) -> int:
            return t.y if lr else t.x

        def along(t) -> int:
            return t.x if lr else t.y

        if direction in self._ACROSS[orientation]:  # the next / previous in reading order
            i = layer.index(name) + (1 if direction in ("down", "right") else -1)
            return layer[i] if 0 <= i < len(layer) else None
        forward = direction in ("right", "down")
        if tile.packed:
            sign = 1 if forward else -1
            row = [tiles[n] for n in layer if across(tiles[n]) == across(tile)
                   and (along(tiles[n]) - along(tile)) * sign > 0]
            best = min(row, key=lambda t: abs(along(t) - along(tile)), default=None)
            if best is not None:
                return best.name
        candidates = self.dependents[name] if forward else self.dependencies[name]
        mid = (lambda t: t.mid) if lr else (lambda t: t.centre)
        return min(candidates, key=lambda n: (abs(tiles[n].layer - tile.layer), abs(mid(tiles[n]) - mid(tile))),
                   default=None)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or self.graph is None:
            return
        name = self.graph.tile_at(offset.x + self.scroll_offset.x, offset.y + self.scroll_offset.y)
        if name is not None:
            self.select(name, scroll=False)


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
    return _fit(reason.removeprefix("cancelled: ").removeprefix("cancelled ").removeprefix("raised "), width)


def _duration(snap: TaskSnapshot, now: float) -> str:
    seconds = snap.duration(now)
    return "" if seconds is None else format_duration(seconds)

