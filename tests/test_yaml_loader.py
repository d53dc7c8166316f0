"""The YAML front end: what a good file becomes, and the exact located message for every kind of bad one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuidag.model import DEFAULT_KILL_GRACE, DagErrors, FailurePolicy, Location
from tuidag.model.loader import load_dag
from tuidag.model.yaml_loader import load_yaml

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path: Path, text: str, name: str = "dag.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def errors(path: Path) -> list[str]:
    with pytest.raises(DagErrors) as caught:
        load_dag(path)
    return [str(err) for err in caught.value.errors]


# Loading good files.


def test_defaults(tmp_path):
    path = write(tmp_path, "tasks:\n  hello:\n    run: echo hi\n", name="greet.yaml")
    dag = load_dag(path)
    assert dag.name == "greet"
    assert dag.max_parallel == (os.cpu_count() or 1)
    assert dag.on_failure is FailurePolicy.SKIP_DOWNSTREAM
    assert dag.kill_grace == DEFAULT_KILL_GRACE
    assert dag.env == {}
    assert dag.workdir == tmp_path.resolve()
    assert dag.source == path.resolve()
    task = dag.tasks["hello"]
    assert (task.name, task.run, task.depends_on, task.env, task.workdir) == ("hello", "echo hi", (), {}, None)
    assert (task.retries, task.retry_delay, task.timeout) == (0, 0.0, None)
    assert task.location == Location(str(path), 2, 3)


def test_all_fields(tmp_path):
    path = write(
        tmp_path,
        """\
name: pipeline
max_parallel: 3
on_failure: finish-running
kill_grace: 2s
env: {STAGE: prod}
workdir: work
tasks:
  fetch:
    run: ./fetch.sh
  train:
    run: |
      python train.py
      echo done
    depends_on: [fetch]
    env: {EPOCHS: "3"}
    workdir: ml/
    retries: 2
    retry_delay: 500ms
    timeout: 10m
""",
    )
    dag = load_dag(path)
    assert (dag.name, dag.max_parallel, dag.on_failure, dag.kill_grace) == (
        "pipeline",
        3,
        FailurePolicy.FINISH_RUNNING,
        2.0,
    )
    assert dag.env == {"STAGE": "prod"}
    assert dag.workdir == (tmp_path / "work").resolve()
    train = dag.tasks["train"]
    assert train.run == "python train.py\necho done\n"
    assert train.depends_on == ("fetch",)
    assert train.dep_locations == (Location(str(path), 14, 18),)
    assert train.env == {"EPOCHS": "3"}
    assert train.workdir == (tmp_path / "work" / "ml").resolve()
    assert (train.retries, train.retry_delay, train.timeout) == (2, 0.5, 600.0)
    assert train.location == Location(str(path), 10, 3)


def test_tasks_keep_file_order(tmp_path):
    path = write(tmp_path, "tasks:\n  zeta: {run: z}\n  alpha: {run: a}\n  mid: {run: m, depends_on: zeta}\n")
    assert list(load_dag(path).tasks) == ["zeta", "alpha", "mid"]


def test_depends_on_a_single_name_is_located_at_the_string(tmp_path):
    path = write(tmp_path, "tasks:\n  a: {run: x}\n  b:\n    run: y\n    depends_on: a\n")
    b = load_dag(path).tasks["b"]
    assert b.depends_on == ("a",)
    assert b.dep_locations == (Location(str(path), 5, 17),)


def test_depends_on_list_entries_are_each_located(tmp_path):
    path = write(
        tmp_path, "tasks:\n  a: {run: x}\n  b: {run: y}\n  c:\n    run: z\n    depends_on:\n      - a\n      - b\n"
    )
    c = load_dag(path).tasks["c"]
    assert c.depends_on == ("a", "b")
    assert c.dep_locations == (Location(str(path), 7, 9), Location(str(path), 8, 9))


def test_workdirs_resolve_against_the_file_then_the_dag_workdir(tmp_path):
    (tmp_path / "proj").mkdir()
    path = write(
        tmp_path / "proj",
        f"""\
workdir: ../data
tasks:
  rel: {{run: x, workdir: sub/dir}}
  abs: {{run: x, workdir: {tmp_path / "elsewhere"}}}
  home: {{run: x, workdir: ~/cache}}
  plain: {{run: x}}
""",
    )
    dag = load_dag(path)
    assert dag.workdir == (tmp_path / "data").resolve()
    assert dag.tasks["rel"].workdir == (tmp_path / "data" / "sub" / "dir").resolve()
    assert dag.tasks["abs"].workdir == (tmp_path / "elsewhere").resolve()
    assert dag.tasks["home"].workdir == (Path.home() / "cache").resolve()
    assert dag.tasks["plain"].workdir is None


def test_a_symlinked_workdir_is_kept_as_written(tmp_path):
    """The model depends on the file alone (so it can be cached): the link is followed when the task starts, so one
    retargeted between runs takes effect."""
    (tmp_path / "v1").mkdir()
    (tmp_path / "current").symlink_to(tmp_path / "v1")
    path = write(tmp_path, "tasks:\n  a: {run: pwd, workdir: current/./}\n")
    assert load_dag(path).tasks["a"].workdir == tmp_path.resolve() / "current"


def test_a_relative_path_is_reported_as_given_but_resolved_for_the_spec(tmp_path, monkeypatch):
    write(tmp_path, "tasks:\n  a: {run: x, depends_on: b}\n")
    monkeypatch.chdir(tmp_path)
    assert errors(Path("dag.yaml")) == ["dag.yaml:2:27: task 'a' depends on unknown task 'b'"]
    write(tmp_path, "tasks:\n  a: {run: x}\n")
    dag = load_dag(Path("dag.yaml"))
    assert dag.source == (tmp_path / "dag.yaml").resolve()
    assert dag.workdir == tmp_path.resolve()


def test_env_values_become_strings(tmp_path):
    path = write(
        tmp_path,
        """\
env:
  TEXT: hello
  QUOTED: "007"
  INT: 42
  HEX: 0x1F
  FLOAT: 1.10
  ON: true
  OFF: False
  YES: yes
  EMPTY: ""
tasks:
  a:
    run: x
    env: {N: 3}
""",
    )
    dag = load_dag(path)
    assert dag.env == {
        "TEXT": "hello",
        "QUOTED": "007",
        "INT": "42",
        "HEX": "0x1F",
        "FLOAT": "1.10",
        "ON": "true",
        "OFF": "false",
        "YES": "true",
        "EMPTY": "",
    }
    assert dag.tasks["a"].env == {"N": "3"}


@pytest.mark.parametrize(
    "written, seconds",
    [
        ("5", 5.0),
        ("1.5", 1.5),
        ("500ms", 0.5),
        ("5s", 5.0),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("0", 0.0),
        ('"3s"', 3.0),
    ],
)
def test_durations(tmp_path, written, seconds):
    path = write(tmp_path, f"kill_grace: {written}\ntasks:\n  a: {{run: x, retry_delay: {written}}}\n")
    dag = load_dag(path)
    assert dag.kill_grace == seconds
    assert dag.tasks["a"].retry_delay == seconds


def test_run_is_taken_as_written_even_when_yaml_would_type_it(tmp_path):
    path = write(tmp_path, "tasks:\n  ok: {run: true}\n  n: {run: 42}\n")
    dag = load_dag(path)
    assert (dag.tasks["ok"].run, dag.tasks["n"].run) == ("true", "42")


def test_anchors_and_aliases_are_followed(tmp_path):
    path = write(tmp_path, "env: &common {A: '1'}\ntasks:\n  a: {run: x, env: *common}\n")
    assert load_dag(path).tasks["a"].env == {"A": "1"}


def test_load_yaml_takes_text_instead_of_reading(tmp_path):
    path = tmp_path / "never-written.yaml"
    dag = load_yaml(path, "tasks:\n  a: {run: x}\n")
    assert (dag.name, list(dag.tasks)) == ("never-written", ["a"])
    with pytest.raises(DagErrors) as caught:
        load_yaml(path)
    assert str(caught.value) == f"{path}:1:1: cannot read file: No such file or directory"


# Errors: (file text, expected "LINE:COL: message" lines). Each case has one kind of problem.
ERROR_CASES = {
    "invalid yaml": (
        "tasks:\n  a:\n    run: 'echo hi\n",
        ["4:1: invalid YAML: found unexpected end of stream (while scanning a quoted scalar started on line 3)"],
    ),
    "invalid yaml, same line": (
        "tasks: {a: {run: x}\n",
        [
            "2:1: invalid YAML: expected ',' or '}', but got '<stream end>' "
            "(while parsing a flow mapping started on line 1)"
        ],
    ),
    "bad character": (
        "tasks:\n  a: {run: \x07}\n",
        ["2:12: invalid YAML: unacceptable character #x0007: special characters are not allowed"],
    ),
    "empty file": ("", ["1:1: the file is empty: a DAG file needs a 'tasks' mapping"]),
    "only comments": ("# nothing yet\n\n", ["1:1: the file is empty: a DAG file needs a 'tasks' mapping"]),
    "empty document": ("---\n", ["1:1: the file is empty: a DAG file needs a 'tasks' mapping"]),
    "root not a mapping": ("- a\n- b\n", ["1:1: the top level must be a mapping of settings and 'tasks', got a list"]),
    "multiple documents": (
        "tasks: {a: {run: x}}\n---\ntasks: {b: {run: y}}\n",
        ["2:1: found a second YAML document: a DAG file holds exactly one"],
    ),
    "unknown root key": (
        "tasks: {a: {run: x}}\non_fail: cancel-all\n",
        ["2:1: unknown key 'on_fail' (did you mean 'on_failure'?)"],
    ),
    "task outside tasks": ("tasks: {a: {run: x}}\nb:\n  run: y\n", ["2:1: unknown key 'b' (tasks go under 'tasks:')"]),
    "unknown task key": (
        "tasks:\n  a:\n    run: x\n    timout: 5s\n",
        ["4:5: task 'a': unknown key 'timout' (did you mean 'timeout'?)"],
    ),
    "non-string task name": ("tasks:\n  ? {a: 1}\n  : {run: x}\n", ["2:5: task names must be strings, got a mapping"]),
    "name wrong type": ("name: {x: 1}\ntasks: {a: {run: x}}\n", ["1:7: name must be a string, got a mapping"]),
    "name empty": ("name: ''\ntasks: {a: {run: x}}\n", ["1:7: name is empty"]),
    "max_parallel word": (
        "max_parallel: four\ntasks: {a: {run: x}}\n",
        ["1:15: max_parallel must be a positive integer, got 'four'"],
    ),
    "max_parallel quoted": (
        "max_parallel: '4'\ntasks: {a: {run: x}}\n",
        ["1:15: max_parallel must be a positive integer, got '4'"],
    ),
    "max_parallel bool": (
        "max_parallel: yes\ntasks: {a: {run: x}}\n",
        ["1:15: max_parallel must be a positive integer, got yes"],
    ),
    "max_parallel zero": (
        "max_parallel: 0\ntasks: {a: {run: x}}\n",
        ["1:15: max_parallel must be a positive integer, got 0"],
    ),
    "max_parallel float": (
        "max_parallel: 2.0\ntasks: {a: {run: x}}\n",
        ["1:15: max_parallel must be a positive integer, got 2.0"],
    ),
    "max_parallel explicit bad int": (
        "max_parallel: !!int many\ntasks: {a: {run: x}}\n",
        ["1:15: max_parallel must be a positive integer, got many"],
    ),
    "on_failure": (
        "on_failure: cancel\ntasks: {a: {run: x}}\n",
        [
            "1:13: on_failure must be one of skip-downstream, finish-running, cancel-all, got 'cancel' "
            "(did you mean 'cancel-all'?)"
        ],
    ),
    "on_failure typo": (
        "on_failure: finish-runing\ntasks: {a: {run: x}}\n",
        [
            "1:13: on_failure must be one of skip-downstream, finish-running, cancel-all, "
            "got 'finish-runing' (did you mean 'finish-running'?)"
        ],
    ),
    "on_failure list": (
        "on_failure: [cancel-all]\ntasks: {a: {run: x}}\n",
        ["1:13: on_failure must be one of skip-downstream, finish-running, cancel-all, got a list"],
    ),
    "kill_grace": (
        "kill_grace: soon\ntasks: {a: {run: x}}\n",
        ["1:13: kill_grace must be a duration like 500ms, 5s, 2m or 1h, got 'soon'"],
    ),
    "kill_grace bool": (
        "kill_grace: true\ntasks: {a: {run: x}}\n",
        ["1:13: kill_grace must be a duration like 500ms, 5s, 2m or 1h, got true"],
    ),
    "kill_grace null": (
        "kill_grace:\ntasks: {a: {run: x}}\n",
        ["1:12: kill_grace must be a duration like 500ms, 5s, 2m or 1h, got null"],
    ),
    "retry_delay negative": (
        "tasks:\n  a: {run: x, retry_delay: -1s}\n",
        ["2:28: task 'a': retry_delay must be a duration like 500ms, 5s, 2m or 1h, got '-1s'"],
    ),
    "timeout zero": ("tasks:\n  a: {run: x, timeout: 0}\n", ["2:24: task 'a': timeout must be longer than 0, got 0"]),
    "timeout infinite": (
        "tasks:\n  a: {run: x, timeout: .inf}\n",
        ["2:24: task 'a': timeout must be a duration like 500ms, 5s, 2m or 1h, got .inf"],
    ),
    "retries negative": (
        "tasks:\n  a: {run: x, retries: -1}\n",
        ["2:24: task 'a': retries must be an integer >= 0, got -1"],
    ),
    "retries bool": (
        "tasks:\n  a: {run: x, retries: false}\n",
        ["2:24: task 'a': retries must be an integer >= 0, got false"],
    ),
    "env not a mapping": (
        "env: A=1\ntasks: {a: {run: x}}\n",
        ["1:6: env must be a mapping of variable names to values, got 'A=1'"],
    ),
    "env value null": (
        "tasks:\n  a: {run: x, env: {A: ~}}\n",
        ["2:24: task 'a': env value for 'A' must be a string, number or boolean, got null"],
    ),
    "env value mapping": (
        "env:\n  A: {b: c}\ntasks: {a: {run: x}}\n",
        ["2:6: env value for 'A' must be a string, number or boolean, got a mapping"],
    ),
    "env name with =": (
        "env: {'A=B': c}\ntasks: {a: {run: x}}\n",
        ["1:7: env: variable name 'A=B' must be non-empty and may not contain '=' or NUL"],
    ),
    "workdir": ("workdir: [a]\ntasks: {a: {run: x}}\n", ["1:10: workdir must be a directory path, got a list"]),
    "missing tasks": ("# a comment\nname: x\n", ["2:1: missing 'tasks': a DAG file needs at least one task"]),
    "empty tasks": ("tasks: {}\n", ["1:8: tasks is empty: a DAG file needs at least one task"]),
    "null tasks": ("name: x\ntasks:\n", ["2:7: tasks is empty: a DAG file needs at least one task"]),
    "tasks as a list": (
        "tasks:\n  - a: {run: x}\n",
        ["2:3: tasks must be a mapping of task names to tasks, not a list: write 'NAME:' keys instead of '- ' items"],
    ),
    "tasks a string": ("tasks: all\n", ["1:8: tasks must be a mapping of task names to tasks, got 'all'"]),
    "task not a mapping": (
        "tasks:\n  a: make all\n",
        ["2:6: task 'a' must be a mapping with a 'run' command, got 'make all'"],
    ),
    "task without run": ("tasks:\n  a: {retries: 1}\n", ["2:3: task 'a' has no 'run' command"]),
    "run empty": ("tasks:\n  a:\n    run:\n", ["3:9: task 'a': run is empty"]),
    "run a list": (
        "tasks:\n  a: {run: [make, test]}\n",
        ["2:12: task 'a': run must be a shell command string, got a list"],
    ),
    "duplicate task": (
        "tasks:\n  a: {run: x}\n  b: {run: y}\n  a: {run: z}\n",
        ["4:3: duplicate task 'a' (first defined on line 2)"],
    ),
    "duplicate root key": (
        "tasks: {a: {run: x}}\nname: one\nname: two\n",
        ["3:1: duplicate key 'name' (first defined on line 2)"],
    ),
    "duplicate task key": (
        "tasks:\n  a:\n    run: x\n    retries: 1\n    retries: 2\n",
        ["5:5: duplicate key 'retries' (first defined on line 4)"],
    ),
    "duplicate env variable": (
        "tasks:\n  a:\n    run: x\n    env:\n      A: 1\n      A: 2\n",
        ["6:7: duplicate env variable 'A' (first defined on line 5)"],
    ),
    "unknown dependency": (
        "tasks:\n  build: {run: x}\n  test: {run: y, depends_on: [buld]}\n",
        ["3:31: task 'test' depends on unknown task 'buld' (did you mean 'build'?)"],
    ),
    "unknown dependency as string": (
        "tasks:\n  test: {run: y, depends_on: lint}\n",
        ["2:30: task 'test' depends on unknown task 'lint'"],
    ),
    "self dependency": ("tasks:\n  a: {run: x, depends_on: a}\n", ["2:27: task 'a' depends on itself"]),
    "cycle": (
        "tasks:\n  a: {run: x, depends_on: c}\n  b: {run: x, depends_on: a}\n  c: {run: x, depends_on: b}\n",
        ["3:27: dependency cycle: a -> b -> c -> a"],
    ),
    "duplicate dependency": (
        "tasks:\n  a: {run: x}\n  b:\n    run: y\n    depends_on:\n      - a\n      - a\n",
        ["7:9: task 'b': depends_on lists 'a' twice (first on line 6)"],
    ),
    "depends_on null": (
        "tasks:\n  a: {run: x}\n  b:\n    run: y\n    depends_on:\n",
        ["5:16: task 'b': depends_on must be a task name or a list of task names, got null"],
    ),
    "depends_on entry not a name": (
        "tasks:\n  a: {run: x, depends_on: [{b: 1}]}\n",
        ["2:28: task 'a': depends_on entries must be task names, got a mapping"],
    ),
    "bad task name": (
        "tasks:\n  'lint/all': {run: x}\n",
        ["2:3: task name 'lint/all' may only contain letters, digits, '_', '.' and '-'"],
    ),
    "task name with ..": ("tasks:\n  x..y: {run: x}\n", ["2:3: task name 'x..y' may not be '.' or contain '..'"]),
}


@pytest.mark.parametrize("text, expected", ERROR_CASES.values(), ids=ERROR_CASES.keys())
def test_errors(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert errors(path) == [f"{path}:{line}" for line in expected]


def test_all_problems_are_reported_at_once_in_file_order(tmp_path):
    path = write(
        tmp_path,
        """\
tasks:
  b:
    run: y
    depends_on: [a, nope]
    retries: lots
  a:
    timeout: never
max_parallel: 0
""",
    )
    assert errors(path) == [
        f"{path}:4:21: task 'b' depends on unknown task 'nope'",
        f"{path}:5:14: task 'b': retries must be an integer >= 0, got 'lots'",
        f"{path}:6:3: task 'a' has no 'run' command",
        f"{path}:7:14: task 'a': timeout must be a duration like 500ms, 5s, 2m or 1h, got 'never'",
        f"{path}:8:15: max_parallel must be a positive integer, got 0",
    ]


def test_dag_errors_text_is_one_line_per_error(tmp_path):
    path = write(tmp_path, "tasks:\n  a: {run: x, depends_on: [b, c]}\n")
    with pytest.raises(DagErrors) as caught:
        load_dag(path)
    assert str(caught.value) == (
        f"{path}:2:28: task 'a' depends on unknown task 'b'\n{path}:2:31: task 'a' depends on unknown task 'c'"
    )


def test_unreadable_files(tmp_path):
    missing = tmp_path / "missing.yaml"
    assert errors(missing) == [f"{missing}:1:1: cannot read file: No such file or directory"]
    assert errors(tmp_path) == [f"{tmp_path}:1:1: cannot read file: Is a directory"]
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"tasks:\xff\n")
    assert errors(binary) == [f"{binary}:1:1: cannot read file: not UTF-8 text (byte 0xff at offset 6)"]


def test_the_model_imports_neither_textual_nor_the_rest_of_tuidag():
    code = (
        "import json, sys, tuidag.model, tuidag.model.loader; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tuidag'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    modules = json.loads(out)
    assert not [m for m in modules if m.startswith("textual")]
    package = ("tuidag", "tuidag.version")  # what `import tuidag` itself loads
    assert [m for m in modules if m not in package and not m.startswith("tuidag.model")] == []
