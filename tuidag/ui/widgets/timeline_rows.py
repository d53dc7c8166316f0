"""Painting the timeline's lines: the axis (time since the run started, with grid marks, `now`, and where each of
watch mode's rounds began, `┃g2`, a bold line down the rows), a task's row in full (attempts as solid bars coloured
by how they ended, waits as a dim shade, the forecast after now, the duration at the bar's end) or dense (two tasks a
row, in half cells), each kept until its task changes or the view moves.
`TimelineRows` is the part of `TimelineView` (timeline.py) that paints; the widget moves the view and the selection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...model.durations import format_duration
from ...model.state import TaskState
from ...model.timeline import SegmentKind
from ...views import timeline_layout as tl
from ...views.group_progress import summarise
from ...views.layout.folding import Folding
from ...views.timeline_layout import Density, Paint
from ..run_model import RunModel, StateFilter
from ..state_style import CRITICAL_COLOUR, LOOKS
from ..text_cells import fit
from .graph.tiles import HIDDEN_COLOUR, SELECTED_BG

S = TaskState
AXIS_BG = "#1c1c2a"
AXIS_COLOUR = "#8a8aa8"
GRID_COLOUR = "#2c2c40"
NOW_COLOUR = "#3f6f8f"
WAIT_GLYPH, RUN_GLYPH = "░", "█"
DENSE_WAIT = "#34407a"  # a wait in dense rows (half cells have no shade): a dim blue
FORECAST_GLYPH, FORECAST_COLOUR = "┄", "#6c6c8a"  # what the forecast says is still to come
GENERATION_GLYPH, GENERATION_COLOUR = "┃", "#00afd7"  # where a round of watch mode began (as the header's `gen N`)
MAX_CACHED_ROWS = 512


if TYPE_CHECKING:  # mixed into a ScrollView
    _ScrollView = ScrollView
else:
    _ScrollView = object


class TimelineRows(_ScrollView):
    """Mixed into `TimelineView` (which sets up the state named here in its `__init__`): its lines."""

    model: RunModel
    rows: list[str]
    selected: str | None
    critical: frozenset[str]
    forecast: Mapping[str, tuple[float, float]]
    density: Density
    _axis: Strip | None
    _grid_marks: tuple[tuple, dict[int, str]] | None
    _longest: int
    _row_cache: dict[int, Strip]
    _styles: tuple[Style, Style] | None
    folding: Folding

    if TYPE_CHECKING:  # TimelineView's

        def view(self) -> tuple[float, float, int]: ...

    def _base_styles(self) -> tuple[Style, Style]:
        """The widget's style and the selected row's, looked up once per style change."""
        if self._styles is None:
            base = self.rich_style
            self._styles = (base, base + Style(bgcolor=SELECTED_BG))
        return self._styles

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        view = self.view()
        if y == 0:
            if self._axis is None:
                self._axis = self._draw_axis(width, view)
            return self._axis
        row = round(self.scroll_y) + y - 1
        base = self._base_styles()[0]
        per_row = self.density.per_row
        if row * per_row >= len(self.rows):
            if row == 0:
                word = "" if self.model.state_filter is StateFilter.ALL else f" {self.model.state_filter.word}"
                return Strip([Segment(fit(f" no{word} tasks", width), base + Style(dim=True))]).crop_extend(
                    0, width, base
                )
            return Strip.blank(width, base)
        strip = self._row_cache.get(row)
        if strip is None:
            if len(self._row_cache) >= MAX_CACHED_ROWS:
                self._row_cache.clear()
            draw = self._draw_dense if per_row == 2 else self._draw_row
            strip = self._row_cache[row] = draw(row, width, view)
        return strip

    def _draw_axis(self, width: int, view: tuple[float, float, int]) -> Strip:
        offset, scale, cells = view
        style = self._base_styles()[0] + Style(bgcolor=AXIS_BG, color=AXIS_COLOUR)
        lead = width - cells
        scale_text = tl.scale_label(scale)
        head = next(
            (
                text.ljust(lead)
                for text in (f" {scale_text}/cell ", f" {scale_text} ", f"{scale_text} ")
                if len(text) <= lead
            ),
            " " * lead,
        )
        axis = tl.axis_text(offset, scale, cells)
        if self.model.generations:  # watch mode's rounds: where each began, labelled (`┃g2`)
            model = self.model
            axis = tl.with_generations(axis, tl.generation_cells(model.generations, model.started, *view))
        return Strip([Segment(head + axis, style)]).crop_extend(0, width, style)

    def _forecast_cells(self, name: str, view: tuple[float, float, int]) -> tuple[int, int] | None:
        span = self.forecast.get(name)
        if span is None:
            return None
        offset, scale, cells = view
        return tl.forecast_cells(span, self.model.started + offset, scale, cells, self.model.clock())

    def _paints(self, name: str, view: tuple[float, float, int]) -> list[Paint | None]:
        offset, scale, cells = view
        model = self.model
        if name in self.folding.folded:
            snaps, recorded = model.snapshots, model.timeline.segments
            segments = tl.group_segments(
                recorded.get(i) or tl.snapshot_segments(snaps[i]) for i in self.folding.groups[name]
            )
            return tl.row_paints(segments, S.RUNNING, model.started + offset, scale, cells, model.clock())
        snap = model.snapshots[name]
        segments = model.timeline.segments.get(name) or tl.snapshot_segments(snap)
        return tl.row_paints(segments, snap.state, model.started + offset, scale, cells, model.clock())

    def _grid(self, view: tuple[float, float, int]) -> dict[int, str]:
        """The cells that mark ticks (a faint dotted line), the start of each of watch mode's rounds after the first
        (a bold line) and `now` (on a live run) in empty parts of rows, worked out once per view and `now` cell."""
        offset, scale, cells = view
        model = self.model
        now = None
        if not model.finished:
            now = round((model.clock() - model.started - offset) / scale)
        key = (view, now, len(model.generations))
        if self._grid_marks is None or self._grid_marks[0] != key:
            marks = {x: "┊" for x, _ in tl.ticks(offset, scale, cells)}
            for x, _ in tl.generation_cells(model.generations, model.started, offset, scale, cells):
                marks[x] = GENERATION_GLYPH
            if now is not None and 0 <= now < cells:
                marks[now] = "│"
            self._grid_marks = (key, marks)
        return self._grid_marks[1]

    def _draw_row(self, row: int, width: int, view: tuple[float, float, int]) -> Strip:
        name = self.rows[row]
        group = self.folding.groups[name] if name in self.folding.folded else None
        snap = self.model.snapshots[name] if group is None else None
        base, selected_style = self._base_styles()
        selected = name == self.selected
        style = selected_style if selected else base
        shown = self._lit(name)
        critical = name in self.critical
        look = LOOKS[
            snap.state
            if snap is not None
            else summarise((self.model.snapshots[i] for i in self.folding.groups[name]), self.model.clock()).state
        ]
        name_w = self.density.name_width(self._longest, width)
        name_style = style + Style(
            bold=selected or critical, color=CRITICAL_COLOUR if critical else None if shown else HIDDEN_COLOUR
        )
        glyph_style = style + Style(color=look.colour if shown else HIDDEN_COLOUR)
        segments = [
            Segment(look.glyph if shown else "·", glyph_style),
            Segment(
                " " + fit(name if group is None else f"▸ {name} ×{len(group)}", name_w).ljust(name_w) + " ", name_style
            ),
        ]
        paints = self._paints(name, view)
        cells = view[2]
        grid = self._grid(view)
        ahead = self._forecast_cells(name, view)
        text, keys = [], []
        for x, paint in enumerate(paints):
            if paint is None and ahead is not None and ahead[0] <= x < ahead[1]:
                text.append(FORECAST_GLYPH)
                keys.append(FORECAST_COLOUR)
            elif paint is None:
                mark = grid.get(x, " ")
                text.append(mark)
                keys.append("now" if mark == "│" else "generation" if mark == GENERATION_GLYPH else "grid")
            else:
                text.append(WAIT_GLYPH if paint.kind is SegmentKind.WAITING else RUN_GLYPH)
                keys.append(LOOKS[paint.state].colour if shown else HIDDEN_COLOUR)
        label = (
            self._duration_label(snap, paints, cells, ahead)
            if self.density is Density.FULL and snap is not None
            else None
        )
        if label is not None:
            at, words = label
            text[at : at + len(words)] = words
            keys[at : at + len(words)] = ["label"] * len(words)
        styles = {
            "grid": style + Style(color=GRID_COLOUR),
            "now": style + Style(color=NOW_COLOUR),
            "generation": style + Style(color=GENERATION_COLOUR),
            "label": style + Style(dim=True),
        }
        for start, end, key in tl.runs(keys):
            cell_style = styles.get(key)
            if cell_style is None:
                cell_style = styles[key] = style + Style(color=key)
            segments.append(Segment("".join(text[start:end]), cell_style))
        return Strip(segments).crop_extend(0, width, style)

    def _duration_label(
        self, snap, paints: list[Paint | None], cells: int, ahead: tuple[int, int] | None
    ) -> tuple[int, str] | None:
        """Where the duration goes in a full row: after the last attempt's bar (and what the forecast says is still
        to come of it), when the room is empty."""
        last = next((x for x in range(cells - 1, -1, -1) if paints[x] is not None), None)
        seconds = snap.duration(self.model.clock())
        if last is None or seconds is None:
            return None
        words = " " + format_duration(seconds)
        at = max(last + 1, ahead[1] if ahead is not None else 0)
        if at + len(words) > cells:
            return None
        return at, words

    def _draw_dense(self, row: int, width: int, view: tuple[float, float, int]) -> Strip:
        """Two tasks a row: the upper half of each cell the first, the lower half the second (▀ ▄ in their
        colours); the selected one marked in the gutter."""
        top_name = self.rows[2 * row]
        bottom_name = self.rows[2 * row + 1] if 2 * row + 1 < len(self.rows) else None
        base, selected_style = self._base_styles()
        selected = self.selected in (top_name, bottom_name)
        style = selected_style if selected else base
        gutter = " "
        if selected:
            gutter = "▀" if self.selected == top_name else "▄"
        segments = [Segment(gutter, style + Style(color="#ffffff", bold=True))]
        upper_colours = self._dense_colours(top_name, view)
        lower_colours = self._dense_colours(bottom_name, view) if bottom_name else [None] * view[2]
        colours = list(zip(upper_colours, lower_colours))
        grid = self._grid(view)
        for start, end, (upper, lower) in tl.runs(colours):
            if upper is None and lower is None:
                segments.append(
                    Segment("".join(grid.get(x, " ") for x in range(start, end)), style + Style(color=GRID_COLOUR))
                )
            elif lower is None:
                segments.append(Segment("▀" * (end - start), style + Style(color=upper)))
            elif upper is None:
                segments.append(Segment("▄" * (end - start), style + Style(color=lower)))
            else:
                segments.append(Segment("▀" * (end - start), Style(color=upper, bgcolor=lower)))
        return Strip(segments).crop_extend(0, width, style)

    def _dense_colours(self, name: str, view: tuple[float, float, int]) -> list[str | None]:
        """Each cell's colour in a dense row: a wait dim blue, an attempt its state's colour (the critical path's
        amber), a hidden task faint. Worked out once per distinct paint (a row has a few), then looked up."""
        paints = self._paints(name, view)
        shown, critical = self._lit(name), name in self.critical
        colour: dict[Paint | None, str | None] = {None: None}
        ahead = self._forecast_cells(name, view)
        if ahead is not None:
            paints = [tl.FORECAST if p is None and ahead[0] <= x < ahead[1] else p for x, p in enumerate(paints)]
            colour[tl.FORECAST] = FORECAST_COLOUR
        for paint in {p for p in paints if p is not None} - colour.keys():
            if not shown:
                colour[paint] = HIDDEN_COLOUR
            elif paint.kind is SegmentKind.WAITING:
                colour[paint] = DENSE_WAIT
            else:
                colour[paint] = CRITICAL_COLOUR if critical else LOOKS[paint.state].colour
        return [colour[p] for p in paints]

    def _lit(self, name: str) -> bool:
        """Drawn in its colours (`RunModel.lit`): a folded group while any of its instances is."""
        if name in self.folding.folded:
            return any(self.model.lit(i) for i in self.folding.groups[name])
        return self.model.lit(name)
