"""The headless summary ends with the last lines of each failed task's log, through the real `tuidag` command."""

from __future__ import annotations

import pytest

from test_cli import tuidag, write

pytestmark = pytest.mark.cli


def tail_of(out: str, heading: str) -> list[str]:
    """The lines under `heading` in the summary, up to the next blank line."""
    after = out[out.index("\n" + heading) + 1 :].split("\n")
    return after[1 : after.index("")]


def test_the_last_twenty_lines_of_each_failed_task_follow_the_table(tmp_path):
    dag = write(
        tmp_path / "dag.yaml",
        """\
tasks:
  chatty:
    run: for i in $(seq 1 30); do echo line $i; done; exit 4
  fine:
    run: echo all good
  mute:
    run: exit 2
""",
    )
    for args in ((), ("-q",)):  # -q leaves out the live output, not the tails: they are then the only output shown
        proc = tuidag("run", "--no-tui", *args, str(dag), cwd=tmp_path)
        assert proc.returncode == 1
        out = proc.stdout
        summary = out[out.index("TASK ") :]
        assert tail_of(summary, "chatty failed (exit code 4): the last 20 lines of its log") == [
            f"[chatty] line {i}" for i in range(11, 31)
        ]
        assert tail_of(summary, "mute failed (exit code 2): it printed nothing") == []
        tails = summary.split("the last 20 lines")[1].split("\ncritical path")[0]  # up to the run's insight lines
        assert "[fine]" not in tails and "fine failed" not in tails  # no tail for a task that succeeded
        assert summary.rstrip().splitlines()[-1].startswith("3 tasks: ")  # the verdict stays last
        assert "\x1b[" not in out


def test_only_the_last_attempt_is_shown_hostile_bytes_are_neutralised_and_long_lines_cut(tmp_path):
    dag = write(
        tmp_path / "dag.yaml",
        r"""
tasks:
  flaky:
    retries: 1
    run: |
      echo "attempt $TUIDAG_ATTEMPT"
      printf 'title \033]2;PWNED\007 clear \033[2J end\n'
      printf 'progress 10%%\rprogress 100%%\n'
      head -c 5000 /dev/zero | tr '\0' x; echo
      exit 3
""",
    )
    proc = tuidag("run", "--no-tui", "-q", str(dag), cwd=tmp_path)
    assert proc.returncode == 1
    lines = tail_of(proc.stdout, "flaky attempt 2 failed (exit code 3): the last 4 lines of its log")
    assert lines[:3] == ["[flaky] attempt 2", "[flaky] title  clear  end", "[flaky] progress 100%"]
    assert lines[3] == "[flaky] " + "x" * 400 + " \u2026 [line cut, 4600 more bytes in the log file]"
    assert "attempt 1" not in proc.stdout and "PWNED" not in proc.stdout


def test_a_log_that_is_gone_or_replaced_by_a_link_is_named_not_read(tmp_path):
    (tmp_path / "secret").write_text("do not show this\n")
    dag = write(
        tmp_path / "dag.yaml",
        """\
tasks:
  gone:
    run: rm .tuidag/runs/$TUIDAG_RUN_ID/logs/gone.log; exit 1
  linked:
    run: ln -sf ../../../../secret .tuidag/runs/$TUIDAG_RUN_ID/logs/linked.log; exit 1
""",
    )
    proc = tuidag("run", "--no-tui", str(dag), cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "do not show this" not in proc.stdout
    assert "gone failed (exit code 1): no log at " in proc.stdout
    assert (
        "linked failed (exit code 1): " in proc.stdout and "is a symbolic link, not a log tuidag wrote" in proc.stdout
    )


def test_the_heading_is_coloured_only_when_the_reporter_colours(tmp_path):
    """The reporter colours when stdout is a terminal (piped, as in the tests above, it never does)."""
    from io import StringIO

    from tuidag.engine.events import TaskSnapshot
    from tuidag.engine.log_headers import LogHeaders
    from tuidag.model.state import TaskState
    from tuidag.views.headless import HeadlessReporter

    log = tmp_path / "bad.log"
    log.write_text("boom\n")
    snapshots = {
        "bad": TaskSnapshot("bad", TaskState.FAILED, attempt=1, exit_code=1, reason="exit code 1", log_path=str(log))
    }
    for colour in (True, False):
        reporter = HeadlessReporter(StringIO(), LogHeaders(), colour=colour)
        reporter.start(["bad"])
        reporter.stop()
        tails = reporter.failure_tails(snapshots)
        assert ("\x1b[1;31mbad failed (exit code 1): the last line of its log\x1b[0m" in tails) is colour
        assert tails.endswith(" boom\n\n")


def test_every_failed_task_gets_its_tail_in_file_order(tmp_path):
    tasks = "".join(f"  t{i:02d}:\n    run: echo out {i}; exit 1\n" for i in range(23))
    proc = tuidag("run", "--no-tui", "-q", str(write(tmp_path / "dag.yaml", "tasks:\n" + tasks)), cwd=tmp_path)
    headings = [f"\nt{i:02d} failed (exit code 1): the last line of its log\n" for i in range(23)]
    at = [proc.stdout.index(heading) for heading in headings]
    assert at == sorted(at)
