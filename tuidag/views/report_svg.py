"""The report's two drawings as inline SVG: the Gantt chart (a row per task, a bar per attempt, waits hatched, the
critical path outlined) and the graph (tasks placed by views/layout, edges as curves).

Built as strings from `report_facts` data, in one pass each, so a run of 5,000 tasks draws in a fraction of a second.
Every name is escaped with `esc`: it is the run's text. Classes carry the meaning (`attempt`, `wait`, `crit`,
`s-FAILED`), and the report's stylesheet the colours, so a test can count bars by class.
"""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Iterable
from typing import Any

from .layout.build import layout_graph
from .layout.style import LayoutStyle, Zoom

_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def esc(text: Any) -> str:
    """Text from the run, safe in HTML and SVG text and attributes: markup escaped, control characters and lone
    surrogates (which JSON lets through, and UTF-8 cannot write) shown as U+FFFD."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=True)


def clock(seconds: float, fine: bool = False) -> str:
    """An axis label: 0s, 45s, 1m30s, 2h, 1h15m; `fine`: tenths under a minute (0.5s), for a sub-second axis."""
    if fine and seconds < 60:
        return f"{seconds:.1f}s"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"


_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def tick_step(span: float, ticks: int = 8) -> float:
    """The smallest step of the clock's own units (1, 2, 5, 10, 15, 30 s, 1, 2, 5... min, 1, 2, 3, 6 h...) that
    gives at most `ticks` ticks over `span`."""
    for step in _STEPS:
        if span / step <= ticks:
            return step
    return _STEPS[-1] * (span // (_STEPS[-1] * ticks) + 1)


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def gantt_svg(facts: dict[str, Any]) -> str:
    run = facts["run"]
    t0, span = run["started_at"], max(run["duration"], 1e-3)
    t1 = t0 + span
    critical = {step["task"] for step in facts["critical_path"]}
    rows: dict[str, list[dict[str, Any]]] = {}
    for seg in facts["segments"]:
        rows.setdefault(seg["task"], []).append(seg)
    index = {task["name"]: i for i, task in enumerate(facts["tasks"])}
    order = sorted(rows, key=lambda name: (rows[name][0]["start"], index.get(name, 0)))
    count = len(order)
    row_h = 18 if count <= 300 else 10 if count <= 1500 else 4
    labels = row_h >= 10
    label_w = min(240, 7 * max((len(n) for n in order), default=0) + 16) if labels else 0
    plot_w, top = 960, 24
    width, height = label_w + plot_w + 10, top + count * row_h + 4
    scale = plot_w / span

    def x(t: float) -> float:
        return label_w + (min(max(t, t0), t1) - t0) * scale

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="gantt" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="Gantt chart: a bar per attempt">',
        '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#eef0f3"/>'
        '<line x1="0" y1="0" x2="0" y2="6" stroke="#9aa3ad" stroke-width="2"/></pattern></defs>',
    ]
    step = tick_step(span)
    tick = 0.0
    while tick <= span + 1e-9:
        tx = _num(label_w + tick * scale)
        out.append(
            f'<line class="tick" x1="{tx}" y1="{top - 4}" x2="{tx}" y2="{height}"/>'
            f'<text class="axis" x="{tx}" y="{top - 8}">+{clock(tick, step < 1)}</text>'
        )
        tick += step
    bar_h, wait_h = max(2, row_h - 4), max(1, (row_h - 4) // 2)
    for i, name in enumerate(order):
        y = top + i * row_h
        crit = " crit" if name in critical else ""
        if labels:
            out.append(f'<text class="label{crit}" x="{label_w - 6}" y="{y + row_h - 5}">{esc(name)}</text>')
        for seg in rows[name]:
            end = seg["end"] if seg["end"] is not None else t1
            left = x(seg["start"])
            w = _num(max(1.0, x(end) - left))
            if seg["kind"] == "running":
                state = seg["outcome"] or "RUNNING"
                title = f"{name} attempt {seg['attempt']}: {clock(end - seg['start'])} {state.lower()}"
                out.append(
                    f'<rect class="attempt s-{state}{crit}" x="{_num(left)}" y="{y + 2}" width="{w}" '
                    f'height="{bar_h}"><title>{esc(title)}</title></rect>'
                )
            else:
                title = f"{name} waiting {clock(end - seg['start'])}"
                out.append(
                    f'<rect class="wait" x="{_num(left)}" y="{y + 2 + (bar_h - wait_h) // 2}" width="{w}" '
                    f'height="{wait_h}"><title>{esc(title)}</title></rect>'
                )
    out.append("</svg>")
    return "".join(out)


_NODE_H, _ROW, _GAP, _CHAR = 16, 22, 56, 7


def graph_svg(facts: dict[str, Any]) -> str:
    """The DAG left to right, in the graph layout's layers and order (its crossing reduction and placement); the
    critical path's tasks and edges drawn heavier."""
    tasks = facts["tasks"]
    if not tasks:
        return ""
    deps = {task["name"]: task["depends_on"] for task in tasks}
    layout = layout_graph(deps, LayoutStyle(zoom=Zoom.COMPACT))
    longest = max(len(name) for name in deps)
    node_w = max(60, min(220, _CHAR * longest + 14))
    chars = (node_w - 12) // _CHAR
    tiles = layout.tiles
    layers = 1 + max(tile.layer for tile in tiles.values())
    width = layers * (node_w + _GAP) - _GAP + 8
    height = (1 + max(tile.y for tile in tiles.values())) * _ROW + 8

    def left(name: str) -> float:
        return 4 + tiles[name].layer * (node_w + _GAP)

    def mid(name: str) -> float:
        return 4 + tiles[name].y * _ROW + _NODE_H / 2

    path = [step["task"] for step in facts["critical_path"]]
    crit_edges = set(itertools.pairwise(path))
    plain: list[str] = []
    heavy: list[str] = []
    for child, parents in deps.items():
        x2, y2 = left(child), mid(child)
        for parent in parents:
            x1, y1 = left(parent) + node_w, mid(parent)
            bend = (x2 - x1) / 2
            (heavy if (parent, child) in crit_edges else plain).append(
                f"M{_num(x1)} {_num(y1)}C{_num(x1 + bend)} {_num(y1)} {_num(x2 - bend)} {_num(y2)} "
                f"{_num(x2)} {_num(y2)}"
            )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="the DAG">'
    ]
    out.extend(_edge_paths(plain, "edge"))
    out.extend(_edge_paths(heavy, "edge crit"))
    critical = set(path)
    state = {task["name"]: task["state"] for task in tasks}
    for name, tile in tiles.items():
        shown = name if len(name) <= chars else name[: chars - 1] + "\u2026"
        crit = " crit" if name in critical else ""
        out.append(
            f'<g class="node s-{state[name]}{crit}"><title>{esc(name)}: {state[name].lower()}</title>'
            f'<rect x="{_num(left(name))}" y="{4 + tile.y * _ROW}" width="{node_w}" height="{_NODE_H}" '
            f'rx="3"/><text x="{_num(left(name) + 6)}" y="{4 + tile.y * _ROW + 12}">{esc(shown)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _edge_paths(parts: list[str], cls: str) -> Iterable[str]:
    """Edges as few path elements (one per thousand edges), not one each: far less markup on a big DAG."""
    for i in range(0, len(parts), 1000):
        yield f'<path class="{cls}" d="{"".join(parts[i : i + 1000])}"/>'
