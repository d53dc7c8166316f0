"""The zombies attempts leave to the process of an in-process worker, reaped while attempts run there.

An orphan goes to the nearest child subreaper above it, else to init, which reaps it. A worker process Dask starts
is no subreaper; an in-process worker (`LocalCluster(processes=False)`) runs its attempts in a process that may be
one: a tuidag, or a test session, whose local run's executor made it one for good (`orphans.become_subreaper`). The
attempts' orphans are then this process's children, and nothing reaped them (the local executor's `OrphanReaper`
does, during its own run only). A zombie among them left in an attempt's process group kept the group alive for
`process.kill_until_empty`, which then SIGKILLed a tree with nothing left in it until its KILL_PASSES_DEADLINE (10 s):
the task stayed CANCELLING 10 s longer than its tree lived. The engine's branch-cancel test with groups did so in 3
runs of 5 in such a process, and in full-suite runs (its tree's SIGTERM-ignoring loop forks a `sleep` every 0.1 s:
one forked, or dying, just as the loop is SIGKILLed is left as a zombie of this process).

So while attempts run in a process that adopts orphans, one thread reaps, every INTERVAL, the zombies among its main
thread's children (the kernel re-parents orphans to the main thread) that are in the process group or the session of
an attempt running here. No other process can be in those, so their exit status is nobody else's to collect. (A
zombie in a session of its own, a daemon's that called setsid, holds up nothing; this process's orphan reaper, if it
has one, gets it.)
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

from ..orphans import own_children
from ..process import LEADERS, _stat_fields
from . import registry

INTERVAL = 0.05  # seconds between reaps, as the local executor's orphan reaper: a kill waits for it at most that long
_PR_GET_CHILD_SUBREAPER = 37

_libc: ctypes.CDLL | None = None


def adopts_orphans() -> bool:
    """Whether this process is a child subreaper (Linux): its descendants' orphans come to it. Asked at each attempt's
    start (one system call): a local run in this process can make it one at any time."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        return _libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value != 0
    except (OSError, AttributeError):  # no prctl: not Linux, so no subreaper either
        return False


def reap(groups: set[int]) -> int:
    """Reap this process's zombie children in the process groups or sessions `groups` (the leaders' pids of attempts
    running here; a leader itself is its attempt's to wait for). Returns how many."""
    reaped = 0
    for pid in own_children(main_thread_only=True):
        if pid in groups or pid in LEADERS:
            continue
        fields = _stat_fields(pid)  # state, ppid, process group, session, ...
        if fields and fields[0] == b"Z" and (int(fields[2]) in groups or int(fields[3]) in groups):
            try:
                reaped += os.waitpid(pid, os.WNOHANG)[0] == pid
            except ChildProcessError:  # reaped meanwhile (by a local run's orphan reaper, say)
                pass
    return reaped


class _Reaper:
    """The one thread of a worker's process that reaps for its attempts (see the module's docstring): started by the
    first attempt that runs in a process that adopts orphans, it ends once none runs."""

    def __init__(self):
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self) -> None:
        """An attempt runs here now (`registry.runs` lists it)."""
        if not adopts_orphans():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # (a forked worker has no thread of its parent's)
                self._thread = threading.Thread(target=self._follow, name="tuidag-dask-reaper", daemon=True)
                self._thread.start()

    def _follow(self) -> None:
        while True:
            time.sleep(INTERVAL)  # the pace of the reaping, not a wait for something to happen
            groups = registry.leaders()
            if not groups:
                with self._lock:  # `watch` either sees this thread end or comes after an attempt it will see
                    if not registry.leaders():
                        self._thread = None
                        return
                continue
            try:
                reap(groups)
            except Exception:  # out of descriptors: try again next time
                pass


_REAPER = _Reaper()
watch = _REAPER.watch
