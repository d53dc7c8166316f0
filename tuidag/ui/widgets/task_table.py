"""The list view: one row per task under a sticky header, sortable by each column, filtered like the graph.

A Line-API `ScrollView` like the graph, not Textual's `DataTable`: it must stay quick at 5,000 rows. The rows are a
list of task names in the shown order; each row's line is drawn once and kept until the task, the selection, the
width or the styles change, so scrolling and moving the selection only draw what came into view.

Live updates repaint the changed rows right away. The order is rebuilt (sorted and filtered again) at most every
`RESORT_INTERVAL` when a change can move rows (a sort by something that changes, or a state filter): rows don't jump
on every event, and the selected task stays selected wherever it moves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from ...engine.events import TaskSnapshot
from ...model.counts import counted
from ...views.group_progress import group_line
from ...views.layout.folding import Folding
from ..run_model import RunModel, StateFilter
from ..state_style import FAINT
from ..task_columns import BY_KEY, COLUMNS, Column, Placed, fit_columns
from ..text_cells import fit
from .focus_hint import FocusHint
from .graph.tiles import HIDDEN_COLOUR, SELECTED_BG
from .group_rows import GROUP_ROW_KEYS, GroupRows
from .row_keys import ROW_KEYS, RowSelection

RESORT_INTERVAL = 0.5  # seconds between two re-orderings caused by live changes
HEADER_BG = "#1c1c2a"
HEADER_COLOUR = "#8a8aa8"
SORTED_COLOUR = "#00afd7"
MAX_CACHED_ROWS = 512  # drawn rows kept (a few screens): many more Strips would slow the garbage collector
UNFOCUSED_HINT = "esc/tab: back to the list"


class TaskTable(FocusHint, RowSelection, GroupRows, ScrollView, can_focus=True):
    BINDINGS = [
        *ROW_KEYS,
        Binding("s", "cycle_sort", "Sort", tooltip="Sort by the next column (graph order, then each column)"),
        Binding("S", "reverse_sort", "Reverse", tooltip="Reverse the order"),
        *GROUP_ROW_KEYS,
    ]

    def __init__(
        self,
        dag_name: str,
        order: Sequence[str],
        model: RunModel,
        *,
        on_select: Callable[[str], None] | None = None,
        folding: Folding | None = None,
        on_fold: Callable[[str, bool], None] | None = None,
        id: str | None = None,
    ):
        """`dag_name` heads the border title. `order`: every task in the graph's order (the default sort; the app
        sets it again with `set_order` when the graph is laid out another way). `on_select(name)` is called as soon
        as the user moves the selection, so what follows it (the log pane) repaints in the same frame."""
        super().__init__(id=id)
        self.dag_name = dag_name
        self.order = list(order)
        self.model = model
        self.on_select = on_select
        self.folding = folding or Folding({}, {})  # matrix groups folded as the graph's are: one row each
        self.on_fold = on_fold  # (group, unfold): the user folded or unfolded a group here
        self.selected: str | None = self.order[0] if self.order else None
        self.sort_key: str | None = None  # a column's key; None: the graph's order
        self.reverse = False
        self.rows: list[str] = []  # the shown tasks, in the shown order
        self._index: dict[str, int] = {}  # task -> its row
        self._kept: str | None = None  # the selected task, listed though the filter no longer shows it
        self._longest = max((len(name) for name in self.order), default=0)
        self._present: set[str] = set()  # optional columns some task has a value for
        self._widest: dict[str, int] = {c.key: 0 for c in COLUMNS if c.grows}  # their longest values, in cells
        self._scanned = False  # every task looked at for them (then only the changed ones are)
        self._layout: list[Placed] = []
        self._layout_key: tuple | None = None
        self._row_cache: dict[str, Strip] = {}
        self._header: Strip | None = None
        self._styles: tuple[Style, Style, Style] | None = None
        self._sorted_at = 0.0
        self._resort: Timer | None = None
        self._active = False

    @property
    def active(self) -> bool:
        """In the graph's place (the app's `L`): while not, it is rebuilt when shown again, not kept up to date.
        Whether it is on the screen is the stylesheet's business (the panes' `-list` class; a maximised log pane
        hides it like the graph)."""
        return self.is_mounted and self._active

    unfocused_hint = UNFOCUSED_HINT

    def focused_hint(self) -> str:
        """What the keys do here, and the order the rows are in (the header's arrow says it too, but not for the
        graph's order, which has no column)."""
        return f"↑↓ jk select · s sort: {self.sort_label} · S reverse · c cancel · r re-run"

    # --------------------------------------------------------------------------------------------- the rows
    def set_order(self, order: Sequence[str]) -> None:
        """The graph's reading order changed (another zoom or orientation): the default sort follows it."""
        if list(order) != self.order:
            self.order = list(order)
            if self.active:
                self.rebuild()

    def reshape(self, order: Sequence[str], folding: Folding) -> None:
        """The DAG changed (its file was edited under --watch): these tasks, folded so."""
        self.folding = folding
        self._longest = max((len(name) for name in order), default=0)
        self._scanned = False
        self.order = []
        self.set_order(order)

    def show(self, selected: str | None, width: int) -> None:
        """Take the graph's place with `selected` (the graph's selection) selected, everything as it is now; until
        the list is laid out, its columns are placed for `width` (the place it takes), so a key typed right after
        the one that showed it (`s`) finds them."""
        self.selected = selected
        self._active = True
        if self._layout_key is None:
            self._fit_layout(width)
        self.rebuild(keep_hidden=False)
        self.call_after_refresh(self.scroll_to_selected)  # once laid out: a hidden widget has no size

    def hide(self) -> None:
        """Give the graph its place back."""
        self._active = False

    def refilter(self) -> None:
        """The state filter changed: list what it shows. A selection it hides moves to the first row."""
        if self.active:
            self.rebuild(keep_hidden=False)

    def rebuild(self, *, keep_hidden: bool = True) -> None:
        """Filter and sort every task again, keeping the selected task selected and where it was on the screen.

        `keep_hidden`: a selected task the filter no longer shows stays listed until the selection moves (a live
        change must not pull the row the user is on from under them); otherwise the selection moves to the first
        shown row."""
        if self._resort is not None:
            self._resort.stop()
            self._resort = None
        self._sorted_at = time.monotonic()
        model = self.model
        if not self._scanned:
            self._find_values(model.snapshots.values())
            self._scanned = True
        selected = self.selected
        old_line = self._index[selected] - round(self.scroll_y) if selected in self._index else -1
        self._kept = None
        filtering = model.state_filter is not StateFilter.ALL
        names = [n for n in self.order if model.shown(n)] if filtering else self.order
        shown = len(names)
        if filtering and selected is not None and not model.shown(selected):
            if keep_hidden:
                self._kept = selected
                names = [n for n in self.order if n == selected or model.shown(n)]
            else:
                selected = None
        self.rows = self.folding.collapse(self._sorted(names))
        self._index = {name: row for row, name in enumerate(self.rows)}
        if selected is not None and selected not in self._index:  # an instance of a folded group: its row
            selected = self.folding.tile_of(selected)
        if selected is None and self.rows:
            selected = self.rows[0]
        self.border_title = Content(
            f"{self.dag_name} · {counted(len(self.order), 'task')}"
            if shown == len(self.order)
            else f"{self.dag_name} · {shown:,} of {counted(len(self.order), 'task')} "
            f"(filter: {model.state_filter.word})"
        )  # not markup: the DAG's name
        self.virtual_size = Size(0, len(self.rows) + 1)  # as wide as the widget: the columns fit its width
        self._row_cache.clear()
        self._header = None
        self.refresh()
        if self.has_focus:
            self.border_subtitle = self.focused_hint()
        if selected is None:
            self.selected = None
        elif selected != self.selected:
            self.select(selected)
        elif 0 <= old_line < self.page:
            # The selected row stays on its screen line: the list moves under it rather than it jumping about.
            self._scroll_row_to(self._index[selected], old_line)
        else:
            self.scroll_to_selected()

    def _sorted(self, names: list[str]) -> list[str]:
        column = BY_KEY.get(self.sort_key) if self.sort_key else None
        if column is None:
            return names[::-1] if self.reverse else list(names)
        model, now = self.model, self.model.clock()
        snaps, value = model.snapshots, column.value
        keyed, missing = [], []
        for name in names:  # in the graph's order: ties keep it (the sort is stable, reversed too)
            v = value(snaps[name], model, now)
            if v is None:
                missing.append(name)
            else:
                keyed.append((v, name))
        keyed.sort(key=lambda pair: pair[0], reverse=self.reverse)
        return [name for _, name in keyed] + missing  # tasks without a value last, whichever the direction

    def refresh_tasks(self, names: Iterable[str]) -> None:
        """These tasks changed: repaint their rows, and re-order soon if the change can move rows."""
        names = list(names)
        snaps = self.model.snapshots
        if self._scanned and self._find_values(snaps[n] for n in names):
            self.refresh()  # a column appears: every row is laid out again
        if not self.active or not names:
            return
        if self.folding.folded:
            names = list(dict.fromkeys(self.folding.tile_of(n) for n in names))
        self._repaint_rows(names)
        if self.model.state_filter is not StateFilter.ALL or self.sort_key not in (None, "name"):
            self._rebuild_soon()

    def _find_values(self, snaps: Iterable[TaskSnapshot]) -> bool:
        """Note the optional columns these tasks have a value for, and the longest values of the columns that grow;
        whether a column appeared or grew."""
        snaps = list(snaps)
        grew = False
        for column in COLUMNS:
            if column.grows:
                cells = max(
                    (len(column.cell(snap, column.value(snap, self.model, 0.0))[0]) for snap in snaps), default=0
                )
                if cells > self._widest[column.key]:
                    self._widest[column.key], grew = cells, True
        missing = [c for c in COLUMNS if c.optional and c.key not in self._present]
        if not missing:
            return grew
        found = {c.key for snap in snaps for c in missing if c.has_value(snap, self.model)}
        self._present |= found
        return bool(found) or grew

    def _rebuild_soon(self) -> None:
        if self._resort is not None:
            return
        wait = self._sorted_at + RESORT_INTERVAL - time.monotonic()
        if wait <= 0:
            self.rebuild()
        else:
            self._resort = self.set_timer(wait, self.rebuild)

    # -------------------------------------------------------------------------------------------------- painting
    def render_line(self, y: int) -> Strip:
        """The header on the first line whatever the scroll; then the rows in view."""
        width = self.scrollable_content_region.width
        self._fit_layout(width)
        if y == 0:
            if self._header is None:
                self._header = self._draw_header(width)
            return self._header
        row = round(self.scroll_y) + y - 1
        base = self._base_styles()[0]
        if row >= len(self.rows):
            if row == 0:  # nothing to list
                return Strip(
                    [Segment(fit(f" no {self.model.state_filter.word} tasks", width), base + Style(dim=True))]
                ).crop_extend(0, width, base)
            return Strip.blank(width, base)
        name = self.rows[row]
        strip = self._row_cache.get(name)
        if strip is None:
            if len(self._row_cache) >= MAX_CACHED_ROWS:
                self._row_cache.clear()
            strip = self._row_cache[name] = self._draw_row(name, width)
        return strip

    def _fit_layout(self, width: int) -> None:
        key = (width, frozenset(self._present), tuple(self._widest.items()))
        if key != self._layout_key:
            self._layout_key = key
            columns = [c for c in COLUMNS if not c.optional or c.key in self._present]
            self._layout = fit_columns(columns, width, self._longest, self._widest)
            self._row_cache.clear()
            self._header = None

    def _base_styles(self) -> tuple[Style, Style, Style]:
        """The widget's style, the selected row's and the header's, looked up once per style change: `rich_style`
        walks the ancestors on every call."""
        if self._styles is None:
            base = self.rich_style
            self._styles = (
                base,
                base + Style(bgcolor=SELECTED_BG),
                base + Style(bgcolor=HEADER_BG, color=HEADER_COLOUR, bold=True),
            )
        return self._styles

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._row_cache.clear()
        self._header = None

    def _draw_header(self, width: int) -> Strip:
        style = self._base_styles()[2]
        segments = []
        pos = 0
        for column, x, w in self._layout:
            title = column.title
            cell_style = style
            if column.key == self.sort_key:
                title += "▼" if self.reverse else "▲"
                cell_style = style + Style(color=SORTED_COLOUR)
            segments.append(Segment(" " * (x - pos), style))
            segments.append(Segment(_align(fit(title, w), w, column.right), cell_style))
            pos = x + w
        return Strip(segments, pos).crop_extend(0, width, style)

    def _draw_row(self, name: str, width: int) -> Strip:
        if name in self.folding.folded:
            return self._draw_group_row(name, width)
        snap = self.model.snapshots[name]
        base, selected_style, _ = self._base_styles()
        selected = name == self.selected
        style = selected_style if selected else base
        now = self.model.clock()
        faint = snap.state in FAINT  # outside the run's targets: the whole row faint
        segments = []
        pos = 0
        for column, x, w in self._layout:
            text, colour = column.cell(snap, column.value(snap, self.model, now))
            cell_style = style
            if faint:
                cell_style = style + Style(color=HIDDEN_COLOUR)
            elif colour is not None:
                cell_style = style + Style(color=colour)
            if selected and column.key == "name":
                cell_style = cell_style + Style(bold=True)
            segments.append(Segment(" " * (x - pos), style))
            segments.append(Segment(_align(fit(text, w), w, column.right), cell_style))
            pos = x + w
        return Strip(segments, pos).crop_extend(0, width, style)

    def _draw_group_row(self, name: str, width: int) -> Strip:
        """A folded group's row: `▸ train ×16` in the name column, then its progress in words across the others."""
        base, selected_style, _ = self._base_styles()
        style = selected_style if name == self.selected else base
        instances = self.folding.groups[name]
        snaps = self.model.snapshots
        x, w = next(((x, w) for column, x, w in self._layout if column.key == "name"), (0, width))
        label = fit(f"▸ {name} ×{len(instances)}", w)
        progress = group_line(name, (snaps[i].state for i in instances)).partition(": ")[2]
        rest = max(0, width - x - w - 2)
        segments = [
            Segment(" " * x, style),
            Segment(label.ljust(w), style + Style(bold=True)),
            Segment("  " + fit(progress, rest), style + Style(dim=name != self.selected)),
        ]
        return Strip(segments).crop_extend(0, width, style)

    # ------------------------------------------------------------------------------------------------- selection
    def select(self, name: str, *, scroll: bool = True) -> None:
        """Select `name` (if it is listed, bring it into view; an instance of a folded group: the group's row) and
        tell `on_select`."""
        if name not in self._index and self.folding.tile_of(name) in self._index:
            name = self.folding.tile_of(name)
        if name == self.selected:
            return
        previous, self.selected = self.selected, name
        if self.active:
            if name not in self._index:
                self.rebuild()  # hidden by the filter (selected from elsewhere): listed while selected
            else:
                self._repaint_rows([n for n in (previous, name) if n])
                if scroll:
                    self.scroll_to_selected()
                if previous is not None and previous == self._kept:
                    self._rebuild_soon()  # the row the filter hides goes once the selection has left it
        if self.on_select is not None:
            self.on_select(name)

    def _repaint_rows(self, names: list[str]) -> None:
        """Draw these rows again; repaint those in view."""
        cache, index = self._row_cache, self._index
        top = round(self.scroll_y)
        bottom = top + self.page
        width = self.scrollable_content_region.width
        for name in names:
            cache.pop(name, None)
            row = index.get(name)
            if row is not None and top <= row < bottom:
                self.refresh(Region(0, 1 + row - top, width, 1))

    @property
    def page(self) -> int:
        """Rows in view (the header aside)."""
        return max(1, self.scrollable_content_region.height - 1)

    def scroll_to_selected(self) -> None:
        """Scroll the least that brings the selected row into view."""
        row = self._index.get(self.selected) if self.selected else None
        if row is None or not self.scrollable_content_region:
            return
        top = round(self.scroll_y)
        if row < top:
            self._scroll_row_to(row, 0)
        elif row >= top + self.page:
            self._scroll_row_to(row, self.page - 1)

    def _scroll_row_to(self, row: int, line: int) -> None:
        """Scroll so `row` is on `line` of the rows in view (as near as the ends of the list allow)."""
        self.scroll_to(y=max(0, row - max(0, min(line, self.page - 1))), animate=False, force=True, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self.scroll_to_selected()

    # ---------------------------------------------------------------------------------------------------- sorting
    def sort_by(self, key: str | None, reverse: bool | None = None) -> None:
        """Sort by the column `key` (None: the graph's order); `reverse` None: the column's first direction."""
        column = BY_KEY.get(key) if key else None
        self.sort_key = key
        self.reverse = (column.descending_first if column else False) if reverse is None else reverse
        self.rebuild()

    @property
    def sort_label(self) -> str:
        """The order the rows are in, in words."""
        if self.sort_key is None:
            return "graph order" + (" reversed" if self.reverse else "")
        return f"{BY_KEY[self.sort_key].title.lower()} {'▼' if self.reverse else '▲'}"

    def action_cycle_sort(self) -> None:
        """The next column on the screen, after the graph's order; after the last column, the graph's order."""
        keys: list[str | None] = [None] + [placed.column.key for placed in self._layout]
        following = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
        self.sort_by(keys[following % len(keys)])

    def action_reverse_sort(self) -> None:
        self.sort_by(self.sort_key, not self.reverse)

    def on_click(self, event: events.Click) -> None:
        """A header sorts by its column (again: the other way); a row is selected."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            column = self._column_at(offset.x)
            if column is not None:
                same = column.key == self.sort_key
                self.sort_by(column.key, not self.reverse if same else None)
            return
        row = round(self.scroll_y) + offset.y - 1
        if row < len(self.rows):
            self.select(self.rows[row], scroll=False)

    def _column_at(self, x: int) -> Column | None:
        """The column under cell `x` of the header (the space before a column counts as its own)."""
        for column, left, width in self._layout:
            if left - 1 <= x < left + width:
                return column
        return None


def _align(text: str, width: int, right: bool) -> str:
    return text.rjust(width) if right else text.ljust(width)
