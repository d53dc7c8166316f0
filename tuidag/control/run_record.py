"""What a viewer knows of a run besides its engine's word: the journal's record of every task, whether the engine's
process is alive, and cleaning up after an engine that died (as any tuidag command on the state dir does)."""

from __future__ import annotations

import os
import time

from ..engine.events import TaskSnapshot
from ..model.state import TaskState
from ..store.journal import replay
from ..store.reaper import Reaped, reap_run
from ..store.runs import RunDir, RunStore

S = TaskState
LOCK_DROP_S = 5.0
"""How long a dead engine's owner lock may outlive its main thread (see `reap_dead_run`)."""


def process_stopped(pid: int) -> bool:
    """Whether `pid` is stopped (SIGSTOP, SIGTSTP, a debugger): it runs, but answers nothing until continued."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def process_alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie does not (a killed engine stays one while a subreaper above it, a test runner
    running runs itself, has not reaped it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def differs(a: TaskSnapshot, b: TaskSnapshot) -> bool:
    return (a.state, a.attempt, a.reason, a.exit_code, a.finished_at) != (
        b.state,
        b.attempt,
        b.reason,
        b.exit_code,
        b.finished_at,
    )


def journal_snapshots(run: RunDir, names: tuple[str, ...]) -> dict[str, TaskSnapshot]:
    """Every task as the run's journal last recorded it."""
    records = replay(run.journal).tasks
    snaps = {}
    for name in names:
        rec = records.get(name)
        if rec is None:
            snaps[name] = TaskSnapshot(name, S.PENDING)
            continue
        snaps[name] = TaskSnapshot(
            name,
            rec.state,
            attempt=rec.attempt,
            reason=rec.reason,
            exit_code=rec.exit_code,
            started_at=rec.started_at,
            finished_at=rec.finished_at,
            changed_at=rec.finished_at or rec.started_at or 0.0,
            pid=rec.pid,
            create_time=rec.create_time,
            reused=rec.reused,
            slots=rec.slots,
            worker=rec.worker,
        )
    return snaps


def reap_dead_run(store: RunStore, run: RunDir) -> Reaped | None:
    """Kill what the run's tasks left once its engine died (None when another command did it, or the engine is
    alive): a foreground viewer left the task trees of a `kill -9`ed engine writing until some later command ran.

    Called once the engine's process is a zombie, which its main thread is as soon as it has ended: the engine's
    other threads may still be ending, and the file table they share, with the owner lock in it, is let go only by
    the last of them. Taken as "owned" then, the run was never reaped (a tmux test: 1 run in 20), so a run still
    owned is tried again until the lock drops."""
    deadline = time.monotonic() + LOCK_DROP_S
    while True:
        try:
            reaped = reap_run(store, run)
            if reaped is not None or time.monotonic() > deadline or run.summary.exists() or not run.owned():
                return reaped
        except OSError:  # a state dir that can't be locked or read: `tuidag runs` will try again
            return None
        time.sleep(0.02)


def reaped_text(reaped: Reaped) -> str:
    """What reaping ended, for people, to follow "this view ": "ended 3 processes its tasks left: a (pid 12
    sleep), ..."."""
    if not reaped.processes:
        return "found no process its tasks left running"
    shown = ", ".join(f"{task} (pid {pid} {name})" for task, pid, name in reaped.processes[:8])
    more = len(reaped.processes) - 8
    count = len(reaped.processes)
    return f"ended {count} process{'' if count == 1 else 'es'} its tasks left: {shown}" + (
        f" and {more} more" if more > 0 else ""
    )
