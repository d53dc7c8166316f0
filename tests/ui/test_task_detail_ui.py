"""The task detail (`i`, Enter on a tile or a row): a real run viewed as `tuidag run` views it, at 80x24 and 160x45.

What it says is built by views/task_detail.py (tests/test_task_detail.py checks the facts through the CLI); here:
that the screen opens from each view, shows the facts (secrets as dots), fits the terminal (a long command wraps
and the text scrolls), follows a dependency when one is chosen, and closes with Esc.
"""

from __future__ import annotations

import pytest
from pilot_helpers import open_app, screen_text, until

from tuidag.model.state import TaskState
from tuidag.ui.screens.task_detail import DetailLink, TaskDetailScreen

S = TaskState
LONG = "echo " + "-".join(f"part{i}" for i in range(40))  # 233 characters: wider than any screen here
TASKS = {
    "fetch": "echo fetching",
    "build": {
        "run": f"{LONG}; echo attempt $TUIDAG_ATTEMPT; exit 3",
        "depends_on": ["fetch"],
        "retries": 1,
        "env": {"API_TOKEN": "hunter2-value", "MODE": "fast"},
    },
    "test": {"run": "echo test", "depends_on": ["build"]},
}
SIZES = [(80, 24), (160, 45)]


async def finished(app, pilot) -> None:
    await until(pilot, lambda: app.model.finished, what="the run over")


def detail(app) -> TaskDetailScreen:
    assert isinstance(app.screen, TaskDetailScreen), type(app.screen).__name__
    return app.screen


@pytest.mark.parametrize("size", SIZES)
async def test_i_opens_the_selected_tasks_detail_and_esc_closes_it(new_session, size):
    async with open_app(new_session(TASKS), size=size) as (app, pilot):
        await finished(app, pilot)
        app.select_task("build")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="the detail open")
        await pilot.pause()
        shown = screen_text(app)
        assert "build · failed: exit code 3" in shown
        assert "API_TOKEN=•••" in shown and "hunter2" not in shown
        assert "#1" in shown and "failed, retried (exit code 3)" in shown
        assert "#2" in shown and "failed (exit code 3)" in shown
        # the whole command is there, wrapped within the frame: every line of the screen fits its width
        assert all(len(line) <= size[0] for line in shown.splitlines())
        body = "".join(line.strip("│ ") for line in shown.splitlines())
        assert "part0-part1" in body and "part39;" in body
        # the end of the detail (its log path) is reached by scrolling, whatever the height
        await pilot.press("end")
        await pilot.pause()
        assert "logs/build.log" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TaskDetailScreen), what="the detail closed")
        assert app.canvas.selected == "build" and app.canvas.has_focus


async def test_choosing_a_dependency_jumps_to_it_in_the_graph(new_session):
    async with open_app(new_session(TASKS)) as (app, pilot):
        await finished(app, pilot)
        app.select_task("build")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="the detail open")
        links = [link.line.task for link in detail(app).links]
        assert links == ["fetch", "test"]  # its dependency, then its dependent
        await pilot.press("down", "down")  # from the first link to the second
        assert isinstance(app.screen.focused, DetailLink) and app.screen.focused.line.task == "test"
        await pilot.press("enter")
        await until(
            pilot,
            lambda: isinstance(app.screen, TaskDetailScreen) and app.screen.task_name == "test",
            what="the dependent's detail",
        )
        assert app.canvas.selected == "test"
        assert "test · skipped: upstream 'build' failed" in screen_text(app)
        # a click on a link jumps too
        (link,) = detail(app).links
        await pilot.click(link)
        await until(pilot, lambda: app.canvas.selected == "build", what="the click's jump")
        assert detail(app).task_name == "build"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TaskDetailScreen), what="the detail closed")
        assert app.canvas.selected == "build"


async def test_enter_opens_the_detail_on_a_tile_a_list_row_and_a_timeline_row(new_session):
    async with open_app(new_session(TASKS)) as (app, pilot):
        await finished(app, pilot)
        for view in ("graph", "L", "t"):
            if view != "graph":
                await pilot.press(view)
                await pilot.pause()
            app.select_task("fetch")
            await pilot.pause()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what=f"the detail from {view}")
            assert detail(app).task_name == "fetch"
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, TaskDetailScreen), what="the detail closed")


async def test_a_running_tasks_detail_follows_it(new_session, tmp_path):
    """Opened while the task runs, the detail shows it running, then how it ended (and what became of its
    dependent), without reopening it."""
    gate = tmp_path / "go"
    tasks = {
        "slow": f"while [ ! -e {gate} ]; do sleep 0.05; done; exit 5",
        "after": {"run": "true", "depends_on": ["slow"]},
    }
    async with open_app(new_session(tasks)) as (app, pilot):
        await until(pilot, lambda: app.model.snapshots["slow"].state is S.RUNNING, what="slow running")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="the detail open")
        assert "slow · running" in screen_text(app) and "#1" in detail(app).text
        gate.touch()
        await until(pilot, lambda: "failed (exit code 5)" in detail(app).text, timeout=15, what="the end shown")
        assert "slow · failed: exit code 5" in screen_text(app)
        (link,) = detail(app).links  # its dependent's state too
        await until(pilot, lambda: link.state is S.SKIPPED, what="the dependent's state followed")
        assert "after  skipped" in screen_text(app)


async def test_i_on_a_folded_matrix_group_shows_an_instance_and_enter_still_unfolds_it(tmp_path):
    from tuidag.launch import RunSession
    from tuidag.model.loader import load_dag

    dag_file = tmp_path / "sweep.yaml"
    dag_file.write_text(
        "tasks:\n  train:\n    matrix:\n      lr: [0.1, 0.01]\n    run: echo lr ${{ matrix.lr }}; exit 1\n"
    )
    session = RunSession.create(load_dag(dag_file), tmp_path / "state", kill_grace=0.5)
    async with open_app(session) as (app, pilot):
        await finished(app, pilot)
        app.select_task("train", unfold=False)
        await pilot.pause()
        assert app.canvas.selected == "train"  # the group's tile
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="the detail open")
        assert detail(app).task_name == "train[lr=0.1]"
        assert "instance of train (lr=0.1)" in detail(app).text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, TaskDetailScreen), what="the detail closed")
        await pilot.press("enter")  # on the group's tile: unfolds it, as before
        await until(pilot, lambda: "train" not in app.folding.folded, what="the group unfolded")
        assert not isinstance(app.screen, TaskDetailScreen)


async def test_a_ready_services_detail_says_what_made_it_ready(new_session, tmp_path):
    from tuidag.model.service import ReadyCheck, ServiceSpec

    session = new_session(
        {
            "db": {"run": "echo up; exec sleep 60", "service": ServiceSpec(ReadyCheck("log", "^up$", interval=0.05))},
            "app": {"run": f"while [ ! -f {tmp_path / 'done'} ]; do sleep 0.02; done", "depends_on": ["db"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.snapshots["app"].state is S.RUNNING, what="db ready, app running")
        app.select_task("db")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="the detail open")
        text = detail(app).text
        assert "db · ready" in text and "service, ready when log '^up$'" in text
        assert "ready after" in text and "log '^up$'" in text.split("ready after", 1)[1]
        (tmp_path / "done").touch()
        await until(pilot, lambda: app.model.finished, timeout=20, what="the run ended")


async def test_the_runs_own_text_is_never_markup_nor_escapes(new_session):
    """A command holding markup and escape sequences shows as written, inert."""
    tasks = {"evil": {"run": "echo '[bold red]x[/bold red] \x1b]2;pwned\x07 [link=http://e]y[/link]'; exit 2"}}
    async with open_app(new_session(tasks)) as (app, pilot):
        await finished(app, pilot)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, TaskDetailScreen), what="the detail open")
        shown = screen_text(app)
        assert "[bold red]x[/bold red]" in shown and "[link=http://e]y[/link]" in shown
        assert "\x1b" not in detail(app).text and "\x07" not in detail(app).text
