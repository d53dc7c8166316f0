"""A matrix task in the UI, on the shipped path (the run served and viewed through `RemoteRun`): one group tile at
start, unfolded and folded back by keys (which stay the log pane's elsewhere), `c` on the group kills every
instance's tree (checked with psutil), `r` re-runs only the failed instances, the finder finds an instance by its
values, the list and the timeline show the group as one row folded with the same keys, the tile repaints a few times
a second at most, and is highlighted when an instance is on the critical path."""

from __future__ import annotations

import time
from pathlib import Path

from pilot_helpers import open_app, screen_text, ui_states, until

from dags import alive, read_pids
from tuidag.launch import RunSession
from tuidag.model.loader import load_dag
from tuidag.ui.screens.confirm import ConfirmScreen

LONG = 'echo $$ >> "$TUIDAG_TASK.pids"; sleep 30 & echo $! >> "$TUIDAG_TASK.pids"; wait'


def sweep_session(
    tmp_path: Path, train_run: str, train_matrix: str = "{lr: [0.01, 0.1], seed: [1, 2, 3]}"
) -> RunSession:
    """prepare -> train (a matrix) -> report, from YAML as a user writes it."""
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"""name: sweep
max_parallel: 8
kill_grace: 0.5
tasks:
  prepare: {{run: "true"}}
  train:
    depends_on: prepare
    matrix: {train_matrix}
    run: '{train_run}'
  report:
    depends_on: train
    run: "true"
"""
    )
    dag = load_dag(path)
    return RunSession.create(dag, tmp_path / "state")


async def test_a_matrix_starts_as_one_group_tile_that_plus_unfolds_and_minus_folds(tmp_path):
    session = sweep_session(tmp_path, "true")
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert set(app.graph.tiles) == {"prepare", "train", "report"}
        assert "train ×6" in screen_text(app)
        await until(pilot, lambda: "6✔" in screen_text(app), what="the group tile counts 6 done")
        app.canvas.select("train")
        await pilot.pause()
        assert "↵/+ unfold" in str(app.canvas.border_subtitle)  # the graph's border says how
        rows = app.log_pane.outer_size.height
        await pilot.press("plus")
        assert "train[lr=0.01,seed=2]" in app.graph.tiles and "train" not in app.graph.tiles
        assert app.canvas.selected == "train[lr=0.01,seed=1]"
        assert "- fold the group" in str(app.canvas.border_subtitle)
        await pilot.press("minus")
        await pilot.pause()
        assert app.log_pane.outer_size.height == rows  # + and - folded and unfolded, they didn't size the log pane
        assert "train" in app.graph.tiles and "train[lr=0.01,seed=2]" not in app.graph.tiles
        assert app.canvas.selected == "train"
        await pilot.press("enter")
        assert "train[lr=0.1,seed=3]" in app.graph.tiles


async def test_plus_and_minus_still_size_the_log_pane_on_a_plain_task(tmp_path):
    session = sweep_session(tmp_path, "true")
    async with open_app(session) as (app, pilot):
        app.canvas.select("prepare")
        await pilot.pause()
        rows = app.log_pane.outer_size.height
        await pilot.press("plus")
        await until(pilot, lambda: app.log_pane.outer_size.height > rows, what="the log pane grew")
        assert "train" in app.graph.tiles


async def test_c_on_a_group_cancels_every_unfinished_instance_and_kills_their_trees(tmp_path):
    session = sweep_session(tmp_path, LONG, "{seed: [1, 2, 3]}")
    async with open_app(session) as (app, pilot):
        pids = [session.dag.workdir / f"train[seed={s}].pids" for s in (1, 2, 3)]
        await until(
            pilot, lambda: all(p.exists() and len(p.read_text().split()) >= 2 for p in pids), what="every tree started"
        )
        await until(pilot, lambda: all(ui_states(app)[f"train[seed={s}]"] == "RUNNING" for s in (1, 2, 3)))
        procs = [proc for p in pids for proc in read_pids(p)]
        app.canvas.select("train")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        assert "3 unfinished instances" in str(app.screen.question)
        await pilot.press("y")
        await until(
            pilot,
            lambda: all(ui_states(app)[f"train[seed={s}]"] == "CANCELLED" for s in (1, 2, 3)),
            what="every instance cancelled",
        )
        await until(pilot, lambda: not any(alive(pid, ct) for pid, ct in procs), what="every tree gone")
        assert ui_states(app)["report"] == "CANCELLED"


async def test_r_on_a_group_reruns_only_its_failed_instances(tmp_path):
    session = sweep_session(tmp_path, '[ "$TUIDAG_MATRIX_SEED" != 2 ] || [ -e ok ]', "{seed: [1, 2, 3]}")
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert ui_states(app)["train[seed=2]"] == "FAILED" and ui_states(app)["report"] == "SKIPPED"
        # The first failure is selected on its own: its group's tile (still folded), and the failed instance's log.
        assert app.selected_task == "train" and "train" in app.graph.tiles
        await until(pilot, lambda: "train\\[seed=2].log" in str(app.log_pane.border_title), what="the failure's log")
        (tmp_path / "ok").touch()
        await pilot.press("r")
        await until(pilot, lambda: ui_states(app)["report"] == "SUCCEEDED", what="the re-run went through")
        attempts = {name: snap.attempt for name, snap in app.model.snapshots.items() if name.startswith("train")}
        assert attempts == {"train[seed=1]": 1, "train[seed=2]": 2, "train[seed=3]": 1}


async def test_the_finder_finds_an_instance_by_its_values_and_shows_it_unfolded(tmp_path):
    session = sweep_session(tmp_path, "true")
    async with open_app(session, start=False) as (app, pilot):
        assert "train" in app.graph.tiles
        await pilot.press("colon", *"0.1,seed=3")
        assert app.screen.found.matches[0].name == "train[lr=0.1,seed=3]"
        await pilot.press("enter")
        assert app.selected_task == "train[lr=0.1,seed=3]"
        assert "train[lr=0.1,seed=3]" in app.graph.tiles and "train" not in app.graph.tiles
        await until(pilot, lambda: "train\\[lr=0.1,seed=3].log" in str(app.log_pane.border_title), what="its log")


async def test_the_group_tile_repaints_a_few_times_a_second_however_fast_its_instances_change(tmp_path):
    """Instances of a big sweep end by hundreds a second: each batch repainting the group's tile drew it 20 times a
    second; the tile is drawn again at most every GROUP_REPAINT seconds."""
    from tuidag.ui.widgets.graph.canvas import GROUP_REPAINT

    session = sweep_session(tmp_path, "true", "{i: [" + ", ".join(str(i) for i in range(40)) + "]}")
    async with open_app(session, start=False) as (app, pilot):
        drawn: list[str] = []
        render = app.canvas._render_tile
        app.canvas._render_tile = lambda name: (drawn.append(name), render(name))[1]  # type: ignore[method-assign]
        start = time.monotonic()
        for i in range(40):  # an instance's change in each of 40 batches, one every frame
            app.canvas.refresh_tasks([f"train[i={i}]"])
            await pilot.pause(0.01)
        await pilot.pause(GROUP_REPAINT * 2)
        elapsed = time.monotonic() - start
        assert 1 <= drawn.count("train") <= elapsed / GROUP_REPAINT + 2


async def test_the_list_shows_a_group_as_one_row_that_the_same_keys_unfold_and_fold(tmp_path):
    session = sweep_session(tmp_path, "true")
    async with open_app(session, start=False) as (app, pilot):
        await pilot.press("L")
        assert app.table.rows == ["prepare", "train", "report"]
        assert "▸ train ×6" in screen_text(app) and "0 of 6 done, 6 pending" in screen_text(app)
        await pilot.press("down")
        assert app.selected_task == "train" and app.canvas.selected == "train"
        await pilot.press("plus")
        assert app.table.rows[1:3] == ["train[lr=0.01,seed=1]", "train[lr=0.01,seed=2]"] and len(app.table.rows) == 8
        assert app.selected_task == "train[lr=0.01,seed=1]" and "train" not in app.graph.tiles  # the graph unfolded too
        await pilot.press("down", "minus")
        assert app.table.rows == ["prepare", "train", "report"] and app.selected_task == "train"
        assert "train" in app.graph.tiles


async def test_the_timeline_shows_a_group_as_one_row_of_its_instances_bars_folded_with_the_same_keys(tmp_path):
    session = sweep_session(tmp_path, "sleep 0.2", "{seed: [1, 2, 3]}")
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        await pilot.press("t")
        assert app.timeline.rows == ["prepare", "train", "report"]
        await until(pilot, lambda: "▸ train ×3" in screen_text(app), what="the group's row")
        row = next(line for line in screen_text(app).splitlines() if "▸ train ×3" in line)
        assert "█" in row.partition("▸ train ×3")[2]  # the instances' attempts, merged into one bar
        await pilot.press("down")
        assert app.selected_task == "train"
        await pilot.press("plus")
        assert app.timeline.rows == ["prepare", "train[seed=1]", "train[seed=2]", "train[seed=3]", "report"]
        assert app.selected_task == "train[seed=1]"
        await pilot.press("minus")
        assert app.timeline.rows == ["prepare", "train", "report"] and app.selected_task == "train"
        assert "train" in app.graph.tiles  # one folding: the graph's group folded too


async def test_a_group_with_an_instance_on_the_critical_path_has_its_name_highlighted(tmp_path):
    from tuidag.ui.state_style import CRITICAL_COLOUR

    session = sweep_session(tmp_path, "true")
    async with open_app(session, start=False) as (app, pilot):

        def title_colours() -> set[str]:
            return {seg.style.color.name for seg in app.canvas._lines_of("train")[0] if seg.style and seg.style.color}

        assert CRITICAL_COLOUR not in title_colours()
        app.canvas.set_critical(["prepare", "train[lr=0.1,seed=2]", "report"])
        await until(pilot, lambda: CRITICAL_COLOUR in title_colours(), what="the group's name highlighted")
