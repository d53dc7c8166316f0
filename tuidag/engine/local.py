"""The local executor: shell tasks as process trees (`shell_attempt`), Python callables on a thread or in a child
process (`inprocess`); it owns what outlives a single attempt (the run's cgroups, orphans re-parented to tuidag).
"""

from __future__ import annotations

import os
import signal
import threading
import weakref
from functools import partial
from typing import TYPE_CHECKING

from . import cgroup, orphans, process
from .cgroup import RunCgroups
from .executor import Attempt, Executor, RunningAttempt
from .shell_attempt import ShellAttempt

if TYPE_CHECKING:
    import psutil


class LocalExecutor(Executor):
    """Shell tasks as subprocesses; Python callables go to `inprocess.launch_callable` (a thread, or a child process
    with isolate=True).

    `subreaper`: adopt orphaned descendants (reaped as they die, ended with the run). `cgroups`: give each attempt a
    cgroup where tuidag may create one (see `cgroup`)."""

    def __init__(self, subreaper: bool = True, cgroups: bool = True):
        if cgroups:
            cgroup.warm_up()  # first: the wait it takes passes while the rest of the run is made
        self._orphans = orphans.OrphanReaper() if subreaper and orphans.become_subreaper() else None
        process.preload_thread_exit()
        self._use_cgroups = cgroups
        self._lock = threading.Lock()
        self._runs: dict[str, RunCgroups | None] = {}
        self._attempts: weakref.WeakSet[ShellAttempt] = weakref.WeakSet()
        self._environ_tag: str | None = None  # the run id put in tuidag's own environment (see `_tag_environment`)

    @property
    def cgroups_active(self) -> bool:
        """Whether the attempts launched so far got cgroups of their own."""
        return any(self._runs.values())

    def _run_cgroups(self, run_id: str) -> RunCgroups | None:
        with self._lock:
            if run_id not in self._runs:
                self._runs[run_id] = RunCgroups.create(run_id) if self._use_cgroups else None
            return self._runs[run_id]

    def _leftovers(self, run_id: str) -> dict[int, psutil.Process]:
        """Every live process the run left: tagged ones, orphans re-parented to tuidag, what callables started, and
        everything in the run's cgroup, with their descendants."""
        found: dict[int, psutil.Process] = {}
        if process.tagged_pids(run_id):
            found.update(process.collect_tree(None, run_id=run_id))
        pids = orphans.adopted()
        if self._orphans is not None:
            pids += self._orphans.orphans()
        groups = self._runs.get(run_id)
        if groups is not None:
            pids += groups.pids()
        if pids:
            found.update(process.descendants(pids))
        for pid in orphans.helper_pids():  # started while the environment carried the run's tag, yet no task's
            found.pop(pid, None)
        return found

    def _tag_environment(self, run_id: str) -> None:
        """A callable on a pool thread starts processes with tuidag's own environment, so the run's tag goes there
        while the run lasts: then they carry it and, if tuidag dies (kill -9, `os._exit` in a callable), the next
        command's reaper finds them by it. (Processes a callable started are ended with the run anyway; one that
        also drops its environment and leaves the group and session is found only while tuidag lives.) Left
        alone when the environment already has a tag: tuidag then runs inside another run's task, which owns it."""
        with self._lock:
            if self._environ_tag is None and process.TAG_RUN not in os.environ:
                os.environ[process.TAG_RUN] = self._environ_tag = run_id

    def close(self) -> None:
        """The run is over: end anything its tasks left running (daemons that called setsid or double-forked after
        a task succeeded, processes callables started), and remove its cgroups."""
        with self._lock:
            runs = list(self._runs.items())
            self._runs.clear()
            if self._environ_tag is not None and os.environ.get(process.TAG_RUN) == self._environ_tag:
                del os.environ[process.TAG_RUN]
            self._environ_tag = None
        for run_id, groups in runs:
            leftovers = self._leftovers(run_id)
            if leftovers or (groups is not None and groups.populated()):
                process.terminate_tree(
                    leftovers,
                    grace=1.0,
                    collect=partial(self._leftovers, run_id),
                    cgroup=groups.root if groups else None,
                )
            if groups is not None:
                groups.remove()
        if self._orphans is not None:
            self._orphans.stop()

    def force_kill(self) -> int:
        """SIGKILL every process of every run at once (a second Ctrl+C): cgroups, the leaders' groups and sessions,
        tagged processes, orphans and callables' processes. Returns how many processes were found."""
        with self._lock:
            runs = list(self._runs.items())
        pgids = [a.pid for a in list(self._attempts) if a.pid is not None and a.running()]
        for _, groups in runs:
            if groups is not None:
                groups.kill()
        for pgid in pgids:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass

        def collect() -> dict[int, psutil.Process]:
            found: dict[int, psutil.Process] = {}
            for run_id, _ in runs:
                found.update(self._leftovers(run_id))
            found.update({pid: proc for pid, (_, proc) in process.group_members(set(pgids), None).items()})
            return found

        first = collect()
        process.kill_until_empty(first, None, collect)
        return len(first)

    def launch(self, attempt: Attempt) -> RunningAttempt:
        groups = self._run_cgroups(attempt.run_id)
        if attempt.task.func is not None:  # a Python callable: in a pool thread, or a child process (isolate=True)
            from .inprocess import launch_callable

            if not attempt.task.isolate:
                self._tag_environment(attempt.run_id)

            running = launch_callable(attempt, groups)
        else:
            steps = []
            if attempt.task.setup:
                steps.append(("setup", attempt.task.setup))
            if attempt.task.run is not None:
                steps.append(("run", attempt.task.run))
            running = ShellAttempt(attempt, steps, groups)
        if isinstance(running, ShellAttempt):
            self._attempts.add(running)
        return running
