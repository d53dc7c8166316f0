"""The graph: one Line-API `ScrollView` drawing every tile and edge of the DAG.

One widget for the whole graph rather than a widget per task: 2,000 tiles draw a first frame in a fraction of a
second and a state change repaints only that tile's region. Geometry and edges come from the pure
`views.layout`; this widget only paints the visible part of each line, caches each tile's rendered lines
until the task changes, and moves the selection.

The layout is made for the canvas's size once it has one: the zoom level and orientation that fit the DAG (until the
user picks them with `z` / `Z` / `o`, which then stick), with wide layers packed for this screen. A resize lays it
out again only when that changes what is packed; layouts already made are kept. When the graph is larger than the
canvas a minimap in the corner shows where the view is and where things happen.

What it does is in modules of their own, mixed in: `tiles` (what each tile says), `selection` (moving the selection)
and `minimap`; this one holds the widget, its layout and zoom, and drawing its lines from the tiles and edges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from ....views.layout.choice import choose_style
from ....views.layout.folding import Folding
from ....views.layout.layout import GraphLayout
from ....views.layout.shape import DagShape
from ....views.layout.style import LayoutStyle, Orientation, Zoom
from ....views.minimap import MinimapGrid
from ...messages import TaskSelected
from ...run_model import RunModel
from ..focus_hint import FocusHint
from .minimap import MinimapCorner
from .selection import Selection
from .tiles import TileDrawing

EDGE_COLOUR = "#767699"
GROUP_REPAINT = 0.25  # seconds between two repaints of a group's tile: a sweep's instances may end by hundreds
MAX_CACHED_LINES = 512  # drawn canvas lines kept (a few screens): many more Strips would slow the garbage collector
# The subtitle says what the arrows do here, and only while they do: with the log pane focused they scroll it.
FOCUSED_HINT = "←↑↓→ hjkl select · c cancel · r re-run · z zoom · o turn"
GROUP_HINT = "↵/+ unfold · c cancel its unfinished · r re-run its failed · ←↑↓→ hjkl select"  # on a folded group
INSTANCE_HINT = "- fold the group · ←↑↓→ hjkl select · c cancel · r re-run · z zoom · o turn"  # on an instance
UNFOCUSED_HINT = "esc/tab: back to the graph"


class DagCanvas(FocusHint, TileDrawing, Selection, MinimapCorner, ScrollView, can_focus=True):
    BINDINGS = [
        Binding(
            "up,k",
            "move('up')",
            "Up",
            show=False,
            tooltip="Left to right: the task above in the layer. Top down: the nearest dependency",
        ),
        Binding(
            "down,j",
            "move('down')",
            "Down",
            show=False,
            tooltip="Left to right: the task below in the layer. Top down: the nearest dependent",
        ),
        Binding(
            "left,h",
            "move('left')",
            "Left",
            show=False,
            tooltip="Left to right: the nearest dependency (what this task needs). Top down: the task to the left",
        ),
        Binding(
            "right,l",
            "move('right')",
            "Right",
            show=False,
            tooltip="Left to right: the nearest dependent (what needs this task). Top down: the task to the right",
        ),
        Binding(
            "z",
            "zoom(1)",
            "Zoom",
            show=False,
            tooltip="Next zoom level: full tiles, one-line tiles, dots (the choice sticks)",
        ),
        Binding("Z", "zoom(-1)", "Zoom back", show=False, tooltip="Previous zoom level"),
        Binding(
            "enter,plus",
            "unfold",
            "Unfold",
            show=False,
            tooltip="On a matrix group's tile: draw its instances, one tile each (packed like a wide layer)",
        ),
        Binding("minus", "fold", "Fold", show=False, tooltip="On a matrix instance: fold its group back into one tile"),
        Binding(
            "o", "turn", "Turn", show=False, tooltip="Turn the graph: left to right or top down (the choice sticks)"
        ),
    ]

    def __init__(
        self,
        folding: Folding,
        layout: Callable[[Mapping[str, Sequence[str]], LayoutStyle], GraphLayout],
        model: RunModel,
        *,
        on_select: Callable[[str], None] | None = None,
        id: str | None = None,
    ):
        """`folding` says which matrix groups are drawn as one tile (all at first); `layout(deps, style)` lays a
        graph out (the app's, with its cache). `on_select(name)`, if given, is called as soon as the selection
        moves, instead of posting `TaskSelected`: what it changes (the log pane) is then painted in the same frame as
        the new selection, not one later."""
        super().__init__(id=id)
        self.on_select = on_select
        self.folding = folding
        self._layout = layout
        self.model = model
        self._shapes: dict[frozenset[str], DagShape] = {}
        self._set_graph_of_folding()
        self._groups_due: set[str] = set()  # group tiles to repaint at the next GROUP_REPAINT tick
        self._group_timer: Timer | None = None
        self.on_refold: Callable[[], None] | None = None  # called when a group was folded or unfolded
        self._last_view: tuple[int, int] | None = None  # the size last laid out for
        self.graph: GraphLayout | None = None  # laid out for the canvas's size on the first resize
        self.zoom_choice: Zoom | None = None  # the user's, once they pressed z / Z / o: it sticks for the run
        self.orientation_choice: Orientation | None = None
        self._layouts: dict[tuple, GraphLayout] = {}
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
        """The graph's keys; on a matrix group's tile or an instance, how to unfold or fold it first."""
        if self.selected in self.folding.folded:
            return GROUP_HINT
        return INSTANCE_HINT if self.selected in self.folding.group_of else FOCUSED_HINT

    def hint_selection(self) -> None:
        """The selection moved: the keys the border offers may change (on a group, off it)."""
        if self.has_focus:
            self.border_subtitle = self.focused_hint()

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
            (x, [Segment(text, edge_style)]) for x, text in self.graph.edge_runs(line, left, right)
        ]
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

    def refresh_tasks(self, names: Iterable[str]) -> None:
        """Repaint these tiles only (their cached lines are rebuilt on the next paint)."""
        if self.graph is None:
            return
        tiles = self.graph.tiles
        if self.folding.folded:  # an instance of a folded group changes its group's tile, a few times a second at most
            plain: list[str] = []
            tile_of = self.folding.tile_of
            for name in names:
                node = tile_of(name)
                if node == name:
                    plain.append(name)
                elif node in tiles:
                    self._groups_due.add(node)
            if self._groups_due and self._group_timer is None:
                self._group_timer = self.set_timer(GROUP_REPAINT, self._repaint_groups)
            names = plain
        names = [name for name in names if name in tiles]  # read twice: for the tiles and for the minimap
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

    def _repaint_groups(self) -> None:
        self._group_timer = None
        due, self._groups_due = self._groups_due, set()
        self.refresh_tasks(due)

    # ---------------------------------------------------------------------------------------- folding groups
    def _set_graph_of_folding(self) -> None:
        """The graph as the folding draws it: its nodes, their edges both ways, its shape (kept per folding)."""
        self.deps = self.folding.deps()
        self.dependencies: Mapping[str, Sequence[str]] = self.deps
        dependents: dict[str, list[str]] = {name: [] for name in self.deps}
        for name, ds in self.deps.items():
            for d in ds:
                dependents[d].append(name)
        self.dependents: Mapping[str, Sequence[str]] = dependents
        shape = self._shapes.get(self.folding.key)
        if shape is None:
            shape = self._shapes[self.folding.key] = DagShape(self.deps)
        self._shape = shape

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`+` / Enter unfold the selected group and `-` folds the group of the selected instance; on any other
        tile the keys are the app's (`+` / `-` size the log pane)."""
        if action == "unfold":
            return self.selected is not None and self.selected in self.folding.folded
        if action == "fold":
            return self.selected is not None and self.selected in self.folding.group_of
        return True

    def action_unfold(self) -> None:
        self.unfold(self.selected or "")

    def action_fold(self) -> None:
        group = self.folding.group_of.get(self.selected or "")
        if group is not None:
            self.fold(group)

    def unfold(self, group: str, select: str | None = None) -> None:
        """Draw `group`'s instances, and select `select` (its first instance if None)."""
        if self.folding.unfold(group):
            self._refold(select or self.folding.groups[group][0])

    def fold(self, group: str) -> None:
        """Draw `group` as one tile again, and select it."""
        if self.folding.fold(group):
            self._refold(group)

    def _refold(self, select: str) -> None:
        self._set_graph_of_folding()
        self.selected = select  # the new layout shows it: no tile of the old one to repaint
        self._first_selection = False
        self.graph = None
        self.relayout()
        self.hint_selection()
        if self.on_refold is not None:
            self.on_refold()
        if self.on_select is not None:
            self.on_select(select)
        else:
            self.post_message(TaskSelected(select))

    def reshape(self, folding: Folding) -> None:
        """The DAG changed (its file was edited under --watch): its graph laid out anew, the selection kept where it
        is still drawn (else the first task of the new layout is selected)."""
        self.folding = folding
        self._shapes.clear()
        self._layouts.clear()
        self._set_graph_of_folding()
        if self.selected not in self.deps:
            self._first_selection = True
        self.graph = None
        self.relayout()
        self.hint_selection()

    # ----------------------------------------------------------------------------------------- layout and zoom
    def _view(self) -> tuple[int, int]:
        """The canvas's inner size, the screen a layout is made for."""
        region = self.content_region
        return region.width, region.height

    def relayout(self) -> None:
        """Lay the graph out for the canvas's size and the zoom and orientation in force (the user's, or those that
        fit best); keep the current layout if the new one would be the same."""
        view = self._view()
        if view[0] <= 0 or view[1] <= 0:  # hidden (the log pane is maximised, the list shown): nothing to fit,
            if self.graph is not None or self._last_view is None:  # unless a group was (un)folded meanwhile: the
                return  # list reads the graph's order, so lay it out for the size it last had
            view = self._last_view
        self._last_view = view
        if self.zoom_choice is None or self.orientation_choice is None:
            fitted = choose_style(self.deps, view, self._shape, self._laid_out)
            zoom = self.zoom_choice or fitted.zoom
            orientation = self.orientation_choice or fitted.orientation
        else:
            zoom, orientation = self.zoom_choice, self.orientation_choice
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
        key = (self.folding.key, style.zoom, style.orientation, self._shape.key(style))
        graph = self._layouts.get(key)
        if graph is None:
            graph = self._layouts[key] = self._layout(self.deps, style)
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

    def on_resize(self, event: events.Resize) -> None:
        """Also the first layout: the graph is laid out for this size, and the selection is shown at start (far down
        a tall column, say) and after any resize."""
        self.relayout()
        self.scroll_to_selected()
