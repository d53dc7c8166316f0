"""The commands that take a matrix task's name, as the real command runs: `logs` (each instance's log under a
`==> name <==` heading, printed or followed live) and `runs --task` (the instances together in each run); a journal
whose header lies about its groups is not believed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from command import command_env, tuidag
from dags import wait_until
from slowness import patience
from tuidag.store.history import group_instances, has_task
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli


def sections(text: str) -> dict[str, list[str]]:
    """The output split at its `==> name <==` headings: name -> the lines under it (blank separators dropped)."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("==> ") and line.endswith(" <=="):
            current = line[4:-4]
            assert current not in found, f"{current} headed twice"
            found[current] = []
        elif line:
            assert current is not None, f"{line!r} before any heading"
            found[current].append(line)
    return found


def test_logs_of_a_matrix_task_print_every_instance_under_its_name_in_the_dag_s_order(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "tasks:\n  test:\n    run: 'echo testing ${{ matrix.py }}; echo done ${{ matrix.py }}'\n"
        "    matrix: {py: ['3.12', '3.10', '3.11']}\n  other: {run: echo other}\n"
    )
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    out = tuidag("logs", "test", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = sections(out.stdout)
    assert list(got) == ["test[py=3.12]", "test[py=3.10]", "test[py=3.11]"]
    for name, lines in got.items():
        py = name[len("test[py=") : -1]
        assert lines[0].startswith(f"=== tuidag: {name} attempt 1 started at ")
        assert lines[1:] == [f"testing {py}", f"done {py}"]
    one = tuidag("logs", "test[py=3.10]", cwd=tmp_path)  # an instance by its name: its log alone, as before
    assert one.returncode == 0 and "==>" not in one.stdout and one.stdout.endswith("testing 3.10\ndone 3.10\n")


def test_a_matrix_task_whose_instances_never_ran_says_so_and_fails(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "tasks:\n  broken: {run: exit 3}\n"
        "  test:\n    run: echo never\n    matrix: {n: [1, 2]}\n    depends_on: [broken]\n"
    )
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 1
    out = tuidag("logs", "test", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == ""
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    assert out.stderr.strip() == f"tuidag: none of the 2 instances has output in run {run.run_id}"


def test_following_a_matrix_task_prints_each_instance_as_it_writes_until_every_one_ended(tmp_path):
    """The instances write in turns (each waits for a file the test makes); `logs -f` shows each line under its
    instance's heading as it comes, a heading again whenever the output switches instance, and ends when they do."""
    dag = tmp_path / "dag.yaml"
    gate = 'while [ ! -e "go-${{ matrix.n }}-$i" ]; do sleep 0.02; done'
    dag.write_text(
        "max_parallel: 4\ntasks:\n  work:\n"
        f"    run: 'for i in 1 2; do {gate}; echo n=${{{{ matrix.n }}}} line $i; done'\n"
        "    matrix: {n: [a, b]}\n"
    )
    env = command_env()
    runner = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", str(dag)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    follower = None
    try:
        wait_until(lambda: (tmp_path / ".tuidag" / "runs").is_dir() and RunStore(tmp_path / ".tuidag").runs())
        follower = subprocess.Popen(
            [sys.executable, "-m", "tuidag", "logs", "work", "-f"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert follower.stdout is not None
        seen: list[str] = []

        def next_lines(until: str) -> None:
            """Read the follower's lines until `until` (each one from a task that just wrote it)."""
            while True:
                line = follower.stdout.readline()
                assert line, f"the follower ended before {until!r}: {seen}"
                seen.append(line.rstrip("\n"))
                if seen[-1] == until:
                    return

        for step in ("a-1", "b-1", "b-2", "a-2"):  # a, then b twice, then a: three switches of instance
            (tmp_path / f"go-{step}").touch()
            n, i = step.split("-")
            next_lines(f"n={n} line {i}")
        out, err = follower.communicate(timeout=patience(30))
        assert follower.returncode == 0, err
        seen += out.splitlines()
        headings = [line for line in seen if line.startswith("==> ")]
        assert headings == ["==> work[n=a] <==", "==> work[n=b] <==", "==> work[n=a] <=="]
        text = "\n".join(seen)
        assert text.index("n=a line 1") < text.index("n=b line 1") < text.index("n=b line 2") < text.index("n=a line 2")
    finally:
        for step in ("a-1", "a-2", "b-1", "b-2"):
            (tmp_path / f"go-{step}").touch()
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.communicate()
        runner.wait(patience(30))


def test_a_header_that_lies_about_its_groups_names_no_matrix_task(tmp_path):
    """The journal is untrusted: groups as a string (where `in` finds substrings), as a list, or naming instances
    that are not the run's tasks do not make a name a matrix task."""
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n  t: {run: 'true'}\n")
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    lines = run.journal.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    for groups in ("abcdef", ["cd"], {"cd": "t"}, {"cd": ["nowhere", 7]}, {"t": ["t"]}):
        header["groups"] = groups
        run.journal.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
        assert group_instances(run, "cd") is None and group_instances(run, "t") is None
        assert not has_task(run, "cd", or_group=True)
        out = tuidag("logs", "cd", cwd=tmp_path)
        assert out.returncode == 2 and "has a task 'cd'" in out.stderr
    header["groups"] = {"cd": ["t", "nowhere"]}  # only what the run has is given
    run.journal.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    assert group_instances(run, "cd") == ["t"]


def test_runs_of_a_matrix_task_counts_its_instances_in_each_run_and_trends_the_runs_where_all_succeeded(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n  work:\n    run: 'test ! -e fail-${{ matrix.n }}'\n    matrix: {n: [1, 2, 3]}\n")
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    (tmp_path / "fail-2").touch()
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 1
    (tmp_path / "fail-2").unlink()
    assert tuidag("run", str(dag), cwd=tmp_path).returncode == 0
    out = tuidag("runs", "--task", "work", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STARTED", "STATE", "DURATION", "ATTEMPTS"]
    rows = [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines[1:4]]  # columns
    assert [row[2] for row in rows] == ["3 succeeded", "2 succeeded, 1 failed", "3 succeeded"]
    assert [row[4] for row in rows] == ["3", "3", "3"]  # attempts, summed
    assert lines[-1].startswith("its last 2 successes, oldest to newest: ")  # the run with a failure left out
