"""A matrix task in the UI, on the shipped path (the run served and viewed through `RemoteRun`): one group tile at
start, unfolded and folded back by keys, `c` on the group kills every instance's tree (checked with psutil), `r`
re-runs the failed instances, and the finder finds an instance by its values."""

from __future__ import annotations

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
        rows = app.log_pane.outer_size.height
        await pilot.press("plus")
        assert "train[lr=0.01,seed=2]" in app.graph.tiles and "train" not in app.graph.tiles
        assert app.canvas.selected == "train[lr=0.01,seed=1]"
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
