"""A worker process's registry of the attempts it runs, and what the client and the worker's guard do through it:
stop one attempt (`cancel_key`, also before it starts), refuse a Dask task's second start (`refuse`), stop the
attempts no client wants any more (`guard_check`), stop them all (`kill_running`, `kill_all`).

Runs inside the worker process, so it is an importable module (not `__main__`): the registry must be the worker's
own, not a copy pickled along with a function (`Client.run` sends `cancel_key` and `kill_all` by reference). The
attempt runner (`runner`) enters each attempt here as it starts and removes it when its tree is gone.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..shell_attempt import ShellAttempt

_lock = threading.Lock()
_running: dict[str, ShellAttempt] = {}  # attempt key -> attempt running on this worker
_carriers: dict[str, tuple[str, str]] = {}  # attempt key -> (its worker, the Dask task that carries it): guard_check
_refused: dict[str, None] = {}  # Dask keys never to run here (a second start, see guard)
_guard_killed: set[str] = set()  # attempt keys the guard has stopped
_cancelled: dict[str, str] = {}  # dask keys cancelled before they started here -> reason (see cancel_key)
_starting: set[str] = set()  # dask keys of attempts being started here (not in _running yet)


def refused(carrier: str) -> bool:
    """Whether the Dask task `carrier` was refused here (Dask starts it a second time, see `guard`): it never runs
    twice. Said once."""
    with _lock:
        if carrier in _refused:
            _refused.pop(carrier)
            return True
    return False


def starting(key: str) -> str | None:
    """The attempt `key` is about to start here, unless it was cancelled before: then the reason."""
    with _lock:
        reason = _cancelled.pop(key, None)
        if reason is None:
            _starting.add(key)
    return reason


def not_starting(key: str) -> None:
    with _lock:
        _starting.discard(key)


def runs(key: str, attempt: ShellAttempt, worker: str, carrier: str) -> str | None:
    """The attempt `key` runs here, on `worker`, in the Dask task `carrier`; the reason of a cancel that came while it
    was starting, if one did."""
    with _lock:
        _running[key] = attempt
        _carriers[key] = (worker, carrier)
        return _cancelled.pop(key, None)


def ended(key: str) -> None:
    """The attempt `key` and its tree are gone."""
    with _lock:
        _running.pop(key, None)
        _carriers.pop(key, None)
        _guard_killed.discard(key)


def leaders() -> set[int]:
    """The leaders' pids of the attempts running here: each one's process group and session (`reaper`)."""
    with _lock:
        return {attempt.pid for attempt in _running.values() if attempt.pid is not None}


def running_attempt(key: str) -> ShellAttempt | None:
    with _lock:
        return _running.get(key)


def cancel_key(key: str, reason: str) -> bool:
    """Run on a worker by `Client.run`: stop the attempt `key` if it runs here (the SIGTERM -> SIGKILL escalation
    goes on in the attempt), or make sure it never starts here. Returns whether it runs here, being started
    included (its processes may exist already: it is stopped as soon as it is, and its end event says when the tree
    is gone, so the client must wait for that). Never blocks: `Client.run` calls it on the worker's event loop."""
    with _lock:
        running = _running.get(key)
        if running is None:
            if len(_cancelled) > 10_000:  # keys of attempts that never came here: keep the set bounded
                _cancelled.clear()
            _cancelled[key] = reason
            return key in _starting
    running.kill(reason)
    return True


def kill_all(run_id: str) -> int:
    """Run on every worker by `Client.run` (a second Ctrl+C): SIGKILL every process of the run here at once."""
    from .. import process

    procs = process.collect_tree(None, run_id=run_id)
    process.signal_all(procs, 9)
    return len(procs)


def refuse(key: str) -> None:
    """Stream handler on the worker (see `guard`): the Dask task `key`, which the scheduler is about to send
    here again, must not run."""
    with _lock:
        if len(_refused) > 10_000:
            _refused.pop(next(iter(_refused)))
        _refused[key] = None


def guard_check(worker: Any) -> None:
    """On the worker's event loop, every `guard.CHECK_INTERVAL`: stop the attempts no client wants any more
    (their Dask task was released: the client died, or cancelled it) and, once the worker has lost its scheduler,
    every attempt (nobody could see them end). The kills run on threads of their own: a tree kill reads /proc."""
    comm = getattr(getattr(worker, "batched_stream", None), "comm", None)
    lost = comm is None or comm.closed()
    with _lock:
        running = list(_running.items())
        carriers = dict(_carriers)
    if not running:
        return
    tasks = worker.state.tasks
    for key, attempt in running:
        where, carrier = carriers.get(key, (None, None))
        if key in _guard_killed or where != worker.address:  # (workers of one process share this module)
            continue
        if lost:
            reason = "the Dask scheduler is unreachable from the worker"
        else:
            state = tasks.get(carrier)
            if state is not None and state.state in ("executing", "long-running"):
                continue
            reason = "the run's Dask client is gone"
        _guard_killed.add(key)
        threading.Thread(target=attempt.kill, args=(reason,), daemon=True, name="tuidag-dask-guard").start()


def kill_running(worker: Any, reason: str) -> None:
    """Stop every attempt running on `worker` (it closes)."""
    with _lock:
        running = [_running[key] for key, (where, _) in _carriers.items() if where == worker.address]
    threads = [threading.Thread(target=attempt.kill, args=(reason,), daemon=True) for attempt in running]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
