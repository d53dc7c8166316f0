"""How `tuidag` exits: the exit handlers and the flush of its streams, then no interpreter teardown; a normal exit
where one is needed."""

from __future__ import annotations

import atexit
import subprocess
import sys
import textwrap

import pytest

from command import command_env
from slowness import patience
from tuidag.cli import exit_now


def exit_with(program: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        env=command_env(),
        capture_output=True,
        text=True,
        timeout=patience(30),
    )


def test_the_exit_handlers_run_and_buffered_output_is_written_before_the_exit_code():
    done = exit_with(
        """
        import atexit, sys
        from tuidag.cli import exit_now
        atexit.register(lambda: print("handler ran"))
        sys.stdout.write("buffered, no newline")
        exit_now(5)
        """
    )
    assert done.returncode == 5
    assert done.stdout == "buffered, no newlinehandler ran\n"


def test_a_thread_that_is_no_daemon_is_waited_for_by_a_normal_exit():
    done = exit_with(
        """
        import threading, time
        from tuidag.cli import exit_now
        threading.Thread(target=lambda: (time.sleep(0.2), print("thread ended", flush=True))).start()
        exit_now(3)
        """
    )
    assert done.returncode == 3 and done.stdout == "thread ended\n"


def test_without_the_interpreter_s_exit_handler_runner_it_exits_normally(monkeypatch):
    monkeypatch.delattr(atexit, "_run_exitfuncs")
    with pytest.raises(SystemExit) as exited:
        exit_now(4)
    assert exited.value.code == 4
