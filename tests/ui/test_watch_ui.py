"""Watch mode in the UI (Pilot, the app on a real engine through its control socket, as `tuidag run` shows it): the
header says the latest generation and what triggered it, the timeline marks where each began; an edit of the DAG
file grows the graph (a removed task stays, cancelled) or, with errors, is said until fixed; `q` (then Stop) ends
watch mode with nothing left running."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
from pilot_helpers import open_app, screen_text, until

from dags import alive, read_pids
from tuidag.control.remote import RemoteRun
from tuidag.ui.app import TuidagApp
from tuidag.ui.screens.choice import ChoiceScreen


def _count(path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


async def test_q_in_watch_mode_ends_it_and_leaves_no_process_and_the_header_shows_the_generation(tmp_path, new_session):
    (tmp_path / "a.txt").write_text("1\n")
    pids = tmp_path / "pids"
    session = new_session(
        {"slow": {"run": f"echo $$ >> {pids}; sleep 120 & echo $! >> {pids}; wait", "inputs": ("a.txt",)}}
    )
    async with open_app(session) as (app, pilot):
        session.watch()
        await until(pilot, lambda: _count(pids) == 2, timeout=30, what="the first attempt's tree")
        first = read_pids(pids)
        (tmp_path / "a.txt").write_text("2\n")
        await until(pilot, lambda: _count(pids) == 4, timeout=30, what="the restarted attempt's tree")
        await until(pilot, lambda: app.model.generation is not None, timeout=30, what="the generation on screen")
        assert "gen 2: a.txt changed -> slow" in app.header._first_line(200).plain
        refs = read_pids(pids)
        assert not [ref for ref in first if alive(*ref)]
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("s")
        await until(pilot, lambda: app.return_code is not None, timeout=30, what="the app's exit")
        assert session.watch_ended.is_set()
        assert session.scheduler.wait(30)
    assert [ref for ref in refs if alive(*ref)] == []


DAG = """\
name: loop
tasks:
  a:
    run: echo a
    inputs: [a.txt]
  b:
    run: echo b
    depends_on: [a]
"""


def _watched(tmp_path, dag: str = DAG):
    """A run of a DAG file under --watch as `tuidag run FILE --watch` makes it: the file's edits reload it."""
    from tuidag.launch import RunSession
    from tuidag.model.loader import load_dag

    path = tmp_path / "dag.yaml"
    path.write_text(dag)
    (tmp_path / "a.txt").write_text("1\n")
    session = RunSession.create(load_dag(path), tmp_path / "state", kill_grace=0.5)
    return session, lambda: load_dag(path)


def _succeeded(app, *names: str) -> bool:
    return all(name in app.model.snapshots and app.model.snapshots[name].state.value == "SUCCEEDED" for name in names)


async def test_the_header_says_each_generation_and_the_timeline_marks_where_it_began(tmp_path):
    session, load = _watched(tmp_path, DAG + "  c:\n    run: echo c\n")  # c's row is empty after its first run
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: _succeeded(app, "a", "b", "c"), timeout=30, what="the first run")
        session.watch(load)
        await pilot.press("t")
        await until(pilot, lambda: app.timeline.active, what="the timeline")
        assert "┃g" not in screen_text(app)  # the first run is no round of its own
        (tmp_path / "a.txt").write_text("2\n")
        await until(pilot, lambda: [g for g, _ in app.model.generations] == ["g2"], timeout=30, what="gen 2")
        await until(pilot, lambda: app.model.snapshots["b"].attempt == 2 and _succeeded(app, "b"), timeout=30)
        assert "gen 2: a.txt changed -> a, b" in app.header._first_line(200).plain
        app.timeline.repaint()
        await pilot.pause()
        screen = screen_text(app)
        axis = next(line for line in screen.splitlines() if "┃g2" in line)
        column = axis.index("┃g2")
        row = next(line for line in screen.splitlines() if line.startswith("│✔ c "))
        assert row[column] == "┃", screen  # the mark goes down the rows, where they are empty
        session.end_watch()


async def test_a_task_an_edit_adds_appears_in_the_graph_and_one_it_removes_stays_cancelled(tmp_path):
    session, load = _watched(tmp_path)
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: _succeeded(app, "a", "b"), timeout=30, what="the first run")
        session.watch(load)
        (tmp_path / "dag.yaml").write_text(DAG + "  lint:\n    run: echo lint\n    depends_on: [b]\n")
        await until(pilot, lambda: _succeeded(app, "lint"), timeout=30, what="the added task's run")
        await until(pilot, lambda: app.graph is not None and "lint" in app.graph.tiles, what="its tile")
        assert "loop · 3 tasks" in str(app.canvas.border_title)
        assert app.canvas.dependencies["lint"] == ["b"]
        assert "gen 2: dag.yaml changed -> lint" in app.header._first_line(200).plain
        await pilot.press("L")
        await until(pilot, lambda: "lint" in app.table.rows, what="its row in the list")
        (tmp_path / "dag.yaml").write_text(DAG)  # lint removed again
        await until(pilot, lambda: app.model.snapshots["lint"].state.value == "CANCELLED", timeout=30)
        assert app.model.snapshots["lint"].reason == "removed from the DAG file"
        assert "lint" in app.table.rows and "lint" in app.graph.tiles  # kept in the run, as it ended
        assert app.canvas.dependencies["lint"] == []
        session.end_watch()


@pytest.mark.parametrize("late", [False, True], ids=["a viewer there at the time", "a viewer that came after"])
async def test_an_edit_with_errors_is_said_on_screen_until_an_edit_loads(tmp_path, late):
    """`late`: the errors came as an event before the viewer attached (`tuidag attach` to a run under --watch)."""
    session, load = _watched(tmp_path)
    async with open_app(session) as (first, first_pilot):
        await until(first_pilot, lambda: _succeeded(first, "a", "b"), timeout=30, what="the first run")
        session.watch(load)
        path = tmp_path / "dag.yaml"
        path.write_text(DAG.replace("depends_on: [a]", "depends_on: [nope]"))
        error = f"{path}:8:18: task 'b' depends on unknown task 'nope'"
        await until(first_pilot, lambda: first.model.dag_error is not None, timeout=30, what="the error")
        async with _viewer(session, first, first_pilot, late) as (app, pilot):
            assert app.model.dag_error == error
            await until(pilot, lambda: f"⚠ {error} (keeping the DAG as it was)" in app.header._first_line(300).plain)
            notices = app._notifications
            await until(pilot, lambda: any(error in n.message for n in notices), what="a notice too")
            assert [n.title for n in notices] == ["The DAG file has errors"]
            path.write_text(DAG.replace("echo b", "echo b2"))
            await until(pilot, lambda: app.model.dag_error is None, timeout=30, what="the fix")
            await until(pilot, lambda: app.model.snapshots["b"].attempt == 2, timeout=30, what="b's re-run")
            assert "⚠" not in app.header._first_line(300).plain
            await until(pilot, lambda: any(n.title == "The DAG file loads again" for n in notices), what="said so")
        session.end_watch()


@asynccontextmanager
async def _viewer(session, app, pilot, late: bool):
    """The viewer there (`app`), or a new one attached to the session's run now."""
    if not late:
        yield app, pilot
        return
    remote = RemoteRun.attach(session.run, session.store)
    try:
        viewer = TuidagApp(remote)
        async with viewer.run_test(headless=True, size=(160, 45)) as viewer_pilot:
            await viewer_pilot.pause()
            yield viewer, viewer_pilot
    finally:
        remote.close()


@pytest.mark.parametrize("late", [False, True], ids=["a viewer there at the time", "a viewer that came after"])
async def test_an_ended_round_says_the_run_is_watching_for_changes_not_finished_until_watch_mode_ends(tmp_path, late):
    session, load = _watched(tmp_path)
    async with open_app(session) as (first, first_pilot):
        await until(first_pilot, lambda: _succeeded(first, "a", "b"), timeout=30, what="the first run")
        session.watch(load)
        await until(first_pilot, lambda: first.model.watching, what="watch mode in the first viewer")
        async with _viewer(session, first, first_pilot, late) as (app, pilot):
            assert app.source.watching
            await until(pilot, lambda: "✔ all 2 succeeded · watching for changes" in app.header._first_line(200).plain)
            assert "finished" not in app.header._first_line(200).plain
            session.end_watch()
            await until(pilot, lambda: not app.model.watching, what="the end of watch mode")
            await until(pilot, lambda: "✔ finished: all 2 succeeded" in app.header._first_line(200).plain)
            assert not app.source.watching


@pytest.mark.parametrize("late", [False, True], ids=["a viewer there at the time", "a viewer that came after"])
async def test_a_round_whose_service_stays_up_says_it_is_watching_once_its_other_tasks_ended(tmp_path, late):
    """The service keeps the run going, so no `finished` comes between rounds: the engine's `settled` event says it."""
    import sys

    from watching import free_port

    port = free_port()
    dag = f"""\
name: loop
tasks:
  web:
    run: exec {sys.executable} -m http.server {port} --bind 127.0.0.1
    service: true
    ready_when: {{http: "http://127.0.0.1:{port}/", interval: 50ms}}
  a:
    run: echo a
    inputs: [a.txt]
    depends_on: [web]
"""
    session, load = _watched(tmp_path, dag)
    said = "✔ all 1 succeeded · 1 service up · watching for changes"
    session.scheduler.watch_rounds()  # before the start, as `tuidag run --watch` does: the service stays up
    async with open_app(session) as (first, first_pilot):
        session.watch(load)
        await until(first_pilot, lambda: _succeeded(first, "a"), timeout=30, what="the first round")
        await until(first_pilot, lambda: said in first.header._first_line(200).plain, what="the first viewer")
        async with _viewer(session, first, first_pilot, late) as (app, pilot):
            await until(pilot, lambda: said in app.header._first_line(200).plain, what="the header")
            (tmp_path / "a.txt").write_text("2\n")
            await until(pilot, lambda: app.model.snapshots["a"].attempt == 2 and _succeeded(app, "a"), timeout=30)
            await until(pilot, lambda: said in app.header._first_line(200).plain and app.model.generation is not None)
        session.end_watch()
