"""Editing the DAG file under `tuidag run --watch`, headless, as a user does it: a real tuidag process, the file
rewritten on disk, real task processes (their marks and pids checked with psutil), the journal read back."""

from __future__ import annotations

from dags import alive, read_pids, wait_until
from slowness import patience
from watching import lines, watching

BEFORE = """
tasks:
  a:
    run: echo a >> marks
    inputs: [a.txt]
  b:
    run: echo b >> marks
    depends_on: [a]
  c:
    run: echo c >> marks
"""


def test_an_edit_that_adds_a_task_runs_it_and_nothing_else_and_show_knows_it(tmp_path):
    (tmp_path / "a.txt").write_text("1\n")
    marks = tmp_path / "marks"
    with watching(tmp_path, BEFORE) as run:
        wait_until(lambda: len(lines(marks)) == 3 and run.said("[c] --> SUCCEEDED"), timeout=30)
        run.edit(BEFORE + "  lint:\n    run: echo lint >> marks\n    depends_on: [b]\n")
        wait_until(lambda: run.said("[lint] --> SUCCEEDED"), timeout=30)
        assert run.said("tuidag: dag.yaml reloaded: added lint\n")
        assert run.generations() == ["tuidag: gen 2: dag.yaml changed -> lint"]
        assert lines(marks)[3:] == ["lint"]
        (tmp_path / "a.txt").write_text("2\n")  # the new task is downstream of a's input too
        wait_until(lambda: run.count("[lint] --> SUCCEEDED") == 2, timeout=30)
        assert run.generations()[1] == "tuidag: gen 3: a.txt changed -> a, b, lint"
        run.stop()
    show = run.tuidag("show", "--task", "lint")
    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith("lint · succeeded\ncommand      echo lint >> marks\n")


def test_a_removed_task_is_cancelled_with_the_reason_its_tree_killed_and_it_stays_in_the_run(tmp_path):
    (tmp_path / "a.txt").write_text("1\n")
    slow = "  slow:\n    run: echo $$ >> pids; sleep 120 & echo $! >> pids; wait\n"
    with watching(tmp_path, BEFORE + slow) as run:
        wait_until(lambda: len(lines(tmp_path / "pids")) == 2 and run.said("[c] --> SUCCEEDED"), timeout=30)
        refs = read_pids(tmp_path / "pids")
        run.edit(BEFORE.replace("  c:\n    run: echo c >> marks\n", ""))  # c (ended) and slow (running) removed
        wait_until(lambda: run.said("[slow] --> CANCELLED") and run.count("[c] --> CANCELLED") == 1, timeout=30)
        assert [ref for ref in refs if alive(*ref)] == []
        assert run.said("tuidag: dag.yaml reloaded: removed c, slow\n")
        assert run.generations() == ["tuidag: gen 2: dag.yaml changed; removed: c, slow"]
        journal = run.journal()
        assert run.tuidag("stop").returncode == 0
        assert run.proc.wait(timeout=patience(30)) == 0  # what the file no longer has does not fail the run
    last = {r["task"]: r for r in journal if r.get("type") == "task"}
    assert {name: (last[name]["to"], last[name].get("reason")) for name in ("c", "slow")} == {
        "c": ("CANCELLED", "removed from the DAG file"),
        "slow": ("CANCELLED", "removed from the DAG file"),
    }
    record = next(r for r in journal if r.get("event") == "dag")
    assert sorted(record["tasks"]) == ["a", "b", "c", "slow"]  # the removed ones kept in the run
    assert record["deps"] == {"b": ["a"]}


def test_a_changed_task_runs_again_with_its_downstream_only(tmp_path):
    dag = """
tasks:
  a:
    run: echo a >> marks
  b:
    run: echo b >> marks
    depends_on: [a]
  d:
    run: echo d >> marks
    depends_on: [b]
  c:
    run: echo c >> marks
"""
    marks = tmp_path / "marks"
    with watching(tmp_path, dag) as run:
        assert run.said("tuidag: no task declares inputs: only an edit of the DAG file re-runs tasks")
        wait_until(lambda: len(lines(marks)) == 4 and run.said("[d] --> SUCCEEDED"), timeout=30)
        run.edit("# the same tasks, b changed\n" + dag.replace("echo b >>", "echo b2 >>"))
        wait_until(lambda: run.count("[d] --> SUCCEEDED") == 2, timeout=30)
        assert run.said("tuidag: dag.yaml reloaded: changed b\n")
        assert run.generations() == ["tuidag: gen 2: dag.yaml changed -> b, d"]
        assert lines(marks)[4:] == ["b2", "d"]


def test_a_broken_edit_keeps_the_dag_says_the_located_error_until_a_fix_reloads_it(tmp_path):
    (tmp_path / "a.txt").write_text("1\n")
    marks = tmp_path / "marks"
    with watching(tmp_path, BEFORE) as run:
        wait_until(lambda: len(lines(marks)) == 3 and run.said("[c] --> SUCCEEDED"), timeout=30)
        broken = BEFORE.replace("depends_on: [a]", "depends_on: [nope]")
        run.edit(broken)
        path = tmp_path / "dag.yaml"
        wait_until(lambda: run.said("(keeping the DAG as it was)"), timeout=30)
        said = [line for line in run.output().splitlines() if "(keeping the DAG as it was)" in line]
        assert said == [f"tuidag: {path}:8:18: task 'b' depends on unknown task 'nope' (keeping the DAG as it was)"]
        (tmp_path / "a.txt").write_text("2\n")  # the run goes on with the DAG it had: b still follows a
        wait_until(lambda: run.count("[b] --> SUCCEEDED") == 2, timeout=30)
        assert run.generations() == ["tuidag: gen 2: a.txt changed -> a, b"]
        run.edit(BEFORE.replace("echo c >>", "echo c2 >>"))  # fixed, and c changed
        wait_until(lambda: lines(marks)[-1:] == ["c2"], timeout=30)
        assert run.generations()[1:] == ["tuidag: gen 3: dag.yaml changed -> c"]
        journal = run.journal()
    errors = [r for r in journal if r.get("event") == "dag-error"]
    assert [r["detail"] for r in errors] == [f"{path}:8:18: task 'b' depends on unknown task 'nope'"]
    assert [r["detail"] for r in journal if r.get("event") == "dag"] == ["dag.yaml reloaded: changed c"]
