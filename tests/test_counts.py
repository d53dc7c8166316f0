"""Every message that counts something says `1 task` (not `1 tasks`) and writes numbers one way (`3,000 tasks: 3,000
succeeded`, not `3,000 tasks: 3000 succeeded`)."""

from __future__ import annotations

from dags import finish, make_dag, start_run
from test_cli import tuidag, write
from tuidag.engine.events import RunEvent
from tuidag.model.counts import counted
from tuidag.views.graph_text import to_text
from tuidag.views.headless import recorded_counts_line


def test_the_summary_line_writes_every_number_alike():
    assert recorded_counts_line({"SUCCEEDED": 3000}, 1.0) == "3,000 tasks: 3,000 succeeded in 1.0s\n"
    assert (
        recorded_counts_line({"SUCCEEDED": 2999, "FAILED": 1}, 1.0)
        == "3,000 tasks: 2,999 succeeded, 1 failed in 1.0s\n"
    )
    assert recorded_counts_line({"CANCELLED": 1}, 1.0) == "1 task: 1 cancelled in 1.0s\n"


def test_counted_says_one_in_the_singular():
    assert [counted(n, "task") for n in (0, 1, 2, 1000)] == ["0 tasks", "1 task", "2 tasks", "1,000 tasks"]
    assert counted(1, "process", "processes") == "1 process" and counted(3, "process", "processes") == "3 processes"


def test_a_dag_of_one_task_is_counted_as_one_task_everywhere(tmp_path):
    dag = make_dag({"only": "true"}, workdir=tmp_path)
    assert to_text(dag).splitlines()[0] == "test: 1 task, 0 edges, 1 layer"
    assert repr(dag).startswith("DagSpec(name='test', 1 task,")
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"only": "SUCCEEDED"}
    (started,) = [e for e in rec.events if isinstance(e, RunEvent) and e.kind == "started"]
    assert started.detail.startswith("1 task, max_parallel")


def test_commands_count_one_task_in_the_singular(tmp_path):
    dag = write(tmp_path / "dag.yaml", "resources: {db: 0}\ntasks:\n  a:\n    run: 'true'\n    resources: {db: 1}\n")
    proc = tuidag("validate", str(dag), cwd=tmp_path)
    assert proc.stderr == f"{dag}:5:17: task 'a' asks for 1 'db' slot, more than the capacity of 0\n"
    write(dag, "tasks:\n  a:\n    run: 'true'\n")
    run = tuidag("run", str(dag), cwd=tmp_path)
    assert run.stdout.splitlines()[-1].startswith("1 task: 1 succeeded in ")
    resumed = tuidag("run", str(dag), "--resume", cwd=tmp_path)
    assert "reusing 1 of 1 task (a)\n" in resumed.stderr
