"""tuidag's own children: as a child subreaper it adopts every orphaned descendant of a task, and what a callable
task started and left running is recorded here too, so that the run's end can end them all.

A task's processes that dropped the run's tags and left the group and session are found nowhere else: once their
parent dies they are re-parented to tuidag, so a child of tuidag that is not a task leader (`LEADERS`, in
process.py), nor one of multiprocessing's helpers, nor in tuidag's own session, is the run's. `OrphanReaper` reaps
those as they die; the run's end kills the ones still running.
"""

from __future__ import annotations

import os
import sys
import threading

from .process import LEADERS, ProcRef, _listdir, _stat_fields, create_time

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process adopt orphaned descendants (Linux), so double-forked daemons stay findable."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def own_children(main_thread_only: bool = False) -> list[int]:
    """This process's children: the ones its threads started, and orphans re-parented to it as their subreaper
    (those go to the main thread). Read from /proc/<pid>/task/<tid>/children, one small file per thread."""
    me = os.getpid()
    tids = [str(me)] if main_thread_only else _listdir(f"/proc/{me}/task")
    found: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                found.extend(map(int, f.read().split()))
        except (OSError, ValueError):
            continue
    return found


def helper_pids() -> set[int]:
    """Children of tuidag that belong to no task: multiprocessing's forkserver (it starts isolated callables) and its
    resource tracker. They are reaped and stopped by multiprocessing itself."""
    helpers: set[int | None] = set()
    forkserver = sys.modules.get("multiprocessing.forkserver")
    if forkserver is not None:
        helpers.add(getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None))
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    if tracker is not None:
        helpers.add(getattr(getattr(tracker, "_resource_tracker", None), "_pid", None))
    return {pid for pid in helpers if pid is not None}


class OrphanReaper:
    """Reaps the run's orphans as they die: without it, a task that keeps starting short-lived background processes
    (`( cmd & )` in a loop) leaves a zombie under tuidag for each until the run ends, and can exhaust the pids.

    Only zombies on the main thread's children list are reaped, and not the ones that were there before the run:
    orphans are re-parented to the main thread, while leaders and the processes callables start with `subprocess`
    are children of the pool threads that started them, and whoever started them collects their exit status (a
    reaper that took it would make `subprocess` report exit code 0)."""

    INTERVAL = 0.05
    #: The longest wait between two looks while there are no orphans at all (a run under --watch between rounds,
    #: or whose tasks start no background process): each look without one doubles the wait up to this, and one that
    #: finds an orphan brings it back to INTERVAL. Looking every 50 ms was 20 wake-ups a second of an idle run.
    IDLE_INTERVAL = 1.0

    def __init__(self) -> None:
        self._existing = set(own_children(main_thread_only=True))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tuidag-orphan-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Reap one last time and stop (the run is over: nothing of it is left running to orphan more)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self.reap()

    def _run(self) -> None:
        interval = self.INTERVAL
        while not self._stop.wait(interval):
            try:
                found = self._orphans()
            except Exception:  # out of descriptors or memory: try again next time
                continue
            interval = self.INTERVAL if found else min(self.IDLE_INTERVAL, interval * 2)
            self._reap(found)

    def reap(self) -> int:
        """Reap every orphan that is a zombie now; returns how many."""
        return self._reap(self._orphans())

    def _reap(self, orphans: list[tuple[int, bytes]]) -> int:
        reaped = 0
        for pid, state in orphans:
            if state == b"Z":
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        reaped += 1
                except ChildProcessError:
                    pass
        return reaped

    def orphans(self) -> list[int]:
        """The run's orphans that are still running."""
        return [pid for pid, state in self._orphans() if state != b"Z"]

    def _orphans(self) -> list[tuple[int, bytes]]:
        """(pid, state) of the main thread's children that are orphans of tasks: not there before the run, no leader,
        no helper, and not in tuidag's own session (a task's processes never are: every leader starts a session of
        its own, and no process can join another session; what tuidag's own code or a program that calls
        `Dag.main()` starts on its main thread is, and is left to whoever started it)."""
        children = own_children(main_thread_only=True)
        if not children:
            return []
        skip = self._existing | LEADERS | helper_pids()
        session = os.getsid(0)
        found = []
        for pid in children:
            if pid in skip:
                continue
            fields = _stat_fields(pid)
            if fields and int(fields[3]) != session:
                found.append((pid, fields[0]))
        return found


ADOPTED: dict[int, float | None] = {}  # processes callables started and left running, ended with the run


def adopt_thread_children() -> None:
    """On a pool thread whose callable just ended: the processes it started (children of this very thread) that are
    still there belong to the run, and are ended when the run ends, like a shell task's daemons."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{threading.get_native_id()}/children", "rb") as f:
            pids = [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return
    skip = LEADERS | helper_pids()
    for pid in pids:
        if pid not in skip:
            ADOPTED[pid] = create_time(pid)


def adopted() -> list[int]:
    """The live processes `adopt_thread_children` recorded (by pid and create time), forgetting them."""
    found = []
    for pid, ctime in list(ADOPTED.items()):
        ADOPTED.pop(pid, None)
        if ctime is not None and ProcRef(pid, ctime).process() is not None:
            found.append(pid)
    return found
