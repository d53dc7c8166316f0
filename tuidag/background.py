"""Starting a run's engine in a process of its own, detached from the terminal.

A run that must outlive its terminal (`tuidag run -d`, or a UI that detaches with `d`) can't live in the process the
shell waits for: that one has to exit for the terminal to be free, and the tasks are the children of whoever started
them. So the engine is forked off before anything starts a thread (forking a threaded process keeps only the forking
thread), becomes a session of its own with no controlling terminal, and runs the DAG headless while serving the
run's control socket; the process the user started becomes a viewer of it, or exits.

Until the engine has created its run it writes what it has to say (notes, errors) to a pipe the starter copies to
its own stderr; the last thing on the pipe is the run's id and the engine's pid (or nothing, when it failed: the
starter then exits with the code the engine gave). After that the engine's output goes to `engine.log` in the run
folder.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import NamedTuple

READY = b"\0tuidag-engine-ready "
EXITED = b"\0tuidag-engine-exit "
ENGINE_LOG = "engine.log"


class Started(NamedTuple):
    run_id: str
    pid: int


class EngineFailed(Exception):
    """The engine ended before its run was created (what it said went to stderr); `code` is its exit code."""

    def __init__(self, code: int):
        super().__init__(f"the engine exited with {code}")
        self.code = code


def start_engine(work: Callable[[Callable[[str, str], None]], int]) -> Started:
    """Run `work(ready)` in a new, detached process and return once it called `ready(run_id, run_folder)`.

    `work` returns the engine's exit code; it must call `ready` once its run exists (its output then moves to the
    run folder's engine.log). Raises EngineFailed if the engine ends first."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read_end)
        _become_engine(work, write_end)  # never returns
    os.close(write_end)
    os.waitpid(middle, 0)  # the middle process exits as soon as the engine is forked off
    said = bytearray()
    while READY not in said or not said.endswith(b"\n"):
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        said += chunk
    os.close(read_end)
    text, marker, tail = bytes(said).partition(READY)
    if not marker:
        head, exit_marker, code = text.rpartition(EXITED)
        _say(head if exit_marker else text)
        raise EngineFailed(int(code.strip()) if code.strip().isdigit() else 2)
    _say(text)
    run_id, _, pid = tail.decode().strip().partition(" ")
    return Started(run_id, int(pid))


def _say(text: bytes) -> None:
    if text:
        sys.stderr.write(text.decode(errors="replace"))
        sys.stderr.flush()


def _become_engine(work: Callable[[Callable[[str, str], None]], int], pipe: int) -> None:
    """In the forked child: a new session (no controlling terminal, no SIGHUP when the terminal closes), forked once
    more so the engine is not a session leader and is the init process's child, not the starter's."""
    code = 2
    handed_over = False
    try:
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
            signal.signal(signum, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # what the engine's children (a Dask cluster's workers) inherit until the run exists
            os.dup2(null, fd)
        os.close(null)
        # Until the run exists, what the engine prints (notes, errors) goes to the starter, through the pipe.
        streams = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = os.fdopen(pipe, "w", buffering=1, closefd=False, errors="replace")

        def ready(run_id: str, folder: str) -> None:
            nonlocal handed_over
            sys.stdout.flush()
            os.write(pipe, READY + f"{run_id} {os.getpid()}\n".encode())
            log = os.open(
                os.path.join(folder, ENGINE_LOG),
                os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            sys.stdout, sys.stderr = streams  # the streams on fds 1 and 2, now the run's engine.log
            os.close(pipe)
            handed_over = True

        code = work(ready)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            if not handed_over:  # the starter is still waiting: tell it how the engine ended
                os.write(pipe, EXITED + f"{code}\n".encode())
        except (OSError, ValueError):
            pass
        os._exit(code)
