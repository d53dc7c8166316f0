"""`F` filters by state (the header says so), `]` `[` `}` `{` jump between failed / running tasks, and the run's first
failure is selected unless the user has moved the selection. Real runs of short commands; waits poll deadlines."""

from __future__ import annotations

import pytest
from pilot_helpers import open_app, screen_text, select, until

from slowness import patience
from tuidag.ui.run_model import StateFilter

WAIT_GO = "while ! test -f go; do sleep 0.02; done"


def header_lines(app) -> list[str]:
    return screen_text(app).splitlines()[:2]


def log_shown(app, name: str) -> bool:
    return str(app.source.run.log_path(name)) in str(app.log_pane.border_title)


def failed(app) -> set[str]:
    return {n for n, s in app.model.snapshots.items() if s.state.value == "FAILED"}


async def test_f_cycles_the_filter_and_the_header_says_how_many_are_shown(new_session):
    session = new_session({"bad": "exit 3", "after": {"run": "true", "depends_on": ["bad"]}, "ok": "true"})
    async with open_app(session) as (app, pilot):
        repaints = []
        refresh_all = app.canvas.refresh_all
        app.canvas.refresh_all = lambda: (repaints.append(app.model.state_filter), refresh_all())
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert "filter" not in header_lines(app)[1]
        await pilot.press("F")
        assert app.model.state_filter is StateFilter.FAILED
        await until(pilot, lambda: "filter: failed (1 of 3 shown)" in header_lines(app)[1], what="filter in header")
        assert "1/3" not in header_lines(app)[1] and "3/3" in header_lines(app)[1]  # counts stay totals
        assert "✔ 1 done" in header_lines(app)[1] and "↷ 1 skipped" in header_lines(app)[1]
        await pilot.press("F")
        await until(pilot, lambda: "filter: running (0 of 3 shown)" in header_lines(app)[1], what="running")
        await pilot.press("F")
        await until(pilot, lambda: "filter: unfinished (0 of 3 shown)" in header_lines(app)[1], what="unfinished")
        await pilot.press("F")
        await until(pilot, lambda: "filter" not in header_lines(app)[1], what="filter off")
        assert repaints == [StateFilter.FAILED, StateFilter.RUNNING, StateFilter.UNFINISHED, StateFilter.ALL]


async def test_a_narrow_header_still_says_a_filter_is_on(new_session):
    session = new_session({f"task-{i}": "exit 1" if i % 3 == 0 else "true" for i in range(12)})
    async with open_app(session, size=(80, 24)) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        await pilot.press("F")
        await until(pilot, lambda: "filter: failed" in header_lines(app)[1], what="filter in header at 80 columns")
        assert "✔ 8 done" in header_lines(app)[1] and "✘ 4 failed" in header_lines(app)[1]
        for width in (60, 40, 20):
            line = app.header._second_line(width).plain
            assert line.startswith(" filter: failed ") or "filter: failed" in line[:width], (width, line)


async def test_brackets_jump_between_failed_and_braces_between_running_tasks(new_session, tmp_path):
    session = new_session(
        {
            "f1": "exit 1",
            "f2": "exit 2",
            "f3": "exit 3",
            "ok": "true",
            "r1": WAIT_GO,
            "r2": WAIT_GO,
            "after": {"run": "true", "depends_on": ["ok"]},
        },
        max_parallel=8,
    )
    async with open_app(session) as (app, pilot):
        notes = []
        app.notify = lambda message, **kw: notes.append(message)
        running = lambda: {n for n, s in app.model.snapshots.items() if s.state.value == "RUNNING"}  # noqa: E731
        await until(pilot, lambda: len(failed(app)) == 3 and running() == {"r1", "r2"}, what="failures and runners")
        order = app.reading_order
        in_order = lambda names: [n for n in order if n in names]  # noqa: E731
        bad, live = in_order(failed(app)), in_order(running())

        app.select_task(bad[0])
        for expected in (bad[1], bad[2], bad[0]):  # ] wraps around
            await pilot.press("right_square_bracket")
            assert app.selected_task == expected
        await pilot.press("left_square_bracket")
        assert app.selected_task == bad[2]  # [ wraps back
        await until(pilot, lambda: log_shown(app, bad[2]), what="the log of the task jumped to")

        after = order.index(bad[2])
        next_live = next(n for n in order[after:] + order[:after] if n in live)
        await pilot.press("right_curly_bracket")
        assert app.selected_task == next_live
        await pilot.press("right_curly_bracket")
        assert app.selected_task == ({"r1", "r2"} - {next_live}).pop()
        await pilot.press("left_curly_bracket")
        assert app.selected_task == next_live

        (tmp_path / "go").touch()
        await until(pilot, lambda: app.model.finished, what="run finished")
        await pilot.press("right_curly_bracket")
        assert notes == ["no running task"] and app.selected_task == next_live
        app.select_task(bad[0])
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert app.selected_task == bad[1]


async def test_the_only_failed_task_selected_says_there_is_no_other(new_session):
    async with open_app(new_session({"bad": "exit 3", "ok": "true"})) as (app, pilot):
        notes = []
        app.notify = lambda message, **kw: notes.append(message)
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert app.selected_task == "bad"  # the first failure was selected
        await pilot.press("right_square_bracket")
        assert notes == ["no other failed task"] and app.selected_task == "bad"


async def test_the_first_failure_is_selected_with_its_log_and_later_ones_are_not(new_session, tmp_path):
    session = new_session(
        {
            "first": "true",
            "breaks": f"{WAIT_GO}; echo broken; exit 3",
            "later": "while ! test -f go2; do sleep 0.02; done; exit 4",
        }
    )
    async with open_app(session) as (app, pilot):
        initial = app.selected_task
        assert initial != "breaks"
        await until(pilot, lambda: app.model.snapshots["first"].state.value == "SUCCEEDED", what="first done")
        (tmp_path / "go").touch()
        await until(pilot, lambda: app.selected_task == "breaks", what="the failure selected")
        await until(pilot, lambda: log_shown(app, "breaks"), what="its log shown")
        await until(pilot, lambda: "broken" in screen_text(app), what="its output on screen")
        (tmp_path / "go2").touch()
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert app.selected_task == "breaks"  # only the first failure moves the selection


@pytest.mark.parametrize("how", ["key", "click", "finder"])
async def test_a_user_who_moved_the_selection_keeps_it_when_a_task_fails(new_session, tmp_path, how):
    session = new_session(
        {
            "top": "true",
            "idle": "true",
            "child": {"run": "true", "depends_on": ["top"]},
            "breaks": {"run": f"{WAIT_GO}; exit 3", "depends_on": ["top"]},
        }
    )
    async with open_app(session) as (app, pilot):
        assert app.graph.columns[0] in (["top", "idle"], ["idle", "top"])
        start = app.selected_task
        if how == "key":
            await pilot.press("j")  # the initial selection is the top of the first column
        elif how == "click":
            await select(app, pilot, "child")
        else:
            await pilot.press("colon", *"chi", "enter")
        moved = app.selected_task
        assert moved not in (start, "breaks")
        (tmp_path / "go").touch()
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert failed(app) == {"breaks"} and app.selected_task == moved


async def test_a_task_that_failed_before_the_app_was_built_is_selected(new_session):
    """`tuidag run` starts the run before it builds the app: a quick failure may already be in the first snapshot."""
    session = new_session({"a-first": "true", "z-bad": "echo early; exit 5"})
    session.scheduler.start()
    assert session.scheduler.wait(patience(10))
    async with open_app(session, start=False) as (app, pilot):
        assert app.graph.columns[0][0] == "a-first" and failed(app) == {"z-bad"}  # not the initial selection
        await until(pilot, lambda: app.selected_task == "z-bad" and log_shown(app, "z-bad"), what="failure shown")
