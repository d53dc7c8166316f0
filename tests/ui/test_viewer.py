"""The terminal UI on a run served over its control socket (a RemoteRun), as `tuidag run`, `attach` and `show` open
it: a real served session in this process, or a real engine process that a test kills."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import asynccontextmanager

import psutil
import pytest
from pilot_helpers import screen_text, select, ui_states, until
from textual.widgets import Button

from dags import make_dag, served_run
from slowness import patience
from tuidag.control.remote import RemoteRun
from tuidag.launch import RunSession
from tuidag.store.journal import replay
from tuidag.store.runs import RunDir, RunStore
from tuidag.ui.app import TuidagApp
from tuidag.ui.roles import DETACHED, RESUME
from tuidag.ui.screens.choice import ChoiceScreen
from tuidag.ui.screens.confirm import ConfirmScreen

SIZE = (160, 45)


def pids_of(path) -> list[psutil.Process]:
    return [psutil.Process(int(line)) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def served(tmp_path):
    """A run served on its control socket in this process: `tree` is a shell with a child (both pids in
    tree.pids), `after` waits for it, `free` sleeps, `broken` fails and `blocked` needs it."""
    pids = tmp_path / "tree.pids"
    dag = make_dag(
        {
            "tree": f"sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; echo tree says hello; wait",
            "after": {"run": "echo after", "depends_on": ["tree"]},
            "free": "echo free runs; sleep 60",
            "broken": "echo broken output; exit 3",
            "blocked": {"run": "true", "depends_on": ["broken"]},
        },
        workdir=tmp_path,
        kill_grace=0.5,
    )
    with served_run(dag, tmp_path) as session:
        # Settle the one failure first: a viewer selects the first failure on its own until the user moves, and a
        # failure that came between a test's `select` of the first task (no move: it was selected) and its `c` took
        # the `c` (CI: the cancel went to `broken`'s finished branch and `after` was never cancelled).
        await_until(lambda: session.scheduler.snapshot()["blocked"].state.value == "SKIPPED")
        yield session, pids


@asynccontextmanager
async def viewer(run: RunDir, store: RunStore, *, foreground=False, remote=None):
    remote = remote or RemoteRun.attach(run, store, foreground=foreground)
    app = TuidagApp(remote)
    try:
        async with app.run_test(headless=True, size=SIZE) as pilot:
            await pilot.pause()
            yield app, pilot
    finally:
        remote.close()


async def test_the_graph_fills_from_the_snapshot_and_follows_the_run(served):
    session, _pids = served
    await_until(lambda: session.scheduler.snapshot()["broken"].state.value == "FAILED")
    async with viewer(session.run, session.store) as (app, pilot):
        assert ui_states(app)["broken"] == "FAILED" and ui_states(app)["blocked"] == "SKIPPED"
        await until(pilot, lambda: ui_states(app)["tree"] == "RUNNING", what="tree running")
        text = screen_text(app)
        assert f"attached · engine pid {os.getpid()}" in text
        assert "broken output" in text  # the first failure is selected and its log shown
        assert app.model.snapshots["broken"].exit_code == 3
        await until(pilot, lambda: "tree" in app.model.usage, what="usage of the running trees")


async def test_the_combined_view_of_a_viewer_holds_the_tasks_that_ran_before_it_attached(served):
    """#13.2 as `tuidag run` is now: the engine ran for a while before any viewer existed."""
    session, _pids = served
    logs = {task: session.run.log_path(task) for task in ("tree", "free", "broken")}
    said = {"tree": "tree says hello", "free": "free runs", "broken": "broken output"}
    await_until(lambda: all(path.exists() and said[task] in path.read_text() for task, path in logs.items()))
    async with viewer(session.run, session.store) as (app, pilot):
        await pilot.press("a")
        await until(pilot, lambda: "3 logs" in str(app.log_pane.border_title), what="the three tasks that ran")
        await until(
            pilot,
            lambda: {f"[{task}] {line}" for task, line in said.items()} <= set(combined_lines(app)),
            what="every task's line",
        )


def combined_lines(app: TuidagApp) -> list[str]:
    from tuidag.views.terminal_text import strip_ansi

    return [strip_ansi(app.combined.line(i)) for i in range(app.combined.line_count)]


async def test_cancel_branch_from_the_viewer_kills_the_real_tree(served):
    session, pids = served
    await_until(lambda: len(pids_of(pids)) == 2)
    procs = pids_of(pids)
    async with viewer(session.run, session.store) as (app, pilot):
        await select(app, pilot, "tree")
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen) and app.screen.items == ["tree  (running)", "after  (pending)"]
        await pilot.press("y")
        await until(
            pilot, lambda: ui_states(app)["tree"] == ui_states(app)["after"] == "CANCELLED", what="branch cancelled"
        )
        assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)
        assert session.scheduler.snapshot()["free"].state.value == "RUNNING"  # nothing else was touched


async def test_a_cancel_is_recorded_as_coming_from_where_it_was_asked_for(served):
    """The viewer's `c`, `tuidag cancel` in another shell and the viewer's stop each leave their own reason in the
    journal (a viewer's cancel used to be blamed on `tuidag cancel`), and the tiles show it."""
    session, _ = served
    async with viewer(session.run, session.store) as (app, pilot):
        await select(app, pilot, "tree")
        await pilot.press("c", "y")
        await until(pilot, lambda: ui_states(app)["after"] == "CANCELLED", what="tree's branch cancelled")
        shell = subprocess.run(
            [
                sys.executable,
                "-m",
                "tuidag",
                "cancel",
                "free",
                "--run",
                session.run.run_id,
                "--state-dir",
                str(session.store.state_dir),
            ],
            capture_output=True,
            text=True,
            timeout=patience(60),
        )
        assert shell.returncode == 0, shell.stderr
        await until(pilot, lambda: ui_states(app)["free"] == "CANCELLED", what="free cancelled from the shell")
        await until(
            pilot,
            lambda: "in the UI" in screen_text(app) and "by tuidag cancel" in screen_text(app),
            what="the tiles to say who cancelled",
        )
    reasons = {name: task.reason for name, task in replay(session.run.journal).tasks.items()}
    assert reasons["tree"] == reasons["after"] == "cancelled in the UI"
    assert reasons["free"] == "cancelled by tuidag cancel"


async def test_a_refused_rerun_says_why(served):
    session, _ = served
    await_until(lambda: session.scheduler.snapshot()["blocked"].state.value == "SKIPPED")
    async with viewer(session.run, session.store) as (app, pilot):
        await select(app, pilot, "blocked")
        await pilot.press("r")
        await until(
            pilot, lambda: any("re-run 'broken' first" in n.message for n in app._notifications), what="the refusal"
        )
        await select(app, pilot, "broken")
        await pilot.press("r")
        await until(pilot, lambda: app.model.snapshots["broken"].attempt == 2, what="broken re-ran")


async def test_pause_and_resume_from_the_viewer(served):
    session, _ = served
    async with viewer(session.run, session.store) as (app, pilot):
        await pilot.press("p")
        await until(pilot, lambda: app.model.paused and session.scheduler.paused, what="paused")
        await until(pilot, lambda: "PAUSED" in screen_text(app), what="the header to say so")
        await pilot.press("p")
        await until(pilot, lambda: not app.model.paused and not session.scheduler.paused, what="resumed")


async def test_a_viewer_that_attaches_to_a_paused_run_says_it_is_paused(served):
    """The pause was an event before this viewer came: its header said '● running' and offered no way to see why
    nothing started."""
    session, _ = served
    assert session.scheduler.pause()
    async with viewer(session.run, session.store) as (app, pilot):
        await until(pilot, lambda: "PAUSED" in screen_text(app), what="the header to say it is paused")
        assert app.model.paused
        await pilot.press("p")
        await until(pilot, lambda: not session.scheduler.paused, what="p to resume it")


async def test_two_viewers_at_once_each_with_its_own_selection(served):
    session, _ = served
    async with (
        viewer(session.run, session.store) as (one, pilot_one),
        viewer(session.run, session.store) as (two, pilot_two),
    ):
        await select(one, pilot_one, "free")
        await select(two, pilot_two, "tree")
        assert one.selected_task == "free" and two.selected_task == "tree"
        await until(pilot_one, lambda: "free runs" in screen_text(one), what="free's log in the first")
        await until(pilot_two, lambda: "tree says hello" in screen_text(two), what="tree's log in the second")
        await pilot_two.press("c", "y")
        await until(pilot_one, lambda: ui_states(one)["tree"] == "CANCELLED", what="the first sees it")
        assert one.selected_task == "free"
        assert session.control.viewers == 2


async def test_q_in_an_attached_viewer_detaches_by_default_and_the_run_goes_on(served):
    session, _ = served
    async with viewer(session.run, session.store) as (app, pilot):
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen) and app.screen.default == "detach"
        await pilot.pause()
        text = screen_text(app)
        assert "It is not finished" in text and "Detach (d)" in text and "Stop the run (s)" in text
        await pilot.press("enter")
        await until(pilot, lambda: app.return_value == DETACHED, what="detached")
    assert session.scheduler.snapshot()["free"].state.value == "RUNNING"


async def test_ctrl_c_in_an_attached_viewer_never_stops_the_run(served):
    session, _ = served
    async with viewer(session.run, session.store) as (app, pilot):
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.return_value == DETACHED, what="closed")
    assert not session.scheduler.finished and session.interrupted_by is None


async def test_stop_from_a_foreground_viewer_cancels_every_task_then_exits(served):
    session, pids = served
    await_until(lambda: len(pids_of(pids)) == 2)
    procs = pids_of(pids)
    async with viewer(session.run, session.store, foreground=True) as (app, pilot):
        assert "foreground · engine pid" in screen_text(app)
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen) and app.screen.default == "back"
        # The way out is called what it does: `Cancel (c)` under "Stop: every task is cancelled" read as the stop.
        assert [str(button.label) for button in app.screen.query(Button)] == [
            "Stop the run (s)",
            "Detach (d)",
            "Back (Esc)",
        ]
        await pilot.press("enter")  # the safe answer: the question closes, nothing is stopped
        assert not isinstance(app.screen, ChoiceScreen) and not session.scheduler.finished
        assert all(p.is_running() for p in procs)
        await pilot.press("q", "s")
        await until(pilot, lambda: session.scheduler.finished, what="the run stopped")
        await until(pilot, lambda: not app.is_running, what="the viewer exited")
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


async def test_sigterm_to_a_foreground_viewer_interrupts_the_run(served):
    session, _ = served
    async with viewer(session.run, session.store, foreground=True) as (app, pilot):
        app._on_signal(signal.SIGTERM)  # what the app's signal handler calls
        await until(pilot, lambda: session.scheduler.finished, what="the run stopped")
    assert session.interrupted_by == "SIGTERM"


def await_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


# -------------------------------------------------------------------------------------- a real engine process
ENGINE = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from dags import make_dag, served_run
    from tuidag.launch import RunSession
    workdir = Path(sys.argv[1])
    dag = make_dag({"slow": "echo slow starts; sleep 60", "quick": "echo quick done",
                    "next": {"run": "sleep 60", "depends_on": ["quick"]}}, workdir=workdir)
    session = RunSession.create(dag, Path(sys.argv[2]))
    session.serve_control()
    session.scheduler.start()
    print(session.run.path, flush=True)
    session.scheduler.wait()
    session.finish()
""")


@pytest.fixture
def engine(tmp_path):
    """A run served by another process (killed at the end, with every task it left)."""
    tests = os.path.dirname(os.path.dirname(__file__))
    proc = subprocess.Popen(
        [sys.executable, "-c", ENGINE, str(tmp_path), str(tmp_path / "state"), tests], stdout=subprocess.PIPE, text=True
    )
    folder = proc.stdout.readline().strip()
    run = RunDir(os.path.basename(folder), __import__("pathlib").Path(folder))
    try:
        yield proc, run, RunStore(tmp_path / "state")
    finally:
        children = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        proc.kill()
        proc.wait()
        for child in children + [c for c in psutil.process_iter() if _tagged(c, run.run_id)]:
            try:
                child.kill()
            except psutil.Error:
                pass


def _tagged(proc: psutil.Process, run_id: str) -> bool:
    try:
        return proc.environ().get("TUIDAG_RUN_ID") == run_id
    except psutil.Error:
        return False


async def test_the_engine_killed_turns_the_viewer_into_the_post_mortem_within_a_second(engine):
    proc, run, store = engine
    remote = RemoteRun.attach(run, store)
    async with viewer(run, store, remote=remote) as (app, pilot):
        await until(pilot, lambda: ui_states(app)["next"] == "RUNNING", what="next running")
        assert f"attached · engine pid {proc.pid}" in screen_text(app)
        proc.kill()
        killed = time.monotonic()
        await until(pilot, lambda: app.read_only, timeout=2, what="post-mortem")
        assert time.monotonic() - killed < 1.0
        await pilot.pause()
        text = screen_text(app)
        assert f"post-mortem · the engine (pid {proc.pid}) died · read-only" in text
        assert ui_states(app)["quick"] == "SUCCEEDED"
        # two tasks never recorded an end: the header said "✔ finished: all 3 succeeded"
        assert "✘ finished: 2 with no recorded end" in text and "succeeded" not in text.splitlines()[0]
        await pilot.press("c")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("read-only: the run is over" in n.message for n in app._notifications)


# ------------------------------------------------------------------------------------------- the post-mortem view
POST_MORTEM = """\
name: finished
tasks:
  prepare:
    run: echo preparing the data; sleep 0.3
  train:
    run: echo training; echo loss 0.25; exit 4
    depends_on: [prepare]
  report:
    run: echo never
    depends_on: [train]
  side:
    run: echo a side note
"""


@pytest.fixture
def finished_run(tmp_path):
    """A run of a DAG file that ended (train failed, report skipped), no engine left."""
    from tuidag.model.loader import load_dag

    source = tmp_path / "dag.yaml"
    source.write_text(POST_MORTEM)
    session = RunSession.create(load_dag(source), tmp_path / "state")
    session.scheduler.start()
    session.scheduler.wait(patience(30))
    session.finish()
    return session, source


async def test_the_post_mortem_shows_every_state_duration_and_log_read_only(finished_run):
    session, _ = finished_run
    recorded = session.scheduler.snapshot()
    remote = RemoteRun.stored(session.run, session.store)
    async with viewer(session.run, session.store, remote=remote) as (app, pilot):
        assert ui_states(app) == {"prepare": "SUCCEEDED", "train": "FAILED", "report": "SKIPPED", "side": "SUCCEEDED"}
        for name, snap in recorded.items():
            shown = app.model.snapshots[name]
            assert (shown.started_at, shown.finished_at, shown.reason, shown.exit_code) == (
                snap.started_at,
                snap.finished_at,
                snap.reason,
                snap.exit_code,
            )
        assert app.model.finished and app.model.elapsed() == pytest.approx(session.duration, abs=0.05)
        text = screen_text(app)
        assert "post-mortem · read-only" in text and "loss 0.25" in text  # the failure selected, its log shown
        # The footer offers only the keys that work here (c, C and p only say "read-only"); r starts a resumed run.
        shown = footer(app)
        assert not any(word in shown for word in ("Cancel", "Pause", "Re-run"))
        assert all(key in shown for key in ("? Help", "r Resume", "/ Search", "a All logs", "q Quit", "L List"))
        for key in ("c", "C", "p"):
            await pilot.press(key)
            assert not isinstance(app.screen, (ConfirmScreen, ChoiceScreen))
        assert sum("read-only: the run is over" in n.message for n in app._notifications) == 3
        await pilot.press("slash")
        await pilot.press(*"loss", "enter")
        await until(pilot, lambda: app.log_pane.search_text == "loss", what="search")
        await pilot.press("a")  # every log, interleaved
        await until(
            pilot,
            lambda: all(line in screen_text(app) for line in ("preparing the data", "a side note")),
            what="the combined view",
        )
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, what="q closes at once")


async def test_r_in_the_post_mortem_offers_a_run_that_resumes_from_it(finished_run):
    session, _source = finished_run
    remote = RemoteRun.stored(session.run, session.store)
    async with viewer(session.run, session.store, remote=remote) as (app, pilot):
        await pilot.press("r")
        assert isinstance(app.screen, ConfirmScreen) and session.run.run_id in app.screen.question
        assert app.screen.items == [
            "prepare  (reused if unchanged)",
            "side  (reused if unchanged)",
            "train  (runs again)",
            "report  (runs again)",
        ]
        await pilot.press("y")
        await until(pilot, lambda: app.return_value == RESUME, what="resume chosen")


async def test_r_is_refused_clearly_when_the_dag_file_is_gone(finished_run):
    session, source = finished_run
    source.unlink()
    remote = RemoteRun.stored(session.run, session.store)
    async with viewer(session.run, session.store, remote=remote) as (app, pilot):
        await pilot.press("r")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any(f"the DAG file {source} is gone" in n.message for n in app._notifications)


async def test_a_run_that_ended_before_the_viewer_attached_is_shown_ended(tmp_path):
    """An engine may stay up after its run ended (a detached run waits for its viewer): no "finished" event comes
    after the snapshot, and the view showed the run running, its clock going on, until the engine left."""
    dag = make_dag({"a": "true", "b": {"run": "true", "depends_on": ["a"]}}, workdir=tmp_path, kill_grace=0.5)
    with served_run(dag, tmp_path) as session:
        assert session.scheduler.wait(patience(10))
        async with viewer(session.run, session.store, foreground=True) as (app, pilot):
            await until(pilot, lambda: app.model.finished, timeout=3, what="the run shown ended")
            assert "all 2 succeeded" in str(app.header.render())


async def test_a_run_that_ends_while_viewed_becomes_its_post_mortem(served):
    session, _ = served
    async with viewer(session.run, session.store) as (app, pilot):
        session.scheduler.cancel_all("ended from elsewhere")
        session.scheduler.wait(patience(10))
        session.finish()
        await until(pilot, lambda: app.read_only, what="post-mortem")
        await until(pilot, lambda: "post-mortem · read-only" in screen_text(app), what="the header to say so")
        assert not any(n.severity == "error" for n in app._notifications)  # an end, not a crash
        assert ui_states(app)["free"] == "CANCELLED"
        await until(pilot, lambda: "Cancel" not in footer(app), what="the footer to drop the controls")
        assert "r Resume" in footer(app) and "Pause" not in footer(app)


def footer(app: TuidagApp) -> str:
    return screen_text(app).splitlines()[-1]


def test_a_foreground_viewer_ends_with_the_summarys_counts_where_the_journal_stopped_early(finished_run, capsys):
    """A full disk stops the journal, not the summary (written over room reserved for it): the viewer's last lines
    said the journal's "2 succeeded, 2 running" and nothing of the full disk (the engine's notice had gone to a viewer
    that was not connected yet)."""
    from tuidag.ui.viewer import _closing_lines

    session, _ = finished_run
    journal = session.run.journal
    journal.write_bytes(b"".join(journal.read_bytes().splitlines(keepends=True)[:4]))  # where the disk filled up
    summary = json.loads(session.run.summary.read_text())
    summary.update(outcome="incomplete: state dir full", journal_error="No space left on device", exit_code=1)
    session.run.summary.write_text(json.dumps(summary))
    remote = RemoteRun.stored(session.run, session.store)
    assert _closing_lines(session.run, remote, None) == 1
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first.endswith(": 4 tasks: 2 succeeded, 1 failed, 1 skipped in " + first.rsplit(" ", 1)[1])
    assert second == (
        "tuidag: run incomplete: state dir full (No space left on device): its journal stopped early, "
        "its summary holds how the tasks ended"
    )


def test_a_foreground_viewer_says_a_second_ctrl_c_was_the_end_not_a_dead_engine(finished_run, capsys):
    """A second Ctrl+C makes the engine kill every process and exit at once, without a summary: the viewer said "the
    engine died before recording the run's outcome" and exited 1, where headless tuidag exits 130."""
    from tuidag.ui.viewer import _closing_lines

    session, _ = finished_run
    session.run.summary.unlink()
    with open(session.run.journal, "a") as journal:
        journal.write(
            json.dumps(
                {
                    "type": "run",
                    "event": "forced-exit",
                    "t": time.time(),
                    "signal": "SIGINT",
                    "detail": "second SIGINT: killed 1 process(es)",
                }
            )
            + "\n"
        )
    assert _closing_lines(session.run, RemoteRun.stored(session.run, session.store), None) == 130
    out = capsys.readouterr().out
    assert "tuidag: interrupted by SIGINT twice: every process of the run was killed at once" in out
    assert "died" not in out


async def test_a_signal_closes_the_post_mortem_view(finished_run):
    session, _ = finished_run
    async with viewer(session.run, session.store, remote=RemoteRun.stored(session.run, session.store)) as (app, pilot):
        app._on_signal(signal.SIGHUP)  # the terminal closed
        await until(pilot, lambda: not app.is_running, what="closed")
    assert app.return_value is None


async def test_the_post_mortem_of_a_run_a_signal_stopped_stays_open(tmp_path):
    """The record says the run was interrupted; that is not this view being asked to stop."""
    session = RunSession.create(make_dag({"a": "sleep 60"}, workdir=tmp_path, kill_grace=0.5), tmp_path / "state")
    session.scheduler.start()
    until_running = time.monotonic() + patience(10)
    while session.scheduler.snapshot()["a"].pid is None and time.monotonic() < until_running:
        time.sleep(0.02)
    session.interrupt(signal.SIGTERM)
    session.scheduler.wait(patience(30))
    session.finish()
    remote = RemoteRun.stored(session.run, session.store)
    assert remote.interrupted_by == "SIGTERM"
    async with viewer(session.run, session.store, remote=remote) as (app, pilot):
        await pilot.pause(0.3)  # a few drains: the app would have closed by now
        assert app.is_running and "by SIGTERM" in screen_text(app)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, what="q closes it")


async def test_a_signal_noted_before_the_app_took_over_still_closes_it(finished_run):
    """A terminal closed while the viewer was opening: its SIGHUP was noted by the viewer's own handler, before the
    app's; the app acts on it when it starts instead of staying open on a terminal that is gone."""
    session, _ = finished_run
    remote = RemoteRun.stored(session.run, session.store)
    app = TuidagApp(remote, signals=(signal.SIGHUP,), early_signals=[signal.SIGHUP])
    try:
        async with app.run_test(headless=True, size=SIZE) as pilot:
            await until(pilot, lambda: not app.is_running, what="the app closing on the noted hang-up")
    finally:
        remote.close()


async def test_paused_the_header_says_eta_paused_with_the_work_left_until_resumed(tmp_path):
    """A first run of the DAG gives the history; on the second, `p` in the viewer: the header no longer gives a
    time of day (it moved on a second a second while nothing started), but the work left once resumed."""
    first = make_dag({"a": "sleep 0.3", "b": {"run": "sleep 0.3", "depends_on": ["a"]}}, workdir=tmp_path)
    with served_run(first, tmp_path) as session:
        assert session.scheduler.wait(patience(30))
    gate = tmp_path / "go"
    second = make_dag(
        {"a": f"while [ ! -e {gate} ]; do sleep 0.02; done", "b": {"run": "sleep 30", "depends_on": ["a"]}},
        workdir=tmp_path,
        kill_grace=0.5,
    )
    with served_run(second, tmp_path, gate) as session:
        async with viewer(session.run, session.store) as (app, pilot):
            await pilot.press("p")
            await until(pilot, lambda: app.model.paused and app._expected, what="paused, the history read")
            gate.touch()  # a ends while paused: b waits
            await until(pilot, lambda: app.model.snapshots["a"].state.value == "SUCCEEDED", what="a's end")
            await until(pilot, lambda: "ETA: paused (" in screen_text(app).splitlines()[0], what="ETA: paused")
            header = screen_text(app).splitlines()[0]
            left = float(header.split("ETA: paused (")[1].split("s of work left)")[0])
            assert 0.2 <= left <= 3  # b's expected duration, from the first run (its name's: its command changed)
            assert re.search(r"ETA \d\d:\d\d:\d\d", header) is None  # no time of day
            assert app.model.snapshots["b"].state.value != "RUNNING"
            await pilot.press("p")
            await until(
                pilot,
                lambda: (
                    "ETA: paused" not in screen_text(app).splitlines()[0] and "ETA" in screen_text(app).splitlines()[0]
                ),
                what="an ETA again once resumed",
            )


async def test_the_first_failure_does_not_take_a_selection_the_user_just_acted_on(tmp_path):
    """The user never moved the selection (the first task) but cancels it; a failure right after must not take
    the selection, or the next `c` lands on the failed task. With no one acting, the first failure is selected."""
    go = tmp_path / "go"
    dag = make_dag(
        {
            "first": "sleep 60",
            "second": "sleep 60",
            "breaks": f"while [ ! -e {go} ]; do sleep 0.02; done; echo broken; exit 3",
        },
        workdir=tmp_path,
        kill_grace=0.5,
    )
    with served_run(dag, tmp_path) as session:
        async with viewer(session.run, session.store) as (app, pilot):
            await until(pilot, lambda: app.selected_task is not None, what="a first selection")
            chosen = app.selected_task
            assert chosen != "breaks"
            await pilot.press("c", "y")
            await until(pilot, lambda: ui_states(app)[chosen] == "CANCELLED", what="the user's cancel")
            go.touch()
            await until(pilot, lambda: ui_states(app)["breaks"] == "FAILED", what="the failure")
            await pilot.pause()
            assert app.selected_task == chosen
    (tmp_path / "go").unlink()
    with served_run(dag, tmp_path) as session:  # the same, nobody acting: the failure is selected for the user
        async with viewer(session.run, session.store) as (app, pilot):
            await until(pilot, lambda: app.selected_task is not None, what="a first selection")
            go.touch()
            await until(pilot, lambda: app.selected_task == "breaks", what="the failure selected")


async def test_a_running_tiles_slots_and_usage_are_whole_when_the_screen_has_room(tmp_path):
    """At 160x45 a three-task DAG leaves 100 columns free: its tiles grow to hold `gpu:0 cpu 0% mem 1.2M` (they
    stayed 22 cells wide and cut it to `gpu:0 cpu 0% me…`)."""
    from tuidag.model.loader import load_dag

    source = tmp_path / "dag.yaml"
    source.write_text(
        "name: gpus\nresources: {gpu: 2}\ntasks:\n  prep: {run: 'true'}\n"
        "  train: {run: 'sleep 60', resources: {gpu: 1}, depends_on: [prep]}\n"
        "  report: {run: 'true', depends_on: [train]}\n"
    )
    with served_run(load_dag(source), tmp_path) as session:
        async with viewer(session.run, session.store) as (app, pilot):
            await until(pilot, lambda: "train" in app.model.usage, what="train's usage")
            await until(pilot, lambda: "mem" in app.canvas._lines_of("train")[2].text, what="the tile's details")
            bottom = app.canvas._lines_of("train")[2].text
            assert re.search(r"gpu:0 cpu \d+% mem [\d.]+[KMG]?i?B? ─", bottom) and "…" not in bottom, bottom
            assert app.graph.fits(tuple(app.canvas.scrollable_content_region.size))


@pytest.mark.parametrize("foreground", [False, True])
async def test_at_80x24_a_viewers_header_keeps_its_role_and_the_run_id(served, foreground):
    session, _ = served
    remote = RemoteRun.attach(session.run, session.store, foreground=foreground)
    app = TuidagApp(remote)
    try:
        async with app.run_test(headless=True, size=(80, 24)) as pilot:
            await until(pilot, lambda: "● running" in screen_text(app).splitlines()[0], what="the header")
            header = screen_text(app).splitlines()[0]
            role = "◆ foreground" if foreground else "◆ attached"
            assert role in header and session.run.run_id in header, header
    finally:
        remote.close()


async def test_a_one_task_run_says_1_task_in_the_graph_the_list_and_the_timeline(tmp_path):
    """Counts in the UI speak as the commands do: '1 task', and thousands with a separator."""
    with served_run(make_dag({"only": "sleep 30"}, workdir=tmp_path, kill_grace=0.5), tmp_path) as session:
        async with viewer(session.run, session.store) as (app, pilot):
            await until(pilot, lambda: "· 1 task " in screen_text(app), what="the graph's title")
            assert "1 tasks" not in screen_text(app)
            await pilot.press("L")
            await until(
                pilot,
                lambda: "· 1 task" in screen_text(app) and "1 tasks" not in screen_text(app),
                what="the list's title",
            )
            await pilot.press("t")
            await until(pilot, lambda: "· 1 task ·" in screen_text(app), what="the timeline's title")
