"""The terminal UI on a state dir whose disk fills up (a real 1 MB tmpfs): the app shows the error, no traceback."""

from __future__ import annotations

import errno
import json
import logging

from pilot_helpers import SIZE, open_app, until

from dags import make_dag
from disks import small_disk
from slowness import patience
from tuidag.launch import RunSession


def fill(disk) -> None:
    """Take the disk's last free block."""
    with open(disk / "filler", "ab", buffering=0) as filler:
        try:
            while True:
                filler.write(b"x" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC


async def test_the_app_shows_a_full_state_dir_as_an_error(tmp_path, caplog):
    """A gate task holds the run while the test fills the disk; the 300 tasks after it meet a full disk: the first
    task log that can't be written stops the run (as a full journal does), and the rest never start."""
    caplog.set_level(logging.WARNING)
    go = tmp_path / "go"
    with small_disk(tmp_path / "disk") as disk:
        gate = f"for i in $(seq {round(patience(30) / 0.02)}); do [ -e {go} ] && exit 0; sleep 0.02; done; exit 1"
        tasks = {"gate": gate} | {
            f"t{i}": {"run": f"echo hello from task {i}", "depends_on": ["gate"]} for i in range(300)
        }
        session = RunSession.create(make_dag(tasks, workdir=tmp_path), disk / "state")
        notes = []
        async with open_app(session, size=SIZE) as (app, pilot):
            app.notify = lambda message, **kw: notes.append((message, kw.get("severity")))
            await until(pilot, lambda: app.model.snapshots["gate"].state.value == "RUNNING", what="gate running")
            fill(disk)
            go.touch()
            await until(pilot, lambda: app.model.finished and notes, timeout=30, what="the error shown")
            states = {snap.state.value for snap in app.model.snapshots.values()}
        assert notes == [
            (
                f"the state dir {disk / 'state'} is full (No space left on device): task logs can't "
                "be written any more, so no more tasks start; running tasks finish",
                "error",
            )
        ]
        assert "CANCELLED" in states and states <= {"SUCCEEDED", "FAILED", "CANCELLED"}
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []  # no observer traceback
        assert json.loads(session.run.summary.read_text())["outcome"] == "incomplete: state dir full"
