"""Laying a DAG out: the stages in order (placement, then routing), and the cache that reads back the layout of a
graph laid out before."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from ...model import layering
from .layout import GraphLayout
from .routing import RoutedGraph
from .shape import DagShape
from .style import LayoutStyle

LAYOUT_FORMAT = 2  # of `GraphLayout.to_data`, for the layout cache
DEFAULT_STYLE = LayoutStyle()


class _Task(Protocol):
    @property
    def depends_on(self) -> Sequence[str]: ...


class Dag(Protocol):
    """What laying out needs of a DAG: a `DagSpec` has it."""

    @property
    def tasks(self) -> Mapping[str, _Task]: ...

    @property
    def topological_order(self) -> Sequence[str]: ...


def layout_dag(dag: Dag, style: LayoutStyle = DEFAULT_STYLE, *, cache_dir: Path | None = None) -> GraphLayout:
    """Lay out a `DagSpec` (anything with `.tasks[name].depends_on` and `.topological_order`). With a `cache_dir`
    (the state dir's cache) the layout of a graph laid out before for the same packing is read back instead: a
    layout is a pure function of the names, the edges and the style, and a DAG of 1,000 tasks takes ~50 ms to lay
    out, a fifth of the app's start-up."""
    return layout_deps(dag_deps(dag), style, cache_dir=cache_dir)


def layout_deps(
    deps: Mapping[str, Sequence[str]], style: LayoutStyle = DEFAULT_STYLE, *, cache_dir: Path | None = None
) -> GraphLayout:
    """As `layout_dag`, for a graph given as name -> dependencies in a topological order (a DAG with its matrix
    groups folded, say)."""
    if cache_dir is None:
        return layout_graph(deps, style)
    from ...model.cache import code_stamp, read_entry, sha1, write_entry

    # The code a layout comes from: this package, and the model's layering rule (stamped with its folder).
    key = sha1(
        repr(
            (
                LAYOUT_FORMAT,
                code_stamp(os.path.dirname(__file__)),
                code_stamp(os.path.dirname(layering.__file__)),
                style.zoom.value,
                style.orientation.name,
                layout_key(deps, style),
                list(deps.items()),
            )
        ).encode()
    ).hexdigest()
    entry = cache_dir / f"layout-{key[:20]}.marshal"
    record = read_entry(entry, key)
    if record is not None:
        try:
            return GraphLayout.from_data(record[1])
        except Exception:  # a record of the right key but not of this shape: lay it out again
            pass
    layout = layout_graph(deps, style)
    write_entry(entry, (key, layout.to_data()))
    return layout


def layout_key(deps: Mapping[str, Sequence[str]], style: LayoutStyle) -> tuple:
    """Which layers a layout for `style` packs, and how, and the width it may wrap into bands at: besides the graph,
    the zoom and the orientation, all a layout depends on (the view only through this), so two styles with the same
    key make the same layout."""
    return DagShape(deps).key(style)


def dag_deps(dag: Dag) -> dict[str, Sequence[str]]:
    return {name: dag.tasks[name].depends_on for name in dag.topological_order}


def layout_graph(deps: Mapping[str, Sequence[str]], style: LayoutStyle = DEFAULT_STYLE) -> GraphLayout:
    """Lay out a DAG given as name -> dependencies, in a topological order (dependencies before dependents)."""
    graph = RoutedGraph(deps, style)
    graph.order()
    graph.place()
    return graph.route()
