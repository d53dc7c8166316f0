"""The style a run starts in: the most detailed zoom and the orientation at which the DAG fits the screen."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from .build import layout_graph
from .layout import GraphLayout
from .shape import DagShape
from .style import DOTS_MIN_TASKS, LayoutStyle, Orientation, Zoom


def choose_style(
    deps: Mapping[str, Sequence[str]],
    view: tuple[int, int],
    shape: DagShape | None = None,
    lay_out: Callable[[LayoutStyle], GraphLayout] | None = None,
) -> LayoutStyle:
    """The style a run starts in on a canvas of `view` (columns, rows): the most detailed zoom at which the whole DAG
    fits, in the orientation that fits (left to right first). Thousands of tasks that fit no other way are dots. If
    nothing fits, of the styles that need no sideways scrolling (a deep chain reads top down) the one with the fewest
    screens to scroll through, the more detailed of two about as long; else compact.

    A DAG of hundreds of tasks or more is not laid out four ways to choose: sizes are estimated from its layers, a few
    milliseconds on 5,000 tasks where a layout takes a few hundred. `lay_out(style)`, if given, is how layouts are
    made (the canvas passes the one that keeps them, so the chosen one is not laid out again)."""
    shape = shape or DagShape(deps)
    lay_out = lay_out or partial(layout_graph, deps)
    detailed = [LayoutStyle(z, o, view) for z in (Zoom.FULL, Zoom.COMPACT) for o in Orientation]
    if len(deps) < DOTS_MIN_TASKS:  # small enough to lay out each way (a few ms): exact, tracks included
        sizes = {style: (layout.width, layout.height) for style in detailed for layout in [lay_out(style)]}
    else:
        sizes = {style: shape.size(style) for style in detailed}
    for style in detailed:
        if _within(sizes[style], view):
            return style
    if len(deps) >= DOTS_MIN_TASKS:
        dots = [LayoutStyle(Zoom.DOTS, o, view) for o in Orientation]
        return min(dots, key=lambda s: _overflow(shape.size(s), view))
    upright = [style for style in detailed if sizes[style][0] <= view[0]]  # no sideways scrolling
    if upright:  # the fewest screens to scroll through; the more detailed of two about as long
        fewest = min(_overflow(sizes[s], view) for s in upright)
        return next(s for s in upright if _overflow(sizes[s], view) <= fewest * 1.25)
    return min(detailed[2:], key=lambda s: _overflow(sizes[s], view))


def _within(size: tuple[int, int], view: tuple[int, int]) -> bool:
    return size[0] <= view[0] and size[1] <= view[1]


def _overflow(size: tuple[int, int], view: tuple[int, int]) -> float:
    """How many screens the layout needs (1 = fits)."""
    return max(1.0, size[0] / max(1, view[0])) * max(1.0, size[1] / max(1, view[1]))
