"""The note at the end of a run, on a real terminal: the real binary in a tmux pane whose output (what the program
writes to its terminal, before tmux reads it) is captured with `tmux pipe-pane -O`. Inside tmux the desktop
notification is wrapped in tmux's passthrough; a pane started without TMUX shows the plain sequence a terminal
gets. The foreground UI, `tuidag attach` and the headless output each ring; into a pipe, or under CI, nothing."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slowness import patience

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

REPO = Path(__file__).resolve().parents[2]
ESC, BEL = "\x1b", "\x07"
# `bad` fails once the test creates `go`, so a viewer is up before anything ends.
DAG = """\
name: notes
notify: failure
tasks:
  gate:
    run: while [ ! -e go ]; do sleep 0.05; done
  bad:
    depends_on: gate
    run: exit 3
  fine:
    depends_on: gate
    run: "true"
"""


def until(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {patience(timeout):.0f}s")
        time.sleep(0.05)


class Pane:
    """A command in a tmux server of its own, started only once its output is being captured."""

    def __init__(self, workdir: Path, command: str, env: str = ""):
        self.socket = f"tuidag-notes-{os.getpid()}-{time.monotonic_ns()}"
        self.workdir = workdir
        self.output = workdir / f"pane-{time.monotonic_ns()}.out"
        go = workdir / f"start-{time.monotonic_ns()}"
        shell = (
            f"while [ ! -e {go} ]; do sleep 0.02; done; cd {workdir} && "
            f"env -u CI -u COLUMNS -u LINES {env} PYTHONPATH={REPO} {sys.executable} -m tuidag {command}; "
            "echo exited $? > exit.code; sleep 60"
        )
        self._tmux("new-session", "-d", "-s", "n", "-x", "100", "-y", "30", shell)
        self._tmux("pipe-pane", "-O", "-t", "n", f"cat >> {shlex.quote(str(self.output))}")
        go.touch()

    def _tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)

    def written(self) -> str:
        """Everything the command wrote to its terminal so far."""
        return self.output.read_bytes().decode("utf-8", "replace") if self.output.exists() else ""

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "n").stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "n", key)

    def kill(self) -> None:
        path = self._tmux("display-message", "-p", "#{socket_path}").stdout.strip()
        self._tmux("kill-server")
        if path:
            Path(path).unlink(missing_ok=True)


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "dag.yaml").write_text(DAG)
    panes: list[Pane] = []
    try:
        yield tmp_path, panes
    finally:
        (tmp_path / "go").touch()  # a run the test left waiting ends by itself
        for pane in panes:
            pane.kill()


def test_the_foreground_ui_in_tmux_rings_at_the_end_through_the_passthrough(workdir):
    path, panes = workdir
    pane = Pane(path, "run dag.yaml --tui --notify end --state-dir state", env="TERM_PROGRAM=WezTerm")
    panes.append(pane)
    until(lambda: "gate" in pane.screen(), what="the UI")
    (path / "go").touch()
    # --notify end wins over the file's `notify: failure`: one note, at the end, wrapped for tmux, then a bell
    note = f"{ESC}Ptmux;{ESC}{ESC}]9;tuidag: notes failed: 3 tasks: 2 succeeded, 1 failed in "
    until(lambda: note in pane.written(), what="the note at the end")
    written = pane.written()
    after = written[written.index(note) + len(note) :]
    assert after.index(f"{BEL}{ESC}\\{BEL}") < 20  # the duration, the OSC's end, tmux's ST, the bell
    assert "bad failed" not in written


def test_attach_rings_at_the_first_failure_as_the_dag_asks(workdir):
    path, panes = workdir
    started = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "-d", "dag.yaml", "--state-dir", "state"],
        cwd=path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=patience(60),
    )
    assert started.returncode == 0, started.stderr
    pane = Pane(path, "attach --state-dir state", env="-u TMUX TERM=foot")  # the plain sequence a terminal gets
    panes.append(pane)
    until(lambda: "attached" in pane.screen(), what="the viewer")
    (path / "go").touch()
    note = f"{ESC}]777;notify;tuidag: notes;bad failed: exit code 3{BEL}{BEL}"
    until(lambda: note in pane.written(), what="the note of the failure")
    until(lambda: "post-mortem" in pane.screen(), what="the run's end")
    assert pane.written().count(f"{ESC}]777;") == 1  # `failure`: nothing more at the end


def test_the_headless_output_on_a_terminal_rings_at_the_end_and_not_under_ci(workdir):
    path, panes = workdir
    (path / "go").touch()
    pane = Pane(path, "run dag.yaml --no-tui --notify end --state-dir state", env="-u TMUX TERM=foot")
    panes.append(pane)
    until(lambda: (path / "exit.code").exists(), what="the run's end")
    written = pane.written()
    assert f"{ESC}]777;notify;tuidag: notes failed;3 tasks: 2 succeeded, 1 failed in " in written
    assert written.rstrip("\r\n").endswith(f"s{BEL}{BEL}")  # the last thing written: no line after it

    (path / "exit.code").unlink()
    quiet = Pane(path, "run dag.yaml --no-tui --notify end --state-dir state", env="-u TMUX TERM=foot CI=true")
    panes.append(quiet)
    until(lambda: (path / "exit.code").exists(), what="the run's end")
    assert "1 failed in" in quiet.written() and BEL not in quiet.written() and f"{ESC}]" not in quiet.written()


def test_nothing_is_written_into_a_pipe(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TMUX")}
    env.update(PYTHONPATH=str(REPO), TERM="foot")
    (tmp_path / "dag.yaml").write_text(DAG)
    (tmp_path / "go").touch()
    for choice in ("end", "failure"):
        done = subprocess.run(
            [sys.executable, "-m", "tuidag", "run", "dag.yaml", "--notify", choice, "--state-dir", "state"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=patience(60),
        )
        assert done.returncode == 1 and "1 failed in" in done.stdout
        assert BEL not in done.stdout + done.stderr and ESC not in done.stdout + done.stderr


def test_browsing_a_finished_run_rings_nothing(workdir):
    path, panes = workdir
    (path / "go").touch()
    ran = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "dag.yaml", "--state-dir", "state"],
        cwd=path,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=patience(60),
    )
    assert ran.returncode == 1
    (run_id,) = [run.name for run in (path / "state" / "runs").iterdir() if not run.name.startswith(".")]
    for command in ("show", f"attach {run_id}"):  # `attach` on a finished run browses it
        pane = Pane(path, f"{command} --state-dir state", env="-u TMUX TERM=foot")
        panes.append(pane)
        until(lambda: "post-mortem" in pane.screen(), what="the post-mortem view")  # noqa: B023
        assert "]777;" not in pane.written()
