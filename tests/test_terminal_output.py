"""What the real `tuidag` command prints of hostile task output: headless (piped, and on a terminal in tmux) and
`tuidag logs` (piped, on a pseudo-terminal, `--raw`); attempt headers; long lines; a printer behind the engine."""

from __future__ import annotations

import io
import os
import re
import select
import shutil
import subprocess
import sys
import time
import tty
from pathlib import Path

import pytest

from slowness import patience
from tuidag.engine.events import TaskEvent, TaskSnapshot
from tuidag.engine.log_headers import LogHeaders, header_text
from tuidag.model.state import TaskState
from tuidag.views.headless import LINE_CAP, HeadlessReporter

pytestmark = pytest.mark.cli
REPO = Path(__file__).resolve().parent.parent
SGR = re.compile(rb"\x1b\[[0-9;:]*m")

HOSTILE = r"""
tasks:
  fetch:
    run: |
      printf 'title \033]2;PWNED2\007 done\n'
      printf 'clear \033[2J\033[H here\n'
      printf 'up \033[1A\033[2K erased\n'
      printf '\033[31mred\033[0m and \033[1mbold\n'
      printf 'dcs \033P1$r0m\033\\ end\n'
      printf 'bell \007 backspace \010 del \177\n'
      printf 'progress 10%%\rprogress 100%%\n'
      printf 'x\r[other] forged\n'
"""
# what each of those lines shows, after the task's prefix
SHOWN = [
    b"title  done",
    b"clear  here",
    b"up  erased",
    b"\x1b[31mred\x1b[0m and \x1b[1mbold\x1b[0m",
    b"dcs  end",
    "bell \ufffd backspace \ufffd del \ufffd".encode(),
    b"progress 100%",
    b"[other] forged",
]


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("TUIDAG_STATE_DIR", "NO_COLOR")}
    return {**base, "PYTHONPATH": str(REPO), **extra}


def tuidag(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuidag", *args], cwd=cwd, env=env(**extra), capture_output=True, timeout=patience(60)
    )


def task_lines(out: bytes, task: str) -> list[bytes]:
    """The output lines of `task` (not its state changes), without the prefix."""
    prefix = f"[{task}] ".encode()
    return [line[len(prefix) :] for line in out.split(b"\n") if line.startswith(prefix) and b"--> " not in line]


def test_piped_headless_output_keeps_colours_and_neutralises_every_other_control(tmp_path: Path) -> None:
    (tmp_path / "dag.yaml").write_text(HOSTILE)
    proc = tuidag("run", "--no-tui", "dag.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert task_lines(proc.stdout, "fetch") == SHOWN
    assert b"\r" not in proc.stdout and b"\x07" not in proc.stdout
    assert b"\x1b" not in SGR.sub(b"", proc.stdout)


def on_pty(*args: str, cwd: Path) -> bytes:
    """Run `tuidag` with its stdout on a pseudo-terminal in raw mode (so the bytes arrive as written)."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuidag", *args],
            cwd=cwd,
            env=env(),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
        )
    finally:
        os.close(slave)
    chunks, deadline = [], time.monotonic() + patience(30)
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # EIO: the last writer closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    assert proc.wait(patience(10)) == 0, proc.stderr.read()
    return b"".join(chunks)


def test_logs_is_byte_exact_piped_safe_on_a_terminal_and_raw_on_request(tmp_path: Path) -> None:
    (tmp_path / "dag.yaml").write_text(HOSTILE)
    assert tuidag("run", "--no-tui", "dag.yaml", cwd=tmp_path).returncode == 0
    log = next(tmp_path.glob(".tuidag/runs/*/logs/fetch.log")).read_bytes()
    assert b"\x1b]2;PWNED2\x07" in log and b"x\r[other]" in log

    assert tuidag("logs", "fetch", cwd=tmp_path).stdout == log
    shown = on_pty("logs", "fetch", cwd=tmp_path)
    assert shown.split(b"\n")[1:-1] == SHOWN and shown.startswith(b"=== tuidag: fetch attempt 1 started at ")
    assert on_pty("logs", "fetch", "--raw", cwd=tmp_path) == log


class Tmux:
    """A 160x45 tmux pane running one shell command, kept open after it ends."""

    def __init__(self, command: str):
        self.name = f"tuidag-term-{os.getpid()}-{time.monotonic_ns()}"
        self.tmux = ["tmux", "-L", self.name]  # a server of its own: never one that another test's end shuts down
        subprocess.run(
            [
                *self.tmux,
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                "160",
                "-y",
                "45",
                f"{command}; echo RUN-ENDED; sleep 60",
            ],
            check=True,
        )

    def run(self, command: str, *args: str) -> str:
        return subprocess.run([*self.tmux, command, "-t", self.name, *args], capture_output=True, text=True).stdout

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + patience(timeout)
        while text not in (screen := self.run("capture-pane", "-p")):
            assert time.monotonic() < deadline, f"{text!r} not on screen within {patience(timeout):.0f}s:\n{screen}"
            time.sleep(0.05)
        return screen

    def kill(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_on_a_terminal_task_output_cannot_retitle_clear_erase_or_forge_a_prefix(tmp_path: Path) -> None:
    (tmp_path / "dag.yaml").write_text(HOSTILE)
    pane = Tmux(f"cd {tmp_path} && env -u NO_COLOR PYTHONPATH={REPO} {sys.executable} -m tuidag run --no-tui dag.yaml")
    try:
        pane.run("select-pane", "-T", "tuidag-test-title")
        screen = pane.wait_for("RUN-ENDED")
        title = pane.run("display-message", "-p", "#{pane_title}").strip()
    finally:
        pane.kill()
    assert title == "tuidag-test-title"
    lines = screen.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("tuidag: run "))  # nothing cleared it
    expected = [SGR.sub(b"", line).decode() for line in SHOWN]
    fetch = [line[len("[fetch] ") :] for line in lines[first:] if line.startswith("[fetch] ") and "-->" not in line]
    assert fetch == expected, screen  # every line there (none erased), each after its own prefix


def test_a_retry_after_a_partial_line_and_a_forged_header(tmp_path: Path) -> None:
    (tmp_path / "dag.yaml").write_text(
        "tasks:\n  r:\n    retries: 1\n    run: |\n"
        "      echo '=== tuidag: r attempt 7 started at never ==='\n"
        "      printf 'attempt %s partial-no-newline' $TUIDAG_ATTEMPT\n"
        "      test $TUIDAG_ATTEMPT = 2\n"
    )
    proc = tuidag("run", "--no-tui", "dag.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    log = next(tmp_path.glob(".tuidag/runs/*/logs/r.log")).read_text()
    assert re.sub(r"at [0-9T:-]+ ===", "at T ===", log).splitlines() == [
        "=== tuidag: r attempt 1 started at T ===",
        "=== tuidag: r attempt 7 started at never ===",
        "attempt 1 partial-no-newline",
        "=== tuidag: r attempt 2 started at T ===",
        "=== tuidag: r attempt 7 started at never ===",
        "attempt 2 partial-no-newline",
    ]
    assert task_lines(proc.stdout, "r") == [
        b"=== tuidag: r attempt 7 started at never ===",
        b"attempt 1 partial-no-newline",
        b"=== tuidag: r attempt 7 started at never ===",
        b"attempt 2 partial-no-newline",
    ]


def test_a_huge_line_is_cut_with_a_marker(tmp_path: Path) -> None:
    size = 3 * LINE_CAP
    (tmp_path / "dag.yaml").write_text(
        f"tasks:\n  big:\n    run: head -c {size} /dev/zero | tr '\\0' x; echo; echo after\n"
    )
    proc = tuidag("run", "--no-tui", "dag.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    big, after = task_lines(proc.stdout, "big")
    assert big == b"x" * LINE_CAP + f" \u2026 [tuidag: line cut, {size - LINE_CAP} more bytes in the log file]".encode()
    assert after == b"after"


def running(name: str, path: str, attempt: int, state: TaskState = TaskState.RUNNING) -> TaskEvent:
    return TaskEvent(attempt, 0.0, None, TaskSnapshot(name, state, attempt=attempt, log_path=path))


def test_a_printer_behind_the_engine_prints_each_attempt_before_its_end(tmp_path: Path) -> None:
    """When the reporter drains the events late, the log already holds the next attempt: what an attempt printed
    comes before the line that says it ended, and the next attempt's header is not printed."""
    path = str(tmp_path / "t.log")
    headers = LogHeaders()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for attempt in (1, 2):
        headers.write(fd, path, header_text("t", attempt))
        os.write(fd, f"output of attempt {attempt}\npartial {attempt}".encode())
    os.close(fd)
    out = io.StringIO()
    reporter = HeadlessReporter(out, headers)
    for event in (
        running("t", path, 1),
        running("t", path, 1, TaskState.RETRYING),
        running("t", path, 2),
        running("t", path, 2, TaskState.SUCCEEDED),
    ):
        reporter(event)
    reporter.start(["t"])
    reporter.stop()
    assert out.getvalue().splitlines() == [
        "[t] --> RUNNING",
        "[t] output of attempt 1",
        "[t] partial 1",
        "[t] --> RETRYING",
        "[t] --> RUNNING (attempt 2)",
        "[t] output of attempt 2",
        "[t] partial 2",
        "[t] --> SUCCEEDED",
    ]


class _CountingOutput(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_the_lines_of_a_round_are_printed_with_one_write(tmp_path: Path) -> None:
    """State changes that arrive together are one write() to stdout, not one per line: on an unbuffered stdout
    (PYTHONUNBUFFERED, a terminal's line buffering) each write is a system call of the engine's process."""
    out = _CountingOutput()
    reporter = HeadlessReporter(out, LogHeaders(), quiet=True)
    for i in range(200):
        path = str(tmp_path / f"t{i}.log")
        reporter(running(f"t{i}", path, 1))
        reporter(running(f"t{i}", path, 1, TaskState.SUCCEEDED))
    reporter.start([f"t{i}" for i in range(200)])
    reporter.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 400 and lines[0].startswith("[t0]") and lines[-1].startswith("[t199]")
    assert out.writes == 1


def test_the_printer_wakes_once_an_interval_while_events_keep_coming_not_once_an_event(tmp_path: Path) -> None:
    """A stream of state changes (a DAG of quick tasks) is printed in rounds `interval` apart: waking the printer
    for each change was a thread switch per event. The first change after a quiet spell is printed at once, and
    nothing is lost. Slowness only lengthens the waits, so the bound holds on a loaded machine."""
    out = _CountingOutput()
    reporter = HeadlessReporter(out, LogHeaders(), quiet=True, interval=0.05)
    reporter.start([f"t{i}" for i in range(100_000)])
    reporter(running("first", str(tmp_path / "first.log"), 1))
    deadline = time.monotonic() + patience(5.0)
    while out.writes == 0:  # the first event wakes the printer from its sleep
        assert time.monotonic() < deadline, "the first event was not printed"
        time.sleep(0.001)
    start, sent = time.monotonic(), 0
    while time.monotonic() - start < 0.5:
        for _ in range(20):
            reporter(running(f"t{sent}", str(tmp_path / f"t{sent}.log"), 1, TaskState.SUCCEEDED))
            sent += 1
        time.sleep(0.0005)  # events come from other threads, a few at a time
    elapsed = time.monotonic() - start
    reporter.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == sent + 1 and lines[-1].startswith(f"[t{sent - 1}"), "every event is printed, in order"
    assert sent > 500
    assert out.writes <= elapsed / 0.05 + 4, f"{out.writes} writes for {sent} events in {elapsed:.2f} s"


def test_a_flood_in_one_log_does_not_hold_up_the_others(tmp_path: Path) -> None:
    """Each round reads a bounded share of every running task's log: a line of a quiet task comes out long before
    the end of a flood that was already in its log."""
    headers = LogHeaders()
    flood, quiet = str(tmp_path / "a-flood.log"), str(tmp_path / "b-quiet.log")
    Path(flood).write_bytes(b"".join(b"flood line %07d\n" % i for i in range(200_000)))  # 3.8 MB
    Path(quiet).write_bytes(b"quiet line\n")
    out = io.StringIO()
    reporter = HeadlessReporter(out, headers)
    reporter(running("a-flood", flood, 1))
    reporter(running("b-quiet", quiet, 1))
    reporter.start(["a-flood", "b-quiet"])
    reporter.stop()
    lines = out.getvalue().splitlines()
    assert lines[-1] == "[a-flood] flood line 0199999"
    assert lines.index("[b-quiet] quiet line") < 100_000


def test_a_step_marker_starts_a_line_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "sky.yaml").write_text("name: s\nsetup: printf 'setup partial'\nrun: echo ran\n")  # one task
    proc = tuidag("run", "--no-tui", "sky.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    log = next(tmp_path.glob(".tuidag/runs/*/logs/s.log")).read_text().splitlines()
    assert log[1:] == ["--- setup ---", "setup partial", "--- run ---", "ran"]


def test_output_stdout_cannot_encode_is_shown_with_replacements_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "dag.yaml").write_text("tasks:\n  u:\n    run: printf 'caf\\303\\251 \\007 bell\\nsecond\\n'\n")
    proc = tuidag("run", "--no-tui", "dag.yaml", cwd=tmp_path, PYTHONIOENCODING="ascii")
    assert proc.returncode == 0, proc.stderr
    assert task_lines(proc.stdout, "u") == [b"caf? ? bell", b"second"]
