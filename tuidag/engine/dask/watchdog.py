"""A Dask worker process's tag and its watchdog: `python -m tuidag.engine.dask.watchdog TOKEN`.

Every attempt a worker starts carries `TUIDAG_DASK_GUARD=TOKEN` in its environment (inherited through forks, setsid
and re-parenting), TOKEN being the worker process's pid and start time. The watchdog, started by the worker's guard
(`guard.HostGuard`) in a session of its own and deaf to SIGINT, SIGTERM and SIGHUP, blocks reading a pipe whose
write end only the worker process holds: however the worker process ends, `kill -9` included, the pipe closes, and the
watchdog SIGKILLs every process of this host carrying the worker's tag, then exits. It imports neither Dask nor psutil
(a few MB, a few hundredths of a second to start).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from ..process import environments

GUARD_TAG = "TUIDAG_DASK_GUARD"

_lock = threading.Lock()
_token: str | None = None
_started_by: int | None = None  # the pid of the process whose watchdog runs (a forked child needs its own)


def token() -> str:
    """This worker process's tag value: its pid and start time, so a recycled pid never matches."""
    global _token
    if _token is None or not _token.startswith(f"{os.getpid()}-"):
        _token = f"{os.getpid()}-{_create_time(os.getpid())}"
    return _token


def _create_time(pid: int) -> float | None:
    from ..process import create_time

    return create_time(pid)


def start_watchdog() -> None:
    """Start this worker process's watchdog, once."""
    global _started_by
    with _lock:
        if _started_by == os.getpid():
            return
        read_end, write_end = os.pipe()  # both close-on-exec: no task inherits the write end
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tuidag.engine.dask.watchdog", token()],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        _started_by = os.getpid()
        _pipes.append(write_end)  # held open (never closed) for the life of this process
        threading.Thread(target=proc.wait, daemon=True, name="tuidag-dask-watchdog").start()  # no zombie


_pipes: list[int] = []


def _token_alive(value: str) -> bool:
    pid, _, started = value.partition("-")
    try:
        now = _create_time(int(pid))
        return now is not None and abs(now - float(started)) < 0.01
    except ValueError:
        return False


def kill_tagged(value: str | None) -> int:
    """SIGKILL every process of this host tagged with worker `value`, or (None) with a worker process that no
    longer exists, pass after pass until none is left (one may start another as it dies). Returns how many."""
    killed = 0
    for _ in range(50):
        found = tagged(value)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.01)
    return killed


def tagged(value: str | None) -> list[int]:
    """Pids of this host's processes tagged with worker `value` (None: with a worker process that is gone)."""
    prefix = f"{GUARD_TAG}=".encode()
    found = []
    for pid, items in environments(prefix):
        for item in items:
            if item.startswith(prefix):
                tag = item[len(prefix) :].decode(errors="replace")
                if (tag == value) if value is not None else not _token_alive(tag):
                    found.append(pid)
                break
    return found


def watch(value: str) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    kill_tagged(value)
    return 0


if __name__ == "__main__":
    sys.exit(watch(sys.argv[1]))
