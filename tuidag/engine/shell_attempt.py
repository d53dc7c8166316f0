"""One attempt of a task as a local process tree: started in its own session (and cgroup where there are cgroups),
output straight into the task's log file, waited for, killed as a whole.

The child writes to the log file descriptor itself: no pipe through tuidag, so output is never lost or reordered
even if tuidag is slow or dies, and tuidag spends no CPU per byte. `inprocess.IsolatedAttempt` reuses all of it
for a Python callable in a child process.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import TYPE_CHECKING

from . import process, spawn
from .cgroup import Cgroup, RunCgroups
from .executor import Attempt, AttemptResult, LogFull, RunningAttempt, log_full
from .log_headers import LogHeaders, header_text, own_line

if TYPE_CHECKING:
    import psutil

_devnull_fd: int | None = None
#: The longest single wait for a leader with a timeout, in seconds: poll() refuses more than 2**31 - 1 ms, and a
#: timeout may be up to a year, so longer waits are made of several.
MAX_POLL_WAIT = 86400.0


def devnull() -> int:
    """One read-only /dev/null descriptor for every task's stdin (Popen would open and close one per spawn)."""
    global _devnull_fd
    if _devnull_fd is None:
        _devnull_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _devnull_fd


def write_header(fd: int, attempt: Attempt, new: bool = False) -> None:
    """Start the attempt's part of the log (see `log_headers`; `new`: `open_first_log` created it). Raises LogFull
    when there is no space for it."""
    headers = attempt.log_headers or LogHeaders()
    try:
        headers.write(fd, attempt.log_path, header_text(attempt.task.name, attempt.number), new)
    except OSError as exc:
        raise log_full(exc, attempt.log_path) from None


_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW


def open_log(attempt: Attempt) -> int:
    """The attempt's log, appended to; never through a symlink planted under its name (ELOOP fails the attempt).
    Raises LogFull when there is no space for it."""
    return _open_log(attempt, exclusive=False)[0]


def open_first_log(attempt: Attempt) -> tuple[int, bool]:
    """`open_log` for the start of an attempt, and whether the log is new: a first attempt creates its log (O_EXCL),
    which is then known to be empty; a log that exists (a retry's, anything planted under its name) is opened as
    `open_log` opens it."""
    return _open_log(attempt, exclusive=attempt.number == 1)


def _open_log(attempt: Attempt, exclusive: bool) -> tuple[int, bool]:
    """The log opened for appending, and whether it was made now. A log with other names is an earlier run's,
    linked in for a task that run did (resumed, up to date: store/runs.link_log); a task that runs again here must
    not write into that run's file: the name is unlinked and a new file made in its place (its viewers see a new
    log: they follow a replaced file)."""
    path = attempt.log_path
    try:
        if exclusive:
            try:
                return os.open(path, _LOG_FLAGS | os.O_EXCL, 0o600), True
            except FileExistsError:
                pass
        fd = os.open(path, _LOG_FLAGS, 0o600)
        if os.fstat(fd).st_nlink <= 1:
            return fd, False
        os.close(fd)
        os.unlink(path)
        return os.open(path, _LOG_FLAGS | os.O_EXCL, 0o600), True
    except OSError as exc:
        raise log_full(exc, path) from None


class ShellAttempt(RunningAttempt):
    identify_by_create_time = False  # see _track
    # The leader: set by `_track` in the first `_start_step`, which __init__ runs (it raises when no step started).
    _popen: spawn.Child

    def __init__(self, attempt: Attempt, steps: list[tuple[str, str]], cgroups: RunCgroups | None = None):
        self.attempt = attempt
        self._cgroups = cgroups
        self._cgroup: Cgroup | None = cgroups.acquire() if cgroups is not None else None
        self._steps = steps
        self._lock = threading.Lock()
        self._kill_requested = False
        self._kill_reason: str | None = None
        self._kill_started: float | None = None  # monotonic time of the SIGTERM; SIGKILL follows kill_grace later
        self._escalation: threading.Timer | None = None  # sends that SIGKILL unless the attempt ended first
        self._ended = False
        self._leader: process.ProcRef | None = None
        self._tree_cache: dict[int, psutil.Process] = {}
        self._deadline = time.monotonic() + attempt.timeout if attempt.timeout else None
        try:
            self._start_step(0)  # raises on spawn errors (missing workdir...), which fails the attempt
        except BaseException:
            self._release_cgroup()
            raise

    # --- spawning -------------------------------------------------------------------------------------------
    def _start_step(self, index: int) -> None:
        kind, command = self._steps[index] if self._steps else ("run", "true")
        shell = self.attempt.task.shell
        prefix = self._cgroup.shell_prefix(shell) if self._cgroup is not None else ""
        fd, new = open_first_log(self.attempt) if index == 0 else (open_log(self.attempt), False)
        try:
            if index == 0:
                write_header(fd, self.attempt, new)
            if kind == "setup" or index > 0:
                try:
                    os.write(fd, own_line(fd, self.attempt.log_path, f"--- {kind} ---\n".encode()))
                except OSError as exc:  # no room for it: the next step can't start with a log
                    raise log_full(exc, self.attempt.log_path) from None
            popen = spawn.start(
                [shell, "-c", prefix + command], self.attempt.env, str(self.attempt.workdir), devnull(), fd
            )
        except FileNotFoundError as exc:
            missing = str(exc.filename or self.attempt.workdir)
            os.write(fd, f"tuidag: cannot start: {missing} does not exist\n".encode())
            what = "workdir" if missing == str(self.attempt.workdir) else "shell"
            raise RuntimeError(f"{what} {missing} does not exist") from None
        except LogFull:
            raise
        except OSError as exc:
            os.write(fd, f"tuidag: cannot start: {exc}\n".encode())
            raise
        finally:
            os.close(fd)
        if self._cgroup is not None and not prefix:
            self._cgroup.add(popen.pid)
        self._step = index
        self._track(popen)

    def _track(self, popen: spawn.Child) -> None:
        """Make `popen` the leader that waiting, killing and usage look at. Anything with Popen's `pid`, `poll()`,
        `wait(timeout)` and `returncode` will do (`inprocess.IsolatedAttempt` passes a multiprocessing child).

        The leader is named by its pid and the run tag in its environment: it is our child, so its pid cannot be
        reused before we reap it, and the tag tells it apart after a crash. That saves reading its create time on
        every spawn; a leader someone else reaps (`identify_by_create_time`) gets its create time instead."""
        self._popen = popen
        self.pid = popen.pid
        if self.identify_by_create_time:
            self.create_time = process.create_time(popen.pid)  # None: it already ran and exited
            self._leader = process.ProcRef(popen.pid, self.create_time or 0.0)
        else:
            self._leader = process.ProcRef(popen.pid, run_id=self.attempt.run_id)

    def running(self) -> bool:
        return self._popen.returncode is None

    def _release_cgroup(self) -> None:
        group, self._cgroup = self._cgroup, None
        if group is not None:
            assert self._cgroups is not None  # the group was acquired from them
            self._cgroups.release(group)

    # --- control --------------------------------------------------------------------------------------------
    def kill(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._kill_requested:
                return
            self._kill_requested = True
            self._kill_reason = reason
            self._kill_started = time.monotonic()
            popen = self._popen
        if popen.returncode is None:
            # Collect before signalling: a leader that exits on SIGTERM orphans its children out of the tree.
            tree = process.collect_tree(
                self._leader, self.attempt.run_id, self.attempt.task.name, popen.pid, attempt=self.attempt.number
            )
            self._tree_cache = tree
            process.signal_all(tree, 15, popen.pid)
        if self._cgroup is not None:
            process.signal_pids(self._cgroup.pids(), 15)
        with self._lock:
            if not self._ended:  # the waiting thread blocks in waitpid: a timer sends the SIGKILL if one is due
                self._escalation = threading.Timer(self.attempt.kill_grace, self._escalate)
                self._escalation.daemon = True
                self._escalation.start()

    def usage(self) -> tuple[float, int] | None:
        """CPU%/RSS of the live tree. Process objects are kept between calls so cpu_percent has a baseline."""
        import psutil

        popen = self._popen
        if popen.returncode is not None:
            return None
        try:
            leader = psutil.Process(popen.pid)
            procs = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            return None
        cache = self._tree_cache
        live = [cache.setdefault(p.pid, p) for p in procs]
        self._tree_cache = {p.pid: p for p in live}
        return process.tree_usage(live)

    # --- waiting --------------------------------------------------------------------------------------------
    def wait(self) -> AttemptResult:
        try:
            return self._wait_steps()
        finally:
            with self._lock:
                self._ended = True
                if self._escalation is not None:
                    self._escalation.cancel()
            self._release_cgroup()

    def _wait_steps(self) -> AttemptResult:
        while True:
            try:
                code = self._wait_leader()
            finally:
                process.LEADERS.discard(self._popen.pid)
            self._finish_tree()
            if self._kill_requested:
                if self._kill_reason == "timeout":
                    return AttemptResult(False, code, "timeout")
                return AttemptResult(False, code, self._kill_reason, cancelled=True)
            kind = self._steps[self._step][0] if self._steps else "run"
            if code != 0:
                return AttemptResult(False, code, describe_exit(code, kind))
            if self._step + 1 >= len(self._steps):
                return AttemptResult(True, code)
            self._start_step(self._step + 1)

    def _wait_leader(self) -> int:
        """Block until the leader exits (one waitpid). A kill meanwhile signals the tree and arms the escalation
        timer, so the leader does exit; a timeout is the one thing the waiting thread has to watch the clock for."""
        popen = self._popen
        if self._deadline is not None and not self._exited_before_deadline(popen, self._deadline):
            self.kill("timeout")
        return popen.wait()

    def _exited_before_deadline(self, popen: spawn.Child, deadline: float) -> bool:
        try:
            pidfd = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):  # no pidfd (old kernel), out of descriptors, or already reaped
            delay = 0.001
            while popen.poll() is None:  # polling needs no descriptor and no import (both may be unavailable)
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.05)
            return True
        try:
            poller = select.poll()  # not select(): it fails for descriptor numbers above 1023
            poller.register(pidfd, select.POLLIN)
            while popen.poll() is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                poller.poll(min(left, MAX_POLL_WAIT) * 1000)  # poll() takes at most 2**31 - 1 ms (24.8 days)
            return True
        finally:
            os.close(pidfd)

    def _escalate(self) -> None:
        """The grace period is over and the leader has not been reaped: SIGKILL the tree."""
        popen = self._popen
        if popen.returncode is not None:
            return  # the waiting thread finishes the tree off itself (`_finish_tree`)
        tree = process.collect_tree(
            self._leader, self.attempt.run_id, self.attempt.task.name, popen.pid, attempt=self.attempt.number
        )
        process.signal_all({**self._tree_cache, **tree}, 9, popen.pid)
        if self._cgroup is not None:
            self._cgroup.kill()

    def _finish_tree(self) -> None:
        """The leader is gone. Make sure nothing it started outlives the attempt: after a kill, everything in its
        group, session, tag or cgroup; after a normal exit, what is left in its group (daemons that left the group
        may serve later tasks: they end with the run)."""
        pgid = self._popen.pid
        run_id, task, number = self.attempt.run_id, self.attempt.task.name, self.attempt.number

        def collect() -> dict[int, psutil.Process]:
            return process.collect_tree(None, run_id, task, pgid, attempt=number)

        if self._kill_requested:
            assert self._kill_started is not None  # set with _kill_requested
            grace = max(0.0, self.attempt.kill_grace - (time.monotonic() - self._kill_started))
            tree = collect()
            tree.update({pid: p for pid, p in self._tree_cache.items() if process.is_alive(p)})
            if self._cgroup is not None:
                tree.update(process.descendants(self._cgroup.pids()))
            survivors = process.wait_gone(tree, time.monotonic() + grace)
            process.kill_until_empty(survivors, pgid, collect, self._cgroup)
        elif process.group_alive(pgid):
            # Normal exit but children are still running in its group: they are part of the task; end them.
            process.terminate_tree(collect(), self.attempt.kill_grace, pgid, collect)


def describe_exit(code: int, kind: str = "run") -> str:
    if kind == "setup":
        return "setup failed"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    if code == 127:
        return "exit code 127 (command not found)"
    if code == 126:
        return "exit code 126 (command not executable)"
    return f"exit code {code}"
