"""A folded matrix group's tile: its name and number of instances, one bar of their states (done, failed,
stopped, running, queued, each in its colour and in proportion), the counts, and the best and worst durations of
those done. A box of three lines, one line, or a dot, by zoom level, as a task's tile is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ....model.durations import format_duration
from ....model.state import TaskState
from ....views.group_progress import BAR_PARTS, GroupSummary
from ....views.layout.style import Orientation, Zoom
from ...state_style import CRITICAL_COLOUR, LOOKS
from ...text_cells import fit
from .tiles import _HEAVY, _LIGHT, SELECTED_BG

if TYPE_CHECKING:
    from .tiles import TileDrawing

S = TaskState
PART_LOOK = {"done": S.SUCCEEDED, "failed": S.FAILED, "stopped": S.CANCELLED, "running": S.RUNNING, "queued": S.QUEUED}
QUEUED_BAR = "#5a5a78"  # the part of the bar still to run


def draw_group(canvas: TileDrawing, name: str, zoom: Zoom) -> list[Strip]:
    if zoom is Zoom.DOTS:
        return [Strip([canvas._dot(name)], 1)]
    summary = canvas.group_summary(name)
    graph = canvas._drawn_layout
    width = graph.tiles[name].width
    selected = name == canvas.selected
    base = canvas._styles()[0] + (Style(bgcolor=SELECTED_BG) if selected else Style())
    look = LOOKS[summary.state]
    label = f"{name} ×{summary.total}"
    if zoom is Zoom.COMPACT:
        right = f"{summary.parts['done']}/{summary.total}"
        title = fit(label, width - 4 - len(right))
        gap = width - 3 - len(title) - len(right)
        return [
            Strip(
                [
                    Segment(look.glyph, base + Style(color=look.colour, bold=selected)),
                    Segment(" " + title, base + Style(bold=True)),
                    Segment(" " * max(1, gap) + right, base + Style(dim=not selected)),
                ],
                width,
            ).crop_extend(0, width, base)
        ]
    box = _HEAVY if selected else _LIGHT
    border = base + Style(color=look.colour, bold=selected)
    inner = width - 2
    exits = name in graph.has_children
    down = exits and graph.orientation is Orientation.TD
    title = fit(label, inner - 4)
    critical = bool(canvas.critical) and any(i in canvas.critical for i in canvas.folding.groups[name])
    top = [
        Segment(box["tl"] + box["h"] + " ", border),
        Segment(title, base + Style(bold=True, color=CRITICAL_COLOUR if critical else None)),
        Segment(" " + box["h"] * (inner - 3 - len(title)) + box["tr"], border),
    ]
    middle = [
        Segment(box["v"], border),
        Segment(" ", base),
        *bar(summary, inner - 2, base),
        Segment(" ", base),
        Segment(box["out"] if exits and not down else box["v"], border),
    ]
    detail = fit(details(summary, inner - 4), inner - 4)
    bottom = [Segment(box["bl"] + box["h"], border)]
    if detail:
        bottom += [Segment(" ", border), Segment(detail, base), Segment(" ", border)]
    bottom.append(Segment(box["h"] * (inner - 1 - (len(detail) + 2 if detail else 0)) + box["br"], border))
    return [Strip(top, width), Strip(middle, width), Strip(bottom, width)]


def bar(summary: GroupSummary, cells: int, base: Style) -> list[Segment]:
    """One bar `cells` wide, a part per state in proportion to its instances (a part with any gets a cell)."""
    total = max(1, summary.total)
    counts = [(part, summary.parts[part]) for part in BAR_PARTS if summary.parts[part]]
    sizes = [max(1, round(n * cells / total)) for _, n in counts]
    while sum(sizes) > cells and max(sizes, default=0) > 1:  # rounding up the small parts took cells: the biggest pays
        sizes[sizes.index(max(sizes))] -= 1
    if sizes and sum(sizes) < cells:
        sizes[-1] += cells - sum(sizes)
    segments = []
    for (part, _), size in zip(counts, sizes):
        colour = QUEUED_BAR if part == "queued" else LOOKS[PART_LOOK[part]].colour
        # Blocks, not lines: a line in the running colour read as part of the selected tile's heavy border.
        segments.append(Segment(("░" if part == "queued" else "█") * size, base + Style(color=colour)))
    return segments


def details(summary: GroupSummary, width: int) -> str:
    """`12✔ 1✘ 3●  0.8s…2.1s`: the instances per state, then the best and worst durations where they fit."""
    counts = " ".join(f"{n}{LOOKS[PART_LOOK[part]].glyph}" for part in BAR_PARTS if (n := summary.parts[part]))
    if summary.best is None or summary.worst is None:
        return counts
    times = f"{format_duration(summary.best)}…{format_duration(summary.worst)}"
    both = f"{counts}  {times}"
    return both if len(both) <= width else counts
