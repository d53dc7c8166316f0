"""Matrix tasks as the loaders read them: combinations with GitHub Actions' include/exclude, instance names and
values, placeholders, and dependencies on a matrix (fan-in, pairing by shared keys, one instance, a selection).

What runs is checked with real processes in test_matrix_runs.py; here the model alone."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tuidag import Dag
from tuidag.model.errors import DagErrors, Note
from tuidag.model.loader import load_dag
from tuidag.model.matrix import substitute


def load(tmp_path: Path, text: str, notes: list[Note] | None = None):
    path = tmp_path / "dag.yaml"
    path.write_text(textwrap.dedent(text))
    return load_dag(path, notes)


def errors_of(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(DagErrors) as caught:
        load(tmp_path, text)
    return [str(err).replace(str(tmp_path / "dag.yaml"), "FILE") for err in caught.value.errors]


def test_include_and_exclude_follow_github_actions(tmp_path):
    """GitHub's documented example: include extends the combinations whose matrix values it doesn't change (and
    overwrites values an earlier include added), makes a combination of its own when it fits none; exclude drops
    every combination it matches."""
    dag = load(
        tmp_path,
        """
        tasks:
          t:
            matrix:
              fruit: [apple, pear]
              animal: [cat, dog]
              include:
                - {color: green}
                - {color: pink, animal: cat}
                - {fruit: apple, shape: circle}
                - {fruit: banana}
                - {fruit: banana, animal: cat}
              exclude:
                - {fruit: pear, animal: dog}
            run: echo ${{ matrix.fruit }}
        """,
    )
    got = {name: dict(task.matrix) for name, task in dag.tasks.items()}
    assert got == {
        "t[fruit=apple,animal=cat]": {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        "t[fruit=apple,animal=dog]": {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        "t[fruit=pear,animal=cat]": {"fruit": "pear", "animal": "cat", "color": "pink"},
        "t[fruit=banana]": {"fruit": "banana"},
        "t[fruit=banana,animal=cat]": {"fruit": "banana", "animal": "cat"},
    }
    assert dag.groups["t"].instances == tuple(got)
    assert dag.groups["t"].keys == ("fruit", "animal")


def test_values_reach_the_environment_and_every_placeholder(tmp_path):
    dag = load(
        tmp_path,
        """
        tasks:
          train:
            matrix: {lr: [0.10, 1e-3], big: [true]}
            run: python train.py --lr ${{ matrix.lr }} --out $${{ matrix.lr }}
            env: {OUT: "runs/${{matrix.lr}}"}
            workdir: "w-${{ matrix.lr }}"
        """,
    )
    task = dag.tasks["train[lr=0.10,big=true]"]  # values as written: 0.10 stays 0.10
    assert task.run == "python train.py --lr 0.10 --out ${{ matrix.lr }}"
    assert task.env == {"OUT": "runs/0.10", "TUIDAG_MATRIX_LR": "0.10", "TUIDAG_MATRIX_BIG": "true"}
    assert task.workdir == tmp_path / "w-0.10"
    assert dag.tasks["train[lr=1e-3,big=true]"].env["TUIDAG_MATRIX_LR"] == "1e-3"


def test_substitution_leaves_other_text_alone():
    values = {"lr": "0.1"}
    assert substitute("echo ${HOME} ${{ env.X }} ${{ matrix.lr }}$${{matrix.lr}}", values) == (
        "echo ${HOME} ${{ env.X }} 0.1${{matrix.lr}}"
    )


def test_names_keep_only_log_file_characters_and_a_template_names_instances(tmp_path):
    dag = load(
        tmp_path,
        """
        tasks:
          fetch:
            matrix: {url: ["https://x.org/a b"]}
            run: curl "${{ matrix.url }}"
          train:
            matrix: {lr: [0.1, 0.2]}
            name: train-lr${{ matrix.lr }}
            run: echo
        """,
    )
    assert list(dag.tasks) == ["fetch[url=https___x.org_a_b]", "train-lr0.1", "train-lr0.2"]
    assert dag.groups["train"].instances == ("train-lr0.1", "train-lr0.2")


def test_dependencies_fan_in_pair_by_shared_keys_and_select_instances(tmp_path):
    dag = load(
        tmp_path,
        """
        tasks:
          train:
            matrix: {lr: [1, 2], seed: [1, 2]}
            run: echo
          eval:
            matrix: {seed: [1, 2]}
            depends_on: train
            run: echo
          plot:
            matrix: {style: [a, b]}
            depends_on: [eval]
            run: echo
          best:
            depends_on: ["train[lr=2,seed=1]", "eval[seed=2]"]
            run: echo
          lr2:
            depends_on: ["train[lr=2]"]
            run: echo
          report:
            depends_on: [train]
            run: echo
        """,
    )
    deps = {name: task.depends_on for name, task in dag.tasks.items()}
    assert deps["eval[seed=1]"] == ("train[lr=1,seed=1]", "train[lr=2,seed=1]")
    assert deps["eval[seed=2]"] == ("train[lr=1,seed=2]", "train[lr=2,seed=2]")
    assert deps["plot[style=a]"] == ("eval[seed=1]", "eval[seed=2]")  # no shared key: every instance
    assert deps["best"] == ("train[lr=2,seed=1]", "eval[seed=2]")
    assert deps["lr2"] == ("train[lr=2,seed=1]", "train[lr=2,seed=2]")
    assert deps["report"] == dag.groups["train"].instances


def test_an_exclude_matching_nothing_is_a_note(tmp_path):
    notes: list[Note] = []
    dag = load(
        tmp_path,
        """
        tasks:
          t:
            matrix:
              a: [1, 2]
              exclude:
                - {a: 3}
            run: echo
        """,
        notes,
    )
    assert len(dag.tasks) == 2
    assert [str(n).replace(str(tmp_path / "dag.yaml"), "FILE") for n in notes] == [
        "FILE:7:11: note: task 't': exclude {a=3} matches no combination"
    ]


def test_a_too_big_matrix_is_refused_before_it_is_expanded(tmp_path):
    """1,000,000 combinations: refused from the counts, at once (expanding them would take a minute and gigabytes)."""
    ten = list(range(10))
    text = "tasks:\n  t:\n    run: echo\n    matrix:\n" + "".join(f"      k{i}: {ten}\n" for i in range(6))
    assert errors_of(tmp_path, text) == [
        "FILE:5:7: task 't': the matrix makes 1,000,000 instances: at most 100,000 are allowed"
    ]


def test_a_dependency_that_pairs_with_nothing_is_an_error(tmp_path):
    assert errors_of(
        tmp_path,
        """
        tasks:
          train: {matrix: {seed: [1, 2]}, run: echo}
          eval: {matrix: {seed: [2, 3]}, depends_on: [train], run: echo}
          x: {depends_on: ["train[seed=9]"], run: echo}
        """,
    ) == [
        "FILE:4:47: task 'eval[seed=3]' pairs with no instance of 'train' (none has seed=3)",
        "FILE:5:20: task 'x' depends on 'train[seed=9]', which matches no instance of 'train'",
    ]


def test_the_python_api_makes_the_same_instances(tmp_path):
    dag = Dag("sweep")

    @dag.task(matrix={"lr": [0.01, 0.1], "seed": [1, 2], "exclude": [{"lr": 0.1, "seed": 2}]}, max_parallel=2)
    def train(ctx):
        return ctx.matrix["lr"]

    @dag.task(depends_on=[train])
    def pick(ctx):
        return ctx.results["train"]

    dag.shell("eval", "echo ${{ matrix.seed }}", matrix={"seed": [1, 2]}, depends_on=[train])
    spec = dag.spec(source=tmp_path / "sweep.py")
    assert spec.groups["train"].instances == ("train[lr=0.01,seed=1]", "train[lr=0.01,seed=2]", "train[lr=0.1,seed=1]")
    assert spec.tasks["train[lr=0.1,seed=1]"].matrix == (("lr", 0.1), ("seed", 1))  # the values as given
    assert spec.tasks["pick"].depends_on == spec.groups["train"].instances
    assert spec.tasks["eval[seed=2]"].depends_on == ("train[lr=0.01,seed=2]",)
    assert spec.tasks["eval[seed=1]"].run == "echo 1"
    assert spec.resources == {"train[*]": 2}


def test_python_api_mistakes_are_located_at_the_call(tmp_path):
    dag = Dag("bad")
    dag.shell("a", "echo ${{ matrix.nope }}", matrix={"x": [1]})
    dag.shell("b", "echo", matrix={"x": []})
    dag.shell("c", "echo", max_parallel=2)
    with pytest.raises(DagErrors) as caught:
        dag.spec(source=tmp_path / "bad.py")
    messages = [err.message for err in caught.value.errors]
    assert messages == [
        "task 'a': run: ${{ matrix.nope }} names no key of the matrix (it has x)",
        "task 'b': matrix: 'x' is an empty list: give it at least one value",
        "task 'c': max_parallel and instance_name are for a task with a matrix, and it has none",
    ]
    assert {err.location.line for err in caught.value.errors} == {
        test_python_api_mistakes_are_located_at_the_call.__code__.co_firstlineno + offset for offset in (2, 3, 4)
    }


def test_a_cached_dag_keeps_its_groups(tmp_path):
    from tuidag.model.cache import load_dag_cached

    path = tmp_path / "dag.yaml"
    path.write_text("tasks:\n  t: {matrix: {a: [1, 2]}, max_parallel: 1, run: echo}\n  u: {depends_on: t, run: echo}\n")
    first = load_dag_cached(path, tmp_path / "cache")
    again = load_dag_cached(path, tmp_path / "cache")
    assert again.groups == first.groups and again.tasks == first.tasks
    assert again.tasks["t[a=2]"].group == "t" and again.resources == {"t[*]": 1}


def test_the_sweeps_page_example_means_what_it_says(tmp_path):
    page = (Path(__file__).resolve().parent.parent / "docs" / "guide" / "sweeps.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    dag = load(tmp_path, example)
    assert dag.groups["train"].instances == (
        "train-0.01-1",
        "train-0.01-2",
        "train-0.1-1",
        "train-0.1-2",
        "train-0.1-3",
    )
    assert dag.tasks["train-0.1-1"].run == "python train.py --lr 0.1 --seed $TUIDAG_MATRIX_SEED"
    assert dag.tasks["train-0.1-1"].env["TUIDAG_MATRIX_EPOCHS"] == "5"
    assert dag.tasks["eval[seed=2]"].depends_on == ("train-0.01-2", "train-0.1-2")
    assert dag.tasks["report"].depends_on == ("eval[seed=1]", "eval[seed=2]", "eval[seed=3]", "train-0.1-1")
    assert dag.resources == {"train[*]": 2}


def test_a_slot_request_can_come_from_a_matrix_value(tmp_path):
    dag = load(
        tmp_path,
        """
        resources: {gpu: 4}
        tasks:
          train:
            matrix: {gpus: [1, 4]}
            resources: {gpu: "${{ matrix.gpus }}"}
            run: echo
        """,
    )
    assert [task.resources["gpu"].count for task in dag.tasks.values()] == [1, 4]
    assert errors_of(
        tmp_path,
        """
        resources: {gpu: 4}
        tasks:
          train:
            matrix: {gpus: [1, two]}
            resources: {gpu: "${{ matrix.gpus }}"}
            run: echo
          eval:
            resources: {gpu: "${{ matrix.gpus }}"}
            run: echo
        """,
    ) == [
        "FILE:6:17: task 'train[gpus=two]': resources: 'gpu' must be a positive integer (at most 1,000,000), got 'two'",
        "FILE:9:17: task 'eval': resources: 'gpu': ${{ matrix.gpus }} but the task has no matrix "
        "(write $${{ for the text itself)",
    ]


def test_a_matrix_too_wrong_to_read_is_the_only_error_of_its_task(tmp_path):
    """Its placeholders are not then reported as a plain task's, nor its templated slot count checked as a count
    (that raised a TypeError in the capacity check)."""
    text = """
        resources: {gpu: 2}
        tasks:
          train:
            matrix: {seed: []}
            resources: {gpu: "${{ matrix.gpus }}"}
            run: echo ${{ matrix.seed }}
        """
    assert errors_of(tmp_path, text) == [
        "FILE:5:20: task 'train': matrix: 'seed' is an empty list: give it at least one value"
    ]
    dag = Dag("bad")
    dag.shell("train", "echo ${{ matrix.seed }}", matrix={"seed": []}, resources={"gpu": "${{ matrix.gpus }}"})
    with pytest.raises(DagErrors) as caught:
        dag.spec(source=tmp_path / "bad.py")
    assert [err.message for err in caught.value.errors] == [
        "task 'train': matrix: 'seed' is an empty list: give it at least one value"
    ]
