"""Run attempts as local subprocesses, each in its own session, output straight into the task's log file.

The child writes to the log file descriptor itself: no pipe through tuidag, so output is never lost or reordered
even if tuidag is slow or dies, and tuidag spends no CPU per byte.
"""
from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import TYPE_CHECKING

from . import process, spawn
from .executor import Attempt, AttemptResult, Executor, RunningAttempt
from .log_headers import LogHeaders, header_text, own_line

if TYPE_CHECKING:
    import psutil

_devnull_fd: int | None = None


def devnull() -> int:
    """One read-only /dev/null descriptor for every task's stdin (Popen would open and close one per spawn)."""
    global _devnull_fd
    if _devnull_fd is None:
        _devnull_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _devnull_fd


def write_header(fd: int, attempt: Attempt) -> None:
    """Start the attempt's part of the log (see `log_headers`)."""
    headers = attempt.log_headers or LogHeaders()
    headers.write(fd, attempt.log_path, header_text(attempt.task.name, attempt.number))


def open_log(attempt: Attempt) -> int:
    return os.open(attempt.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


class LocalExecutor(Executor):
    """Shell tasks as subprocesses; Python callables go to `inprocess.launch_callable` (a thread, or a child process
    with isolate=True)."""

    def __init__(self, subreaper: bool = True):
        if subreaper:
            process.become_subreaper()
        self._run_ids: set[str] = set()

    def close(self) -> None:
        """The run is over: end anything its tasks left running outside their process groups (daemons that called
        setsid or double-forked after a task succeeded), found by the run's tag."""
        for run_id in self._run_ids:
            if not process.tagged_pids(run_id):
                continue
            leftovers = process.collect_tree(None, run_id=run_id)
            if leftovers:
                process.terminate_tree(leftovers, grace=1.0)
        self._run_ids.clear()

    def launch(self, attempt: Attempt) -> RunningAttempt:
        self._run_ids.add(attempt.run_id)
        if attempt.task.func is not None:  # a Python callable: in a pool thread, or a child process (isolate=True)
            from .inprocess import launch_callable

            return launch_callable(attempt)
        steps = []
        if attempt.task.setup:
            steps.append(("setup", attempt.task.setup))
        if attempt.task.run is not None:
            steps.append(("run", attempt.task.run))
        return ShellAttempt(attempt, steps)


class ShellAttempt(RunningAttempt):
    identify_by_create_time = False  # see _track

    def __init__(self, attempt: Attempt, steps: list[tuple[str, str]]):
        self.attempt = attempt
        self._steps = steps
        self._lock = threading.Lock()
        self._kill_requested = False
        self._kill_reason: str | None = None
        self._kill_started: float | None = None  # monotonic time of the SIGTERM; SIGKILL follows kill_grace later
        self._escalation: threading.Timer | None = None  # sends that SIGKILL unless the attempt ended first
        self._ended = False
        self._popen: spawn.Child | None = None
        self._leader: process.ProcRef | None = None
        self._tree_cache: dict[int, psutil.Process] = {}
        self._deadline = time.monotonic() + attempt.timeout if attempt.timeout else None
        self._start_step(0)  # raises on spawn errors (missing workdir...), which fails the attempt

    # --- spawning -------------------------------------------------------------------------------------------
    def _start_step(self, index: int) -> None:
        kind, command = self._steps[index] if self._steps else ("run", "true")
        fd = open_log(self.attempt)
        try:
            if index == 0:
                write_header(fd, self.attempt)
            if kind == "setup" or index > 0:
                os.write(fd, own_line(fd, self.attempt.log_path, f"--- {kind} ---\n".encode()))
            popen = spawn.start([self.attempt.task.shell, "-c", command], self.attempt.env,
                                str(self.attempt.workdir), devnull(), fd)
        except FileNotFoundError as exc:
            missing = str(exc.filename or self.attempt.workdir)
            os.write(fd, f"tuidag: cannot start: {missing} does not exist\n".encode())
            what = "workdir" if missing == str(self.attempt.workdir) else "shell"
            raise RuntimeError(f"{what} {missing} does not exist") from None
        except OSError as exc:
            os.write(fd, f"tuidag: cannot start: {exc}\n".encode())
            raise
        finally:
            os.close(fd)
        self._step = index
        self._track(popen)

    def _track(self, popen) -> None:
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

    # --- control --------------------------------------------------------------------------------------------
    def kill(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._kill_requested:
                return
            self._kill_requested = True
            self._kill_reason = reason
            self._kill_started = time.monotonic()
            popen = self._popen
        if popen is not None and popen.returncode is None:
            # Collect before signalling: a leader that exits on SIGTERM orphans its children out of the tree.
            tree = process.collect_tree(self._leader, self.attempt.run_id, self.attempt.task.name, popen.pid)
            self._tree_cache = tree
            process.signal_all(tree, 15, popen.pid)
        with self._lock:
            if not self._ended:  # the waiting thread blocks in waitpid: a timer sends the SIGKILL if one is due
                self._escalation = threading.Timer(self.attempt.kill_grace, self._escalate)
                self._escalation.daemon = True
                self._escalation.start()

    def usage(self) -> tuple[float, int] | None:
        """CPU%/RSS of the live tree. Process objects are kept between calls so cpu_percent has a baseline."""
        import psutil

        popen = self._popen
        if popen is None or popen.returncode is not None:
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

    def _wait_steps(self) -> AttemptResult:
        while True:
            code = self._wait_leader()
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
        assert popen is not None
        if self._deadline is not None and not self._exited_before_deadline(popen):
            self.kill("timeout")
        return popen.wait()

    def _exited_before_deadline(self, popen) -> bool:
        try:
            pidfd = os.pidfd_open(popen.pid)
        except (AttributeError, OSError):  # no pidfd (old kernel) or the leader is already reaped
            import subprocess  # for TimeoutExpired, which every Child's wait(timeout) raises

            try:
                popen.wait(max(0.0, self._deadline - time.monotonic()))
                return True
            except subprocess.TimeoutExpired:
                return False
        try:
            while popen.poll() is None:
                left = self._deadline - time.monotonic()
                if left <= 0:
                    return False
                select.select([pidfd], [], [], left)
            return True
        finally:
            os.close(pidfd)

    def _escalate(self) -> None:
        """The grace period is over and the leader has not been reaped: SIGKILL the tree."""
        popen = self._popen
        if popen.returncode is not None:
            return  # the waiting thread finishes the tree off itself (`_finish_tree`)
        tree = process.collect_tree(self._leader, self.attempt.run_id, self.attempt.task.name, popen.pid)
        process.signal_all({**self._tree_cache, **tree}, 9, popen.pid)

    def _finish_tree(self) -> None:
        """The leader is gone. Make sure nothing it started outlives the attempt."""
        pgid = self._popen.pid
        if self._kill_requested:
            grace = max(0.0, self.attempt.kill_grace - (time.monotonic() - self._kill_started))
            tree = process.collect_tree(None, self.attempt.run_id, self.attempt.task.name, pgid)
            tree.update({pid: p for pid, p in self._tree_cache.items() if _alive(p)})
            survivors = process.wait_gone(tree, time.monotonic() + grace)
            if survivors or process.group_alive(pgid):
                process.signal_all(survivors, 9, pgid)
                process.wait_gone(survivors, time.monotonic() + 5.0)
        elif process.group_alive(pgid):
            # Normal exit but children are still running in its group: they are part of the task; end them.
            tree = process.collect_tree(None, self.attempt.run_id, self.attempt.task.name, pgid)
            process.terminate_tree(tree, self.attempt.kill_grace, pgid)


def _alive(proc: psutil.Process) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


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

