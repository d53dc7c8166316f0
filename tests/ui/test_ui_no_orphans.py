"""No process survives the UI ways of ending a task or a run, whatever the task's tree does (see tests/trees.py).

The UI counterpart of tests/test_no_orphans.py. Each way runs ONE DAG holding all six hostile trees as independent
tasks, and acts only once every tree has recorded all its pids (pid + create time, so a recycled pid never counts):
- `c` (Pilot, real engine): cancel the six branches one after another in one app session;
- `C` (Pilot): cancel everything;
- `q` (Pilot): quit while the tasks run;
- SIGHUP: the real `tuidag run` in tmux, whose session is killed (the terminal closing).
For `c`, `C` and `q` a scheduler observer checks each tree the instant the engine sets its task CANCELLED (no grace
afterwards); for SIGHUP the check is the instant the tuidag process is gone. Failures name every (way, tree) pair.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil
import pytest
from pilot_helpers import open_app, select, until
from test_tmux import Tmux

from dags import alive, read_pids, wait_until
from slowness import patience
from test_no_orphans import GRACE, survivors
from trees import TREES
from tuidag.engine.events import TaskEvent
from tuidag.store.journal import replay
from tuidag.ui.screens.choice import ChoiceScreen
from tuidag.ui.screens.confirm import ConfirmScreen

START_TIMEOUT = 30.0  # six trees (62 processes) starting at once, on 2 loaded cores
END_TIMEOUT = 20.0


class Trees:
    """The six trees of one run: their pid files, the processes they recorded, and what was alive when each ended.

    Also an engine observer: the moment the scheduler reports a tree's task terminal, it notes which of the tree's
    processes are still alive (events are delivered right after the snapshot changes)."""

    def __init__(self, workdir: Path):
        self.files = {tree.name: workdir / f"{tree.name}.pids" for tree in TREES}
        self.refs: dict[str, list[tuple[int, float]]] = {}
        self.at_end: dict[str, tuple[str, list[int]]] = {}  # tree -> (state, survivors) when its task ended
        self.run_id: str | None = None

    def tasks(self) -> dict[str, dict]:
        return {tree.name: {"run": tree.command(self.files[tree.name])} for tree in TREES}

    def yaml(self) -> str:
        tasks = "".join(
            f"  {tree.name}:\n    run: {json.dumps(tree.command(self.files[tree.name]))}\n" for tree in TREES
        )
        return f"name: ui-no-orphans\nmax_parallel: {len(TREES)}\nkill_grace: {GRACE}\ntasks:\n{tasks}"

    def __call__(self, event) -> None:
        if isinstance(event, TaskEvent) and event.task in self.files and event.new.terminal:
            self.at_end.setdefault(event.task, (event.new.value, survivors(self.refs.get(event.task, []))))

    # ------------------------------------------------------------------------------------------------- start
    def started(self) -> bool:
        return all(
            f.exists() and len(f.read_text().split()) >= tree.processes for tree, f in zip(TREES, self.files.values())
        )

    def record(self) -> None:
        """Called once `started()`: every recorded process, by pid and create time."""
        for tree in TREES:
            self.refs[tree.name] = read_pids(self.files[tree.name])
        short = {t.name: len(self.refs[t.name]) for t in TREES if len(self.refs[t.name]) != t.processes}
        assert not short, f"trees with fewer live processes than expected, before anything ended: {short}"

    # ------------------------------------------------------------------------------------------------- checks
    def report(
        self,
        way: str,
        left: dict[str, list[int]],
        states: dict[str, str] | None = None,
        when: str = "when its task ended",
    ) -> str:
        lines = [f"{way}: processes of each tree alive {when}:"]
        for tree in TREES:
            state = (states or {}).get(tree.name, "")
            alive_now = left.get(tree.name, [])
            verdict = f"{len(alive_now)} of {tree.processes} survived {alive_now}" if alive_now else "ok"
            lines.append(f"  ({way}, {tree.name}): {verdict} {state}".rstrip())
        return "\n".join(lines)

    def check_at_end(self, way: str) -> None:
        """Every tree's task ended CANCELLED and none of its processes was alive at that instant."""
        left = {name: dead for name, (state, dead) in self.at_end.items() if dead}
        states = {
            tree.name: f"[task {self.at_end[tree.name][0] if tree.name in self.at_end else 'never ended'}]"
            for tree in TREES
        }
        bad_state = {n for n, s in states.items() if s != "[task CANCELLED]"}
        assert not left and not bad_state, self.report(way, left, states)

    def survivors_now(self) -> dict[str, list[int]]:
        return {name: dead for name, refs in self.refs.items() if (dead := survivors(refs))}

    # ------------------------------------------------------------------------------------------------ cleanup
    def kill_leftovers(self) -> None:
        """SIGKILL whatever is left of the trees: the processes recorded (pid + create time) and, for a tree that never
        finished starting, the pids in its file that carry this run's tag."""
        targets = [psutil.Process(pid) for refs in self.refs.values() for pid, ct in refs if alive(pid, ct)]
        for f in self.files.values():
            if self.run_id is None or not f.exists():
                continue
            for pid in map(int, f.read_text().split()):
                try:
                    proc = psutil.Process(pid)
                    if proc.environ().get("TUIDAG_RUN_ID") == self.run_id:
                        targets.append(proc)
                except psutil.Error:
                    pass
        for proc in targets:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(targets, timeout=patience(5))


def running(session, name: str) -> bool:
    return session.scheduler.snapshot()[name].state.value == "RUNNING"


def ended(session, name: str) -> bool:
    return session.scheduler.snapshot()[name].state.terminal


@pytest.mark.parametrize("way", ["c", "C", "q"])
async def test_ui_keys_leave_no_process(new_session, tmp_path, way):
    trees = Trees(tmp_path)
    session = new_session(trees.tasks(), max_parallel=len(TREES), kill_grace=GRACE)
    trees.run_id = session.run.run_id
    session.scheduler.subscribe(trees)
    try:
        async with open_app(session) as (app, pilot):
            await until(pilot, trees.started, timeout=START_TIMEOUT, what="every tree fully started")
            await until(  # what the viewer knows comes over the socket, a moment after the engine knew it
                pilot,
                lambda: all(app.model.snapshots[t.name].state.value == "RUNNING" for t in TREES),
                what="the view shows every tree running",
            )
            trees.record()
            if way == "c":
                for i, tree in enumerate(TREES):
                    await select(app, pilot, tree.name)
                    await pilot.press("c")
                    assert isinstance(app.screen, ConfirmScreen)
                    assert app.screen.items == [f"{tree.name}  (running)"]
                    await pilot.press("y")
                    await until(
                        pilot,
                        lambda tree=tree: ended(session, tree.name),
                        timeout=END_TIMEOUT,
                        what=f"{tree.name} cancelled",
                    )
                    # cancelling one branch leaves the other trees whole
                    later = TREES[i + 1 :]
                    dead = {t.name: sum(not alive(*ref) for ref in trees.refs[t.name]) for t in later}
                    hurt = {
                        name: f"{n} process(es) gone, task {session.scheduler.snapshot()[name].state.value}"
                        for name, n in dead.items()
                        if n or not running(session, name)
                    }
                    assert not hurt, f"(c, {tree.name}): cancelling it hurt other branches: {hurt}"
                await until(pilot, lambda: app.model.finished, timeout=END_TIMEOUT, what="run finished")
            elif way == "C":
                await pilot.press("C")
                assert isinstance(app.screen, ConfirmScreen)
                assert sorted(app.screen.items) == sorted(f"{t.name}  (running)" for t in TREES)
                await pilot.press("y")
                await until(
                    pilot,
                    lambda: all(ended(session, t.name) for t in TREES),
                    timeout=END_TIMEOUT,
                    what="every tree cancelled",
                )
            else:
                await pilot.press("q")
                assert isinstance(app.screen, ChoiceScreen)
                await pilot.press("s")
                await until(pilot, lambda: app.return_code is not None, timeout=END_TIMEOUT, what="app exit")
                left = trees.survivors_now()  # the instant the app has exited
                assert not left, trees.report("q", left, when="the instant the app exited")
                assert session.scheduler.finished
            trees.check_at_end(way)
        if way == "q":
            assert session.exit_code(session.finish()) == 1
    finally:
        trees.kill_leftovers()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_sighup_closing_the_terminal_leaves_no_process(tmp_path):
    trees = Trees(tmp_path)
    tmux = Tmux(tmp_path, dag=trees.yaml(), kill_grace=GRACE)
    try:
        wait_until(trees.started, timeout=START_TIMEOUT)
        trees.run_id = next((tmp_path / "state" / "runs").iterdir()).name
        trees.record()
        tuidag = psutil.Process(int((tmp_path / "tuidag.pid").read_text()))
        tuidag_ref = (tuidag.pid, tuidag.create_time())
        tmux.kill()  # closing the terminal: tuidag gets SIGHUP
        wait_until(lambda: not alive(*tuidag_ref), timeout=END_TIMEOUT)
        left = trees.survivors_now()  # the instant the tuidag process is gone
        journals = list((tmp_path / "state" / "runs").glob("*/journal.jsonl"))
        assert len(journals) == 1, journals
        rep = replay(journals[0])
        states = {t.name: f"[journal: {rep.tasks[t.name].state.value}]" for t in TREES}
        gone = "the instant the tuidag process was gone"
        assert not left, trees.report("SIGHUP", left, states, gone)
        assert set(states.values()) == {"[journal: CANCELLED]"}, trees.report("SIGHUP", left, states, gone)
        assert tmux.wait_exit() == 129
    finally:
        tmux.kill()
        trees.kill_leftovers()
