"""Copying and paging in a real terminal: `tuidag run` inside tmux. Copy mode's `y` must reach tmux's clipboard
through OSC 52 (tmux with `set-clipboard on` makes a paste buffer of it: `tmux show-buffer`), and `e`/`E` must hand
the terminal to `$PAGER`/`$EDITOR` (here scripts that record what they were given and saw) and take it back after,
with Ctrl+C in the pager reaching the pager only, never the run."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from test_tmux import Tmux, leftovers, select, task_pids

from slowness import patience

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

DAG = """\
name: copy
tasks:
  talk:
    run: "for i in $(seq 1 30); do printf '\\\\033[33mwarm %d\\\\033[0m\\\\rline %d\\\\n' $i $i; done"
  slow:
    run: echo $$ >> pids; sleep 60 & echo $! >> pids; echo slow started; wait
"""

# What the pager and the editor do: record their arguments and the file they were given, show themselves on the
# terminal, and wait until told to end (a file appears), or until Ctrl+C (SIGINT), which they record.
VIEWER = """\
#!/bin/sh
for last; do :; done
printf '%s\\n' "$@" > "{out}/argv"
cat "$last" > "{out}/seen"
trap 'echo INT > "{out}/interrupted"; exit 0' INT
echo "VIEWER IS ON THE TERMINAL"
while [ ! -e "{out}/end" ]; do sleep 0.05; done
"""


def wait_file(path: Path, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + patience(timeout)
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.05)


def viewer(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A viewer script and the folder it records in."""
    out = tmp_path / f"{name}-out"
    out.mkdir()
    script = tmp_path / f"{name}.sh"
    script.write_text(VIEWER.format(out=out))
    script.chmod(0o755)
    return script, out


def tmux_buffer(tmux: Tmux) -> str | None:
    done = subprocess.run([*tmux.tmux, "show-buffer"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def test_y_in_copy_mode_reaches_tmux_through_osc_52(tmp_path):
    tmux = Tmux(tmp_path, DAG)
    try:
        subprocess.run([*tmux.tmux, "set", "-g", "set-clipboard", "on"], check=True)
        tmux.wait_for("1 running")
        select(tmux, "talk")
        tmux.wait_for("line 30")
        tmux.keys("v")
        tmux.wait_for("COPY: 1 line selected")
        tmux.keys("k", "k")
        tmux.wait_for("COPY: 3 lines selected")
        tmux.keys("y")
        tmux.wait_for("copied 3 lines to the clipboard")
        deadline = time.monotonic() + patience(10)
        while tmux_buffer(tmux) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tmux_buffer(tmux) == "line 28\nline 29\nline 30"
    finally:
        tmux.kill()


def test_e_hands_the_terminal_to_the_pager_and_ctrl_c_there_stops_only_the_pager(tmp_path, monkeypatch):
    script, out = viewer(tmp_path, "pager")
    monkeypatch.setenv("PAGER", f"{script} --from-tuidag")  # the tmux server, and so tuidag, inherits it
    tmux = Tmux(tmp_path, DAG)
    try:
        tmux.wait_for("1 running")
        procs = task_pids(tmux.workdir, count=2)
        select(tmux, "talk")
        tmux.wait_for("line 30")
        tmux.keys("e")
        screen = tmux.wait_for("VIEWER IS ON THE TERMINAL")  # the app is suspended: the pager has the screen
        assert "line 30" not in screen
        log = next((tmp_path / "state" / "runs").iterdir()) / "logs" / "talk.log"
        assert (out / "argv").read_text().splitlines() == ["--from-tuidag", str(log)]
        wait_file(out / "seen")
        assert (out / "seen").read_bytes() == log.read_bytes()
        tmux.keys("C-c")
        wait_file(out / "interrupted")
        tmux.wait_for("line 30")  # the app is back
        tmux.wait_for("1 running")
        assert "stopping" not in tmux.screen()
        assert all(p.is_running() for p in procs), "Ctrl+C in the pager reached the run"
        tmux.keys("q")
        tmux.wait_for("It is not finished")
        tmux.keys("s")
        assert tmux.wait_exit() == 1
        assert leftovers(tmux.workdir, procs) == []
    finally:
        tmux.kill()


def test_E_opens_a_copy_of_the_log_as_it_is_now_in_the_editor(tmp_path, monkeypatch):
    script, out = viewer(tmp_path, "editor")
    monkeypatch.setenv("EDITOR", str(script))
    tmux = Tmux(tmp_path, DAG)
    try:
        tmux.wait_for("1 running")
        select(tmux, "talk")
        tmux.wait_for("line 30")
        tmux.keys("E")
        tmux.wait_for("VIEWER IS ON THE TERMINAL")
        log = next((tmp_path / "state" / "runs").iterdir()) / "logs" / "talk.log"
        wait_file(out / "seen")
        (given,) = (out / "argv").read_text().splitlines()
        assert Path(given).name == log.name and Path(given) != log and (out / "seen").read_bytes() == log.read_bytes()
        (out / "end").touch()
        tmux.wait_for("line 30")
        assert not Path(given).exists()  # the copy is gone with its folder
    finally:
        tmux.kill()


def test_a_selection_over_the_cap_reaches_tmux_as_its_first_lines(tmp_path):
    """1 MiB of text (1.33 MiB in base64) is dropped whole by tmux 3.3a: nothing is copied. The cap keeps a copy of
    100,000 lines within what it takes."""
    tmux = Tmux(tmp_path, "name: big\ntasks:\n  big:\n    run: seq 1 200000\n")
    try:
        subprocess.run([*tmux.tmux, "set", "-g", "set-clipboard", "on"], check=True)
        tmux.wait_for("200,001 lines")
        tmux.keys("v")
        tmux.wait_for("COPY:")
        tmux.keys("g", "y")
        tmux.wait_for("copied the first")
        deadline = time.monotonic() + patience(10)
        while tmux_buffer(tmux) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        copied = (tmux_buffer(tmux) or "").split("\n")
        assert copied[0].startswith("=== tuidag: big attempt 1") and len(copied) > 50_000
        assert copied[1:] == [str(i) for i in range(1, len(copied))]
    finally:
        tmux.kill()


def test_closing_the_terminal_while_the_pager_is_open_stops_the_run_as_it_would_without_it(tmp_path, monkeypatch):
    script, _ = viewer(tmp_path, "pager")
    monkeypatch.setenv("PAGER", str(script))
    tmux = Tmux(tmp_path, DAG)
    try:
        tmux.wait_for("1 running")
        procs = task_pids(tmux.workdir, count=2)
        select(tmux, "talk")
        tmux.wait_for("line 30")
        tmux.keys("e")
        tmux.wait_for("VIEWER IS ON THE TERMINAL")
        tmux.kill()  # the terminal closes: SIGHUP
        assert tmux.wait_exit() == 129
        assert leftovers(tmux.workdir, procs) == []
    finally:
        tmux.kill()
