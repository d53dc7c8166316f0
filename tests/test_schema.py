"""The DAG format's one table of keys (tuidag/model/dag_keys.py), and what is made from it: the loader's keys, the
JSON schema (tuidag/schema.json, docs/schema.json, `tuidag schema`) and the reference page
(docs/reference/dag-file.md). The schema is set beside the loader: it never flags what the loader takes, and where
it misses what the loader flags, the tables below say which files and values, and why."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

from schema_lines import read, schema_lines, validator
from test_cli import tuidag
from tuidag.model.dag_keys import KEYS, NOT_FOR_SERVICES, ROOT_KEYS, SERVICE_KEYS, TASK_KEYS, Key, keys_of
from tuidag.model.dag_schema import TYPES, dag_schema, schema_text
from tuidag.model.errors import DagErrors
from tuidag.model.loader import load_dag
from tuidag.model.service import READY_KINDS
from tuidag.model.yaml_loader import _Reader

REPO = Path(__file__).resolve().parent.parent
CORPUS = sorted((REPO / "tests" / "bad_dags").glob("*.yaml"))
DEMOS = sorted((REPO / "demos").glob("*.yaml"))
SCHEMA_LINE = "# yaml-language-server: $schema=../tuidag/schema.json"
#: A file of SkyPilot tasks is another format (model/skypilot_loader.py): tuidag's schema would flag every key of it.
SKYPILOT_DEMOS = ["skypilot_pipeline.yaml"]


def generator():
    spec = importlib.util.spec_from_file_location("gen_dag_file", REPO / "docs" / "gen_dag_file.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loader_lines(path: Path, text: str | None = None) -> set[int]:
    """The lines `tuidag validate` reports a mistake on (none: it takes the file)."""
    try:
        load_dag(path, text=text)
    except DagErrors as exc:
        return {error.location.line for error in exc.errors if error.location is not None}
    return set()


# ------------------------------------------------------------------------------------------------------ the table
def test_the_loader_takes_exactly_the_keys_of_the_table(tmp_path):
    reader = _Reader("dag.yaml")
    assert set(reader.root_converters(tmp_path)) | {"tasks"} == set(ROOT_KEYS)  # tasks: read by _Reader.tasks
    assert set(reader.task_converters(tmp_path)) | {"service", *SERVICE_KEYS} == set(TASK_KEYS)  # service_yaml.py's
    assert set(NOT_FOR_SERVICES) <= set(keys_of("task"))


def test_the_tables_ready_when_and_matrix_keys_are_the_ones_their_readers_know():
    assert set(keys_of("ready_when")) == {*READY_KINDS, "status", "interval"}  # service_yaml.py
    assert set(keys_of("matrix")) == {"<key>", "include", "exclude"}  # yaml_values.ValueReader.matrix


def test_each_key_has_a_known_type_a_description_and_an_example():
    for key in KEYS:
        assert key.type in TYPES, key
        assert key.description.endswith(".") and key.example, key
    assert len({(key.scope, key.name) for key in KEYS}) == len(KEYS)


def dag_with(key: Key, value: str) -> str:
    """A DAG file holding `key: value` where the key belongs, with what the key needs beside it."""
    if key.scope == "dag":
        tasks = "" if key.name == "tasks" else "tasks:\n  fetch: {run: echo}\n"
        return f"{key.name}: {value}\n{tasks}"
    lines = ["resources: {gpu: 4}", "tasks:", "  fetch: {run: echo}", "  prepare: {run: echo}", "  t:"]
    lines += [] if key.name == "run" else ["    run: echo"]
    if key.scope == "task":
        lines += ["    matrix: {lr: [0.1, 0.01]}"] if key.needs == "matrix" else []
        lines += [f"    {key.name}: {value}"]
    elif key.scope == "matrix":
        axes = "seed: [1, 2, 3]" + ("" if key.name == "<key>" else ", lr: [0.01, 0.1]")
        lines += [f"    matrix: {{{axes}, {'lr' if key.name == '<key>' else key.name}: {value}}}"]
    else:
        lines += ["    service: true"] + (["    restart: on-failure"] if key.needs.startswith("restart") else [])
        if key.scope == "service":
            lines += [f"    {key.name}: {value}"]
        else:  # ready_when: the key with a check of its kind when it needs one, or is none itself
            kind = key.needs or ("" if key.name in READY_KINDS else "port")
            check = {"http": "http: http://127.0.0.1:8000/", "port": "port: 8000", "": ""}[kind]
            lines += [f"    ready_when: {{{', '.join(filter(None, [check, f'{key.name}: {value}']))}}}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("key", KEYS, ids=lambda key: f"{key.scope}.{key.name}")
def test_each_keys_example_is_taken_by_the_loader_and_the_schema(key, tmp_path):
    text = dag_with(key, key.example)
    assert loader_lines(tmp_path / "dag.yaml", text) == set(), text
    assert schema_lines(text) == set(), text


# The values tried for every key, in the tests below: each kind of value, in range and out of it.
VALUES = [
    *["0", "1", "-1", "2.0", "1000001", ".inf", "true", "yes", "null", '""', '"  "', '"x\\0"', "0x10"],
    *["5s", "0s", "500ms", "9000h", "5 minutes", "2024-01-01", "/abs/path", "out/*.pt", "fetch", "A=B", "local"],
    *["dask-local:0", "on-failure", "no", "false", "end", "[]", "[fetch, prepare]", "[a, a]", "[[a]]", "{}"],
    *["{gpu: 1}", "{gpu: 0}", "{A: [1]}", "{A=B: 1}", '"${{ matrix.lr }}"', "{lr: [1, 2]}", "{lr: []}"],
    *["{include: [{lr: 1}]}", "{exclude: [{lr: 1}]}", "{port: 5432}", "{port: 1, status: 200}", '{log: "("}'],
    *['{http: "ftp://x"}', "{command: true, interval: 0}", "{port: 80, http: http://x}"],
]
#: Mistakes the schema can't see in a value, by the loader's message, and why.
VALUE_GAPS = {
    "is too long: at most 8760h": "a duration over a year written with a unit: no regular expression compares it",
    r"must be (a positive integer|an integer >= 0), got 2\.0": "JSON can't tell 2.0 from 2",
    "is not a valid regular expression": "the schema's regular expressions are ECMAScript's; tuidag uses Python's",
    "restart must be no or on-failure, got false": "YAML 1.1 reads an unquoted `no` as false: the schema takes false",
    "depends on unknown task": "a dependency names another task",
    "but the task has no matrix": "a placeholder needs a matrix, another key of the task",
    "two instances are both named|name template gives": "instance names are made when the matrix is expanded",
}


def test_the_schema_never_flags_a_value_the_loader_takes_and_misses_only_the_listed_mistakes(tmp_path):
    seen: set[str] = set()
    for key in KEYS:
        if key.scope not in ("dag", "task", "service"):  # nested keys: tried in the values of ready_when and matrix
            continue
        for value in VALUES:
            text = dag_with(key, value)
            try:
                load_dag(tmp_path / "dag.yaml", text=text)
                message = ""
            except DagErrors as exc:
                message = str(exc.errors[0])
            flagged = bool(schema_lines(text))
            assert not flagged or message, f"the schema flags what the loader takes:\n{text}"
            if message and not flagged:
                gaps = [gap for gap in VALUE_GAPS if re.search(gap, message)]
                assert gaps, f"the schema takes what the loader does not: {message}\n{text}"
                seen.update(gaps)
    assert seen == set(VALUE_GAPS), "a gap the values no longer show: take it out of VALUE_GAPS"


# ------------------------------------------------------------------------------------------ the files made from it
def test_the_checked_in_schemas_and_reference_are_what_the_generator_makes():
    stale = [str(path.relative_to(REPO)) for path, text in generator().outputs().items() if path.read_text() != text]
    assert not stale, f"{', '.join(stale)}: out of date with tuidag/model/dag_keys.py: run python docs/gen_dag_file.py"


def test_the_schema_is_a_draft_2020_12_schema_with_descriptions_for_editors():
    schema = dag_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["kill_grace"]["description"].endswith("Default: 5s.")
    assert schema["$defs"]["task"]["additionalProperties"] is False


def test_the_package_ships_the_schema():
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "schema.json" in package_data["tuidag"]


def test_tuidag_schema_prints_the_schema(tmp_path):
    proc = tuidag("schema", cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == schema_text() == (REPO / "tuidag" / "schema.json").read_text()
    assert json.loads(proc.stdout)["title"] == "tuidag DAG file"


def test_the_references_example_is_taken_by_the_loader_and_the_schema(tmp_path):
    page = (REPO / "docs" / "reference" / "dag-file.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert loader_lines(tmp_path / "dag.yaml", example) == set() == schema_lines(example)


# ------------------------------------------------------------------------------------------------------ the demos
@pytest.mark.parametrize("path", DEMOS, ids=lambda p: p.name)
def test_each_demo_names_the_schema_and_fits_it(path):
    text = path.read_text()
    if path.name in SKYPILOT_DEMOS:
        assert "$schema" not in text
        return
    assert text.splitlines()[0] == SCHEMA_LINE
    assert (path.parent / SCHEMA_LINE.split("=", 1)[1]).resolve() == REPO / "tuidag" / "schema.json"
    assert loader_lines(path) == set() == schema_lines(text)
    validator().validate(read(text)[1])  # the same, with jsonschema's own message if not


# -------------------------------------------------------------------------------------------------- the bad files
DUPLICATE = "a key given twice: JSON has no such thing, a YAML parser keeps one (an editor flags it itself)"
UNKNOWN_TASK = "a dependency on a task the file lacks: the schema sees one value, not the other tasks"
EXPANDED = "made when the matrix is expanded: instances, their names and what they pair with"
PLACEHOLDER = "a placeholder is checked against the task's matrix, another key"
#: The bad files whose mistakes the schema can't see all of: the lines only the loader reports, and why. On every
#: other file of the corpus the schema fails on exactly the lines the loader reports, and never on another line.
LOADER_ONLY = {
    "cycle.yaml": ((5,), "a dependency cycle is a property of the whole graph"),
    "cycle_and_unknown_dependency.yaml": ((4, 5), f"{UNKNOWN_TASK}; a cycle is the whole graph's"),
    "duplicate_env_variable.yaml": ((4,), DUPLICATE),
    "duplicate_root_key.yaml": ((6,), DUPLICATE),
    "duplicate_task.yaml": ((6,), DUPLICATE),
    "duplicate_task_key.yaml": ((5,), DUPLICATE),
    "matrix_duplicate_key.yaml": ((7,), DUPLICATE),
    "matrix_misplaced_keys.yaml": ((14,), "an exclude naming a key the matrix lacks: the matrix's own keys"),
    "matrix_name_collision.yaml": ((6, 10), EXPANDED),
    "matrix_pairs_with_nothing.yaml": ((10, 13), EXPANDED),
    "matrix_resources_placeholder.yaml": ((7, 10), f"{EXPANDED}; {PLACEHOLDER}"),
    "matrix_too_many_instances.yaml": ((5,), "the product of the lists' lengths"),
    "matrix_unknown_placeholder.yaml": ((6, 8), PLACEHOLDER),
    "not_utf8.yaml": ((1,), "bytes that are not UTF-8 are no text for a YAML parser or a schema"),
    "output_declared_twice.yaml": ((8,), "another task's outputs"),
    "output_is_input.yaml": ((6,), "an output matched against the inputs, another key"),
    "self_dependency.yaml": ((6,), "the task's own name is its key, not a value the schema sees"),
    "several_errors.yaml": ((10,), UNKNOWN_TASK),
    "unknown_dependency.yaml": ((6,), UNKNOWN_TASK),
    "unknown_dependency_string.yaml": ((4,), UNKNOWN_TASK),
}


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_each_bad_file_fails_the_schema_where_the_loader_says_or_the_difference_is_listed(path):
    loader = loader_lines(path)
    assert loader, "the corpus holds bad files only"
    schema = schema_lines(path.read_bytes().decode("utf-8", errors="replace"))
    only_loader, why = LOADER_ONLY.get(path.name, ((), ""))
    assert schema - loader == set(), f"the schema flags lines the loader takes: {sorted(schema - loader)}"
    assert sorted(loader - schema) == list(only_loader), f"the loader alone flags {sorted(loader - schema)} ({why})"


def test_the_differences_name_files_of_the_corpus():
    assert set(LOADER_ONLY) <= {path.name for path in CORPUS}
