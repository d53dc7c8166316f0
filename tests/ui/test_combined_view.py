"""The combined view (`a`) holds every task's output from the run's start, whenever it is opened.

The run starts before the app subscribes (as `tuidag run` does), so some tasks are already running, or even finished,
when the app first hears of the run: they must be in the view all the same, each prefix in its task's colour."""

from __future__ import annotations

from pilot_helpers import open_app, select, until

from dags import wait_until
from tuidag.views.headless import TASK_COLOURS
from tuidag.views.terminal_text import strip_ansi

TICKER = "i=0; while [ ! -f stop ]; do echo tick $i; i=$((i+1)); sleep 0.01; done; echo ticker done"
BAR = (
    "for p in 10 20 30; do printf 'progress %s%%\\r' $p; done; printf 'progress 100%%\\n'; "
    "while [ ! -f stop ]; do sleep 0.01; done; echo bar done"
)


def shown(app) -> list[str]:
    combined = app.combined
    return [strip_ansi(combined.line(i)) for i in range(combined.line_count)]


def body(session, task: str) -> list[str]:
    """A task's log lines as the combined view shows them (after `\\r` overwrites), prefixed."""
    text = session.run.log_path(task).read_bytes().decode()
    return [f"[{task}] " + line.split("\r")[-1] for line in text.split("\n")[:-1]]


async def test_tasks_running_before_the_app_subscribed_are_in_the_combined_view(new_session, tmp_path):
    session = new_session({"done-early": "echo early bird", "ticker": TICKER, "bar": BAR}, max_parallel=4)
    session.scheduler.start()  # before the app exists
    wait_until(
        lambda: (
            session.scheduler.snapshot()["done-early"].state.value == "SUCCEEDED"
            and "tick 3"
            in (session.run.log_path("ticker").read_text() if session.run.log_path("ticker").exists() else "")
        )
    )
    async with open_app(session) as (app, pilot):
        await pilot.press("a")
        await until(pilot, lambda: "3 logs" in str(app.log_pane.border_title), what="all three logs in the view")
        await until(
            pilot,
            lambda: {"[done-early] early bird", "[ticker] tick 0", "[bar] progress 100%"} <= set(shown(app)),
            what="every task's early lines",
        )
        (tmp_path / "stop").touch()
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await until(pilot, lambda: {"[ticker] ticker done", "[bar] bar done"} <= set(shown(app)), what="the last lines")
        lines = shown(app)
        for task in ("done-early", "ticker", "bar"):
            assert [line for line in lines if line.startswith(f"[{task}] ")] == body(session, task)
        colours = {task: TASK_COLOURS[i % len(TASK_COLOURS)] for i, task in enumerate(session.dag.topological_order)}
        for i in range(app.combined.line_count):
            line = app.combined.line(i)
            task = strip_ansi(line)[1:].split("]")[0]
            assert line.startswith(f"\x1b[{colours[task]}m[{task}]\x1b[0m "), line


async def test_a_combined_view_opened_late_holds_every_task_in_the_order_they_ran(new_session):
    tasks = {f"t{i:02d}": f"echo first of t{i:02d}; echo second of t{i:02d}" for i in range(40)}
    tasks["last"] = {"run": "echo the end", "depends_on": list(tasks)}
    session = new_session(tasks, max_parallel=8)
    session.scheduler.start()
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await pilot.press("a")
        await until(pilot, lambda: len(shown(app)) >= 2 * 41, what="every line")
        assert "41 logs" in str(app.log_pane.border_title)
        lines = [line for line in shown(app) if "=== tuidag" not in line]
        assert sorted(lines) == sorted(
            [f"[t{i:02d}] {which} of t{i:02d}" for i in range(40) for which in ("first", "second")] + ["[last] the end"]
        )
        assert lines[-1] == "[last] the end"  # it started after every other task ended
        for i in range(40):
            assert lines.index(f"[t{i:02d}] first of t{i:02d}") < lines.index(f"[t{i:02d}] second of t{i:02d}")


async def test_the_combined_view_shows_one_branch_or_the_tasks_matching_a_name(new_session):
    tasks = {
        "build": "echo built",
        "lint": "echo linted; echo lint again",
        "test-unit": {"run": "echo unit ok; echo unit done", "depends_on": ["build"]},
        "test-e2e": {"run": "echo e2e ok", "depends_on": ["build"]},
        "report": {"run": "echo reported", "depends_on": ["test-unit", "test-e2e"]},
    }
    session = new_session(tasks, max_parallel=1)
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="the run's end")
        await pilot.press("b")  # not in the combined view: says so, changes nothing
        assert app.combined.shown_tasks is None
        await pilot.press("a")
        await until(pilot, lambda: any(line.endswith("reported") for line in shown(app)), what="every line")
        everything = shown(app)

        def task_of(line: str) -> str:
            return line[1 : line.index("]")]

        await select(app, pilot, "test-unit")
        await pilot.press("b")
        assert shown(app) == [line for line in everything if task_of(line) in ("test-unit", "report")]
        assert "branch of test-unit" in str(app.log_pane.border_title)
        await pilot.press("T", *"E2E", "enter")  # with the branch: none of it is called that
        assert shown(app) == [] and "branch of test-unit, matching “E2E”" in str(app.log_pane.border_title)
        await pilot.press("b")
        assert shown(app) == [line for line in everything if task_of(line) == "test-e2e"]
        assert "tasks matching “E2E”" in str(app.log_pane.border_title)
        await pilot.press("T")
        assert app.task_name_bar.value == "E2E" and app.focused is app.task_name_bar
        await pilot.press("escape")  # gives up: the filter stays
        assert app.focused is app.canvas and app.combined.shown_tasks == {"test-e2e"}
        await pilot.press("a", "a")  # the filter outlives leaving the combined view
        assert "tasks matching “E2E”" in str(app.log_pane.border_title)
        await pilot.press("slash", *"ok", "enter")  # search and its count see the shown lines only
        assert app.log_pane.match_count == (1, 1, True)
        await pilot.press("T", "ctrl+u", "enter")  # empty: every task again
        assert shown(app) == everything and "all tasks" in str(app.log_pane.border_title)
        await until(pilot, lambda: app.log_pane.match_count[1:] == (2, True), what="the count over every task")
