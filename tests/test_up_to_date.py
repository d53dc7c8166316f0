"""Running only what needs to run, with real files and real processes: each task's command appends its name to a
marker file, so what ran is what the file says, not what tuidag claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slowness import patience
from tuidag.store.hashing import hash_bytes
from tuidag.store.journal import replay
from tuidag.store.runs import RunStore

REPO = Path(__file__).resolve().parent.parent

PIPELINE = """\
tasks:
  prepare:
    run: mkdir -p out && cp data/train.csv out/clean.csv && echo prepare >> ran
    inputs: [data/*.csv]
    outputs: [out/clean.csv]
  train:
    run: cat out/clean.csv params.txt > out/model.pt && echo train >> ran
    depends_on: [prepare]
    inputs: [params.txt]
    outputs: [out/model.pt]
  evaluate:
    run: wc -c < out/model.pt > out/score && echo evaluate >> ran
    depends_on: [train]
    outputs: [out/score]
  lint:
    run: mkdir -p out && cp params.txt out/lint && echo lint >> ran
    inputs: [params.txt]
    outputs: [out/lint]
  notify:
    run: echo notify >> ran
    depends_on: [evaluate]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def make_project(tmp_path: Path) -> Path:
    """A folder with PIPELINE as dag.yaml and the files it reads."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.csv").write_text("x,y\n1,2\n")
    (tmp_path / "params.txt").write_text("lr=0.1\n")
    (tmp_path / "dag.yaml").write_text(PIPELINE)
    return tmp_path


def run(folder: Path, *args: str, env: dict[str, str] | None = None, code: int = 0) -> str:
    """`tuidag run dag.yaml` there; returns the tasks whose commands ran, sorted."""
    marker = folder / "ran"
    marker.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", "dag.yaml", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    return " ".join(sorted(marker.read_text().split())) if marker.exists() else ""


def states(folder: Path) -> dict[str, tuple[str, str | None]]:
    """Each task's state and reason in the latest run, from its journal."""
    latest = RunStore(folder / ".tuidag").runs()[-1]
    return {name: (task.state.value, task.reason) for name, task in replay(latest.journal).tasks.items()}


def settle(*paths: Path) -> None:
    """Age files past the stat cache's one-second window (what a user's edit an hour ago looks like)."""
    for path in paths:
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - 5_000_000_000))


def test_a_second_run_with_nothing_changed_runs_only_the_tasks_without_outputs(project):
    assert run(project) == "evaluate lint notify prepare train"
    assert run(project) == "notify"
    found = states(project)
    assert found["train"][0] == "UP_TO_DATE" and found["train"][1].startswith("up to date (run ")
    assert found["notify"] == ("SUCCEEDED", "it declares no outputs")


def test_editing_an_input_runs_that_task_and_its_dependents_and_nothing_else(project):
    run(project)
    (project / "data" / "train.csv").write_text("x,y\n1,3\n")
    assert run(project) == "evaluate notify prepare train"
    found = states(project)
    assert found["lint"][0] == "UP_TO_DATE"
    assert found["prepare"][1].startswith("input data/train.csv changed (was ")
    assert found["evaluate"][1].startswith("output out/model.pt of its dependency train changed (was ")


def test_touching_an_input_without_changing_it_runs_nothing(project):
    run(project)
    settle(project / "params.txt")
    os.utime(project / "data" / "train.csv")  # now: modified, by its time, but not by its content
    assert run(project) == "notify"


def test_an_undeclared_os_variable_changes_nothing_and_a_declared_one_runs_the_task(project):
    run(project, env={"CUDA_VERSION": "11"})
    assert run(project, env={"CUDA_VERSION": "12"}) == "notify"
    text = (
        (project / "dag.yaml")
        .read_text()
        .replace("    outputs: [out/lint]", "    outputs: [out/lint]\n    env_inputs: [CUDA_VERSION]")
    )
    (project / "dag.yaml").write_text(text)
    assert run(project, env={"CUDA_VERSION": "12"}) == "lint notify"  # its definition changed
    assert run(project, env={"CUDA_VERSION": "12"}) == "notify"
    assert run(project, env={"CUDA_VERSION": "13"}) == "lint notify"
    assert states(project)["lint"][1] == "environment variable CUDA_VERSION changed"


def test_a_deleted_output_is_restored_byte_for_byte_without_running_its_command(project):
    run(project)
    model = project / "out" / "model.pt"
    made = model.read_bytes()
    model.unlink()
    assert run(project) == "notify"
    assert model.read_bytes() == made
    state, reason = states(project)["train"]
    assert state == "UP_TO_DATE"
    assert reason.startswith("output out/model.pt is missing: restored from the cache (run ")


def test_an_output_replaced_by_other_content_is_put_back_from_the_cache(project):
    run(project)
    score = project / "out" / "score"
    made = score.read_bytes()
    score.unlink()  # as a checkout of another branch replaces it
    score.write_text("tampered\n")
    assert run(project) == "notify"
    assert score.read_bytes() == made


def test_a_damaged_cache_entry_is_removed_and_the_task_runs(project):
    run(project)
    model = project / "out" / "model.pt"
    model.unlink()
    entries = [p for p in (project / ".tuidag" / "content").rglob("*") if p.is_file()]
    for entry in entries:  # every entry, whatever its links: none may be restored
        entry.unlink()
        entry.write_bytes(b"not what it was\n")
    assert run(project) == "notify train"  # it made the same bytes again: evaluate stays up to date
    assert states(project)["train"] == ("SUCCEEDED", "the cache entry of output out/model.pt was damaged (removed)")
    assert model.read_bytes() != b"not what it was\n"
    kept = project / ".tuidag" / "content" / hash_bytes(model.read_bytes())[:2] / hash_bytes(model.read_bytes())
    assert kept.read_bytes() == model.read_bytes()  # the damaged entry was replaced by the new attempt's output


def test_a_dependency_rewriting_its_output_with_the_same_bytes_does_not_run_its_dependents(project):
    run(project)
    text = (project / "dag.yaml").read_text().replace("cp data/train.csv", "cp -f data/train.csv")
    (project / "dag.yaml").write_text(text)  # prepare's command changed: it runs, and makes the same file
    assert run(project) == "notify prepare"
    assert states(project)["prepare"][1] == "its command changed"


def test_a_declared_output_the_command_does_not_make_fails_the_task(project):
    (project / "dag.yaml").write_text(PIPELINE.replace("outputs: [out/score]", "outputs: [out/score, out/plot.png]"))
    run(project, code=1)
    state, reason = states(project)["evaluate"]
    assert (state, reason) == ("FAILED", "declared output out/plot.png was not made")
    assert states(project)["notify"][0] == "SKIPPED"


def test_an_input_glob_that_matches_nothing_fails_the_task_without_running_it(project):
    (project / "data" / "train.csv").unlink()
    assert run(project, code=1) == "lint"
    assert states(project)["prepare"] == ("FAILED", "input 'data/*.csv' matches no file")


def test_a_task_without_outputs_always_runs(project):
    run(project)
    assert run(project) == "notify"
    assert run(project) == "notify"


def test_cache_false_runs_the_task_every_time(project):
    (project / "dag.yaml").write_text(PIPELINE.replace("outputs: [out/lint]", "outputs: [out/lint]\n    cache: false"))
    run(project)
    assert run(project) == "lint notify"
    assert states(project)["lint"] == ("SUCCEEDED", "cache: false")


def test_on_a_dask_cluster_up_to_date_tasks_are_decided_on_the_client_and_not_sent(project):
    pytest.importorskip("distributed")
    assert run(project, "--executor", "dask-local:1") == "evaluate lint notify prepare train"
    (project / "params.txt").write_text("lr=0.3\n")
    (project / "out" / "clean.csv").unlink()
    assert run(project, "--executor", "dask-local:1") == "evaluate lint notify train"
    found = states(project)
    assert found["prepare"][0] == "UP_TO_DATE" and "restored from the cache" in found["prepare"][1]


PYTHON_DAG = """\
from pathlib import Path

from tuidag import Dag

dag = Dag("py")


@dag.task(inputs=["raw.txt"], outputs=["count.txt"])
def count():
    with open("ran", "a") as marker:
        marker.write("count\\n")
    words = len(Path("raw.txt").read_text().split())
    Path("count.txt").write_text(str(words))
    return {"words": words}


@dag.task(depends_on=[count])
def report(ctx):
    with open("ran", "a") as marker:
        marker.write(f"report {ctx.results['count']['words']}\\n")


if __name__ == "__main__":
    dag.main()
"""


def test_an_up_to_date_callable_gives_its_dependents_the_value_it_returned_then(tmp_path):
    (tmp_path / "raw.txt").write_text("a b c\n")
    (tmp_path / "dag.py").write_text(PYTHON_DAG.replace('open("ran"', f"open({str(tmp_path / 'ran')!r}"))

    def python_run() -> str:
        (tmp_path / "ran").unlink(missing_ok=True)
        proc = subprocess.run(
            [sys.executable, str(tmp_path / "dag.py"), "--no-tui", "-q"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=patience(60),
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return (tmp_path / "ran").read_text()

    assert python_run() == "count\nreport 3\n"
    assert python_run() == "report 3\n"
    (tmp_path / "raw.txt").write_text("a b c d\n")
    assert python_run() == "count\nreport 4\n"


def test_the_headless_output_says_up_to_date_with_the_run_and_counts_it(project):
    run(project)
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "dag.yaml"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    (first,) = [r.run_id for r in RunStore(project / ".tuidag").runs()[:1]]
    assert f"[train]    --> up to date (run {first})\n" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("5 tasks: 4 up to date, 1 succeeded in ")
    assert proc.returncode == 0


def test_a_folder_output_is_restored_as_it_was_then(project):
    (project / "dag.yaml").write_text(
        "tasks:\n"
        "  split:\n"
        "    run: mkdir -p parts && cp data/train.csv parts/a.csv && echo b > parts/b.csv && echo split >> ran\n"
        "    inputs: [data]\n"
        "    outputs: [parts]\n"
    )
    run(project)
    (project / "parts" / "a.csv").unlink()
    (project / "parts" / "stray.csv").write_text("not made by split\n")
    assert run(project) == ""
    assert sorted(p.name for p in (project / "parts").iterdir()) == ["a.csv", "b.csv"]
    assert (project / "parts" / "a.csv").read_text() == "x,y\n1,2\n"


def test_the_cache_says_when_its_cap_made_it_drop_entries(project):
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", "dag.yaml"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO), "TUIDAG_CACHE_MAX_SIZE": "10"},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 0
    assert "tuidag: note: the content cache reached its cap of 10 B: removed its " in proc.stderr
    entries = [p for p in (project / ".tuidag" / "content").rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in entries) <= 10


def test_a_damaged_index_is_put_aside_with_a_warning_and_the_run_goes_on(project):
    run(project)
    (project / ".tuidag" / "index.sqlite").write_bytes(b"this is not a database, and much longer than its header" * 100)
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", "dag.yaml"],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 0, proc.stderr
    assert "index.sqlite: not an index tuidag can read (" in proc.stderr and "Traceback" not in proc.stderr
    assert run(project) == "notify"  # the new index has this run's successes


def test_a_matrix_s_instances_declare_their_own_outputs_and_each_is_up_to_date_on_its_own(tmp_path):
    """`${{ matrix.KEY }}` in `inputs` and `outputs`: each instance reads and makes its own files, so editing one
    instance's input runs that instance only."""
    (tmp_path / "dag.yaml").write_text(
        "tasks:\n"
        "  fit:\n"
        "    matrix: {seed: [1, 2]}\n"
        "    run: cp in-${{ matrix.seed }}.txt out-${{ matrix.seed }}.txt && echo fit-${{ matrix.seed }} >> ran\n"
        '    inputs: ["in-${{ matrix.seed }}.txt"]\n'
        '    outputs: ["out-${{ matrix.seed }}.txt"]\n'
    )
    for seed in (1, 2):
        (tmp_path / f"in-{seed}.txt").write_text(f"seed {seed}\n")
    assert run(tmp_path) == "fit-1 fit-2"
    assert run(tmp_path) == ""
    (tmp_path / "in-2.txt").write_text("seed 2, edited\n")
    assert run(tmp_path) == "fit-2"
    assert (tmp_path / "out-2.txt").read_text() == "seed 2, edited\n"
