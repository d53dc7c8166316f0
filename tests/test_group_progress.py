"""A matrix group's progress in words, and when the headless output prints it: as instances end, at most once per
interval per group, and always when the group's last instance ends (a sweep of a thousand fast instances would
otherwise print a thousand progress lines)."""

from __future__ import annotations

from tuidag.engine.events import TaskSnapshot
from tuidag.model.matrix import MatrixGroup
from tuidag.model.spec import DagSpec, TaskSpec
from tuidag.model.state import TaskState as S
from tuidag.store.run_dag import dag_from_header, dag_header
from tuidag.views.group_progress import GroupProgress, group_line

GROUPS = {"train": MatrixGroup("train", ("i",), ("train[i=1]", "train[i=2]", "train[i=3]"))}


def test_a_group_line_counts_done_then_the_other_states():
    states = [S.SUCCEEDED, S.FAILED, S.RUNNING, S.SUCCEEDED, S.QUEUED]
    assert group_line("train", states) == "train: 2 of 5 done, 1 failed, 1 running, 1 queued"


def test_progress_is_said_at_most_once_an_interval_and_always_at_the_groups_end():
    now = [100.0]
    progress = GroupProgress(GROUPS, every=1.0, clock=lambda: now[0])
    assert progress.update(TaskSnapshot("train[i=1]", S.RUNNING)) is None  # not an end
    assert progress.update(TaskSnapshot("train[i=1]", S.SUCCEEDED)) == "train: 1 of 3 done, 2 pending"
    now[0] += 0.5
    assert progress.update(TaskSnapshot("train[i=2]", S.FAILED)) is None  # within the interval
    assert progress.update(TaskSnapshot("other", S.SUCCEEDED)) is None  # not an instance
    now[0] += 0.1
    assert progress.update(TaskSnapshot("train[i=3]", S.SUCCEEDED)) == "train: 2 of 3 done, 1 failed"  # the last
    assert progress.update(TaskSnapshot("train[i=3]", S.SUCCEEDED)) is None  # the same end again says nothing


def test_a_stored_run_remembers_its_groups():
    tasks = {name: TaskSpec(name, run="true", group="train") for name in GROUPS["train"].instances}
    tasks["eval"] = TaskSpec("eval", run="true", depends_on=tuple(GROUPS["train"].instances))
    header = dag_header(DagSpec("d", tasks, groups=GROUPS), None)
    header["tasks"] = list(tasks)
    stored = dag_from_header(header)
    assert stored.groups["train"].instances == GROUPS["train"].instances
    assert stored.tasks["train[i=2]"].group == "train" and stored.tasks["eval"].group is None
