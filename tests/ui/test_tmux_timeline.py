"""The timeline on the real binary in a real terminal (tmux): `t` on a live run shows it, the running bar grows,
`x` lists the critical path, `t` again gives the graph back, and quitting leaves no task behind."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from test_tmux import Tmux, task_pids
from test_tmux_graph import quit_unfinished

from slowness import patience

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

LIVE = """\
name: live
max_parallel: 2
tasks:
  prepare: {run: "sleep 0.3"}
  train: {run: "echo $$ >> pids; sleep 30", depends_on: prepare}
  side: {run: "true", depends_on: prepare}
"""


def bar_of(screen: str, task: str) -> int:
    """Cells of the task's bar on the timeline's row."""
    row = next((line for line in screen.splitlines() if f"● {task} " in line), "")
    return row.count("█")


def test_t_toggles_the_timeline_of_a_live_run(tmp_path):
    term = Tmux(tmp_path, LIVE, size=(120, 32))
    try:
        term.wait_for("1 running")
        procs = task_pids(tmp_path, 1)
        term.keys("t")
        screen = term.wait_for("timeline from")
        assert "╵0s" in screen and "prepare" in screen and "side" in screen
        deadline = time.monotonic() + patience(10)
        first = bar_of(term.screen(), "train")
        while bar_of(term.screen(), "train") <= first:  # the running bar grows, a second at a time
            assert time.monotonic() < deadline, term.screen()
            time.sleep(0.1)
        term.keys("x")
        screen = term.wait_for("◆ train")  # worked out on a thread: the panel says so until then
        assert "critical path (x)" in screen and "◆ prepare" in screen
        term.keys("x", "t")
        deadline = time.monotonic() + patience(10)
        while "timeline from" in term.screen():
            assert time.monotonic() < deadline, term.screen()
            time.sleep(0.05)
        assert "─ live · 3 tasks · " in term.screen()  # the graph's title again
        quit_unfinished(term, procs)
    finally:
        term.kill()


def test_a_key_typed_with_t_in_one_write_zooms_the_timeline_not_the_graph(tmp_path):
    """`tmux send-keys t Z`: both keys reach tuidag in one read. Z belongs to the timeline `t` shows (it zoomed the
    graph behind it, which went from full tiles to dots)."""
    term = Tmux(tmp_path, LIVE, size=(120, 32))
    try:
        term.wait_for("1 running")
        procs = task_pids(tmp_path, 1)
        screen = term.wait_for("─ live · 3 tasks · ")
        title = next(line for line in screen.splitlines() if "─ live · 3 tasks · " in line)
        zoom = title.split("3 tasks · ")[1].split()[0]
        subprocess.run([*term.tmux, "send-keys", "-t", term.name, "t", "Z"], check=True)
        term.wait_for("timeline from")
        term.keys("t")  # the graph back: its zoom as it was
        deadline = time.monotonic() + patience(10)
        while "timeline from" in term.screen():
            assert time.monotonic() < deadline, term.screen()
            time.sleep(0.05)
        assert f"3 tasks · {zoom} " in term.screen(), term.screen()
        term.keys("t", "0")  # the timeline again; 0 fits the whole run again, so Z had zoomed it
        term.wait_for("timeline from")
        quit_unfinished(term, procs)
    finally:
        term.kill()
