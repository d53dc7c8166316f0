"""The graph at any size in a real terminal (tmux): a wide DAG fills a 220x60 screen, and at 80x24 the keys that
find, filter, list and read still work on the real binary."""

from __future__ import annotations

import re
import shutil
import time

import pytest
from test_tmux import Tmux, leftovers, task_pids

from slowness import patience

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

WORKERS = [f"worker-{i:02d}" for i in range(64)]
WIDE = (
    "name: wide\nmax_parallel: 8\ntasks:\n  setup: {run: 'true'}\n"
    + "".join(f"  {w}: {{run: 'echo $$ >> pids; sleep 30', depends_on: setup}}\n" for w in WORKERS)
    + "  gather: {run: 'true', depends_on: ["
    + ", ".join(WORKERS)
    + "]}\n"
)
NUMBERED = "seq 1 100 | sed 's/^/log line /'"
FAILING = f"""\
name: small
tasks:
  fetch: {{run: "echo $$ >> pids; sleep 30"}}
  parse-records: {{run: "{NUMBERED}; exit 3"}}
  report: {{run: "true", depends_on: parse-records}}
"""


def quit_unfinished(tmux: Tmux, procs) -> None:
    """q, confirmed, on a run still going: exit code 1 and no task process left."""
    tmux.keys("q")
    tmux.wait_for("It is not finished")  # the foreground viewer's question
    tmux.keys("s")  # stop the run
    assert tmux.wait_exit() == 1
    assert leftovers(tmux.workdir, procs) == []


def wait_title(tmux: Tmux, ok, timeout: float = 10.0) -> str:
    """The graph's title line once `ok(line)` holds."""
    deadline = time.monotonic() + patience(timeout)
    while True:
        line = next((line for line in tmux.screen().splitlines() if "· 66 tasks ·" in line), "")
        if ok(line):
            return line
        if time.monotonic() > deadline:
            raise AssertionError(f"title still {line!r}")
        time.sleep(0.05)


def test_a_wide_dag_fills_a_220x60_screen_and_z_o_change_the_view(tmp_path):
    wide = Tmux(tmp_path, WIDE, size=(220, 60))
    try:
        wide.wait_for("8 running")
        screen = wide.wait_for("gather")  # the graph laid out (the header may paint a frame before it)
        deadline = time.monotonic() + patience(15)  # a frame can reach the terminal in parts (CI: a worker missing)
        while not all(w in screen for w in WORKERS) and time.monotonic() < deadline:
            time.sleep(0.05)
            screen = wide.screen()
        # every worker on the first screen, between setup and gather: no scrolling, no 64 crossing edges
        assert all(w in screen for w in WORKERS), screen
        assert "setup" in screen and "gather" in screen and screen.count("▶") == 2
        title = next(line for line in screen.splitlines() if "· 66 tasks ·" in line)
        wide.keys("z")  # the next zoom level
        after = wait_title(wide, lambda line: line != title)
        assert title.split("tasks · ")[1].split()[0] != after.split("tasks · ")[1].split()[0]
        wide.keys("o")
        wide.wait_for("↓" if "→" in after else "→")
        procs = task_pids(tmp_path)
        quit_unfinished(wide, procs)
    finally:
        wide.kill()


STEPS = [
    "fetch",
    "unpack",
    "validate",
    "clean",
    "dedupe",
    "normalise",
    "tokenise",
    "embed",
    "index",
    "split",
    "train",
    "tune",
    "evaluate",
    "calibrate",
    "compare",
    "report",
    "package",
    "sign",
    "upload",
    "announce",
]
CHAIN = "name: chain\ntasks:\n" + "".join(
    f"  step-{i:02d}-{step}: {{run: 'echo $$ >> pids; sleep 30'"
    + (f", depends_on: step-{i - 1:02d}-{STEPS[i - 2]}" if i > 1 else "")
    + "}\n"
    for i, step in enumerate(STEPS, 1)
)


def test_a_20_step_chain_shows_every_step_by_name_at_160x45_from_the_start(tmp_path):
    """Wrapped into bands left to right, full tiles: not 8 steps of 20 in any zoom, as one row or one column."""
    chain = Tmux(tmp_path, CHAIN, size=(160, 45))
    try:
        screen = chain.wait_for("● running")
        screen = chain.wait_for("step-20-announce")
        names = [f"step-{i:02d}-{step}" for i, step in enumerate(STEPS, 1)]
        # each whole, in its tile's top border (heavy for the selected tile)
        assert all(re.search(f"[─━] {name} [─━]", screen) for name in names), screen
        assert "· full →" in screen
        quit_unfinished(chain, task_pids(tmp_path, 1))
    finally:
        chain.kill()


def test_find_filter_list_and_a_maximised_log_at_80x24(tmp_path):
    small = Tmux(tmp_path, FAILING, size=(80, 24))
    try:
        small.wait_for("1 failed")
        screen = small.wait_for("┏━ parse-records ")  # the first failure is selected for the user
        small.keys("m")  # the log maximised: 20 lines of it readable at 80x24
        screen = small.wait_for("log line 81")
        shown = [int(line.split("log line ")[1].split()[0]) for line in screen.splitlines() if "log line " in line]
        assert len(shown) >= 20 and shown == list(range(shown[0], shown[0] + len(shown))), screen
        small.keys("m")
        small.keys(":")
        small.wait_for("find a task")
        small.keys("fch")  # fuzzy: f-et-c-h
        small.wait_for("fetch")
        small.keys("Enter")
        small.wait_for("┏━ fetch ")
        small.keys("F")  # only failed tasks: the header says a filter is on
        small.wait_for("filter: failed")
        small.keys("L")  # the list, filtered like the graph
        screen = small.wait_for("1 of 3 tasks")
        assert "parse-records" in screen and "report" not in screen.split("1 of 3 tasks")[1]
        procs = task_pids(tmp_path, 1)
        quit_unfinished(small, procs)
    finally:
        small.kill()
