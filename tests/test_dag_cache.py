"""The cache of validated DAGs: a hit gives exactly what loading the file gives, and anything that could change the
result is a miss."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slowness import patience
from tuidag.model import cache
from tuidag.model.cache import load_dag_cached
from tuidag.model.errors import DagErrors
from tuidag.model.loader import load_dag

REPO = Path(__file__).resolve().parent.parent
DAG = """\
name: cached
max_parallel: 3
on_failure: cancel-all
kill_grace: 2s
env: {SHARED: "1"}
tasks:
  fetch:
    run: echo fetch
    workdir: ~/data
  train:
    run: |
      echo train
      echo more
    depends_on: [fetch]
    env: {EPOCHS: "3"}
    retries: 2
    retry_delay: 500ms
    timeout: 10m
    inputs: [data/*.csv, train.py]
    outputs: out/model.pt
    env_inputs: [CUDA_VERSION]
  report: {run: echo report, depends_on: train, cache: false}
"""


def same(a, b) -> None:
    for field in ("name", "tasks", "max_parallel", "on_failure", "kill_grace", "env", "workdir", "source", "job_group"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.topological_order == b.topological_order
    assert a.fingerprints == b.fingerprints


@pytest.fixture
def dag_file(tmp_path):
    path = tmp_path / "dag.yaml"
    path.write_text(DAG)
    return path


@pytest.fixture
def no_loading(monkeypatch):
    """After this, a cache miss fails the test: only a hit can produce the DAG."""

    def refuse(*args, **kwargs):
        raise AssertionError("the file was loaded: the cache missed")

    return lambda: monkeypatch.setattr(cache, "load_dag", refuse)


def test_a_hit_is_exactly_what_loading_the_file_gives(dag_file, tmp_path, no_loading):
    first = load_dag_cached(dag_file, tmp_path / "cache")
    no_loading()
    hit = load_dag_cached(dag_file, tmp_path / "cache")
    same(hit, load_dag(dag_file))
    same(hit, first)
    (entry,) = (tmp_path / "cache").iterdir()
    assert (entry.stat().st_mode & 0o777, (tmp_path / "cache").stat().st_mode & 0o777) == (0o600, 0o700)
    assert hit.tasks["train"].location == load_dag(dag_file).tasks["train"].location


@pytest.mark.parametrize("demo", sorted(p.name for p in (REPO / "demos").glob("*.yaml")))
def test_every_demo_round_trips(demo, tmp_path, no_loading):
    path = REPO / "demos" / demo
    notes_first: list = []
    load_dag_cached(path, tmp_path / "cache", notes_first)
    no_loading()
    notes_hit: list = []
    same(load_dag_cached(path, tmp_path / "cache", notes_hit), load_dag(path))
    assert notes_hit == notes_first  # SkyPilot's notes about ignored keys are told on every run


def test_a_skypilot_job_group_round_trips(tmp_path, no_loading, monkeypatch):
    monkeypatch.chdir(REPO / "tests" / "skypilot")  # its fixtures' workdirs are relative to where tuidag runs
    path = REPO / "tests" / "skypilot" / "graph_job_group.yaml"
    load_dag_cached(path, tmp_path / "cache")
    no_loading()
    hit = load_dag_cached(path, tmp_path / "cache")
    same(hit, load_dag(path))
    assert hit.job_group is not None and hit.tasks["trainer"].run_env  # the runtime variables with the run's id


def test_the_folder_tuidag_runs_in_and_env_flags_are_part_of_the_key(tmp_path, monkeypatch):
    path = tmp_path / "task.yaml"
    path.write_text("name: t\nworkdir: ./$SUB\nenvs: {SUB: a}\nrun: pwd\n")
    for folder in ("one/a", "one/b", "two/a"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "one")
    assert load_dag_cached(path, tmp_path / "cache").tasks["t"].workdir == tmp_path / "one" / "a"
    assert load_dag_cached(path, tmp_path / "cache", env=[("SUB", "b")]).tasks["t"].workdir == tmp_path / "one" / "b"
    monkeypatch.chdir(tmp_path / "two")
    assert load_dag_cached(path, tmp_path / "cache").tasks["t"].workdir == tmp_path / "two" / "a"


def test_an_edit_that_keeps_size_and_mtime_is_still_a_miss(dag_file, tmp_path):
    load_dag_cached(dag_file, tmp_path / "cache")
    stat = dag_file.stat()
    dag_file.write_text(DAG.replace("echo report", "echo REPORT"))
    os.utime(dag_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_dag_cached(dag_file, tmp_path / "cache").tasks["report"].run == "echo REPORT"


def test_what_the_loaders_read_from_the_environment_is_part_of_the_key(dag_file, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "one"))
    assert load_dag_cached(dag_file, tmp_path / "cache").tasks["fetch"].workdir == tmp_path / "one" / "data"
    monkeypatch.setenv("HOME", str(tmp_path / "two"))
    assert load_dag_cached(dag_file, tmp_path / "cache").tasks["fetch"].workdir == tmp_path / "two" / "data"


def test_a_change_to_the_loaders_code_is_a_miss(dag_file, tmp_path, monkeypatch, no_loading):
    code = tmp_path / "model"
    code.mkdir()
    (code / "yaml_loader.py").write_text("# v1\n")
    monkeypatch.setattr(cache, "_MODEL_DIR", str(code))
    load_dag_cached(dag_file, tmp_path / "cache")
    (code / "yaml_loader.py").write_text("# version 2\n")
    calls = []
    monkeypatch.setattr(cache, "load_dag", lambda *a, **k: calls.append(a) or load_dag(*a, **k))
    load_dag_cached(dag_file, tmp_path / "cache")
    assert len(calls) == 1


def test_errors_are_never_cached(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("tasks:\n  a: {run: true, depends_on: [nope]}\n")
    for _ in range(2):
        with pytest.raises(DagErrors) as info:
            load_dag_cached(path, tmp_path / "cache")
        assert str(info.value) == f"{path}:2:31: task 'a' depends on unknown task 'nope'"
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())


def test_an_unreadable_file_is_reported_as_without_the_cache(tmp_path):
    with pytest.raises(DagErrors) as info:
        load_dag_cached(tmp_path / "missing.yaml", tmp_path / "cache")
    assert str(info.value).startswith(f"{tmp_path / 'missing.yaml'}:1:1: cannot read file:")
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"tasks:\n  a: {run: caf\xe9}\n")
    with pytest.raises(DagErrors, match="not UTF-8"):
        load_dag_cached(bad, tmp_path / "cache")


@pytest.mark.parametrize("damage", [b"", b"not marshal at all", b"\xe9" * 100])
def test_a_damaged_entry_is_a_miss_and_is_written_again(dag_file, tmp_path, damage, no_loading):
    load_dag_cached(dag_file, tmp_path / "cache")
    (entry,) = (tmp_path / "cache").iterdir()
    good = entry.read_bytes()
    entry.write_bytes(damage if damage else good[: len(good) // 2])
    same(load_dag_cached(dag_file, tmp_path / "cache"), load_dag(dag_file))
    assert entry.read_bytes() == good
    no_loading()
    load_dag_cached(dag_file, tmp_path / "cache")


def test_an_unwritable_cache_dir_only_costs_the_cache(dag_file, tmp_path):
    blocker = tmp_path / "file-in-the-way"
    blocker.write_text("")
    same(load_dag_cached(dag_file, blocker / "cache"), load_dag(dag_file))


def test_a_second_run_does_not_even_import_the_yaml_parser(tmp_path):
    """End to end: `tuidag run` twice on the same file; the second start-up reads the cache, not the file."""
    path = tmp_path / "dag.yaml"
    path.write_text("tasks:\n  a: {run: 'true'}\n  b: {run: 'true', depends_on: a}\n")
    env = {**os.environ, "TUIDAG_STATE_DIR": str(tmp_path / "state")}
    command = [sys.executable, "-X", "importtime", "-m", "tuidag", "run", "--no-tui", "-q", str(path)]
    runs = [subprocess.run(command, capture_output=True, text=True, env=env, timeout=patience(60)) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0]
    imported = [
        {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")} for r in runs
    ]
    assert "yaml" in imported[0] and "yaml" not in imported[1]
    assert len(list((tmp_path / "state" / "cache").iterdir())) == 1


def test_a_record_marshal_cannot_store_leaves_nothing_behind(tmp_path):
    cache.write_entry(tmp_path / "cache" / "x.dag", ("key", object()))
    assert list((tmp_path / "cache").iterdir()) == []
