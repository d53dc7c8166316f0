"""How many times slower than a quiet machine this one runs now, measured once per test session.

Deadlines that wait for real processes (a task to start, a tree to be gone, a line on a screen, a command to exit)
are multiplied by it, never below 1. Beside two CPU-bound processes on a shared 2-core machine (load average 5 to
6), a fixed piece of Python work and a process start each took 4-8 times as long as on the quiet machine the
deadlines were set on, and at load average 8 fixed deadlines failed tests that passed there. A wait that succeeds
ends as soon as its condition holds, so a generous factor costs nothing while the tests pass; waits that must run
out (nothing may happen within a while) are not scaled.

The controller of a session measures it in `pytest_configure` and leaves it in the environment, where pytest-xdist
workers and the processes tests start find it; setting TUIDAG_TEST_SLOWNESS yourself skips the measurement.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from functools import cache

ENV = "TUIDAG_TEST_SLOWNESS"
#: `_work` and starting `sh -c true` on that machine (2 cores), unhindered: 10.7 ms of CPU time and 1.0-1.3 ms
#: (the fastest tries), rounded up so that noise on a quiet machine stays at 1.
_QUIET_WORK = 0.012
_QUIET_SPAWN = 0.002
#: Beyond this, the machine is too busy for the suite to be worth running: a hiccup during the measurement is more
#: likely than a machine that slow.
_MOST = 10.0


def _work() -> int:
    total = 0
    for i in range(200_000):
        total += i * i % 7
    return total


def measure(rounds: int = 10) -> float:
    """The larger of the two slowdowns (the median of `rounds` tries each), between 1 and _MOST. About 0.15 s on a
    quiet machine."""
    work, spawn = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        _work()
        work.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
        spawn.append(time.perf_counter() - start)
    slowdown = max(statistics.median(work) / _QUIET_WORK, statistics.median(spawn) / _QUIET_SPAWN)
    return min(max(1.0, slowdown), _MOST)


@cache
def slowness() -> float:
    """The session's factor: from the environment when the controller (or the user) set it, else measured now."""
    value = os.environ.get(ENV)
    return max(1.0, float(value)) if value else measure()


def patience(seconds: float) -> float:
    """A deadline of `seconds` on a quiet machine, as long as this machine needs now."""
    return seconds * slowness()
