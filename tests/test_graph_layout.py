"""The graph layout as text: columns by longest path, edges routed in the gaps, merged fan-in/fan-out, speed."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import pytest

from dags import make_dag
from tuidag.views.layout.build import dag_deps, layout_dag, layout_graph
from tuidag.views.layout.choice import choose_style
from tuidag.views.layout.edges import ARROW
from tuidag.views.layout.shape import DagShape
from tuidag.views.layout.style import LayoutStyle, Orientation, Zoom
from tuidag.views.layout.text import render_text


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
        assert all(b >= a + 4 for a, b in itertools.pairwise(tops)), "tiles of a column overlap or touch"


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
    for deps in (
        _layered(2000, 100, seed=1),
        _layered(2000, 500, seed=2),
        {"root": [], **{f"x{i}": ["root"] for i in range(1998)}, "sink": [f"x{i}" for i in range(1998)]},
        {f"c{i}": [f"c{i - 1}"] if i else [] for i in range(2000)},
    ):
        layout = layout_graph(deps)
        for y in range(min(layout.height, 60)):  # a first screen of edges
            layout.edge_runs(y)
        assert len(layout.tiles) == 2000


def test_layout_does_not_import_textual():
    code = "import sys, tuidag.views.layout.choice, tuidag.views.layout.text; assert 'textual' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_canvas_draws_the_layers_tuidag_graph_lists():
    """`tuidag graph` lists the model's longest-path layers (`DagSpec.depth`); the canvas must draw the same ones,
    packed or not, in either orientation, and weigh its styles by them."""
    deps = _layered(300, 30, seed=5)
    dag = make_dag({name: {"run": "true", "depends_on": d} for name, d in deps.items()})
    assert len(set(dag.depth.values())) > 2
    for style in (
        LayoutStyle(),
        LayoutStyle(Zoom.COMPACT, Orientation.TD, VIEW),
        LayoutStyle(Zoom.DOTS, Orientation.LR, VIEW),
    ):
        assert {name: tile.layer for name, tile in layout_dag(dag, style).tiles.items()} == dag.depth, style
    assert DagShape(dag_deps(dag)).layer == dag.depth


def _layered(n: int, width: int, seed: int) -> dict[str, list[str]]:
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(n)]
    deps: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        layer = i // width
        earlier = names[max(0, layer - 2) * width : layer * width]
        deps[name] = rng.sample(earlier, min(len(earlier), rng.randint(1, 3))) if layer else []
    return deps


def test_a_cached_layout_is_the_same_layout(tmp_path, monkeypatch):
    """The layout of a DAG laid out before is read from the cache; it must draw exactly the same, and a damaged or
    stale entry is laid out again."""
    from tuidag.views.layout import build

    deps = _layered(300, 30, seed=3)
    dag = make_dag({name: {"run": "true", "depends_on": d} for name, d in deps.items()})
    fresh = layout_dag(dag)
    first = layout_dag(dag, cache_dir=tmp_path)
    monkeypatch.setattr(build, "layout_graph", lambda deps, style: pytest.fail("laid out again: the cache missed"))
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


# ------------------------------------------------------------------------------------------ sizes and styles
WIDE = {"setup": [], **{f"w{i:02d}": ["setup"] for i in range(64)}, "merge": [f"w{i:02d}" for i in range(64)]}
CHAIN = {f"step-{i:02d}": [f"step-{i - 1:02d}"] if i else [] for i in range(20)}
VIEW = (156, 23)  # the graph pane of a 160x45 terminal


def test_a_layer_wider_than_the_screen_is_packed_into_sub_columns_with_a_bus():
    layout = layout_graph(WIDE, LayoutStyle(Zoom.COMPACT, Orientation.LR, VIEW))
    assert layout.fits(VIEW)
    workers = [layout.tiles[f"w{i:02d}"] for i in range(64)]
    assert all(t.packed for t in workers) and len({t.x for t in workers}) == 4  # 4 sub-columns of 16
    assert [t.name for t in sorted(workers, key=lambda t: (t.x, t.y))] == [f"w{i:02d}" for i in range(64)]
    assert layout.columns[1] == [f"w{i:02d}" for i in range(64)]  # reading order: down, then the next sub-column
    lines = render_text(layout)
    setup, merge = layout.tiles["setup"], layout.tiles["merge"]
    # one line in (setup ──▶┤ the bracket) and one out (├──▶ merge): a bus, not 64 edges
    assert lines[setup.mid].count(ARROW) == 2
    left = min(t.x for t in workers) - 2
    assert lines[setup.mid][left - 1 : left + 1] == ARROW + "┤" and "├" in lines[merge.mid]
    top = min(t.y for t in workers) - 1
    assert lines[top][left] == "┌" and lines[top + 17][left] == "└"
    assert sum(line.count(ARROW) for line in lines) == 2
    assert "w00" not in layout.has_children  # a packed tile has no exit of its own: its block does


def test_top_down_draws_every_edge_into_the_top_of_its_child():
    deps = _layered(200, 20, seed=3)
    layout = layout_graph(deps, LayoutStyle(Zoom.FULL, Orientation.TD))
    lines = render_text(layout)
    for name, ds in deps.items():
        tile = layout.tiles[name]
        for d in ds:
            assert layout.tiles[d].y + layout.tiles[d].height < tile.y  # dependencies above
        if ds:
            assert lines[tile.y - 1][tile.centre] == "▼", name
    for name in layout.has_children:  # an exit in the middle of the bottom border, and a line below it
        tile = layout.tiles[name]
        assert lines[tile.y + 2][tile.centre] == "┬" and lines[tile.y + 3][tile.centre] in "│├┤┼┴└┘", name


def test_top_down_is_the_left_to_right_layout_turned():
    """The same graph both ways: the same layers and the same order in each; edges meet the same tiles."""
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    lr = layout_graph(deps, LayoutStyle(Zoom.FULL, Orientation.LR))
    td = layout_graph(deps, LayoutStyle(Zoom.FULL, Orientation.TD))
    assert lr.columns == td.columns
    assert "\n".join(render_text(td)) == block("""
            ╭─ a ────────────────╮
            │                    │
            ╰──────────┬─────────╯
                       │
           ┌───────────┴───────────┐
           ▼                       ▼
╭─ b ────────────────╮  ╭─ c ────────────────╮
│                    │  │                    │
╰──────────┬─────────╯  ╰──────────┬─────────╯
           │                       │
           └───────────┬───────────┘
                       ▼
            ╭─ d ────────────────╮
            │                    │
            ╰────────────────────╯
""")


def test_compact_and_dots_tiles_are_one_line_and_one_cell():
    compact = layout_graph(WIDE, LayoutStyle(Zoom.COMPACT, Orientation.LR))
    assert {t.height for t in compact.tiles.values()} == {1}
    assert {t.width for t in compact.tiles.values()} == {len("merge") + 10}  # glyph, name, duration
    dots = layout_graph(WIDE, LayoutStyle(Zoom.DOTS, Orientation.LR, VIEW))
    assert {(t.width, t.height) for t in dots.tiles.values()} == {(1, 1)}
    cells = {(t.x, t.y) for t in dots.tiles.values()}
    assert len(cells) == 66  # one cell each, none shared
    assert dots.fits(VIEW) and dots.width < 30  # 64 workers as a block of dots


def test_dots_draw_one_bus_per_pair_of_layers_and_no_long_edges():
    deps = _layered(2000, 100, seed=1)
    layout = layout_graph(deps, LayoutStyle(Zoom.DOTS, Orientation.TD, VIEW))
    lines = render_text(layout)
    arrows = sum(line.count("▼") for line in lines)
    layers = len(layout.columns)
    assert arrows <= layers - 1  # at most one bus into each layer
    assert layout.width <= VIEW[0]  # rows of dots as wide as the screen, never wider


def test_the_chosen_style_fits_the_screen_when_anything_does():
    assert choose_style({"a": [], "b": ["a"], "c": ["b"]}, VIEW) == LayoutStyle(Zoom.FULL, Orientation.LR, VIEW)
    wide = choose_style(WIDE, VIEW)
    assert layout_graph(WIDE, wide).fits(VIEW) and wide.zoom is not Zoom.DOTS  # 66 names still readable
    big = choose_style(_layered(500, 25, seed=11), VIEW)
    assert big.zoom is Zoom.DOTS and layout_graph(_layered(500, 25, seed=11), big).fits(VIEW)
    # a 20-step chain is far wider than 160 columns in one row: it wraps into bands, full tiles, every step on screen
    chain = choose_style(CHAIN, VIEW)
    assert chain == LayoutStyle(Zoom.FULL, Orientation.LR, VIEW) and layout_graph(CHAIN, chain).fits(VIEW)


def test_a_long_chain_wraps_into_bands_joined_end_to_start_like_lines_of_text():
    layout = layout_graph(CHAIN, LayoutStyle(Zoom.FULL, Orientation.LR, VIEW))
    lines = render_text(layout)
    tiles = layout.tiles
    rows = sorted({tile.y for tile in tiles.values()})
    assert len(rows) == 4 and layout.width <= VIEW[0]  # 5 steps a band
    for name, tile in tiles.items():
        assert f"─ {name} ─" in lines[tile.y][tile.x : tile.x + tile.width]  # every name whole
    for i in range(1, 20):
        parent, child = tiles[f"step-{i - 1:02d}"], tiles[f"step-{i:02d}"]
        assert lines[child.mid][child.x - 1] == "▶"  # every step has its edge in
        if child.y != parent.y:  # a band's end: out right, down, back left to the margin, down and in
            exit_x = parent.x + parent.width + 1
            assert lines[parent.mid][parent.x + parent.width : exit_x + 1] == "─┐"
            turn = parent.y + parent.height
            assert lines[turn][0] == "┌" and lines[turn][exit_x] == "┘" and set(lines[turn][1:exit_x]) == {"─"}
            assert lines[child.mid][:2] == "└▶" and child.y == turn + 1


def test_a_band_never_ends_where_an_edge_passes_over_the_cut():
    """Only after a layer of one task whose edges all reach the next layer: anywhere else two lines (or a line that
    skips a layer) would have to wrap."""
    deps = {}
    for name, parents in CHAIN.items():  # late (layer 3) skips layer 4
        deps[name] = [*parents, "late"] if name == "step-05" else parents
        if name == "step-02":
            deps["late"] = ["step-02"]
    layout = layout_graph(deps, LayoutStyle(Zoom.FULL, Orientation.LR, VIEW))
    tiles = layout.tiles
    wrapped = [
        (parent, child) for child, parents in deps.items() for parent in parents if tiles[child].x < tiles[parent].x
    ]  # the child starts the next band
    assert wrapped and layout.width <= VIEW[0]
    for parent, child in wrapped:
        layer = tiles[parent].layer
        assert layer not in (3, 4) and layout.columns[layer] == [parent], (parent, child)


def test_a_graph_that_fits_is_never_wrapped_and_a_resize_of_it_keeps_its_layout():
    short = {f"s{i}": [f"s{i - 1}"] if i else [] for i in range(3)}
    layout = layout_graph(short, LayoutStyle(Zoom.FULL, Orientation.LR, VIEW))
    assert len({tile.y for tile in layout.tiles.values()}) == 1 and layout.tiles["s0"].x == 0
    shape = DagShape(short)
    assert shape.key(LayoutStyle(Zoom.FULL, Orientation.LR, VIEW)) == shape.key(
        LayoutStyle(Zoom.FULL, Orientation.LR, (VIEW[0] + 7, VIEW[1]))
    )


def test_every_style_of_big_dags_lays_out_and_keeps_tiles_apart():
    for deps in (_layered(2000, 100, seed=1), WIDE, CHAIN):
        for zoom in Zoom:
            for orientation in Orientation:
                layout = layout_graph(deps, LayoutStyle(zoom, orientation, VIEW))
                seen: set[tuple[int, int]] = set()
                for tile in layout.tiles.values():
                    cells = {
                        (x, y) for x in range(tile.x, tile.x + tile.width) for y in range(tile.y, tile.y + tile.height)
                    }
                    assert not cells & seen, (zoom, orientation, tile)
                    seen |= cells
                    assert tile.x + tile.width <= layout.width and tile.y + tile.height <= layout.height
                assert sorted(n for c in layout.columns for n in c) == sorted(deps)


def test_a_cached_layout_is_kept_per_zoom_orientation_and_packing(tmp_path):
    dag = make_dag({name: {"run": "true", "depends_on": d} for name, d in WIDE.items()})
    styles = [LayoutStyle(z, o, VIEW) for z in Zoom for o in Orientation]
    for style in styles:
        assert render_text(layout_dag(dag, style, cache_dir=tmp_path)) == render_text(layout_dag(dag, style))
    assert len(list(tmp_path.iterdir())) == len(styles)
    # a view that packs the same way is the same layout: nothing new is cached
    layout_dag(dag, LayoutStyle(Zoom.COMPACT, Orientation.LR, (VIEW[0] + 1, VIEW[1])), cache_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == len(styles)
    cached = layout_dag(dag, styles[3], cache_dir=tmp_path)
    assert cached.style.zoom is styles[3].zoom and cached.orientation is styles[3].orientation


def test_a_packed_layer_no_edge_meets_has_no_bus():
    layout = layout_graph({f"t{i:02d}": [] for i in range(40)}, LayoutStyle(Zoom.COMPACT, Orientation.LR, VIEW))
    assert len({t.x for t in layout.tiles.values()}) > 1  # packed
    assert not any(ch in line for line in render_text(layout) for ch in "┌┐└┘│┤├▶")
