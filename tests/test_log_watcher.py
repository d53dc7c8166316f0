"""Knowing that logs changed: file-system events, or polling when they cannot be had (LogWatcher)."""

from __future__ import annotations

import time
from pathlib import Path

from slowness import patience
from test_log_index import append
from tuidag.views.log_watcher import LogWatcher

# --- LogWatcher ---------------------------------------------------------------------------------------------------


def wait_for(condition, timeout: float | None = None) -> bool:
    """Whether `condition` came true within `timeout` seconds (a wait that may run out), by default within 5 s of a
    quiet machine."""
    deadline = time.monotonic() + (patience(5) if timeout is None else timeout)
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_watcher_raises_the_flag_on_writes(tmp_path: Path) -> None:
    watcher = LogWatcher([tmp_path], safety_interval=60, settle=0)
    watcher.start()

    def write_and_see() -> bool:  # the first write may come before the watch is set up: write until one is seen
        append(tmp_path / "t.log", "x\n")
        return wait_for(watcher.changed, timeout=0.2)

    try:
        assert wait_for(lambda: watcher.watching)
        assert wait_for(write_and_see)
    finally:
        watcher.stop()
    assert not watcher.watching


def test_a_file_watcher_ignores_other_files_in_its_folder(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine.log", tmp_path / "other.log"
    append(mine, "")
    watcher = LogWatcher([mine], safety_interval=60, settle=0)
    watcher.start()

    def write_and_see(path: Path, timeout: float = 0.2) -> bool:
        append(path, "x\n")
        return wait_for(watcher.changed, timeout)

    try:
        assert wait_for(lambda: watcher.watching)
        assert wait_for(lambda: write_and_see(mine))  # the watch is set up
        assert not any(write_and_see(other) for _ in range(5))
        assert write_and_see(mine, patience(5))
    finally:
        watcher.stop()


def test_a_new_watcher_says_changed_until_its_watch_has_surely_been_set_up(tmp_path: Path) -> None:
    """A write between `start()` and the thread's watch being in place raises no event: the caller rereads on
    every call for the first moments instead of waiting for the safety poll."""
    append(tmp_path / "t.log", "")
    watcher = LogWatcher([tmp_path / "t.log"], safety_interval=60, settle=60)
    watcher.start()
    try:
        assert all(watcher.changed() for _ in range(3))
    finally:
        watcher.stop()


def test_watcher_polls_when_it_cannot_watch(tmp_path: Path) -> None:
    watcher = LogWatcher([tmp_path / "missing"], poll_interval=0.05)
    watcher.start()
    assert not watcher.watching
    assert wait_for(watcher.changed, timeout=patience(1))
    assert not watcher.changed()  # answered: the next True comes a poll interval later
    watcher.stop()
