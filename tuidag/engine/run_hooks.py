"""The DAG's run hooks: `on_end:` runs after every run, `on_run_failure:` after a run that failed (a non-zero exit
code), in the DAG's workdir, with the run's id, outcome, counts and duration in their environment (as pueue's
`daemon.callback` has). Their output goes to `hooks.log` in the run folder. A hook that fails or hangs is reported
but never changes the run's exit code; one still running after `HOOK_TIMEOUT` seconds is killed with its whole tree.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..model.state import TaskState
from . import process

# Long enough for a notification or an upload of a report; short enough that a viewer waiting for the run's
# summary (it waits 30 s after the last task) sees it, since hooks run before the summary is written.
HOOK_TIMEOUT = 20.0


@dataclass(frozen=True)
class HookResult:
    hook: str  # on_end or on_run_failure
    exit_code: int | None  # None: killed at the timeout, or it could not start
    problem: str | None  # why it counts as failed, said for a person; None: it exited 0

    def record(self) -> dict[str, object]:
        return {"hook": self.hook, "exit_code": self.exit_code, "problem": self.problem}


def hook_env(
    run_id: str, dag: str, outcome: str, exit_code: int, counts: Mapping[str, int], duration: float, run_dir: Path
) -> dict[str, str]:
    """What a hook learns of the run: TUIDAG_RUN_ID, TUIDAG_DAG, TUIDAG_OUTCOME, TUIDAG_EXIT_CODE, TUIDAG_DURATION
    (seconds) and TUIDAG_RUN_DIR, and a count per state a task ends in (TUIDAG_SUCCEEDED, TUIDAG_FAILED, TUIDAG_SKIPPED,
    TUIDAG_CANCELLED, TUIDAG_UP_TO_DATE, TUIDAG_UNTARGETED: 0 when none)."""
    env = {
        "TUIDAG_RUN_ID": run_id,
        "TUIDAG_DAG": dag,
        "TUIDAG_OUTCOME": outcome,
        "TUIDAG_EXIT_CODE": str(exit_code),
        "TUIDAG_DURATION": f"{duration:.3f}",
        "TUIDAG_RUN_DIR": str(run_dir),
    }
    for state in TaskState:  # the states a task can end in (the others count 0 once a run is over)
        if not state.terminal:
            continue
        env[f"TUIDAG_{state.value}"] = str(counts.get(state.value, 0))
    return env


def run_hook(
    hook: str,
    command: str,
    workdir: Path,
    env: Mapping[str, str],
    log: Path,
    timeout: float = HOOK_TIMEOUT,
) -> HookResult:
    """Run `command` with `sh -c` in a session of its own, its output appended to `log` after a header line; kill
    its tree (its session and its descendants) if it is still running after `timeout` seconds."""
    try:
        with open(log, "ab") as out:
            out.write(f"=== {hook}: {command} ({time.strftime('%Y-%m-%d %H:%M:%S')})\n".encode())
            out.flush()
            return _ended(out, _run(hook, command, workdir, env, out, timeout))
    except OSError as exc:  # a full disk: the hook is not run, since nothing it says could be kept
        return HookResult(hook, None, f"not run: hooks.log could not be written ({exc.strerror or exc})")


def _run(hook: str, command: str, workdir: Path, env: Mapping[str, str], out: BinaryIO, timeout: float) -> HookResult:
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=workdir,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return HookResult(hook, None, f"could not start ({exc.strerror or exc})")
    process.LEADERS.add(proc.pid)  # waited for here, never reaped by an orphan reaper
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_hook_tree(proc.pid)
        proc.wait()
        return HookResult(hook, None, f"still running after {timeout:g}s: killed with its processes")
    finally:
        process.LEADERS.discard(proc.pid)
    if code == 0:
        return HookResult(hook, 0, None)
    if code < 0:
        return HookResult(hook, code, f"killed by {signal.Signals(-code).name}")
    return HookResult(hook, code, f"exited with {code}")


def kill_hook_tree(pid: int) -> None:
    """SIGKILL the hook's session and its descendants (those that left the session too) until none is left."""

    def collect() -> dict:
        return {**process.descendants([pid]), **process.collect_tree(None, pgid=pid)}

    process.kill_until_empty(collect(), pid, collect)


def _ended(out: BinaryIO, result: HookResult) -> HookResult:
    try:
        out.write(f"=== {result.hook}: {result.problem or 'exited with 0'}\n".encode())
    except OSError:  # a full disk: the summary still records how the hook went
        pass
    return result
