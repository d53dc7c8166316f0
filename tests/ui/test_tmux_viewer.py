"""End to end with the real binary: a detached run (`tuidag run -d`), viewers attached in tmux (each test on a tmux
server of its own, so killing it hangs up only its viewers), controls from the viewer and from another shell, and
the engine killed under a viewer. Every task writes its pids (the shell and a child) to a file, so the test can say
which processes must still run and which must be gone."""

from __future__ import annotations

import os
import re
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
name: long
max_parallel: 4
tasks:
  slow:
    run: echo $$ >> slow.pids; sleep 60 & echo $! >> slow.pids; echo slow started; wait
  after:
    depends_on: slow
    run: "true"
  other:
    run: echo $$ >> other.pids; sleep 60 & echo $! >> other.pids; echo other started; wait
  keeps:
    run: echo $$ >> keeps.pids; sleep 60 & echo $! >> keeps.pids; echo keeps going; wait
"""


def kill_task_trees(workdir) -> None:
    """Whatever the DAG's tasks left running (their pids in TASK.pids), however a test ended."""
    for task in ("slow", "other", "keeps"):
        path = workdir / f"{task}.pids"
        for pid in path.read_text().split() if path.exists() else ():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def tuidag(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuidag", *args, "--state-dir", "state"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=patience(60),
    )


def until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {patience(timeout):.0f}s")
        time.sleep(0.05)


def pids(workdir: Path, task: str, count: int = 2) -> list[psutil.Process]:
    path = workdir / f"{task}.pids"
    until(lambda: path.exists() and len(path.read_text().split()) >= count, what=f"{task}'s pids")
    return [psutil.Process(int(p)) for p in path.read_text().split()]


def alive(procs: list[psutil.Process]) -> bool:
    return all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


def gone(procs: list[psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


def reap(pid: int) -> None:
    """A killed engine is the test runner's zombie when the runner is a subreaper (a run it ran in-process made it
    one): reap it."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


class Viewer:
    """`tuidag attach` (or another command) in a tmux server of its own; its exit code lands in `attach.code`."""

    def __init__(self, workdir: Path, *args: str, size: tuple[int, int] = (160, 45), command: str = "attach"):
        self.socket = f"tuidag-viewer-{os.getpid()}-{time.monotonic_ns()}"
        self.workdir = workdir
        (workdir / "attach.code").unlink(missing_ok=True)
        command = (
            f"cd {workdir} && env -u COLUMNS -u LINES PYTHONPATH={REPO} {sys.executable} -m tuidag {command} "
            f"{' '.join(args)} --state-dir state; echo $? > attach.code; sleep 30"
        )
        self._tmux("new-session", "-d", "-s", "v", "-x", str(size[0]), "-y", str(size[1]), command)

    def _tmux(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "v").stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "v", key)

    def wait_for(self, text: str, timeout: float = 15.0) -> str:
        until(lambda: text in self.screen(), timeout, what=f"{text!r} on screen")
        return self.screen()

    def exit_code(self, timeout: float = 15.0) -> int:
        code = self.workdir / "attach.code"
        until(lambda: code.exists() and code.read_text().strip(), timeout, what="the viewer's exit")
        return int(code.read_text())

    def kill_server(self) -> None:
        path = self._tmux("display-message", "-p", "#{socket_path}").stdout.strip()
        self._tmux("kill-server")
        if path:
            Path(path).unlink(missing_ok=True)


@pytest.fixture
def detached(tmp_path):
    """A run started with `tuidag run -d`: (workdir, run id, engine pid); everything it left is killed after."""
    (tmp_path / "dag.yaml").write_text(DAG)
    started = tuidag(tmp_path, "run", "-d", "dag.yaml", "--kill-grace", "0.5")
    assert started.returncode == 0, started.stderr
    run_id, pid = re.search(
        r"run (\S+) of long started in the background \(engine pid (\d+)\)", started.stdout
    ).groups()
    viewers: list[Viewer] = []
    try:
        yield tmp_path, run_id, int(pid), viewers
    finally:
        for viewer in viewers:
            viewer.kill_server()
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
        reap(int(pid))
        tuidag(tmp_path, "runs")  # reaps what the run left, as the next command does after a crash
        kill_task_trees(tmp_path)


def test_attach_cancel_from_viewer_and_shell_hang_up_reattach_then_the_engine_dies(detached):
    workdir, run_id, engine, viewers = detached
    slow, other, keeps = pids(workdir, "slow"), pids(workdir, "other"), pids(workdir, "keeps")
    first = Viewer(workdir)
    viewers.append(first)
    first.wait_for(f"attached · engine pid {engine}")
    first.keys(":")  # the finder: select `slow` by name
    first.wait_for("Enter jumps")
    first.keys("slow", "Enter")
    first.wait_for("slow started")
    first.keys("c")
    first.wait_for("everything downstream of it")
    first.keys("y")
    until(lambda: gone(slow), what="slow's tree killed")

    cancelled = tuidag(workdir, "cancel", "other", "--run", run_id)  # from another shell
    assert cancelled.returncode == 0, cancelled.stderr
    until(lambda: gone(other), what="other's tree killed")
    until(lambda: "3 cancelled" in first.screen(), what="the viewer to count them")  # slow, after and other
    assert alive(keeps)

    first.kill_server()  # the terminal goes away: SIGHUP to the viewer, never to the run
    until(
        lambda: (
            not any(
                p.info["cmdline"] and "attach" in p.info["cmdline"]
                for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and str(workdir) in " ".join(p.info["cmdline"])
            )
        ),
        timeout=5,
        what="the viewer gone",
    )
    assert alive(keeps) and psutil.pid_exists(engine)

    second = Viewer(workdir, run_id)
    viewers.append(second)
    second.wait_for(f"attached · engine pid {engine}")
    screen = second.wait_for("3 cancelled")  # the state of every task as the engine has it
    assert "1 running" in screen
    second.keys("d")  # detach: the viewer prints how to come back
    assert second.exit_code() == 0
    screen = second.wait_for(f"tuidag attach {run_id}")
    assert alive(keeps)

    third = Viewer(workdir, run_id)
    viewers.append(third)
    third.wait_for(f"attached · engine pid {engine}")
    os.kill(engine, signal.SIGKILL)
    killed = time.monotonic()
    third.wait_for("died", timeout=3)
    assert time.monotonic() - killed < 1.5  # < 1 s to notice, then a frame to paint it
    third.wait_for("post-mortem")
    third.keys("c")
    third.wait_for("read-only: the run is over")
    third.keys("q")
    assert third.exit_code() == 0


def stop(pid: int) -> None:
    """SIGSTOP, and wait until every thread of the process is stopped (the signal takes effect asynchronously)."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat", "rb") as f:
                states.append(f.read().rpartition(b")")[2].split()[0])
        return all(state in (b"T", b"t") for state in states)

    until(stopped, what="the engine stopped")


def header_of(screen: str) -> str:
    return next((line for line in screen.splitlines() if "engine pid" in line or "post-mortem" in line), "")


def test_attach_to_a_stopped_engine_says_not_answering_and_goes_live_after_sigcont(detached):
    """It opened "post-mortem · read-only · finished: 2 with no recorded end" and never looked again, while `tuidag
    runs` said the run was running."""
    workdir, run_id, engine, viewers = detached
    keeps = pids(workdir, "keeps")
    stop(engine)
    try:
        viewer = Viewer(workdir, run_id)
        viewers.append(viewer)
        until(
            lambda: f"attached · engine pid {engine} · not answering" in header_of(viewer.screen()),
            timeout=20,
            what="not answering in the header",
        )
        screen = viewer.screen()
        assert "post-mortem" not in screen and "read-only" not in screen and "no recorded end" not in screen
        assert "running" in tuidag(workdir, "runs").stdout
    finally:
        os.kill(engine, signal.SIGCONT)
    until(lambda: "not answering" not in header_of(viewer.screen()), timeout=10, what="the viewer live again")
    assert f"attached · engine pid {engine}" in header_of(viewer.screen())
    assert f"running (pid {engine}, 1 viewer)" in tuidag(workdir, "runs").stdout  # it subscribed
    assert tuidag(workdir, "cancel", "other").returncode == 0
    until(lambda: "1 cancelled" in viewer.screen(), what="the viewer to follow the engine's events")
    assert alive(keeps)


def test_show_browses_a_finished_run_and_r_starts_one_resuming_from_it(tmp_path):
    (tmp_path / "dag.yaml").write_text(
        "name: done\ntasks:\n  good:\n    run: echo all good\n"
        "  bad:\n    run: echo bad news; exit 3\n    depends_on: [good]\n"
    )
    ended = tuidag(tmp_path, "run", "--no-tui", "dag.yaml")
    assert ended.returncode == 1
    run_id = re.search(r"run (\S+) of done", ended.stdout).group(1)
    viewer = Viewer(tmp_path, run_id, command="show")
    try:
        viewer.wait_for("post-mortem · read-only")
        screen = viewer.wait_for("bad news")  # the failure selected, its log shown
        assert "1 done" in screen and "1 failed" in screen
        viewer.keys("p")
        viewer.wait_for("read-only: the run is over")
        viewer.keys("r")
        viewer.wait_for("bad  (runs again)")
        viewer.keys("y")  # exec: tuidag run dag.yaml --resume RUN_ID, in this terminal
        viewer.wait_for("reused")
        until(
            lambda: len(re.findall(r"^\d{8}-\d{6}-", tuidag(tmp_path, "runs").stdout, re.M)) == 2, what="a second run"
        )
    finally:
        viewer.kill_server()


# ------------------------------------------------------------------------------------------- the foreground viewer
# `tuidag run` in a terminal: the engine in the background, this process its foreground viewer. The exit code
# lands in fg.code.
class Foreground(Viewer):
    def __init__(self, workdir: Path):
        (workdir / "dag.yaml").write_text(DAG)
        self.socket = f"tuidag-viewer-{os.getpid()}-{time.monotonic_ns()}"
        self.workdir = workdir
        command = (
            f"cd {workdir} && env -u COLUMNS -u LINES PYTHONPATH={REPO} {sys.executable} -m tuidag run dag.yaml "
            f"--state-dir state --kill-grace 0.5; echo $? > fg.code; sleep 30"
        )
        self._tmux("new-session", "-d", "-s", "v", "-x", "160", "-y", "45", command)

    def exit_code(self, timeout: float = 15.0) -> int:
        code = self.workdir / "fg.code"
        until(lambda: code.exists() and code.read_text().strip(), timeout, what="the viewer's exit")
        return int(code.read_text())

    def summary(self) -> dict:
        import json

        found = list((self.workdir / "state" / "runs").glob("*/summary.json"))
        return json.loads(found[0].read_text()) if found else {}


@pytest.fixture
def foreground(tmp_path):
    viewer = Foreground(tmp_path)
    try:
        viewer.wait_for("foreground · engine pid")
        yield viewer, [*pids(tmp_path, "slow"), *pids(tmp_path, "other"), *pids(tmp_path, "keeps")]
    finally:
        viewer.kill_server()
        tuidag(tmp_path, "stop")
        tuidag(tmp_path, "runs")
        kill_task_trees(tmp_path)


def test_q_then_s_in_the_foreground_viewer_stops_the_run_and_exits_with_its_code_enter_stops_nothing(foreground):
    viewer, procs = foreground
    viewer.keys("q")
    viewer.wait_for("Stop the run (s)")
    viewer.keys("Enter")  # the highlighted answer is the safe one (#13: Enter never confirms a destructive choice)
    until(lambda: "Stop the run (s)" not in viewer.screen(), what="the question closed")
    assert alive(procs) and "foreground · engine pid" in viewer.screen()
    viewer.keys("q")
    viewer.wait_for("Stop the run (s)")
    viewer.keys("s")
    assert viewer.exit_code() == 1
    assert gone(procs)
    screen = viewer.wait_for("tuidag: logs in")
    assert re.search(r"tuidag: run \S+ of long: .*cancelled", screen)
    assert viewer.summary()["exit_code"] == 1


@pytest.mark.parametrize("how, code", [("ctrl-c", 130), ("hang-up", 129)])
def test_ctrl_c_or_a_hang_up_of_the_foreground_viewer_interrupts_the_run(foreground, how, code):
    viewer, procs = foreground
    if how == "ctrl-c":
        viewer.keys("C-c")
        assert viewer.exit_code() == code
        viewer.wait_for("interrupted by SIGINT; every task was stopped")
    else:
        viewer.kill_server()  # the terminal closes
        until(lambda: viewer.summary().get("exit_code") == code, what="the run's end recorded")
    until(lambda: gone(procs), timeout=5, what="every task stopped")


def test_d_detaches_the_foreground_viewer_and_the_run_goes_on(foreground):
    viewer, procs = foreground
    viewer.keys("d")
    assert viewer.exit_code() == 0
    screen = viewer.wait_for("to see it again")
    run_id = re.search(r"tuidag attach (\S+) --state-dir \S+/state", screen).group(1)
    assert alive(procs)
    assert tuidag(viewer.workdir, "runs").stdout.count("running (pid") == 1
    assert tuidag(viewer.workdir, "stop", "--run", run_id).returncode == 0
    until(lambda: gone(procs), timeout=5, what="stopped from another shell")


def test_the_engine_killed_under_the_foreground_viewer_and_the_viewer_ends_what_its_tasks_left(foreground):
    """The task trees kept writing until some later tuidag command reaped them: the viewer is a tuidag command on
    that state dir, and reaps them itself (as `tuidag runs` would), saying what it ended."""
    viewer, procs = foreground
    engine = int(re.search(r"foreground · engine pid (\d+)", viewer.screen()).group(1))
    os.kill(engine, signal.SIGKILL)
    viewer.wait_for(f"the engine (pid {engine}) died", timeout=3)
    until(lambda: gone(procs), timeout=10, what="the dead run's tasks ended by the viewer")  # no other command ran
    viewer.wait_for("Cleaned up")
    viewer.keys("q")  # the run is over for this viewer: q closes at once
    assert viewer.exit_code() == 1
    screen = viewer.wait_for("before recording the run's outcome")
    assert "this view ended 6 processes its tasks left" in " ".join(screen.split())
    assert viewer.summary()["outcome"] == "interrupted"
    reap(engine)


def test_d_in_a_run_started_from_another_folder_prints_an_attach_command_that_works_there(tmp_path):
    """`cd sub; tuidag run ../dag.yaml`: the run is kept next to the DAG file, not in `sub`; what `d` prints is typed
    as printed in the same shell, and it attaches."""
    (tmp_path / "dag.yaml").write_text(DAG)
    sub = tmp_path / "sub"
    sub.mkdir()
    shell = Viewer.__new__(Viewer)  # an interactive shell in `sub`, where the user types
    shell.socket, shell.workdir = f"tuidag-viewer-{os.getpid()}-{time.monotonic_ns()}", tmp_path
    shell._tmux(
        "new-session",
        "-d",
        "-s",
        "v",
        "-x",
        "160",
        "-y",
        "45",
        "-c",
        str(sub),
        "env -u COLUMNS -u LINES -u TUIDAG_STATE_DIR PS1='$ ' bash --norc --noprofile",
    )
    try:
        shell.keys(f'tuidag() {{ PYTHONPATH={REPO} {sys.executable} -m tuidag "$@"; }}', "Enter")
        shell.keys("tuidag run ../dag.yaml --kill-grace 0.5", "Enter")
        engine = int(re.search(r"foreground · engine pid (\d+)", shell.wait_for("foreground · engine pid")).group(1))
        shell.keys("d")
        printed = re.search(r"to see it again: (tuidag attach .*)", shell.wait_for("to see it again")).group(1).strip()
        shell.keys("clear", "Enter", printed, "Enter")
        shell.wait_for(f"attached · engine pid {engine}")
        shell.keys("q")
        shell.wait_for("Detach (d)")
        shell.keys("s")  # stop the run from the viewer the printed command opened
        until(
            lambda: (tmp_path / ".tuidag").is_dir() and list((tmp_path / ".tuidag").glob("runs/*/summary.json")),
            timeout=15,
            what="the run stopped",
        )
    finally:
        shell.kill_server()
        subprocess.run(
            [sys.executable, "-m", "tuidag", "runs", "--state-dir", ".tuidag"],
            cwd=tmp_path,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=patience(60),
        )
        kill_task_trees(tmp_path)


def test_an_attached_viewer_at_80x24_says_so_and_which_run_in_its_header(detached):
    workdir, run_id, _engine, viewers = detached
    small = Viewer(workdir, run_id, size=(80, 24))
    viewers.append(small)
    small.wait_for("● running")
    header = small.wait_for("◆ attached").splitlines()[0]
    assert run_id in header and "● running" in header, header
    small.keys("d")
    assert small.exit_code() == 0
