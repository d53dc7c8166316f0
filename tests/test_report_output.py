"""`tuidag report -o FILE` in a folder others can write to, the file's permissions, and the failure tails the report
and the headless summary share (the last attempt's last lines, a long line cut with its true size)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from test_cli import tuidag, write
from test_failure_tails import tail_of

pytestmark = pytest.mark.cli


@pytest.fixture
def finished_run(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a: {run: echo the secret is 42}\n")
    assert tuidag("run", "--no-tui", "-q", str(dag), cwd=tmp_path).returncode == 0
    return tmp_path


def test_a_symlink_planted_at_the_destination_is_refused_and_its_target_left_alone(finished_run):
    """In a 1777 folder another user plants `report.html -> victim`: the report overwrote the victim."""
    shared = finished_run / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o1777)
    victim = write(finished_run / "victim", "precious\n")
    (shared / "report.html").symlink_to(victim)
    proc = tuidag("report", "-o", "shared/report.html", cwd=finished_run)
    assert proc.returncode == 2
    assert proc.stderr == (
        "tuidag: cannot write the report to shared/report.html: it is a symbolic link (a report "
        "replaces only a regular file of your own)\n"
    )
    assert victim.read_text() == "precious\n" and (shared / "report.html").is_symlink()
    assert sorted(os.listdir(shared)) == ["report.html"]  # no temporary file left


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_destination_of_another_user_is_refused(finished_run):
    theirs = write(finished_run / "theirs.html", "theirs\n")
    os.chown(theirs, 65534, 65534)
    proc = tuidag("report", "-o", "theirs.html", cwd=finished_run)
    assert proc.returncode == 2 and "it belongs to another user (uid 65534)" in proc.stderr
    assert theirs.read_text() == "theirs\n"


def test_a_fifo_destination_is_refused_without_blocking(finished_run):
    os.mkfifo(finished_run / "pipe.html")
    proc = tuidag("report", "-o", "pipe.html", cwd=finished_run, timeout=30)
    assert proc.returncode == 2 and "it is not a regular file" in proc.stderr


def test_a_report_is_readable_only_by_its_user_unless_asked(finished_run):
    """It holds log lines (`the secret is 42`) while the run store is 0700/0600: it was created 0644."""
    old = os.umask(0o022)
    try:
        proc = tuidag("report", "-o", "r.html", cwd=finished_run)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.endswith("written to r.html (only you can read it; --mode 644 lets others)\n")
        assert stat.S_IMODE(os.stat(finished_run / "r.html").st_mode) == 0o600
        proc = tuidag("report", "-o", "r.html", "--mode", "644", cwd=finished_run)  # replaces its own file
        assert proc.returncode == 0 and proc.stdout.endswith("written to r.html (mode 644)\n")
        assert stat.S_IMODE(os.stat(finished_run / "r.html").st_mode) == 0o644
        assert "<html" in (finished_run / "r.html").read_text()
        bad = tuidag("report", "-o", "r.html", "--mode", "rw", cwd=finished_run)
        assert bad.returncode == 2 and "expected octal permissions such as 600 or 644" in bad.stderr
    finally:
        os.umask(old)


TAILS = """\
tasks:
  flaky:
    retries: 1
    run: echo "attempt $TUIDAG_ATTEMPT printed this"; exit 3
  wide:
    run: echo before; head -c 300000 /dev/zero | tr '\\0' x; echo; exit 1
  huge:
    run: head -c 3000000 /dev/zero | tr '\\0' y; exit 1
"""


def test_report_and_summary_show_the_last_attempts_last_lines_and_long_lines_with_their_true_size(tmp_path):
    """The report read a retried task's log from its start (attempt 1's output and tuidag's headers); a last line
    over the 256 KiB window was dropped whole ("it printed nothing"); a 3,000,000-byte line said 261744 more bytes."""
    dag = write(tmp_path / "dag.yaml", TAILS)
    run = tuidag("run", "--no-tui", "-q", str(dag), cwd=tmp_path)
    assert run.returncode == 1
    wide = "x" * 400 + " \u2026 [line cut, 299600 more bytes in the log file]"
    huge = "y" * 400 + " \u2026 [line cut, 2999600 more bytes in the log file]"
    report = tuidag("report", "--format", "json", "-o", "-", cwd=tmp_path)
    failures = {f["task"]: f["log"] for f in json.loads(report.stdout)["failures"]}
    assert failures == {"flaky": ["attempt 2 printed this"], "wide": [wide], "huge": [huge]}
    summary = run.stdout
    assert tail_of(summary, "flaky attempt 2 failed (exit code 3): the last line of its log") == [
        "[flaky] attempt 2 printed this"
    ]
    assert tail_of(summary, "wide failed (exit code 1): the last line of its log") == ["[wide]  " + wide]
    assert tail_of(summary, "huge failed (exit code 1): the last line of its log") == ["[huge]  " + huge]
