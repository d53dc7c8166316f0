"""The task keys that say what a task reads and makes (`inputs`, `outputs`, `cache`, `env_inputs`), from YAML and
Python, and the located errors for the mistakes that would make an up-to-date check wrong or unsafe."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_cli import write
from test_yaml_loader import errors
from tuidag import Dag
from tuidag.model import DagErrors
from tuidag.model.errors import Location
from tuidag.model.loader import load_dag


def test_yaml_tasks_declare_inputs_outputs_cache_and_env_inputs(tmp_path):
    path = write(
        tmp_path / "dag.yaml",
        "tasks:\n"
        "  train:\n"
        "    run: python train.py\n"
        "    inputs: [data/*.csv, train.py]\n"
        "    outputs: out/model.pt\n"
        "    env_inputs: CUDA_VERSION\n"
        "  report:\n"
        "    run: echo\n"
        "    cache: false\n",
    )
    dag = load_dag(path)
    train, report = dag.tasks.values()
    assert (train.inputs, train.outputs, train.env_inputs, train.cache) == (
        ("data/*.csv", "train.py"),
        ("out/model.pt",),
        ("CUDA_VERSION",),
        True,
    )
    assert train.output_locations == (Location(str(path), 5, 14),)
    assert (report.inputs, report.outputs, report.cache) == ((), (), False)


def test_declaring_inputs_changes_the_definition_and_nothing_else_does(tmp_path):
    plain = load_dag(write(tmp_path / "a.yaml", "tasks:\n  t: {run: echo}\n"))
    same = load_dag(write(tmp_path / "b.yaml", "tasks:\n  t: {run: echo, cache: false}\n"))
    declared = load_dag(write(tmp_path / "c.yaml", "tasks:\n  t: {run: echo, inputs: [x]}\n"))
    assert plain.fingerprints["t"] == same.fingerprints["t"] != declared.fingerprints["t"]


def test_an_output_outside_the_workdir_and_the_dag_folder_is_a_located_error(tmp_path):
    path = write(tmp_path / "dag.yaml", "tasks:\n  t:\n    run: echo\n    outputs: [ok.txt, ../elsewhere.txt]\n")
    assert errors(path) == [
        f"{path}:4:23: task 't': output '../elsewhere.txt' is outside the task's workdir and the DAG's folder "
        f"('{tmp_path}')"
    ]


def test_an_output_in_the_dag_folder_may_be_written_from_a_task_workdir_below_it(tmp_path):
    (tmp_path / "sub").mkdir()
    path = write(tmp_path / "dag.yaml", "tasks:\n  t: {run: echo, workdir: sub, outputs: [../made.txt]}\n")
    assert load_dag(path).tasks["t"].outputs == ("../made.txt",)


def test_a_folder_output_holding_another_tasks_output_is_declared_twice(tmp_path):
    path = write(
        tmp_path / "dag.yaml",
        "tasks:\n  a: {run: echo, outputs: [out]}\n  b: {run: echo, outputs: [out/b.txt]}\n",
    )
    assert errors(path) == [f"{path}:3:28: task 'b': output 'out/b.txt' is also declared by task 'a' (as 'out')"]


def test_python_tasks_take_the_same_keys(tmp_path):
    dag = Dag("io")

    @dag.task(inputs=["data/raw.csv"], outputs=["out/clean.csv"], env_inputs=["SEED"])
    def clean():
        return None

    dag.shell("train", "python train.py", depends_on=[clean], inputs="out/clean.csv", outputs="out/model.pt")
    dag.shell("notes", "echo", cache=False)
    spec = dag.spec(source=tmp_path / "io.py")
    assert (spec.tasks["clean"].inputs, spec.tasks["clean"].outputs, spec.tasks["clean"].env_inputs) == (
        ("data/raw.csv",),
        ("out/clean.csv",),
        ("SEED",),
    )
    assert (spec.tasks["train"].inputs, spec.tasks["train"].outputs) == (("out/clean.csv",), ("out/model.pt",))
    assert spec.tasks["notes"].cache is False


def test_python_mistakes_are_located_at_the_call(tmp_path):
    dag = Dag("io")
    dag.shell("a", "echo", outputs=["out/x"])
    line = (
        Path(__file__).read_text().splitlines().index('    dag.shell("b", "echo", outputs=["out/x"], cache="no")') + 1
    )
    dag.shell("b", "echo", outputs=["out/x"], cache="no")
    with pytest.raises(DagErrors) as caught:
        dag.spec(source=tmp_path / "io.py")
    assert [(err.message, err.location.line) for err in caught.value.errors] == [
        ("task 'b': cache must be True or False, got 'no'", line),
        ("task 'b': output 'out/x' is also declared by task 'a' (as 'out/x')", line),
    ]
