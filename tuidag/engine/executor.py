"""The executor interface: start one attempt of one task, watch it, kill it.

The scheduler owns the thread pool (its slots are `max_parallel`) and all task state; an executor only knows how to
run one attempt somewhere (local subprocess, in-process callable, a Dask worker) and report how it ended. A pool
thread calls `launch()` and then blocks in `wait()`; `kill()` comes from any other thread and must not block.
"""

from __future__ import annotations

import errno
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ..model.spec import NO_ENV, TaskSpec
from .log_headers import LogHeaders


class TaskEnvironment(Mapping[str, str]):
    """An attempt's environment: the run's variables (the OS's and the DAG's, the same for every task and never
    changed once the run starts) under the task's own. Spawning encodes the run's part once per run instead of once
    per task (see `spawn.start`); anything else reads it like a dict."""

    __slots__ = ("own", "shared")

    def __init__(self, shared: Mapping[str, str], own: Mapping[str, str]):
        self.shared = shared
        self.own = own

    def __getitem__(self, key: str) -> str:
        own = self.own
        return own[key] if key in own else self.shared[key]

    def __iter__(self) -> Iterator[str]:
        own = self.own
        yield from (key for key in self.shared if key not in own)
        yield from own

    def __len__(self) -> int:
        return len(self.shared) + sum(key not in self.shared for key in self.own)


class Attempt(NamedTuple):
    """Everything an executor needs to run one attempt."""

    run_id: str
    task: TaskSpec
    number: int  # 1-based attempt number
    env: Mapping[str, str]  # full environment: OS + DAG + task + TUIDAG_* tags
    workdir: Path
    log_path: str
    timeout: float | None
    kill_grace: float
    results: Mapping[str, Any] = NO_ENV  # return values of finished callable dependencies (read-only)
    log_headers: LogHeaders | None = None  # where the header is put on record (None: nobody asks; see `log_headers`)
    #: Called by an executor that runs attempts elsewhere with the worker's name as soon as the attempt started there
    #: (any thread), so the views name the worker while the task runs, not only once it has ended; and, when the
    #: worker numbered the attempt's slots itself (its own devices), with those slots (`format_slots` text), and
    #: when the process started there (`started`, a time.time() of the worker's clock); `ending=True` when the
    #: attempt is over already (its end is about to be reported: the event goes out with it).
    on_worker: Callable[..., None] | None = None
    #: Called by an executor whose attempts start later (`Executor.starts_later`) when this one still waits for a
    #: worker a moment after it was launched (not for the many that start at once), so QUEUED says why.
    on_waiting: Callable[[], None] | None = None


class LogFull(OSError):
    """The attempt's log could not be created or written for lack of space (ENOSPC, EDQUOT): the attempt did not
    start, and no other attempt would, as every log lives in the same place."""


def log_full(exc: OSError, path: str) -> OSError:
    """`exc` as LogFull when it says there is no space, else as it is."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) and not isinstance(exc, LogFull):
        return LogFull(exc.errno, exc.strerror, path)
    return exc


class AttemptResult(NamedTuple):
    ok: bool
    exit_code: int | None = None
    reason: str | None = None  # why it failed or stopped: "exit code 3", "timeout", "setup failed", ...
    cancelled: bool = False  # it ended because kill() was called
    value: Any = None  # a callable's return value
    worker: str | None = None  # the Dask worker that ran it (None: this machine)


class RunningAttempt(ABC):
    """A started attempt. `pid`/`create_time` name the leader process when there is one (for the journal)."""

    pid: int | None = None
    create_time: float | None = None

    @abstractmethod
    def wait(self) -> AttemptResult:
        """Block until the attempt and every process it started are gone. Enforces the attempt's timeout."""

    @abstractmethod
    def kill(self) -> None:
        """Ask the attempt to stop (any thread, non-blocking). `wait()` returns once everything is gone."""

    def usage(self) -> tuple[float, int] | None:
        """(CPU %, RSS bytes) of the attempt's whole tree, or None when unknown."""
        return None


class Executor(ABC):
    #: An attempt it launches may wait before its process starts (in a Dask cluster's queue): the task stays QUEUED
    #: ("waiting for a worker") until `Attempt.on_worker` says it started, and is RUNNING from then on.
    starts_later = False
    waiting_reason = "waiting for a worker"
    #: Where the run's attempts run, for the run record (`executor` in the journal's header).
    description = "local"
    #: What `parallelism` counts, said with the max_parallel it gives (`the Dask cluster's worker threads`).
    parallelism_source = ""

    def parallelism(self) -> int | None:
        """How many attempts the executor can run at once, the default max_parallel when neither the DAG nor the
        command line sets one; None: this machine's CPU count."""
        return None

    def watch_parallelism(self, changed: Callable[[int], None]) -> None:  # noqa: B027 (a no-op by default)
        """Have `changed(n)` called when `parallelism` changes (workers join or leave). An optional hook: by default
        the parallelism never changes, so there is nothing to watch."""

    @abstractmethod
    def launch(self, attempt: Attempt) -> RunningAttempt:
        """Start the attempt. Raising is allowed: the scheduler turns the exception into a failed attempt."""

    def placement_problem(self, task: TaskSpec) -> str | None:
        """Why no worker can run `task` now, or None. The task then waits (QUEUED, with this as its reason) instead of
        being launched to wait unseen inside a cluster. Called with the scheduler's lock held for every task about to
        run: answer from what is already known, never wait. Call the `recheck` given to `watch_placement` once the
        answer may have changed (a worker joined)."""
        return None

    def watch_placement(self, recheck: Callable[[], None]) -> None:  # noqa: B027 (a no-op by default)
        """`recheck()` (any thread, no lock held) tries again the tasks `placement_problem` turned away. An optional
        hook: by default no task is turned away, so there is nothing to recheck."""

    def close(self) -> None:  # noqa: B027 (a no-op by default)
        """Release resources once the run is over. An optional hook: by default there are none."""

    def force_kill(self) -> int:
        """SIGKILL every process of the run at once, without grace (a second Ctrl+C). Returns how many were found."""
        return 0
