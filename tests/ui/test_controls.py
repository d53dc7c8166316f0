"""Every key of the run screen against the real engine running short real commands.

Tasks that must be stopped write their pids (shell and a child) to files, so the tests can check with psutil that
the whole tree is gone. Waits poll the app against deadlines; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import signal

from pilot_helpers import open_app, select, ui_states, until

from dags import alive, read_pids, wait_until
from tuidag.ui.screens.choice import ChoiceScreen
from tuidag.ui.screens.confirm import ConfirmScreen
from tuidag.ui.screens.help import HelpScreen

LONG = "echo $$ > {n}.pids; sleep 30 & echo $! >> {n}.pids; echo started; wait"


def long_task(name: str, **fields) -> dict:
    return {"run": LONG.format(n=name), **fields}


async def wait_pids(pilot, path, count=2):
    await until(pilot, lambda: path.exists() and len(path.read_text().split()) >= count, what=f"pids in {path.name}")
    return read_pids(path)


async def test_cancel_running_branch_kills_its_trees(new_session, tmp_path):
    session = new_session(
        {
            "a": long_task("a"),
            "b": {"run": "true", "depends_on": ["a"]},
            "other": "true",
        }
    )
    async with open_app(session) as (app, pilot):
        procs = await wait_pids(pilot, tmp_path / "a.pids")
        await select(app, pilot, "a")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.items == ["a  (running)", "b  (pending)"]
        await pilot.press("y")
        await until(
            pilot,
            lambda: ui_states(app)["a"] == "CANCELLED" and ui_states(app)["b"] == "CANCELLED",
            what="branch cancelled",
        )
        assert not any(alive(pid, ct) for pid, ct in procs)
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert ui_states(app)["other"] == "SUCCEEDED"
        assert "finished" in str(app.header.render())


async def test_cancel_aborted_with_escape_changes_nothing(new_session, tmp_path):
    session = new_session({"a": long_task("a")})
    async with open_app(session) as (app, pilot):
        await wait_pids(pilot, tmp_path / "a.pids")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("c", "n")
        await pilot.pause(0.2)
        assert ui_states(app)["a"] == "RUNNING"


async def test_cancel_a_queued_branch_then_everything(new_session, tmp_path):
    session = new_session(
        {
            "a": long_task("a"),
            "q": "true",
            "q_after": {"run": "true", "depends_on": ["q"]},
        },
        max_parallel=1,
    )
    async with open_app(session) as (app, pilot):
        procs = await wait_pids(pilot, tmp_path / "a.pids")
        # a's process wrote its pids; the UI learns q was queued from an event that may come a moment later
        await until(pilot, lambda: ui_states(app)["q"] == "QUEUED", what="q queued behind a")
        await select(app, pilot, "q")
        await pilot.press("c", "y")
        await until(
            pilot,
            lambda: ui_states(app)["q"] == ui_states(app)["q_after"] == "CANCELLED",
            what="queued branch cancelled",
        )
        assert ui_states(app)["a"] == "RUNNING"
        await pilot.press("C")
        assert app.screen.items == ["a  (running)"]
        await pilot.press("enter")  # the safe answer is the default: Enter keeps everything running
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.pause(0.2)
        assert ui_states(app)["a"] == "RUNNING" and not app.model.stopping
        await pilot.press("C", "right", "enter")  # Enter on "Yes", once the user moved there
        await until(pilot, lambda: app.model.finished, what="run finished")
        assert ui_states(app)["a"] == "CANCELLED"
        assert not any(alive(pid, ct) for pid, ct in procs)


async def test_rerun_a_failed_task_and_its_skipped_downstream(new_session, tmp_path):
    session = new_session(
        {
            "flaky": "test -f marker || { touch marker; echo first try fails; exit 3; }",
            "after": {"run": "true", "depends_on": ["flaky"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="first pass")
        assert ui_states(app) == {"flaky": "FAILED", "after": "SKIPPED"}
        await select(app, pilot, "after")
        await pilot.press("r")  # a skipped task whose dependency failed: re-run that one instead
        await pilot.pause()
        assert ui_states(app)["after"] == "SKIPPED"
        await select(app, pilot, "flaky")
        await pilot.press("r")
        await until(pilot, lambda: ui_states(app) == {"flaky": "SUCCEEDED", "after": "SUCCEEDED"}, what="re-run")
        assert app.model.snapshots["flaky"].attempt == 2
        assert app.model.finished


async def test_pause_holds_new_tasks_and_resume_releases_them(new_session, tmp_path):
    session = new_session(
        {
            "a": "while ! test -f go; do sleep 0.02; done",  # runs until the test creates `go`
            "b": {"run": "true", "depends_on": ["a"]},
        }
    )
    async with open_app(session) as (app, pilot):
        await pilot.press("p")
        await until(pilot, lambda: app.model.paused, what="paused")
        assert "PAUSED" in str(app.header.render())
        (tmp_path / "go").touch()
        await until(pilot, lambda: ui_states(app)["a"] == "SUCCEEDED", what="a done")
        await until(pilot, lambda: ui_states(app)["b"] == "QUEUED", what="b queued")  # (its event may come later)
        for _ in range(5):  # several drain cycles: b stays queued while paused
            await pilot.pause(0.05)
            assert ui_states(app)["b"] == "QUEUED"
        await pilot.press("p")
        await until(pilot, lambda: app.model.finished, what="run finished after resume")
        assert ui_states(app)["b"] == "SUCCEEDED" and not app.model.paused


async def test_pause_on_a_finished_run_is_refused_and_a_rerun_then_runs(new_session, tmp_path):
    """`p` on a finished run used to pause silently (the header still said finished); the next `r` then left the
    task queued forever."""
    session = new_session({"flaky": "test -f marker || { touch marker; exit 3; }"})
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="first pass")
        await pilot.press("p")
        await until(pilot, lambda: any("finished" in n.message for n in app._notifications), what="notice")
        assert not session.scheduler.paused and not app.model.paused
        assert "PAUSED" not in str(app.header.render())
        await pilot.press("r")
        await until(pilot, lambda: ui_states(app)["flaky"] == "SUCCEEDED", what="re-run done")


async def test_quit_while_running_asks_then_stops_every_tree(new_session, tmp_path):
    """`q` in the terminal that started the run asks: stop the run, detach, or back (the default: Enter never
    kills tasks); `s` stops every tree and the view exits once they are gone."""
    stubborn = "trap '' TERM; " + LONG.format(n="b")  # ignores SIGTERM: stopping lasts the 0.5 s grace period
    session = new_session({"a": long_task("a"), "b": stubborn})
    async with open_app(session) as (app, pilot):
        procs = await wait_pids(pilot, tmp_path / "a.pids") + await wait_pids(pilot, tmp_path / "b.pids")
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen) and app.screen.default == "back"
        await pilot.press("s")
        assert app.model.stopping
        assert "stopping" in str(app.header.render())
        await until(pilot, lambda: app.return_code is not None, what="app exit")
        assert session.scheduler.finished
        assert not any(alive(pid, ct) for pid, ct in procs)
    assert session.exit_code(session.finish()) == 1


async def test_ctrl_c_stops_at_once_as_sigint(new_session, tmp_path):
    session = new_session({"a": long_task("a")})
    async with open_app(session) as (app, pilot):
        procs = await wait_pids(pilot, tmp_path / "a.pids")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.return_code is not None, what="app exit")
        assert not any(alive(pid, ct) for pid, ct in procs)
    assert session.interrupted_by == "SIGINT"
    assert session.exit_code(session.finish()) == 130


async def test_sigterm_handler_cancels_and_exits(new_session, tmp_path):
    session = new_session({"a": long_task("a")})
    async with open_app(session, signals=(signal.SIGTERM,)) as (app, pilot):
        procs = await wait_pids(pilot, tmp_path / "a.pids")
        signal.raise_signal(signal.SIGTERM)
        await until(pilot, lambda: app.return_code is not None, what="app exit")
        assert not any(alive(pid, ct) for pid, ct in procs)
    assert session.exit_code(session.finish()) == 143


async def test_a_signal_while_the_app_is_built_still_ends_it(new_session, tmp_path):
    """A run starts before the app is built; a hangup in that window stops the run there (the engine's handler), and
    the app must then stop too, not stay open on a finished run and a terminal that is gone."""
    session = new_session({"a": long_task("a")})
    session.scheduler.start()
    pids = tmp_path / "a.pids"
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) >= 2)  # the task runs before the signal
    procs = read_pids(pids)
    session.interrupt(signal.SIGHUP)  # what the engine's handler does
    async with open_app(session, signals=(signal.SIGHUP,)) as (app, pilot):
        await until(pilot, lambda: app.return_code is not None, what="app exit")
        assert not any(alive(pid, ct) for pid, ct in procs)
    assert session.exit_code(session.finish()) == 129


async def test_finished_run_stays_open_and_q_quits_without_asking(new_session):
    session = new_session({"a": "true"})
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, what="run finished")
        await pilot.pause(0.2)
        assert app.return_code is None
        assert "all 1 succeeded" in str(app.header.render())
        await pilot.press("q")
        assert app.return_code == 0


async def test_exit_on_finish_closes_the_app(new_session):
    session = new_session({"a": "true", "b": {"run": "true", "depends_on": ["a"]}})
    async with open_app(session, exit_on_finish=True) as (app, pilot):
        await until(pilot, lambda: app.return_code is not None, what="app exit")
    assert session.exit_code(session.finish()) == 0


async def test_the_end_of_the_run_is_shown_without_waiting_for_a_tick(new_session, monkeypatch):
    """The engine posts the end of the run to the app: with ticks an hour apart (longer than the deadline below on
    any machine), the final state still shows at once."""
    import tuidag.ui.app as app_module

    monkeypatch.setattr(app_module, "DRAIN_INTERVAL", 3600.0)
    session = new_session({"a": "true"})
    async with open_app(session, exit_on_finish=True) as (app, pilot):
        await until(pilot, lambda: app.return_code is not None, timeout=10, what="app exit long before a tick")
    assert app.model.finished and app.model.snapshots["a"].state.value == "SUCCEEDED"


async def test_help_screen_and_command_palette_list_every_key(new_session):
    session = new_session({"a": "true"})
    async with open_app(session, start=False) as (app, pilot):
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        described = " ".join(what for _, what in app.screen.keys)
        for word in (
            "Cancel the selected",
            "Cancel every",
            "again",
            "Pause",
            "Search",
            "Next",
            "Previous",
            "following",
            "wrapping",
            "top",
            "bottom",
            "combined",
            "Quit",
            "focus",
            "dependency",
            "dependent",
            "above",
            "below",
        ):
            assert word in described, word
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for title in (
            "Cancel",
            "Cancel all",
            "Re-run",
            "Pause",
            "Search",
            "Next",
            "Prev",
            "Follow",
            "Wrap",
            "Top",
            "Bottom",
            "All logs",
            "Help",
            "Stop",
            "Select left",
            "Switch focus",
        ):
            assert title in titles, title
