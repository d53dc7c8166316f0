"""TaskFilter: which tasks the combined view shows (a branch, a name, both), and how its title says so."""

from __future__ import annotations

from dags import make_dag
from tuidag.views.task_filter import TaskFilter

# build -> test-unit, test-e2e -> report; lint alone
DAG = make_dag(
    {
        "build": "true",
        "lint": "true",
        "test-unit": {"run": "true", "depends_on": ["build"]},
        "test-e2e": {"run": "true", "depends_on": ["build"]},
        "report": {"run": "true", "depends_on": ["test-unit", "test-e2e"]},
    }
)


def test_no_filter_shows_every_task() -> None:
    assert TaskFilter().tasks(DAG) is None and TaskFilter().describe() == "all tasks"
    assert TaskFilter().with_name("   ").tasks(DAG) is None  # blank text is no filter


def test_a_branch_is_the_task_and_everything_downstream() -> None:
    assert TaskFilter(branch="build").tasks(DAG) == {"build", "test-unit", "test-e2e", "report"}
    assert TaskFilter(branch="test-e2e").tasks(DAG) == {"test-e2e", "report"}
    assert TaskFilter(branch="lint").tasks(DAG) == {"lint"}
    assert TaskFilter(branch="build").describe() == "branch of build"


def test_a_name_filter_ignores_case_and_combines_with_a_branch() -> None:
    assert TaskFilter(name="TEST").tasks(DAG) == {"test-unit", "test-e2e"}
    assert TaskFilter(name="test").describe() == "tasks matching “test”"
    both = TaskFilter(branch="test-e2e").with_name(" e2e ")
    assert both.tasks(DAG) == {"test-e2e"} and both.describe() == "branch of test-e2e, matching “e2e”"
    assert TaskFilter(name="nothing").tasks(DAG) == frozenset()
    assert both.with_branch(None) == TaskFilter(name="e2e")


def test_the_branch_of_a_matrix_group_is_its_instances_and_what_depends_on_them(tmp_path) -> None:
    from tuidag.model.loader import load_dag

    path = tmp_path / "sweep.yaml"
    path.write_text(
        "tasks:\n  prep: {run: 'true'}\n"
        "  train: {matrix: {seed: [1, 2]}, depends_on: prep, run: 'true'}\n"
        "  report: {depends_on: train, run: 'true'}\n"
    )
    shown = TaskFilter().with_branch("train").tasks(load_dag(path))
    assert shown == {"train[seed=1]", "train[seed=2]", "report"}
