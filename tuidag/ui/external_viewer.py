"""Opening a log in the user's pager (`$PAGER`, default `less -R`) or editor (`$EDITOR`, default `vi`), on the terminal
the app hands over while it is suspended (no textual here: ui/log_keys.py suspends the app around `open_on_terminal`).

The program runs as the terminal's foreground job, in a process group of its own, as a shell runs a job: Ctrl+C in
`less` (which leaves its follow mode, `F`) must reach only `less`. In the app's process group it would reach the
app too, whose Ctrl+C stops the run. Ctrl+Z in the program has no shell to return to: the program is let go on.
A signal that stops the app (SIGHUP when the terminal closes, SIGTERM, SIGINT from another shell) is passed on to
the program, so it ends and the app, no longer waiting for it, acts on the signal (the app's handler runs once the
app is back); a second one kills the program.

The pager gets the log file itself (`less` reads it as it is now, and `F` follows it as it grows). The editor gets a
copy of it as it is now, in a folder of its own removed afterwards: an editor that saves by writing a new file in its
place would take the file a running task writes to away from the run, and a log is the run's record.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_PAGER = "less -R"
DEFAULT_EDITOR = "vi"
PASSED_ON = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
"""The signals the app stops on: while the program runs they are passed on to it."""
_POLL_S = 0.05
"""How often the program's end is checked for (see `_wait_for`)."""


class ViewerProblem(Exception):
    """The program named by the variable cannot be run; the message says why."""


def viewer_command(variable: str, default: str, environ: os._Environ[str] | dict[str, str] = os.environ) -> list[str]:
    """The command `$variable` names (`default` when unset or empty), split as a shell would, its program found."""
    value = environ.get(variable, "").strip() or default
    try:
        argv = shlex.split(value)
    except ValueError as exc:
        raise ViewerProblem(f"${variable} is not a command ({exc}): {value}") from None
    if not argv:
        raise ViewerProblem(f"${variable} is not a command: {value!r}")
    if shutil.which(argv[0]) is None:
        raise ViewerProblem(f"${variable}: {argv[0]} not found")
    return argv


def open_on_terminal(argv: list[str], path: Path, *, copy: bool) -> int:
    """Run `argv + [path]` (a copy of `path`, when `copy`) in the foreground of the terminal; its exit status."""
    if not copy:
        return run_in_foreground([*argv, str(path)])
    with tempfile.TemporaryDirectory(prefix="tuidag-log-") as folder:
        snapshot = Path(folder) / path.name
        shutil.copyfile(path, snapshot)
        return run_in_foreground([*argv, str(snapshot)])


def run_in_foreground(argv: list[str]) -> int:
    """Run `argv` as the terminal's foreground process group and give the terminal back after; its exit status.
    Without a terminal we control (stdin is not one, or we are not its foreground), it simply runs."""
    stdin = sys.__stdin__
    fd = stdin.fileno() if stdin is not None else -1
    ours = os.getpgrp()
    try:
        owns_terminal = fd >= 0 and os.isatty(fd) and os.tcgetpgrp(fd) == ours
    except OSError:
        owns_terminal = False
    if not owns_terminal:
        return subprocess.run(argv).returncode
    process = subprocess.Popen(argv, process_group=0)
    received: list[int] = []

    def pass_on(signum: int, _frame: object) -> None:
        received.append(signum)
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signum if len(received) == 1 else signal.SIGKILL)

    # A process in a background group that changes the terminal's owner gets SIGTTOU (and stops) unless it ignores it.
    previous = {signal.SIGTTOU: signal.signal(signal.SIGTTOU, signal.SIG_IGN)}
    previous.update((signum, signal.signal(signum, pass_on)) for signum in PASSED_ON)
    try:
        _hand_over(fd, process.pid)
        while True:
            status = _wait_for(process.pid)
            if not os.WIFSTOPPED(status):
                process.returncode = os.waitstatus_to_exitcode(status)
                return process.returncode
            _hand_over(fd, process.pid)  # Ctrl+Z, or it touched the terminal before it owned it: go on
    finally:
        with contextlib.suppress(OSError):  # the terminal may be gone
            os.tcsetpgrp(fd, ours)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _wait_for(pid: int) -> int:
    """The wait status of `pid` once it ends or stops. Polled, not a blocking `waitpid`: a signal the kernel hands to
    another of the app's threads (the viewer's, the log watcher's) does not interrupt the main thread's system call,
    and Python runs its handler only when the main thread next runs Python code, so a blocked wait never passed
    SIGHUP on and the app waited for a pager that was never told the terminal had closed (a tmux test: 2 runs in 10).
    A signal the main thread gets ends the sleep at once; one another thread got waits at most one interval."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if done:
            return status
        time.sleep(_POLL_S)


def _hand_over(fd: int, group: int) -> None:
    """Make `group` the terminal's foreground and let it go on if it stopped (reading the terminal before it owned it
    stops a process)."""
    try:
        os.tcsetpgrp(fd, group)
        os.killpg(group, signal.SIGCONT)
    except OSError:  # it has ended already (its group is gone)
        pass
