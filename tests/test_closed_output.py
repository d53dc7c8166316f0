"""A reader that goes away (`tuidag run p.yaml | head -1`) stops the printing, never the run and never the truth of
the exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slowness import patience
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli

DAG = """\
tasks:
  a: {{run: touch {tmp}/ran-a}}
  b: {{run: 'for i in $(seq {loops}); do [ -e {tmp}/go ] && break; sleep 0.02; done; seq 1 5000; exit 3'}}
  c: {{run: touch {tmp}/ran-c, depends_on: a}}
"""
#: b waits for `go` up to about 30 s of a quiet machine, so that a failed test leaves nothing running.
GATE_LOOPS = round(patience(30) / 0.02)


def start(tmp_path: Path, *args: str, stdout: int, stderr) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"} | {"NO_COLOR": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", *args], cwd=tmp_path, env=env, stdout=stdout, stderr=stderr
    )


def latest_summary(tmp_path: Path) -> dict:
    return json.loads(RunStore(tmp_path / ".tuidag").runs()[-1].summary.read_text())


@pytest.mark.parametrize("when", ["before the first line", "after the first line"])
def test_a_closed_stdout_keeps_the_run_and_its_exit_code(tmp_path, when):
    dag = tmp_path / "p.yaml"
    dag.write_text(DAG.format(tmp=tmp_path, loops=GATE_LOOPS))
    read_end, write_end = os.pipe()
    if when == "before the first line":
        os.close(read_end)
        (tmp_path / "go").touch()
    with open(tmp_path / "stderr", "w") as err:
        proc = start(tmp_path, str(dag), stdout=write_end, stderr=err)
    os.close(write_end)
    if when == "after the first line":  # as `head -1` does; task b then prints 5,000 lines into the closed pipe
        with os.fdopen(read_end, "rb") as reader:
            assert reader.readline().startswith(b"tuidag: run ")
        (tmp_path / "go").touch()
    assert proc.wait(timeout=patience(60)) == 1  # b failed
    assert (tmp_path / "stderr").read_text() == ""  # no traceback, no "Exception ignored"
    assert (tmp_path / "ran-a").exists() and (tmp_path / "ran-c").exists()
    summary = latest_summary(tmp_path)
    assert summary["outcome"] == "failed" and summary["counts"] == {"SUCCEEDED": 2, "FAILED": 1}


def test_resume_into_a_closed_pipe_still_runs_and_tells_the_truth(tmp_path):
    """`tuidag run --resume p.yaml 2>&1 | head -1`: the resume notice is the first line; the run goes on."""
    dag = tmp_path / "p.yaml"
    dag.write_text(DAG.format(tmp=tmp_path, loops=GATE_LOOPS))
    (tmp_path / "go").touch()
    first = start(tmp_path, str(dag), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert first.wait(timeout=patience(60)) == 1
    (tmp_path / "ran-a").unlink()
    read_end, write_end = os.pipe()
    os.close(read_end)
    proc = start(tmp_path, str(dag), "--resume", stdout=write_end, stderr=write_end)
    os.close(write_end)
    assert proc.wait(timeout=patience(60)) == 1  # b failed again
    summary = latest_summary(tmp_path)
    assert summary["outcome"] == "failed" and summary["counts"] == {"SUCCEEDED": 2, "FAILED": 1}
    assert not (tmp_path / "ran-a").exists()  # reused, not run again


@pytest.mark.parametrize(
    "streams",
    ["stdout closed", "stdout and stderr closed", "stdout on a full device", "stdout and stderr on a full device"],
)
def test_output_that_cannot_be_written_stops_the_printing_not_the_run(tmp_path, streams):
    """`tuidag run p.yaml >&-` (Python then has no sys.stdout) and `> /dev/full` (ENOSPC on every write) once ended
    tuidag with a traceback before any task ran, leaving the run `interrupted`."""
    if streams.endswith("full device") and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    dag = tmp_path / "p.yaml"
    dag.write_text(DAG.format(tmp=tmp_path, loops=GATE_LOOPS))
    (tmp_path / "go").touch()
    redirect = {
        "stdout closed": ">&-",
        "stdout and stderr closed": ">&- 2>&-",
        "stdout on a full device": ">/dev/full",
        "stdout and stderr on a full device": ">/dev/full 2>&1",
    }
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
    # stderr, where it is not redirected, goes to a file the test reads: tracebacks would show there
    with open(tmp_path / "stderr", "w") as err:
        proc = subprocess.run(
            ["sh", "-c", f'exec "$0" -m tuidag run --no-tui p.yaml {redirect[streams]}', sys.executable],
            cwd=tmp_path,
            env=env,
            stderr=err,
            timeout=patience(60),
        )
    assert proc.returncode == 1  # b failed
    assert (tmp_path / "stderr").read_text() == ""
    assert (tmp_path / "ran-a").exists() and (tmp_path / "ran-c").exists()
    summary = latest_summary(tmp_path)
    assert summary["outcome"] == "failed" and summary["counts"] == {"SUCCEEDED": 2, "FAILED": 1}


@pytest.mark.parametrize("command", [["runs"], ["logs", "a"], ["validate", "p.yaml"], ["graph", "p.yaml"]])
def test_a_command_whose_output_is_lost_says_so_and_a_reader_that_had_enough_is_no_error(tmp_path, command):
    """`runs > /dev/full`: one line on stderr and exit 1, never a traceback; `runs | head -1`: exit 0. Without
    PYTHONUNBUFFERED, so the output is still in Python's buffer when the command returns."""
    (tmp_path / "p.yaml").write_text("tasks:\n  a: {run: 'seq 1 20000'}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TUIDAG_STATE_DIR", "PYTHONUNBUFFERED")}
    assert (
        subprocess.run(
            [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", "p.yaml"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
        ).returncode
        == 0
    )
    tuidag = [sys.executable, "-m", "tuidag", *command]
    with open("/dev/full", "w") as full:
        lost = subprocess.run(tuidag, cwd=tmp_path, env=env, stdout=full, stderr=subprocess.PIPE, text=True)
    assert lost.returncode == 1 and lost.stderr == "tuidag: cannot write the output: No space left on device\n"
    reader = subprocess.Popen(tuidag, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.read(1)
    reader.stdout.close()  # had enough
    assert reader.wait(patience(30)) == 0 and b"Traceback" not in reader.stderr.read()
