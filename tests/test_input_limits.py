"""Limits every front end (YAML, SkyPilot pipeline, Python API) enforces before anything runs: task names that are
exactly the allowed alphabet and short enough for any file system, no NUL in what reaches the OS, YAML nesting."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slowness import patience
from tuidag.api import load_python
from tuidag.model import skypilot_loader, yaml_nodes
from tuidag.model.errors import DagErrors
from tuidag.model.loader import load_dag
from tuidag.model.spec import MAX_TASK_NAME, task_name_problem
from tuidag.model.yaml_nodes import MAX_DEPTH, _depth_bound

REPO = Path(__file__).resolve().parent.parent
NUL = "contains a NUL character (\\0), which no command, path or environment variable can hold"


def errors(path: Path) -> list[str]:
    with pytest.raises(DagErrors) as caught:
        load_python(path) if path.suffix == ".py" else load_dag(path)
    return [str(err) for err in caught.value.errors]


@pytest.mark.parametrize("name", ["a\n", "a\r", "\na", "a b", "a/b", ""])
def test_a_name_is_the_alphabet_from_start_to_end(name):
    assert task_name_problem(name) is not None


def test_name_length_is_capped_where_every_file_system_takes_the_log_name():
    assert task_name_problem("x" * MAX_TASK_NAME) is None
    assert "at most 128" in task_name_problem("x" * (MAX_TASK_NAME + 1))
    assert len(f"{'x' * MAX_TASK_NAME}.log") < 143  # eCryptfs, the strictest common Linux file system


def test_python_api_refuses_bad_names_and_nul(tmp_path):
    path = tmp_path / "api.py"
    path.write_text(
        textwrap.dedent("""\
        from tuidag import Dag
        dag = Dag("x", env={"A": "1\\0"})
        dag.shell("a\\n", "echo a")
        dag.shell("a_-3f786850", "echo \\0", setup="\\0", workdir="w\\0")
        dag.shell("b", "echo b", env={"K\\0": "v", "V": "x\\0y"})
        dag.shell("c" * 300, "echo c")

        @dag.task(env={"E": "\\0"})
        def d(ctx):
            pass
    """)
    )
    f = str(path)
    assert errors(path) == [
        f"{f}:2:1: env value for 'A' {NUL}",
        f"{f}:3:1: task name 'a\\n' may only contain letters, digits, '_', '.' and '-'",
        f"{f}:4:1: task 'a_-3f786850': workdir {NUL}",
        f"{f}:4:1: task 'a_-3f786850': run {NUL}",
        f"{f}:4:1: task 'a_-3f786850': setup {NUL}",
        f"{f}:5:1: task 'b': env: variable name 'K\\x00' must be a non-empty string without '=' or NUL",
        f"{f}:5:1: task 'b': env value for 'V' {NUL}",
        f"{f}:6:1: task name 'cccccccccccccccccccc...' is 300 characters long: at most 128 are allowed",
        f"{f}:8:1: task 'd': env value for 'E' {NUL}",
    ]


def test_yaml_run_and_workdir_with_nul_are_refused(tmp_path):
    path = tmp_path / "dag.yaml"
    path.write_text('workdir: "a\\0"\ntasks:\n  a:\n    run: "echo \\0"\n')
    assert errors(path) == [f"{path}:1:10: workdir {NUL}", f"{path}:4:10: task 'a': run {NUL}"]


# Nesting. Each shape once at a depth PyYAML's composer can't recurse through and once at one libyaml's C composer
# overflowed the stack at (a segmentation fault before).
def flow(depth: int) -> str:
    return "tasks:\n  a:\n    run: echo\n    env: " + "[" * depth + "]" * depth + "\n"


def block(depth: int) -> str:
    return "tasks:\n  a:\n    run: echo\nsurplus:\n" + "".join(" " * (i + 1) + "k:\n" for i in range(depth))


def sequences(depth: int) -> str:
    return "tasks:\n  a: {run: echo}\nsurplus:\n" + "- " * depth + "x\n"


def unclosed(depth: int) -> str:  # also a syntax error: PyYAML's composer, which reports those, must not recurse
    return flow(depth)[:-2] + "\n"


def pipeline(depth: int) -> str:
    return "name: p\n---\nname: a\nrun: echo\nresources: " + "{a: " * depth + "1" + "}" * depth + "\n"


@pytest.fixture(params=["libyaml", "pure"])
def yaml_parser(request, monkeypatch):
    """Each YAML file read both ways tuidag can read it: with libyaml's C loader (when this PyYAML has it) and with
    PyYAML's pure-Python one, which is all a PyYAML built without libyaml has. PyYAML 6.0.4's wheels carry libyaml
    0.2.6, whose own limit of 1,000 flow levels stopped its parser before the level past MAX_DEPTH was read, so the
    error pointed where the pure composer ran out of stack (4:1518 instead of 4:107)."""
    if request.param == "libyaml" and yaml_nodes.CSafeLoader is None:
        pytest.skip("this PyYAML is built without libyaml")
    if request.param == "pure":
        monkeypatch.setattr(yaml_nodes, "CSafeLoader", None)
        monkeypatch.setattr(skypilot_loader, "CSafeLoader", None)
    return request.param


@pytest.mark.parametrize(
    "shape, where",
    [(flow, "4:107"), (block, "104:101"), (sequences, "4:199"), (unclosed, "4:107"), (pipeline, "5:408")],
    ids=lambda v: getattr(v, "__name__", v),
)
@pytest.mark.parametrize("depth", [1_000, 60_000])
def test_deep_nesting_is_a_located_error(tmp_path, shape, where, depth, yaml_parser):
    if shape is block and depth > 1_000:
        depth = 3_000  # its size grows with the square of the depth
    path = tmp_path / "deep.yaml"
    path.write_text(shape(depth))
    assert errors(path) == [f"{path}:{where}: nesting too deep: more than {MAX_DEPTH} levels of lists and mappings"]


def test_nesting_up_to_the_limit_is_fine(tmp_path, yaml_parser):
    path = tmp_path / "dag.yaml"
    inner = MAX_DEPTH - 3  # the root mapping, tasks, a
    path.write_text("tasks:\n  a:\n    run: echo\n    env: {A: '1'}\n" + "surplus: " + "[" * inner + "]" * inner + "\n")
    assert errors(path) == [f"{path}:5:1: unknown key 'surplus'"]


def test_deep_file_through_the_cli_exits_2_without_a_traceback(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(flow(100_000))
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "--state-dir", str(tmp_path / "s"), str(path)],
        capture_output=True,
        text=True,
        timeout=patience(60),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 2
    assert proc.stderr == f"{path}:4:107: nesting too deep: more than {MAX_DEPTH} levels of lists and mappings\n"
    assert not (tmp_path / "s").exists()


def _nested(depth: int, draw_kind: list[bool]):
    value: object = "x"
    for as_list in draw_kind[:depth]:
        value = [value] if as_list else {"k": value}
    return value


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.booleans(), min_size=1, max_size=40),
    flow_style=st.sampled_from([True, False, None]),
    indent=st.integers(2, 6),
)
def test_the_depth_bound_is_never_below_the_real_depth(kinds, flow_style, indent):
    """The cheap bound decides whether the event scan runs: it must never miss real depth, in any style."""
    text = yaml.safe_dump(_nested(len(kinds), kinds), default_flow_style=flow_style, indent=indent)
    assert _depth_bound(text) >= len(kinds)


def laughs(prefix: str) -> str:
    """Nine levels of ten aliases each: a billion nodes once expanded, a dozen lines of text."""
    lines = [f"{prefix}l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{prefix}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def test_the_depth_check_does_not_expand_aliases(tmp_path, yaml_parser):
    """Walking the composed tree must not follow every alias again (a billion-laughs file took forever)."""
    path = tmp_path / "dag.yaml"
    path.write_text("tasks:\n  a: {run: echo}\nsurplus:\n" + laughs("  "))
    assert errors(path) == [f"{path}:3:1: unknown key 'surplus'"]
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: p\n---\nname: a\nrun: echo\nconfig:\n" + laughs("  "))  # ignored: accepted whole
    assert list(load_dag(pipeline).tasks) == ["p"]  # a single task takes the pipeline's name, as in SkyPilot
