"""The real binary in a real 80x24 terminal (tmux): every screen usable, nothing wrapped or cut that matters, the
selection in view, and the graph's keys alive after a search."""

from __future__ import annotations

import shutil
import time

import pytest
from test_tmux import DAG, Tmux, leftovers, task_pids

from slowness import patience

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SMALL = (80, 24)
SEARCH_BAR = "▊▔▔▔"  # the search bar's top edge
WIDE = (
    "name: wide\ntasks:\n  setup: {run: 'true'}\n"
    + "".join(f"  worker-{i:02d}: {{run: 'sleep 30', depends_on: setup}}\n" for i in range(40))
    + "  gather: {run: 'true', depends_on: ["
    + ", ".join(f"worker-{i:02d}" for i in range(40))
    + "]}\n"
)
CHAIN = "name: chain\ntasks:\n  s0: {run: 'sleep 30'}\n" + "".join(
    f"  s{i}: {{run: 'true', depends_on: s{i - 1}}}\n" for i in range(1, 6)
)  # 6 columns: wider than 160


@pytest.fixture
def small(tmp_path):
    session = Tmux(tmp_path, DAG, size=SMALL)
    yield session
    session.kill()


def lines(tmux: Tmux) -> list[str]:
    return tmux.screen().splitlines()


def wait_gone(tmux: Tmux, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + patience(timeout)
    while text in (screen := tmux.screen()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{text!r} still on screen after {patience(timeout):.0f}s:\n{screen}")
        time.sleep(0.05)
    return screen


def test_every_screen_is_usable_at_80x24(small):
    small.wait_for("2 running")
    procs = task_pids(small.workdir)
    header, counts = lines(small)[:2]
    assert "● running" in header and "elapsed" in header
    assert "━" in counts and "0/3" in counts and "2 running" in counts
    footer = lines(small)[-1]
    assert "q Quit" in footer and "more" in footer and "? Help" in footer

    small.keys("?")
    screen = small.wait_for("tuidag keys")
    assert "Esc/? close" in screen and "In the graph" in screen
    rows = ("PgUp PgDn", "Home End", "Toggle wrapping", "bottom of the log", "combined view", "^c")
    seen, deadline = screen, time.monotonic() + patience(60)  # a dozen pages or more, each painted slowly when busy
    while not all(row in seen for row in rows):  # page down, a page at a time, until every row was on screen
        assert time.monotonic() < deadline, [row for row in rows if row not in seen]
        before = small.screen()
        small.keys("PageDown")
        page_deadline = time.monotonic() + patience(3)
        while (page := small.screen()) == before and time.monotonic() < page_deadline:
            time.sleep(0.02)
        while time.monotonic() < page_deadline:  # the page painted in full before the next key: none is skipped
            time.sleep(0.1)
            settled = small.screen()
            if settled == page:
                break
            page = settled
        seen += page
    small.keys("Escape")
    wait_gone(small, "tuidag keys")

    small.keys("C")
    screen = small.wait_for("Cancel every unfinished task?")
    assert "No (n/Esc)" in screen and "Yes (y)" in screen and "n/Esc abort" in screen
    small.keys("Enter")  # the safe default: nothing is cancelled
    wait_gone(small, "Cancel every unfinished task?")
    assert "2 running" in small.screen() and "cancelled" not in small.screen()

    small.keys("q")
    small.wait_for("It is not finished")  # the foreground viewer's question
    small.keys("s")  # stop the run
    assert small.wait_exit() == 1
    assert leftovers(small.workdir, procs) == []


def test_graph_keys_work_after_a_search(small):
    small.wait_for("2 running")
    small.wait_for("┏━ slow ")
    small.keys("/")
    small.wait_for(SEARCH_BAR)
    small.keys("started", "Enter")
    wait_gone(small, SEARCH_BAR)
    small.keys("j")  # the graph has the focus back: the selection moves
    small.wait_for("┏━ other ")
    small.keys("/")
    small.wait_for(SEARCH_BAR)
    small.keys("Escape")
    wait_gone(small, SEARCH_BAR)
    small.keys("k")
    small.wait_for("┏━ slow ")
    assert "hjkl select" in small.screen()


def test_the_selection_is_in_view_at_start(tmp_path):
    wide = Tmux(tmp_path, WIDE, size=SMALL)
    try:
        # the first task, beside a layer far taller than the screen: selected (its log shown) and in view
        screen = wide.wait_for("╭─ setup · ")
        graph = screen.split("╭─ setup · ")[0].splitlines()[3:]
        assert any("setup" in line for line in graph), screen
    finally:
        wide.kill()


def test_the_selection_stays_in_view_after_a_resize(tmp_path):
    chain = Tmux(tmp_path, CHAIN, size=(160, 45))
    try:
        chain.wait_for("· full →")  # six full tiles fit 160 columns, wrapped into two bands
        chain.keys("z", "Z")  # to one-line tiles and back to full ones, the user's choice from now on
        chain.wait_for("╭─ s5 ")
        for _ in range(5):
            chain.keys("l")
        chain.wait_for("┏━ s5 ")
        chain.resize(*SMALL)
        deadline = time.monotonic() + patience(15)
        while not ("┏━ s5 " in chain.screen() and "s0 " not in chain.screen()):  # scrolled to keep it in view
            assert time.monotonic() < deadline, chain.screen()
            time.sleep(0.05)
    finally:
        chain.kill()


def test_the_task_detail_fits_80x24_and_esc_closes_it(small):
    """The real binary: `i` on the selected task shows its detail inside the terminal, and Esc brings the graph back."""
    small.wait_for("2 running")
    small.keys("i")
    screen = small.wait_for("task detail")
    assert "command" in screen and "environment" in screen and "TUIDAG_TASK=" in screen
    assert all(len(line) <= SMALL[0] for line in screen.splitlines())
    small.keys("Escape")
    wait_gone(small, "task detail")
    small.wait_for("2 running")
