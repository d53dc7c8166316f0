"""The DAG's run hooks (`on_end:`, `on_run_failure:`): real `tuidag` commands running real hook processes, their
environment and output read back from hooks.log, a hung hook's tree checked gone with psutil."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import psutil
import pytest

from dags import wait_until
from test_cli import tuidag
from test_detached_runs import no_engine_left_behind, start_detached, summary_of, the_run  # noqa: F401
from tuidag.engine.run_hooks import run_hook
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli


def only_run(tmp_path: Path):
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    return run


def write_dag(tmp_path: Path, text: str) -> Path:
    dag = tmp_path / "dag.yaml"
    dag.write_text(textwrap.dedent(text))
    return dag


def test_on_end_runs_in_the_workdir_with_the_runs_facts_in_its_environment_and_its_output_in_hooks_log(tmp_path):
    (tmp_path / "work").mkdir()
    dag = write_dag(
        tmp_path,
        """\
        name: facts
        workdir: work
        on_end: 'pwd; env | grep ^TUIDAG_ | sort'
        tasks:
          ok: {run: "true"}
          bad: {run: "exit 4"}
          after: {run: "true", depends_on: [bad]}
        """,
    )
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    run = only_run(tmp_path)
    log = (run.path / "hooks.log").read_text()
    lines = log.splitlines()
    assert lines[0].startswith("=== on_end: pwd; env")
    assert lines[1] == str((tmp_path / "work").resolve())
    env = dict(line.split("=", 1) for line in lines[2:-1])
    assert env["TUIDAG_RUN_ID"] == run.run_id and env["TUIDAG_DAG"] == "facts"
    assert env["TUIDAG_OUTCOME"] == "failed" and env["TUIDAG_EXIT_CODE"] == "1"
    assert (env["TUIDAG_SUCCEEDED"], env["TUIDAG_FAILED"], env["TUIDAG_SKIPPED"], env["TUIDAG_CANCELLED"]) == (
        "1",
        "1",
        "1",
        "0",
    )
    summary = json.loads(run.summary.read_text())
    assert float(env["TUIDAG_DURATION"]) == pytest.approx(summary["duration"], abs=0.001)
    assert env["TUIDAG_RUN_DIR"] == str(run.path)
    assert lines[-1] == "=== on_end: exited with 0"
    assert summary["hooks"] == [{"hook": "on_end", "exit_code": 0, "problem": None}]


def test_a_failing_hook_is_reported_and_leaves_the_exit_code_as_it_was(tmp_path):
    dag = write_dag(
        tmp_path,
        """\
        on_end: 'echo hook says no; exit 7'
        tasks:
          ok: {run: "true"}
        """,
    )
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = only_run(tmp_path)
    assert f"tuidag: warning: on_end hook exited with 7 (its output is in {run.path / 'hooks.log'})" in proc.stderr
    assert "hook says no\n" in (run.path / "hooks.log").read_text()
    summary = json.loads(run.summary.read_text())
    assert summary["exit_code"] == 0 and summary["outcome"] == "succeeded"
    assert summary["hooks"] == [{"hook": "on_end", "exit_code": 7, "problem": "exited with 7"}]


def test_on_run_failure_runs_only_after_a_run_that_failed(tmp_path):
    text = """\
        on_end: 'echo end'
        on_run_failure: 'echo failure $TUIDAG_FAILED'
        tasks:
          t: {{run: "{command}"}}
        """
    ok = tmp_path / "ok"
    ok.mkdir()
    assert tuidag("run", str(write_dag(ok, text.format(command="true"))), cwd=ok).returncode == 0
    assert "failure" not in (only_run(ok).path / "hooks.log").read_text()
    failed = tmp_path / "failed"
    failed.mkdir()
    assert tuidag("run", str(write_dag(failed, text.format(command="exit 1"))), cwd=failed).returncode == 1
    log = (only_run(failed).path / "hooks.log").read_text()
    assert log.index("\nend\n") < log.index("\nfailure 1\n")


def test_a_hook_still_running_at_its_timeout_is_killed_with_its_whole_tree(tmp_path):
    """A hook that hangs must not hold the run's end (and its viewers) for ever, nor leave processes behind: a child
    that ignores SIGTERM and a grandchild in a session of its own go too."""
    pids = tmp_path / "pids"
    command = (
        f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; sleep 60' & setsid sleep 60 & echo $! >> {pids}; "
        f"echo $$ >> {pids}; wait"
    )
    result = run_hook("on_end", command, tmp_path, {}, tmp_path / "hooks.log", timeout=1.0)
    assert result.exit_code is None
    assert result.problem == "still running after 1s: killed with its processes"
    started = [int(pid) for pid in pids.read_text().split()]
    assert len(started) == 3
    for pid in started:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert (
        (tmp_path / "hooks.log").read_text().endswith("=== on_end: still running after 1s: killed with its processes\n")
    )


def test_a_detached_run_runs_its_hook_in_its_engine(tmp_path):
    _dag, run_id, pid = start_detached(
        tmp_path,
        """\
on_end: 'echo "ended $TUIDAG_RUN_ID $TUIDAG_OUTCOME"'
tasks:
  t: {run: "true"}
""",
    )
    run = the_run(tmp_path, run_id)
    record = summary_of(run)
    assert record["hooks"] == [{"hook": "on_end", "exit_code": 0, "problem": None}]
    assert f"\nended {run_id} succeeded\n" in (run.path / "hooks.log").read_text()
    wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)


@pytest.mark.parametrize(
    "line, error",
    [
        ("on_end: [a, b]", "2:9: on_end must be a shell command, got a list"),
        ("on_run_failure: ''", "2:17: on_run_failure is empty"),
        ("notify: sometimes", "2:9: notify must be one of never, end, failure, got 'sometimes'"),
    ],
)
def test_a_bad_hook_or_notify_value_is_a_located_error_and_starts_nothing(tmp_path, line, error):
    dag = write_dag(tmp_path, "tasks: {t: {run: 'true'}}\n" + line + "\n")
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{dag}:{error}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / ".tuidag" / "runs").exists() or not list((tmp_path / ".tuidag" / "runs").iterdir())


def test_the_python_api_takes_the_hooks_and_locates_a_bad_one(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(
        'from tuidag import Dag\ndag = Dag("py", on_end="echo ended $TUIDAG_OUTCOME", notify="never")\n'
        'dag.shell("t", "true")\n'
    )
    assert tuidag("run", str(good), cwd=tmp_path).returncode == 0
    assert "\nended succeeded\n" in (only_run(tmp_path).path / "hooks.log").read_text()
    bad = tmp_path / "bad.py"
    bad.write_text('from tuidag import Dag\n\ndag = Dag("bad", on_run_failure=3)\ndag.shell("t", "true")\n')
    proc = tuidag("run", str(bad), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{bad}:3:1: on_run_failure must be a non-empty shell command string, got 3" in proc.stderr
