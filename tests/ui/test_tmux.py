"""End to end in a real terminal: `tuidag run FILE` inside tmux, driven with send-keys, read with capture-pane.

The tasks write their pids (the shell and a child) to a file; after tuidag exits, none of them, and no process with
the run's TUIDAG_RUN_ID in its environment, may be left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from slowness import patience

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

REPO = Path(__file__).resolve().parents[2]
DAG = """\
name: e2e
tasks:
  slow:
    run: echo $$ >> pids; sleep 30 & echo $! >> pids; echo slow started; wait
  after:
    depends_on: slow
    run: "true"
  other:
    run: echo $$ >> pids; sleep 30 & echo $! >> pids; echo other started; wait
"""
# Runs the CLI like the `tuidag` script does, and records its pid and exit code for the test.
LAUNCHER = (
    "import os, sys; open('tuidag.pid', 'w').write(str(os.getpid())); from tuidag.cli import main; "
    "code = main(sys.argv[1:]); open('exit.code', 'w').write(str(code)); sys.exit(code)"
)


class Tmux:
    def __init__(
        self,
        workdir: Path,
        dag: str = DAG,
        kill_grace: float = 0.5,
        size: tuple[int, int] = (160, 45),
        targets: tuple[str, ...] = (),
        options: tuple[str, ...] = (),
    ):
        self.name = f"tuidag-e2e-{os.getpid()}-{time.monotonic_ns()}"
        self.tmux = ["tmux", "-L", self.name]
        self.workdir = workdir
        (workdir / "dag.yaml").write_text(dag)
        # COLUMNS/LINES reach the session from the test's environment and would override the terminal's real size.
        command = (
            f'cd {workdir} && env -u COLUMNS -u LINES PYTHONPATH={REPO} {sys.executable} -c "{LAUNCHER}" '
            f"run dag.yaml {' '.join((*targets, *options))} --state-dir state --kill-grace {kill_grace}"
        )
        # A server of its own (-L): sessions of tests running at once never meet a shared server as it exits.
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), command],
            check=True,
        )

    def screen(self) -> str:
        done = subprocess.run([*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True)
        return done.stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run([*self.tmux, "send-keys", "-t", self.name, key], check=True)

    def resize(self, width: int, height: int) -> None:
        subprocess.run([*self.tmux, "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)], check=True)

    def alive(self) -> bool:
        return subprocess.run([*self.tmux, "has-session", "-t", self.name], capture_output=True).returncode == 0

    def wait_for(self, text: str, timeout: float = 15.0) -> str:
        deadline = time.monotonic() + patience(timeout)
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not on screen within {patience(timeout):.0f}s:\n{screen}")
            time.sleep(0.05)

    def wait_exit(self, timeout: float = 15.0) -> int:
        code = self.workdir / "exit.code"
        deadline = time.monotonic() + patience(timeout)
        while not code.exists() or (self.alive() and not code.read_text()):
            if time.monotonic() > deadline:
                raise AssertionError(f"tuidag did not exit within {patience(timeout):.0f}s:\n{self.screen()}")
            time.sleep(0.05)
        return int(code.read_text())

    def kill(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path):
    session = Tmux(tmp_path)
    yield session
    session.kill()


def task_pids(workdir: Path, count: int = 4) -> list[psutil.Process]:
    path = workdir / "pids"
    deadline = time.monotonic() + patience(15)
    while not path.exists() or len(path.read_text().split()) < count:
        assert time.monotonic() < deadline, "tasks did not start"
        time.sleep(0.05)
    return [psutil.Process(int(pid)) for pid in path.read_text().split()]


def leftovers(workdir: Path, procs: list[psutil.Process]) -> list[psutil.Process]:
    """Task processes still alive, by pid (+ create time) and by the run id in their environment."""
    run_id = next((workdir / "state" / "runs").iterdir()).name
    left = [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("TUIDAG_RUN_ID") == run_id and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(proc)
        except psutil.Error:
            pass
    return left


def select(tmux: Tmux, task: str) -> None:
    tmux.wait_for("┏━ ")  # a selection is drawn: the graph is laid out
    for _ in range(4):
        if f"┏━ {task} " in tmux.screen():
            return
        tmux.keys("j")
        time.sleep(0.1)
    tmux.wait_for(f"┏━ {task} ")


def test_cancel_a_branch_then_quit(tmux):
    tmux.wait_for("2 running")
    procs = task_pids(tmux.workdir)
    select(tmux, "slow")
    tmux.keys("c")
    tmux.wait_for("Cancel slow and everything downstream of it?")
    tmux.keys("y")
    tmux.wait_for("2 cancelled")
    assert "⊘ cancelled" in tmux.screen() and "● 1 running" in tmux.screen()
    tmux.keys("q")
    tmux.wait_for("It is not finished")  # the foreground viewer's question
    tmux.keys("s")  # stop the run
    assert tmux.wait_exit() == 1
    assert leftovers(tmux.workdir, procs) == []


@pytest.mark.parametrize("how, code", [("SIGTERM", 143), ("SIGHUP", 129)])
def test_signals_stop_every_task(tmux, how, code):
    tmux.wait_for("2 running")
    procs = task_pids(tmux.workdir)
    if how == "SIGTERM":
        os.kill(int((tmux.workdir / "tuidag.pid").read_text()), signal.SIGTERM)
    else:
        tmux.kill()  # closing the terminal: tuidag gets SIGHUP
    assert tmux.wait_exit() == code
    assert leftovers(tmux.workdir, procs) == []


def test_a_run_of_one_target_in_the_real_terminal_runs_what_it_needs_and_exits_0(tmp_path):
    """`tuidag run dag.yaml publish` in a terminal: publish and build run, lint (which would fail) never starts; the
    header says so and the exit code is the target's."""
    dag = """tasks:
  build: {run: "touch ran-build"}
  publish: {run: "touch ran-publish", depends_on: [build]}
  lint: {run: "touch ran-lint; exit 1"}
"""
    session = Tmux(tmp_path, dag, targets=("publish",))
    try:
        session.wait_for("✔ finished: all 2 succeeded, 1 not a target")
        session.keys("q")
        assert session.wait_exit() == 0
    finally:
        session.kill()
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-build", "ran-publish"]
