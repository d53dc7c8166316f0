"""The graph layout as text: columns by longest path, edges routed in the gaps, merged fan-in/fan-out, speed."""
from __future__ import annotations

import random
import subprocess
import sys

import pytest

from dags import make_dag
from tuidag.views.graph_layout import ARROW, layout_dag, layout_graph, render_text


def text(deps: dict) -> str:
    return "\n".join(render_text(layout_graph(deps)))


def block(s: str) -> str:
    return "\n".join(line.rstrip() for line in s.strip("\n").splitlines())


def test_chain():
    assert text({"a": [], "b": ["a"], "c": ["b"]}) == block("""
╭─ a ────────────────╮      ╭─ b ────────────────╮      ╭─ c ────────────────╮
│                    ├─────▶│                    ├─────▶│                    │
╰────────────────────╯      ╰────────────────────╯      ╰────────────────────╯
""")


def test_diamond_centres_the_ends_and_merges_fan_in():
    assert text({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}) == block("""
                            ╭─ b ────────────────╮
                        ┌──▶│                    ├──┐
╭─ a ────────────────╮  │   ╰────────────────────╯  │   ╭─ d ────────────────╮
│                    ├──┤                           ├──▶│                    │
╰────────────────────╯  │   ╭─ c ────────────────╮  │   ╰────────────────────╯
                        └──▶│                    ├──┘
                            ╰────────────────────╯
""")


def test_fan_out_and_fan_in_share_one_trunk_each():
    deps = {"src": [], "x1": ["src"], "x2": ["src"], "x3": ["src"], "sink": ["x1", "x2", "x3"]}
    assert text(deps) == block("""
                            ╭─ x1 ───────────────╮
                        ┌──▶│                    ├──┐
                        │   ╰────────────────────╯  │
                        │                           │
╭─ src ──────────────╮  │   ╭─ x2 ───────────────╮  │   ╭─ sink ─────────────╮
│                    ├──┼──▶│                    ├──┼──▶│                    │
╰────────────────────╯  │   ╰────────────────────╯  │   ╰────────────────────╯
                        │                           │
                        │   ╭─ x3 ───────────────╮  │
                        └──▶│                    ├──┘
                            ╰────────────────────╯
""")


def test_long_edge_passes_through_the_skipped_column():
    assert text({"a": [], "b": ["a"], "c": ["b"], "d": ["a", "c"]}) == block("""
                            ╭─ b ────────────────╮      ╭─ c ────────────────╮
╭─ a ────────────────╮  ┌──▶│                    ├─────▶│                    ├──┐   ╭─ d ────────────────╮
│                    ├──┤   ╰────────────────────╯      ╰────────────────────╯  ├──▶│                    │
╰────────────────────╯  │                                                       │   ╰────────────────────╯
                        └───────────────────────────────────────────────────────┘
""")


def test_independent_chains_stack_and_long_names_are_cut():
    name = "a_really_long_task_name_that_does_not_fit"
    lines = render_text(layout_graph({name: [], "b": [], "c": [name], "d": ["b"]}))
    assert lines[0].startswith("╭─ a_really_long_task_name_t… ─╮")  # tiles stop growing at 32 columns
    assert lines[4].startswith("╭─ b ")


def test_columns_follow_longest_path_and_tiles_never_overlap():
    deps = _layered(300, 30, seed=7)
    layout = layout_graph(deps)
    depth: dict[str, int] = {}
    for name, ds in deps.items():
        depth[name] = 1 + max(depth[d] for d in ds) if ds else 0
    for name, tile in layout.tiles.items():
        assert tile.layer == depth[name]
        assert name in layout.columns[tile.layer]
        for d in deps[name]:
            assert layout.tiles[d].x + layout.tiles[d].width < tile.x
    for column in layout.columns:
        tops = [layout.tiles[n].y for n in column]
        assert all(b >= a + 4 for a, b in zip(tops, tops[1:])), "tiles of a column overlap or touch"


def test_every_edge_ends_in_an_arrow_at_its_child():
    deps = _layered(200, 20, seed=3)
    layout = layout_graph(deps)
    for name, ds in deps.items():
        if ds:
            tile = layout.tiles[name]
            line = dict(layout.edge_runs(tile.mid))
            ends = {x + len(t) - 1: t[-1] for x, t in line.items()}
            assert ends.get(tile.x - 1) == ARROW, name


def test_tile_at_and_layout_of_a_dagspec():
    dag = make_dag({"a": "true", "b": {"run": "true", "depends_on": ["a"]}})
    layout = layout_dag(dag)
    a, b = layout.tiles["a"], layout.tiles["b"]
    assert layout.tile_at(a.x, a.y) == "a" and layout.tile_at(b.x + 5, b.mid) == "b"
    assert layout.tile_at(a.x + a.width, a.mid) is None  # the gap
    assert layout.tile_at(0, 99) is None


def test_two_thousand_tasks_lay_out():
    """Shapes that stress the layout (wide layers, a 1,998-way fan, a long chain); its speed is measured by
    benchmarks/ui_bench.py, not here."""
    for deps in (_layered(2000, 100, seed=1), _layered(2000, 500, seed=2),
                 {"root": [], **{f"x{i}": ["root"] for i in range(1998)}, "sink": [f"x{i}" for i in range(1998)]},
                 {f"c{i}": [f"c{i - 1}"] if i else [] for i in range(2000)}):
        layout = layout_graph(deps)
        for y in range(min(layout.height, 60)):  # a first screen of edges
            layout.edge_runs(y)
        assert len(layout.tiles) == 2000


def test_layout_does_not_import_textual():
    code = "import sys, tuidag.views.graph_layout; assert 'textual' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def _layered(n: int, width: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(n)]
    deps: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        layer = i // width
        earlier = names[max(0, layer - 2) * width:layer * width]
        deps[name] = rng.sample(earlier, min(len(earlier), rng.randint(1, 3))) if layer else []
    return deps


def test_a_cached_layout_is_the_same_layout(tmp_path, monkeypatch):
    """The layout of a DAG laid out before is read from the cache; it must draw exactly the same, and a damaged or
    stale entry is laid out again."""
    from tuidag.views import graph_layout

    deps = _layered(300, 30, seed=3)
    dag = make_dag({name: {"run": "true", "depends_on": d} for name, d in deps.items()})
    fresh = layout_dag(dag)
    first = layout_dag(dag, cache_dir=tmp_path)
    monkeypatch.setattr(graph_layout, "layout_graph", lambda deps, style: pytest.fail("laid out again: the cache missed"))
    cached = layout_dag(dag, cache_dir=tmp_path)
    for layout in (first, cached):
        assert render_text(layout) == render_text(fresh)
        assert layout.tiles == fresh.tiles and layout.columns == fresh.columns
        assert layout.has_children == fresh.has_children and layout.line_tiles == fresh.line_tiles
    monkeypatch.undo()
    (entry,) = tmp_path.iterdir()
    entry.write_bytes(entry.read_bytes()[:100])
    assert render_text(layout_dag(dag, cache_dir=tmp_path)) == render_text(fresh)
    other = make_dag({"a": "true", "b": {"run": "true", "depends_on": ["a"]}})
    assert render_text(layout_dag(other, cache_dir=tmp_path)) == render_text(layout_dag(other))
