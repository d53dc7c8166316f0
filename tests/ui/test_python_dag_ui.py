"""Python DAGs under the UI: what a callable prints reaches its own log, whatever stream the app put in front.

The run starts before the app, as `tuidag run` does, and the tasks wait for a flag file that the test creates once
the app is up: each task writes both before the app replaced `sys.stdout` and while it is in front (and, in the last
test, after it closed). Every line is checked in the right log file, none in another.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pilot_helpers import open_app, served_and_viewed, until

from dags import wait_until
from slowness import patience
from tuidag.api import load_python
from tuidag.engine import output_routing
from tuidag.launch import RunSession
from tuidag.model.durations import format_duration
from tuidag.ui.app import TuidagApp

TASKS = '''
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from tuidag import Dag

dag = Dag("pyui", max_parallel=8)


class ToStderr(logging.Handler):
    """Whatever `sys.stderr` is at the time of the record (as Python's last-resort handler does)."""

    def emit(self, record):
        sys.stderr.write(self.format(record) + "\\n")


log = logging.getLogger("pyui")
log.propagate = False  # the test runner's own handlers on the root logger stay out of it
log.setLevel(logging.INFO)
handler = ToStderr()
handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
log.addHandler(handler)


def wait_for(ctx, flag):
    path = Path(ctx.workdir) / flag
    while not path.exists():
        time.sleep(0.01)


@dag.task()
def printer(ctx):
    print("printer before")
    wait_for(ctx, "app-up")
    for i in range(15):
        print(f"printer tick {i}")
        sys.stderr.write(f"printer err {i}\\n")
        time.sleep(0.01)
    wait_for(ctx, "app-closed")
    print("printer after the app")


@dag.task()
def logger(ctx):
    log.info("logger before")
    wait_for(ctx, "app-up")
    for i in range(10):
        log.warning("logger line %d", i)


@dag.task()
def threads(ctx):
    print("threads before")
    wait_for(ctx, "app-up")
    def body(n):
        for i in range(5):
            print(f"thread {n} line {i}")
    workers = [threading.Thread(target=body, args=(n,)) for n in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda i: print(f"pool item {i}"), range(6)))


@dag.task(isolate=True)
def isolated(ctx):
    print("isolated before", flush=True)
    wait_for(ctx, "app-up")
    for i in range(5):
        print(f"isolated line {i}", flush=True)
    os.write(1, b"isolated fd 1\\n")
    log.info("isolated logging")
'''


def session_of(tmp_path: Path) -> RunSession:
    path = tmp_path / "pyui_tasks.py"
    path.write_text(textwrap.dedent(TASKS).lstrip("\n"))
    return RunSession.create(load_python(path), tmp_path / "state", kill_grace=0.5)


def body_lines(session: RunSession, task: str) -> list[str]:
    """A task's log without tuidag's own header lines."""
    text = session.run.log_path(task).read_text()
    return [line for line in text.splitlines() if not line.startswith("=== tuidag: ")]


def started(session: RunSession, text_by_task: dict[str, str]) -> bool:
    """Every task wrote its first line."""
    paths = {task: session.run.log_path(task) for task in text_by_task}
    return all(paths[task].exists() and text in paths[task].read_text() for task, text in text_by_task.items())


BEFORE = {
    "printer": "printer before",
    "logger": "logger before",
    "threads": "threads before",
    "isolated": "isolated before",
}


async def test_every_line_a_python_task_prints_under_the_ui_lands_in_its_own_log(tmp_path):
    session = session_of(tmp_path)
    (tmp_path / "app-closed").touch()  # this test keeps the app open to the end
    session.scheduler.start()  # before the app, as `tuidag run` does
    wait_until(lambda: started(session, BEFORE), timeout=30)
    async with open_app(session) as (app, pilot):
        assert not isinstance(sys.stdout, io.TextIOWrapper)  # the app's stand-in is in front
        # What multiprocessing asks of sys.stderr when it starts a helper process: a descriptor, or none.
        try:
            assert sys.stderr.fileno() >= 0
        except io.UnsupportedOperation:
            pass
        (tmp_path / "app-up").touch()
        await until(pilot, lambda: app.model.finished, timeout=30, what="the run's end")
        states = {name: snap.state.value for name, snap in app.model.snapshots.items()}
        assert states == dict.fromkeys(BEFORE, "SUCCEEDED"), {n: s.reason for n, s in app.model.snapshots.items()}

    printer = body_lines(session, "printer")
    assert printer == [
        "printer before",
        *(f"printer {kind} {i}" for i in range(15) for kind in ("tick", "err")),
        "printer after the app",
    ]
    logger = body_lines(session, "logger")
    assert logger == ["INFO pyui: logger before", *(f"WARNING pyui: logger line {i}" for i in range(10))]
    threads = body_lines(session, "threads")
    assert threads[0] == "threads before"
    assert sorted(threads[1:]) == sorted(
        [f"thread {n} line {i}" for n in range(3) for i in range(5)] + [f"pool item {i}" for i in range(6)]
    )
    isolated = body_lines(session, "isolated")
    assert isolated[:7] == ["isolated before", *(f"isolated line {i}" for i in range(5)), "isolated fd 1"]
    assert isolated[7:] == ["INFO pyui: isolated logging"]


LATE = """
import time
from pathlib import Path
from tuidag import Dag

dag = Dag("late")
first = dag.shell("first", "true")


@dag.task(depends_on=[first])
def late(ctx):
    print("late while the app is up")
    while not (Path(ctx.workdir) / "app-closed").exists():
        time.sleep(0.01)
    print("late after the app")
"""


async def test_a_callable_that_outlives_the_app_still_writes_to_its_log(tmp_path, capsys):
    """The first callable starts under the app, which then ends (and puts the streams back) while it runs."""
    path = tmp_path / "late_tasks.py"
    path.write_text(LATE.lstrip("\n"))
    session = RunSession.create(load_python(path), tmp_path / "state", kill_grace=0.5)
    # The engine and the viewer share this process here (they never do for users: the engine is forked off):
    # routing goes in front of the streams the app puts back when it ends, as the engine's own would be.
    output_routing.install()
    remote = served_and_viewed(session)
    session.scheduler.start()
    app = TuidagApp(remote)
    try:
        async with app.run_test(headless=True, size=(120, 40)) as pilot:
            await until(pilot, lambda: "while the app is up" in log_text(session, "late"), what="late's start")
    finally:
        remote.close()
    try:
        (tmp_path / "app-closed").touch()
        assert session.scheduler.wait(patience(30))
    finally:
        session.finish()
    assert body_lines(session, "late") == ["late while the app is up", "late after the app"]
    assert "late" not in capsys.readouterr().out


def log_text(session: RunSession, task: str) -> str:
    path = session.run.log_path(task)
    return path.read_text() if path.exists() else ""


def test_a_stream_without_a_descriptor_reports_none_rather_than_a_bad_number():
    """Textual's stand-in for stdout answers `fileno()` with -1; passed on, multiprocessing handed -1 to a child."""
    from tuidag.engine import output_routing

    class NoDescriptor(io.StringIO):
        def fileno(self) -> int:
            return -1

    with pytest.raises(io.UnsupportedOperation):
        output_routing.RoutingStream(NoDescriptor()).fileno()


# --- the demo in a real terminal ---------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_python_demo_in_a_terminal_keeps_every_line_and_its_duration_ends_with_its_last_task(tmp_path):
    """`tuidag run demos/etl.py` in a fresh process (as a user runs it): the isolated task starts (the first child
    process multiprocessing starts under the UI), every page `extract` prints is in its log, and the run's duration,
    printed on exit and kept in summary.json, ends with its last task, not when the user quit."""
    shutil.copy(REPO / "demos" / "etl.py", tmp_path / "etl.py")
    name = f"tuidag-A-etl-{os.getpid()}-{time.monotonic_ns()}"
    command = (
        f"cd {tmp_path} && env PYTHONPATH={REPO} {sys.executable} -m tuidag run etl.py --state-dir state; "
        f"echo EXIT $?; sleep 60"
    )
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", "160", "-y", "45", command], check=True)
    try:
        wait_until(lambda: "finished:" in screen(name), timeout=60)
        (run,) = (tmp_path / "state" / "runs").iterdir()
        time.sleep(1.5)  # the user looks at the finished run before quitting
        quit_at = time.time()
        subprocess.run(["tmux", "-L", name, "send-keys", "-t", name, "q"], check=True)
        wait_until(lambda: "EXIT " in screen(name), timeout=30)
        text = screen(name)
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True)
    assert "EXIT 0" in text, text
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"SUCCEEDED": 4}
    assert quit_at - summary["started_at"] - summary["duration"] >= 1.5
    assert f"4 tasks: 4 succeeded in {format_duration(summary['duration'])}" in text
    extract = (run / "logs" / "extract.log").read_text()
    assert [line for line in extract.splitlines() if line.startswith("page")] == [
        f"page {i}/5: {20 * i} rows" for i in range(1, 6)
    ]
    transform = (run / "logs" / "transform.log").read_text()  # a thread pool's prints, unconfigured logging
    assert sorted(line.split(":")[0] for line in transform.splitlines() if line.startswith("shard")) == [
        f"shard {i}" for i in range(4)
    ]
    assert " INFO etl: transformed 100 rows into 4 shards\n" in transform
    assert "scoring in pid" in (run / "logs" / "score.log").read_text()


def screen(name: str) -> str:
    return subprocess.run(["tmux", "-L", name, "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
