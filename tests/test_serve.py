"""`tuidag serve` end to end: a detached run (`tuidag run -d`), served as a user runs it, opened in a real headless
Chromium (Debian's `chromium`; .ci/run installs it). A tab shows the run's graph and its keys work as in a
terminal (`c` `y` cancels a task and its process tree is gone); a request without the token is refused and starts
no viewer; closing the tab or stopping the server leaves the run running and no viewer behind. Every task writes its
pids (the shell and a child) to a file, so the test can say which processes must still run and which must be gone.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from browser import Browser, chromium
from dags import wait_until
from served import REPO, Served, open_tab, press, screen, wait_for_text
from slowness import patience

DAG = """\
name: served
tasks:
  slow:
    run: echo $$ >> slow.pids; sleep 60 & echo $! >> slow.pids; echo slow started; wait
  after:
    depends_on: slow
    run: "true"
  keeps:
    run: echo $$ >> keeps.pids; sleep 60 & echo $! >> keeps.pids; echo keeps going; wait
"""
browser_needed = pytest.mark.skipif(chromium() is None, reason="no chromium (apt-get install chromium)")


def tuidag(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuidag", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=patience(60),
    )


def pids(workdir: Path, task: str) -> list[psutil.Process]:
    path = workdir / f"{task}.pids"
    wait_until(lambda: path.exists() and len(path.read_text().split()) >= 2, timeout=15)
    return [psutil.Process(int(p)) for p in path.read_text().split()]


def gone(procs: list[psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A detached run of DAG: (workdir, run id, engine pid); it and its tasks are killed after."""
    workdir = tmp_path_factory.mktemp("served")
    (workdir / "dag.yaml").write_text(DAG)
    started = tuidag(workdir, "run", "-d", "dag.yaml", "--kill-grace", "0.5", "--state-dir", "state")
    assert started.returncode == 0, started.stderr
    run_id, pid = re.search(
        r"run (\S+) of served started in the background \(engine pid (\d+)\)", started.stdout
    ).groups()
    try:
        yield workdir, run_id, int(pid)
    finally:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
        tuidag(
            workdir, "runs", "--state-dir", "state"
        )  # reaps what the run left, as the next command does after a crash
        for task in ("slow", "keeps"):
            path = workdir / f"{task}.pids"
            for p in path.read_text().split() if path.exists() else ():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def status(url: str, cookie: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=patience(10)) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@browser_needed
def test_a_tab_is_a_viewer_whose_keys_cancel_a_task_and_closing_it_or_the_server_leaves_the_run(run, browser):
    workdir, run_id, engine = run
    slow, keeps = pids(workdir, "slow"), pids(workdir, "keeps")
    served = Served(workdir, "--state-dir", "state")
    try:
        assert f"live run {run_id} of served" in served.out and "127.0.0.1" in served.url
        open_tab(browser, served.url)
        wait_for_text(browser, f"attached · engine pid {engine}")
        press(browser, ":")  # the finder: select `slow` by name
        wait_for_text(browser, "Enter jumps")
        press(browser, "slow\r")
        wait_for_text(browser, "slow started")
        press(browser, "c")
        wait_for_text(browser, "everything downstream of it")
        press(browser, "y")
        wait_until(lambda: gone(slow), timeout=15)
        wait_until(lambda: "2 cancelled" in screen(browser), timeout=15)  # slow and after
        assert len(served.viewers()) == 1 and not gone(keeps)

        browser.close_page()  # the tab closed: its viewer quits, the run goes on
        wait_until(lambda: not served.viewers(), timeout=15)
        assert not gone(keeps) and psutil.pid_exists(engine)

        open_tab(browser, served.url)  # a tab open when the server stops
        wait_for_text(browser, "2 cancelled")
        viewers = served.viewers()
        assert viewers
    finally:
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err
    assert gone(viewers) and not gone(keeps) and psutil.pid_exists(engine)
    assert tuidag(workdir, "stop", "--run", run_id, "--state-dir", "state").returncode == 0


@browser_needed
def test_requests_without_the_token_are_refused_and_start_no_viewer(run, browser):
    workdir, _, _ = run
    served = Served(workdir, "--state-dir", "state")
    try:
        token = served.url.split("token=")[1]
        wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
        for path in ("/", "/ws", "/static/js/textual.js", "/download/x"):
            assert status(served.base + path) == 403, path
            assert status(f"{served.base}{path}?token={wrong}") == 403, path
        cookie = served.out and f"tuidag-serve-{served.base.rsplit(':', 1)[1]}"
        assert status(served.base + "/ws", cookie=f"{cookie}={wrong}") == 403
        assert status(served.base + "/static/js/textual.js", cookie=f"{cookie}={token}") == 200

        open_tab(browser, f"{served.base}/?token={wrong}")
        assert "403 Forbidden" in browser.evaluate("document.body.innerText")
        assert browser.evaluate("window.__terminal === undefined")
        assert served.viewers() == []
    finally:
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err
