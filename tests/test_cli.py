"""The real `tuidag` command in a subprocess: exit codes, headless output, the run store, `runs` and `logs`."""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from command import tuidag
from dags import alive, read_pids, stubborn_trees, wait_until
from slowness import patience
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli
REPO = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


OK_DAG = """\
name: demo
tasks:
  hello:
    run: echo hello from $TUIDAG_TASK
  world:
    depends_on: hello
    run: echo world; echo oops >&2
"""

FAILING_DAG = """\
tasks:
  bad:
    run: echo about to fail; exit 4
  after:
    depends_on: bad
    run: echo never
  fine:
    run: echo fine
"""


def test_successful_run_exit_0_prefixed_output_and_summary(tmp_path):
    dag = write(tmp_path / "dag.yaml", OK_DAG)
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "[hello] hello from hello" in out
    assert "[world] world" in out and "[world] oops" in out
    assert "[hello] --> SUCCEEDED" in out
    assert out.index("[hello] hello from hello") < out.index("[hello] --> SUCCEEDED")  # output before the end
    assert "\x1b[" not in out  # piped: no colour
    table = out[out.index("TASK ") :]
    assert "hello  SUCCEEDED  1" in table and str(tmp_path / ".tuidag" / "runs") in table
    assert "2 tasks: 2 succeeded" in out


def test_failed_run_exit_1_and_skipped(tmp_path):
    dag = write(tmp_path / "dag.yaml", FAILING_DAG)
    proc = tuidag("run", "--no-tui", str(dag), cwd=tmp_path)
    assert proc.returncode == 1
    assert "[bad]   --> FAILED" in proc.stdout and "exit code 4" in proc.stdout
    assert "[after] --> SKIPPED in" not in proc.stdout
    assert "[after] --> SKIPPED: upstream 'bad' failed" in proc.stdout
    assert "never" not in proc.stdout


def test_quiet_prints_only_state_changes_and_summary(tmp_path):
    dag = write(tmp_path / "dag.yaml", OK_DAG)
    proc = tuidag("run", "-q", str(dag), cwd=tmp_path)
    assert proc.returncode == 0
    assert "hello from" not in proc.stdout and "--> SUCCEEDED" in proc.stdout and "TASK" in proc.stdout


def test_invalid_file_exit_2_nothing_started(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a:\n    run: touch started\n    depends_on: [nope]\n")
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"{dag}:4:18: task 'a' depends on unknown task 'nope'\n"
    assert not (tmp_path / "started").exists() and not (tmp_path / ".tuidag").exists()


@pytest.mark.parametrize(
    "args", [["run"], ["run", "x.yaml", "-j", "0"], ["frobnicate"], ["run", "x.yaml", "--kill-grace", "soon"]]
)
def test_usage_errors_exit_2(tmp_path, args):
    proc = tuidag(*args, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.strip()


def test_missing_file_is_a_located_error(tmp_path):
    proc = tuidag("run", "nope.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "nope.yaml:1:1: cannot read file: No such file or directory\n"


def test_unwritable_state_dir_is_refused_before_anything_starts(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  a:\n    run: touch started\n")
    blocker = write(tmp_path / "blocker", "a file, not a folder")
    proc = tuidag("run", str(dag), "--state-dir", str(blocker / "state"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"tuidag: state dir {blocker / 'state'} is not writable")
    assert not (tmp_path / "started").exists()


def test_state_dir_from_environment_and_option(tmp_path):
    dag = write(tmp_path / "dag.yaml", OK_DAG)
    assert tuidag("run", str(dag), cwd=tmp_path, env={"TUIDAG_STATE_DIR": str(tmp_path / "envstate")}).returncode == 0
    assert len(RunStore(tmp_path / "envstate").runs()) == 1
    assert tuidag("run", str(dag), "--state-dir", str(tmp_path / "optstate"), cwd=tmp_path).returncode == 0
    assert len(RunStore(tmp_path / "optstate").runs()) == 1


def test_journal_and_logs_after_a_run(tmp_path):
    dag = write(tmp_path / "dag.yaml", FAILING_DAG)
    tuidag("run", str(dag), cwd=tmp_path)
    store = RunStore(tmp_path / ".tuidag")
    (run,) = store.runs()
    assert oct(run.path.stat().st_mode & 0o777) == "0o700"
    assert oct(run.journal.stat().st_mode & 0o777) == "0o600"
    assert oct(run.log_path("bad").stat().st_mode & 0o777) == "0o600"
    records = list(read_journal(run.journal))
    assert records[0]["event"] == "created" and records[0]["tasks"] == ["bad", "fine", "after"]
    seqs = [r["seq"] for r in records[1:]]
    assert seqs == sorted(seqs)
    bad = [(r["from"], r["to"]) for r in records if r.get("task") == "bad" and r["from"] != r["to"]]
    assert bad == [("PENDING", "QUEUED"), ("QUEUED", "RUNNING"), ("RUNNING", "FAILED")]
    running = [r for r in records if r.get("task") == "bad" and r["to"] == "RUNNING" and "pid" in r]
    assert running and running[0]["pid"] > 0  # the leader, named with the run's tag (see ShellAttempt._track)
    rep = replay(run.journal)
    assert {n: t.state.value for n, t in rep.tasks.items()} == {
        "bad": "FAILED",
        "fine": "SUCCEEDED",
        "after": "SKIPPED",
    }
    assert rep.tasks["bad"].exit_code == 4 and rep.tasks["after"].reason == "upstream 'bad' failed"
    summary = json.loads(run.summary.read_text())
    assert summary["outcome"] == "failed" and summary["counts"] == {"SUCCEEDED": 1, "FAILED": 1, "SKIPPED": 1}
    assert run.log_path("fine").read_text().endswith("fine\n")


def test_runs_lists_history(tmp_path):
    ok = write(tmp_path / "ok.yaml", OK_DAG)
    bad = write(tmp_path / "bad.yaml", FAILING_DAG)
    tuidag("run", str(ok), cwd=tmp_path)
    tuidag("run", str(bad), cwd=tmp_path)
    proc = tuidag("runs", cwd=tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["RUN", "DAG", "STARTED", "DURATION", "TASKS", "OUTCOME"]
    assert lines[1].split()[1] == "demo" and lines[1].split()[-2:] == ["succeeded=2", "succeeded"]
    assert lines[2].split()[1] == "bad" and lines[2].endswith("failed")
    assert "failed=1 skipped=1 succeeded=1" in lines[2]
    assert lines[1].split()[0] < lines[2].split()[0]  # ids sort by time


def test_logs_of_latest_and_named_run(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  t:\n    run: echo run=$TUIDAG_RUN_ID\n")
    tuidag("run", str(dag), cwd=tmp_path)
    tuidag("run", str(dag), cwd=tmp_path)
    first, second = RunStore(tmp_path / ".tuidag").runs()
    latest = tuidag("logs", "t", cwd=tmp_path)
    assert latest.returncode == 0 and latest.stdout.endswith(f"run={second.run_id}\n")
    older = tuidag("logs", "t", "--run", first.run_id, cwd=tmp_path)
    assert older.stdout.endswith(f"run={first.run_id}\n")
    unknown = tuidag("logs", "x", cwd=tmp_path)
    assert unknown.returncode == 2 and "has a task 'x'" in unknown.stderr


def test_logs_follow_until_the_task_ends(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  t:\n    run: for i in 1 2 3; do echo line $i; sleep 0.3; done\n")
    runner = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: (tmp_path / ".tuidag" / "runs").is_dir() and RunStore(tmp_path / ".tuidag").runs())
        follow = tuidag("logs", "t", "-f", cwd=tmp_path, timeout=30)
        assert follow.returncode == 0
        assert follow.stdout.splitlines()[-3:] == ["line 1", "line 2", "line 3"]
    finally:
        runner.wait(patience(30))


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_cancels_every_tree_and_exits_with_128_plus_signal(tmp_path, sig, code):
    pids = tmp_path / "pids"
    dag = write(
        tmp_path / "dag.yaml",
        "kill_grace: 500ms\ntasks:\n" + stubborn_trees(pids) + "  c:\n    depends_on: a\n    run: echo never\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    refs = read_pids(pids)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=patience(30))
    assert proc.returncode == code, err
    assert not any(alive(*r) for r in refs)
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    states = {n: t.state.value for n, t in replay(run.journal).tasks.items()}
    assert states == {"a": "CANCELLED", "b": "CANCELLED", "c": "CANCELLED"}
    assert json.loads(run.summary.read_text())["outcome"] == "interrupted"
    assert f"interrupted by {signal.Signals(sig).name}" in out
    assert "Traceback" not in err


def test_validate_and_graph(tmp_path):
    dag = write(tmp_path / "dag.yaml", OK_DAG)
    proc = tuidag("validate", str(dag), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"{dag}: ok: demo, 2 tasks, 1 edge\n"
    text = tuidag("graph", str(dag), cwd=tmp_path).stdout
    assert "layer 0:\n  hello\nlayer 1:\n  world  <- hello" in text
    dot = tuidag("graph", str(dag), "--format", "dot", cwd=tmp_path).stdout
    assert '"hello" -> "world";' in dot and dot.startswith('digraph "demo" {')
    mermaid = tuidag("graph", str(dag), "--format", "mermaid", cwd=tmp_path).stdout
    assert mermaid.splitlines() == ["flowchart LR", '  t0["hello"]', '  t1["world"]', "  t0 --> t1"]


def test_console_script_is_installed():
    proc = subprocess.run(["tuidag", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "run" in proc.stdout


def test_version_is_the_one_the_package_is_built_with():
    version = importlib.metadata.version("tuidag")
    proc = subprocess.run([sys.executable, "-m", "tuidag", "--version"], capture_output=True, text=True)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"tuidag {version}\n", "")


def test_core_never_imports_textual():
    code = (
        "import sys, tuidag.engine, tuidag.store, tuidag.model, tuidag.views.headless, tuidag.launch, "
        "tuidag.control.server, tuidag.control.client, tuidag.background, tuidag.cli; "
        "print('textual' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.stdout.strip() == "False", proc.stderr


def test_arrows_point_down_the_cli_loads_a_python_dag_without_the_python_front_end(tmp_path):
    """`Dag.main()` runs the CLI, so the CLI must not need `tuidag.api`: loading a .py file goes through
    model/python_loader, which knows `Dag` only by its base class."""
    dag = write(tmp_path / "flow.py", "from tuidag import Dag\ndag = Dag('flow')\ndag.shell('a', 'true')\n")
    code = (
        f"import sys, tuidag.cli; assert 'tuidag.api' not in sys.modules; "
        f"from pathlib import Path; spec = tuidag.cli._load(Path({str(dag)!r}), []); "
        f"print(spec.name, list(spec.tasks))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.stdout.strip() == "flow ['a']", proc.stderr


def test_second_sigint_kills_at_once(tmp_path):
    """A task that ignores SIGTERM would keep a first Ctrl-C waiting for the grace period; a second one doesn't wait."""
    pids = tmp_path / "pids"
    dag = write(
        tmp_path / "dag.yaml",
        f"kill_grace: 60s\ntasks:\n  a:\n    run: trap '' TERM; echo $$ > {pids}; while :; do sleep 0.05; done\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    refs = read_pids(pids)
    proc.send_signal(signal.SIGINT)
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    wait_until(lambda: any(r.get("to") == "CANCELLING" for r in read_journal(run.journal)))
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=patience(20))
    assert proc.returncode == 130
    assert not any(alive(*r) for r in refs)
    assert any(r.get("event") == "forced-exit" for r in read_journal(run.journal))


TRAIN_DAG = "name: {name}\ntasks:\n  train:\n    run: echo training {name}\n"


def test_runs_and_logs_keep_to_the_dag_file_in_a_shared_state_dir(tmp_path):
    """Every DAG file of a folder shares its .tuidag: `runs FILE` and `logs --file FILE` pick that file's runs."""
    failing = write(tmp_path / "failing.yaml", TRAIN_DAG.format(name="failing"))
    other = write(tmp_path / "pipeline.yaml", "name: pipeline\ntasks:\n  fetch:\n    run: echo fetch\n")
    tuidag("run", str(failing), cwd=tmp_path)
    tuidag("run", str(other), cwd=tmp_path)  # the latest run of the folder, without a task 'train'
    logs = tuidag("logs", "train", "--file", str(failing), cwd=tmp_path)
    assert (logs.returncode, logs.stdout.splitlines()[-1]) == (0, "training failing"), logs.stderr
    listed = tuidag("runs", str(failing), cwd=tmp_path).stdout.splitlines()
    assert len(listed) == 2 and listed[1].split()[1] == "failing"
    assert tuidag("runs", str(other), cwd=tmp_path).stdout.splitlines()[1].split()[1] == "pipeline"
    assert len(tuidag("runs", cwd=tmp_path).stdout.splitlines()) == 3  # without FILE: the whole state dir
    # Without --file: the latest run that has the task.
    assert tuidag("logs", "train", cwd=tmp_path).stdout.splitlines()[-1] == "training failing"
    missing = tuidag("logs", "trian", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr == f"tuidag: no run in {tmp_path / '.tuidag'} has a task 'trian' (did you mean 'train'?)\n"
    none = tuidag("runs", str(write(tmp_path / "new.yaml", TRAIN_DAG.format(name="new"))), cwd=tmp_path)
    assert none.stdout.startswith(f"no runs of {tmp_path / 'new.yaml'} in {tmp_path / '.tuidag'} (2 runs of other")


def test_logs_of_a_task_that_never_ran_says_why_and_where_its_latest_output_is(tmp_path):
    dag = write(
        tmp_path / "dag.yaml",
        "max_parallel: 1\ntasks:\n  a:\n    run: echo a\n  train-small:\n    run: echo small output\n",
    )
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    write(
        dag,
        "max_parallel: 1\non_failure: finish-running\ntasks:\n  a:\n    run: exit 3\n"
        "  b:\n    run: echo b\n    depends_on: a\n  train-small:\n    run: echo small output\n",
    )
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 1  # a fails: train-small is cancelled unstarted
    first, second = RunStore(tmp_path / ".tuidag").runs()
    logs = tuidag("logs", "train-small", "--file", str(dag), cwd=tmp_path)
    assert (logs.returncode, logs.stdout) == (1, "")
    assert logs.stderr.splitlines() == [
        f"tuidag: train-small never ran in run {second.run_id}: it was cancelled before it started "
        f"(run stopped: 'a' failed (finish-running))",
        f"tuidag: the latest run with output of it is {first.run_id}: "
        f"tuidag logs train-small --run {first.run_id} --file {dag}",
    ]
    pointed = tuidag("logs", "train-small", "--run", first.run_id, "--file", str(dag), cwd=tmp_path)
    assert pointed.returncode == 0 and pointed.stdout.endswith("small output\n")
    skipped = tuidag("logs", "b", cwd=tmp_path)
    assert (skipped.returncode, skipped.stderr.splitlines()) == (
        1,
        [
            f"tuidag: b never ran in run {second.run_id}: it was skipped (upstream 'a' failed)",
            f"tuidag: no run in {tmp_path / '.tuidag'} has output of it",
        ],
    )


def test_an_ambiguous_run_prefix_lists_the_candidates(tmp_path):
    dag = write(tmp_path / "dag.yaml", TRAIN_DAG.format(name="demo"))
    tuidag("run", str(dag), cwd=tmp_path)
    tuidag("run", str(dag), cwd=tmp_path)
    first, second = RunStore(tmp_path / ".tuidag").runs()
    prefix = os.path.commonprefix([first.run_id, second.run_id])  # noqa: RUF071 (ids, not paths)
    proc = tuidag("logs", "train", "--run", prefix, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"tuidag: run id {prefix!r} is ambiguous: 2 runs in {tmp_path / '.tuidag'} start with it "
        "(give more of the id):",
        f"  {second.run_id}  demo",
        f"  {first.run_id}  demo",
    ]
    resume = tuidag("run", str(dag), "--resume", prefix, cwd=tmp_path)
    assert resume.returncode == 2 and resume.stderr.startswith(f"tuidag: --resume: run id {prefix!r} is ambiguous")
    assert tuidag("logs", "train", "--run", first.run_id[:-1], cwd=tmp_path).returncode == 0  # unique: fine
    unknown = tuidag("logs", "train", "--run", "1999", cwd=tmp_path)
    assert unknown.stderr == f"tuidag: no run '1999' in {tmp_path / '.tuidag'}\n"


def test_finding_no_runs_nearby_says_where_runs_are_kept(tmp_path):
    """After the quickstart, `runs` from the project folder: the runs are in demos/.tuidag."""
    (tmp_path / "demos").mkdir()
    dag = write(tmp_path / "demos" / "dag.yaml", TRAIN_DAG.format(name="demo"))
    tuidag("run", str(dag), cwd=tmp_path)
    runs = tuidag("runs", cwd=tmp_path)
    assert runs.returncode == 0
    assert runs.stdout.splitlines() == [
        f"no runs in {tmp_path / '.tuidag'}",
        "runs are kept in .tuidag/ next to each DAG file (or in --state-dir DIR, or $TUIDAG_STATE_DIR): pass the "
        "DAG file, e.g. `tuidag runs FILE`, `tuidag logs TASK --file FILE`",
        "folders below this one that hold runs: demos/.tuidag",
    ]
    logs = tuidag("logs", "train", cwd=tmp_path)
    assert logs.returncode == 2 and logs.stderr.startswith(f"tuidag: no runs in {tmp_path / '.tuidag'}\nruns are kept")
    assert "demos/.tuidag" in logs.stderr
    assert tuidag("logs", "train", "--state-dir", "demos/.tuidag", cwd=tmp_path).stdout.endswith("training demo\n")


def test_resume_before_or_after_the_file(tmp_path):
    dag = write(tmp_path / "dag.yaml", TRAIN_DAG.format(name="demo"))
    tuidag("run", str(dag), cwd=tmp_path)
    before = tuidag("run", "--resume", str(dag), cwd=tmp_path)
    assert before.returncode == 0 and "reusing 1 of 1" in before.stderr
    first = RunStore(tmp_path / ".tuidag").runs()[0]
    named = tuidag("run", "--resume", first.run_id, str(dag), cwd=tmp_path)
    assert named.returncode == 0 and f"resuming {first.run_id}" in named.stderr
    alone = tuidag("run", "--resume", cwd=tmp_path)
    assert alone.returncode == 2 and "required: FILE" in alone.stderr and "Traceback" not in alone.stderr


def test_runs_table_shows_no_control_characters_from_the_store(tmp_path):
    dag = write(tmp_path / "dag.yaml", 'name: "evil\\e]2;PWNED\\a\\e[2J"\ntasks:\n  a:\n    run: "true"\n')
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    table = tuidag("runs", cwd=tmp_path).stdout
    assert "\x1b" not in table and "\x07" not in table and "evil?]2;PWNED??[2J" in table


def test_a_run_command_line_is_parsed_by_the_same_run_parser_built_alone():
    """`tuidag run ...` builds only the top level and `run` (start-up): its options, help and usage are the ones the
    full parser has."""
    import argparse

    from tuidag.cli import build_parser

    def run_parser(only_run: bool) -> argparse.ArgumentParser:
        (sub,) = [a for a in build_parser(only_run)._actions if isinstance(a, argparse._SubParsersAction)]
        return sub.choices["run"]

    alone, among = run_parser(True), run_parser(False)
    assert alone.format_help() == among.format_help() and alone.format_usage() == among.format_usage()
    line = ["run", "dag.yaml", "-j", "3", "--quiet", "--no-tui", "a"]
    assert (
        vars(build_parser(True).parse_known_args(line)[0]).keys()
        == vars(build_parser(False).parse_known_args(line)[0]).keys()
    )
