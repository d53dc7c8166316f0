"""The timeline (`t`): one row per task on a shared wall-clock axis, in the graph's place.

A Line-API `ScrollView` like the graph and the list: a row's line is drawn when it comes into view and kept until
its task changes, the view moves in time, or a second passes on a live run (running bars grow and the `now` mark
moves; only the rows in view are drawn again). The geometry (rows, ticks, which cells a wait or an attempt covers)
is `views.timeline_layout`'s; this widget paints it and moves the selection.

Attempts are solid bars coloured by how they ended (a running one by the task's state), waits (queued for a slot,
held by a pause or a retry's delay) a dim shade before them. The sticky first line is the axis: time since the run
started. Until the user zooms or pans, the scale fits the whole run and grows with it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from ...model.counts import counted
from ...model.state import TaskState
from ...views import timeline_layout as tl
from ...views.layout.folding import Folding
from ...views.timeline_layout import Density
from ..run_model import RunModel, StateFilter
from .focus_hint import FocusHint
from .group_rows import GROUP_ROW_KEYS, GroupRows
from .row_keys import ROW_KEYS, RowSelection
from .timeline_rows import TimelineRows

S = TaskState
REFILTER_INTERVAL = 0.5  # seconds between two re-listings caused by live changes under a state filter
UNFOCUSED_HINT = "esc/tab: back to the timeline"
FOCUSED_HINT = "↑↓ jk select · ←→ hl earlier/later · z/Z zoom in/out · 0 fit · t graph"


class TimelineView(TimelineRows, FocusHint, RowSelection, GroupRows, ScrollView, can_focus=True):
    BINDINGS = [
        *ROW_KEYS,
        Binding("left,h", "pan(-1)", "Earlier", show=False, tooltip="Scroll back in time (a quarter of the width)"),
        Binding("right,l", "pan(1)", "Later", show=False, tooltip="Scroll on in time"),
        Binding("z", "zoom(-1)", "Zoom in", show=False, tooltip="Zoom in on time: fewer seconds a cell"),
        Binding("Z", "zoom(1)", "Zoom out", show=False, tooltip="Zoom out: more seconds a cell"),
        Binding("0", "fit", "Fit", show=False, tooltip="The whole run in the width again (and growing with it)"),
        *GROUP_ROW_KEYS,
    ]

    def __init__(
        self,
        dag_name: str,
        model: RunModel,
        order: Callable[[], Sequence[str]],
        density: Callable[[], Density],
        *,
        on_select: Callable[[str], None] | None = None,
        folding: Folding | None = None,
        on_fold: Callable[[str, bool], None] | None = None,
        id: str | None = None,
    ):
        """`order()` gives every task in the graph's reading order and `density()` the rows' density (after the
        graph's zoom), both read when the timeline is shown. `on_select(name)` is called as soon as the user moves
        the selection, so what follows it (the graph's selection, the log pane) repaints in the same frame."""
        super().__init__(id=id)
        self.dag_name = dag_name
        self.model = model
        self._order = order
        self._density = density
        self.on_select = on_select
        self.folding = folding or Folding({}, {})  # matrix groups folded as the graph's are: one row each
        self.on_fold = on_fold  # (group, unfold): the user folded or unfolded a group here
        self.density = Density.FULL
        self.rows: list[str] = []
        self._index: dict[str, int] = {}
        self.selected: str | None = None
        self.critical: frozenset[str] = frozenset()  # tasks of the critical path, highlighted (`x`)
        self.forecast: Mapping[str, tuple[float, float]] = {}  # a live run's forecast spans, drawn after now
        self.forecast_end: float | None = None
        self.time_scale: float | None = None  # seconds a cell once the user zoomed or panned; None: fit the run
        self.time_offset = 0.0  # seconds after the run's start at the bar area's first cell (when not fitted)
        self._follow = True  # panned or zoomed with `now` in view: keep it in view as the run goes on
        self._view: tuple[float, float, int] | None = None  # (offset, scale, cells) drawn
        self._row_cache: dict[int, Strip] = {}
        self._axis: Strip | None = None
        self._grid_marks: tuple[tuple, dict[int, str]] | None = None  # ((view, now cell), cell -> mark)
        self._styles: tuple[Style, Style] | None = None
        self._longest = 0
        self._active = False
        self._refilter: Timer | None = None
        self._listed_at = 0.0

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._row_cache.clear()
        self._axis = None

    @property
    def active(self) -> bool:
        """In the graph's place (the app's `t`); while not, it is rebuilt when shown, not kept up to date."""
        return self.is_mounted and self._active

    unfocused_hint = UNFOCUSED_HINT

    def focused_hint(self) -> str:
        return FOCUSED_HINT

    # ------------------------------------------------------------------------------------------------ the rows
    def show(self, selected: str | None) -> None:
        """Take the graph's place with `selected` selected, in the graph's order, density and state filter."""
        self.selected = selected
        self.density = self._density()
        self._active = True
        self.relist()
        self.call_after_refresh(self.scroll_to_selected)  # once laid out: a hidden widget has no size

    def hide(self) -> None:
        self._active = False

    def relist(self) -> None:
        """List the tasks again (the state filter or the order changed); the selection stays listed."""
        if self._refilter is not None:
            self._refilter.stop()
            self._refilter = None
        self._listed_at = time.monotonic()
        model = self.model
        order = self._order()
        self._longest = max((len(name) for name in order), default=0)
        shown = None
        if model.state_filter is not StateFilter.ALL:
            shown = {name: model.shown(name) for name in order}
        self.rows = self.folding.collapse(tl.rows_of(order, shown, self.selected))
        self._index = {name: i for i, name in enumerate(self.rows)}
        if self.selected is not None and self.selected not in self._index:  # an instance of a folded group
            self.selected = self.folding.tile_of(self.selected)
        if self.selected not in self._index and self.rows:
            self.selected = self.rows[0]
        count = len(self.rows) if shown is None else sum(shown.values())
        self._title(count, len(order))
        self.virtual_size = Size(0, 1 + math.ceil(len(self.rows) / self.density.per_row))
        self.repaint()
        self.scroll_to_selected()

    def _title(self, shown: int, total: int) -> None:
        tasks = (
            counted(total, "task")
            if shown == total
            else f"{shown:,} of {counted(total, 'task')} (filter: {self.model.state_filter.word})"
        )
        start = time.strftime("%H:%M:%S", time.localtime(self.model.started))
        self.border_title = Content(  # not markup: the DAG's name
            f"{self.dag_name} · {tasks} · timeline from {start}, {self.density.value} rows"
        )

    def repaint(self) -> None:
        """Draw every row again (the view moved in time, the styles or the highlighted path changed)."""
        self._view = None
        self._row_cache.clear()
        self._axis = None
        self.refresh()

    def refresh_tasks(self, names: Iterable[str]) -> None:
        """These tasks changed: repaint their rows (everything if the fitted scale changed); under a state filter,
        list the tasks again soon."""
        if not self.active:
            return
        names = list(names)
        if not names:
            return
        if self.folding.folded:
            names = list(dict.fromkeys(self.folding.tile_of(n) for n in names))
        if self._view is not None and self._compute_view() != self._view:
            self.repaint()
        else:
            per_row, index, cache = self.density.per_row, self._index, self._row_cache
            top = round(self.scroll_y)
            width = self.scrollable_content_region.width
            for name in names:
                i = index.get(name)
                if i is None:
                    continue
                row = i // per_row
                cache.pop(row, None)
                if top <= row < top + self.page:
                    self.refresh(Region(0, 1 + row - top, width, 1))
        if self.model.state_filter is not StateFilter.ALL and self._refilter is None:
            wait = self._listed_at + REFILTER_INTERVAL - time.monotonic()
            if wait <= 0:
                self.relist()
            else:
                self._refilter = self.set_timer(wait, self.relist)

    def tick(self) -> None:
        """A second passed: running bars grow and `now` moves (a finished run stays as it is)."""
        if self.active and not self.model.finished:
            self.repaint()

    def set_forecast(self, spans: Mapping[str, tuple[float, float]], end: float | None) -> None:
        """The live forecast's spans (empty once the run is finished): what is still to come is drawn faint."""
        self.forecast, self.forecast_end = spans, end
        if self.active:
            self.repaint()

    def set_critical(self, tasks: Iterable[str]) -> None:
        tasks = frozenset(tasks)
        if tasks != self.critical:
            self.critical = tasks
            if self.active:
                self.repaint()

    # ----------------------------------------------------------------------------------------------- the view
    @property
    def cells(self) -> int:
        """Cells of the bar area: the width after the name column."""
        width = self.scrollable_content_region.width
        name = self.density.name_width(self._longest, width)
        return max(1, width - (name + 3 if name else 1))

    def _compute_view(self) -> tuple[float, float, int]:
        """(offset, scale, cells) for now: the fitted scale from the run's start, or the user's."""
        model = self.model
        now = model.clock()
        cells = self.cells
        end = tl.time_span(model.timeline.segments, model.snapshots, model.started, now)
        if model.finished_at is not None:
            end = max(end, model.finished_at)
        elif self.forecast_end is not None:
            end = max(end, self.forecast_end)  # the forecast's end in view too
        span = end - model.started
        if self.time_scale is None:
            return 0.0, tl.fit_scale(span, cells), cells
        offset = self.time_offset
        if self._follow and not model.finished and span > offset + cells * self.time_scale:
            # `now` back to three quarters of the way across
            offset = self.time_offset = max(0.0, span - cells * self.time_scale * 0.75)
        return offset, self.time_scale, cells

    def view(self) -> tuple[float, float, int]:
        if self._view is None:
            self._view = self._compute_view()
        return self._view

    def _now_in_view(self, offset: float, scale: float, cells: int) -> bool:
        now = self.model.clock() - self.model.started
        return offset <= now <= offset + cells * scale

    def action_zoom(self, step: int) -> None:
        """z finer, Z coarser, about the middle of the view."""
        offset, scale, cells = self.view()
        middle = offset + cells * scale / 2
        new = tl.scale_step(scale, step)
        self._set_view(middle - cells * new / 2, new)

    def action_pan(self, direction: int) -> None:
        offset, scale, cells = self.view()
        self._set_view(offset + direction * max(1, cells // 4) * scale, scale)

    def _set_view(self, offset: float, scale: float) -> None:
        _, _, cells = self.view()
        model = self.model
        now = model.clock()
        end = tl.time_span(model.timeline.segments, model.snapshots, model.started, now) - model.started
        self.time_scale = scale
        self.time_offset = max(0.0, min(offset, max(0.0, end - cells * scale / 2)))
        self._follow = self._now_in_view(self.time_offset, scale, cells)
        self.repaint()

    def action_fit(self) -> None:
        self.time_scale = None
        self.time_offset = 0.0
        self._follow = True
        self.repaint()

    # ------------------------------------------------------------------------------------------------ selection
    @property
    def page(self) -> int:
        """Rows in view (the axis aside)."""
        return max(1, self.scrollable_content_region.height - 1)

    def select(self, name: str, *, scroll: bool = True) -> None:
        """Select `name` (listed even if the filter hides it; an instance of a folded group: the group's row) and tell
        `on_select`."""
        if name not in self._index and self.folding.tile_of(name) in self._index:
            name = self.folding.tile_of(name)
        if name == self.selected:
            return
        previous, self.selected = self.selected, name
        if self.active:
            if name not in self._index:
                self.relist()
            else:
                self.refresh_tasks([n for n in (previous, name) if n])
                if scroll:
                    self.scroll_to_selected()
        if self.on_select is not None:
            self.on_select(name)

    def scroll_to_selected(self) -> None:
        i = self._index.get(self.selected) if self.selected else None
        if i is None or not self.scrollable_content_region:
            return
        row = i // self.density.per_row
        top = round(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False, force=True, immediate=True)
        elif row >= top + self.page:
            self.scroll_to(y=row - self.page + 1, animate=False, force=True, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self.repaint()
        self.scroll_to_selected()

    @property
    def tasks_per_row(self) -> int:
        return self.density.per_row

    def on_click(self, event: events.Click) -> None:
        """A row is selected; in dense rows its upper task, or the lower one when the upper is selected already."""
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        row = round(self.scroll_y) + offset.y - 1
        per_row = self.density.per_row
        i = row * per_row
        if per_row == 2 and i < len(self.rows) and self.rows[i] == self.selected and i + 1 < len(self.rows):
            i += 1
        if i < len(self.rows):
            self.select(self.rows[i], scroll=False)
