"""Watch mode in the real binary in a real 80x24 terminal (tmux): `tuidag run dag.yaml --watch` on a copy of the dev
demo (a build, a dev server as a service, tests against it), an input edited on disk, the new generation on screen,
then `q`, Stop: watch mode ends, the server is stopped, and no process of the run is left."""

from __future__ import annotations

import shutil
import time

import psutil
import pytest
from test_tmux import REPO, Tmux, leftovers

from slowness import patience
from watching import free_port

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _log_says(workdir, task: str, text: str) -> bool:
    return any(text in log.read_text() for log in (workdir / "state" / "runs").glob(f"*/logs/{task}.log"))


def _journal_says(workdir, text: str) -> bool:
    return any(text in journal.read_text() for journal in (workdir / "state" / "runs").glob("*/journal.jsonl"))


def _until(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not within {patience(timeout):.0f}s"
        time.sleep(0.05)


def test_watch_mode_shows_a_new_generation_and_q_stop_leaves_nothing_running_at_80x24(tmp_path):
    shutil.copytree(REPO / "demos" / "dev", tmp_path / "dev")
    port = free_port()
    dag = (REPO / "demos" / "dev.yaml").read_text().replace("48762", str(port))
    tmux = Tmux(tmp_path, dag, size=(80, 24), options=("--watch",))
    try:
        _until(lambda: _log_says(tmp_path, "test", "2 tests passed"), "the first run's tests")
        tmux.wait_for("◉ 1 ready  ✔ 2 done")
        server = next(
            p for p in psutil.process_iter(["environ"]) if (p.info["environ"] or {}).get("TUIDAG_TASK") == "web"
        )
        test_app = tmp_path / "dev" / "test_app.py"
        test_app.write_text(test_app.read_text() + "# edited\n")
        screen = tmux.wait_for("gen 2")
        assert "╭─" in screen and "q Quit" in screen.splitlines()[-1]  # the screen as it was, with the new line
        _until(lambda: _journal_says(tmp_path, '"task":"test","from":"RUNNING","to":"SUCCEEDED","attempt":2'), "test")
        tmux.wait_for("◉ 1 ready  ✔ 2 done")
        assert server.is_running()  # only the tests ran again: the same server
        tmux.keys("q")
        tmux.wait_for("It is not finished")  # the server is up: watch mode goes on until stopped
        tmux.keys("s")
        assert tmux.wait_exit(timeout=30) == 0  # the tests passed; the server's stop is how it is meant to end
        assert leftovers(tmp_path, [server]) == []
    finally:
        tmux.kill()
