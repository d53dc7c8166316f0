"""Matrix tasks run for real: the instances a matrix makes, their values, the order dependencies impose (from
timestamps the tasks record), a group's max_parallel, and controlling a group from the command line (cancel kills
every instance's tree, checked with psutil; rerun runs only the instances that failed), resume and Dask."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from command import tuidag
from dags import alive, read_pids, wait_until
from slowness import patience
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli

REPO = Path(__file__).resolve().parent.parent

#: A task line that records when it ran: `NAME START END` in stamps/, one file per task.
STAMP = 's=$(date +%s.%N); {work}; echo "$TUIDAG_TASK $s $(date +%s.%N)" > "{stamps}/$TUIDAG_TASK"'


def stamps(folder: Path) -> dict[str, tuple[float, float]]:
    spans = {}
    for path in folder.iterdir():
        name, start, end = path.read_text().split()
        spans[name] = (float(start), float(end))
    return spans


def most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    now = peak = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        now += step
        peak = max(peak, now)
    return peak


def test_a_2x3_matrix_with_include_and_exclude_runs_exactly_its_instances_with_their_values(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""\
tasks:
  train:
    matrix:
      lr: [0.01, 0.1]
      seed: [1, 2, 3]
      include:
        - {{lr: 0.1, seed: 2, big: "yes"}}
        - {{lr: 1.0, seed: 7}}
      exclude:
        - {{lr: 0.01, seed: 3}}
    run: echo "$TUIDAG_MATRIX_LR $TUIDAG_MATRIX_SEED ${{{{ matrix.big }}}}" > "{out}/$TUIDAG_TASK"
"""
    )
    proc = tuidag("run", "--no-tui", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {path.name: path.read_text().strip() for path in out.iterdir()}
    assert got == {
        "train[lr=0.01,seed=1]": "0.01 1",
        "train[lr=0.01,seed=2]": "0.01 2",
        "train[lr=0.1,seed=1]": "0.1 1",
        "train[lr=0.1,seed=2]": "0.1 2 yes",
        "train[lr=0.1,seed=3]": "0.1 3",
        "train[lr=1.0,seed=7]": "1.0 7",
    }
    assert "\ntrain: 6 of 6 done\n" in proc.stdout
    logs = {path.name for path in next((tmp_path / ".tuidag" / "runs").iterdir()).joinpath("logs").iterdir()}
    assert logs == {f"{name}.log" for name in got}  # each instance its own log, named after it


def test_fan_in_waits_for_every_instance_and_pairing_only_for_the_shared_key(tmp_path):
    """eval[seed=1] starts once the seed=1 trainings end, while the slow seed=2 ones still run; report waits for all."""
    box = tmp_path / "stamps"
    box.mkdir()
    dag = tmp_path / "dag.yaml"
    train = STAMP.format(work="sleep $((${{ matrix.seed }} * ${{ matrix.seed }} - 1))", stamps=box)
    dag.write_text(
        f"""\
max_parallel: 8
tasks:
  train:
    matrix: {{lr: [a, b], seed: [1, 2]}}
    run: '{train}'
  eval:
    matrix: {{seed: [1, 2]}}
    depends_on: [train]
    run: '{STAMP.format(work="true", stamps=box)}'
  report:
    depends_on: [train]
    run: '{STAMP.format(work="true", stamps=box)}'
"""
    )
    proc = tuidag("run", "--no-tui", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spans = stamps(box)
    for seed in (1, 2):
        ended = max(spans[f"train[lr={lr},seed={seed}]"][1] for lr in "ab")
        assert spans[f"eval[seed={seed}]"][0] >= ended
    slow_end = min(spans[f"train[lr={lr},seed=2]"][1] for lr in "ab")
    assert spans["eval[seed=1]"][1] < slow_end  # paired, not fanned in: it did not wait for seed=2
    assert spans["report"][0] >= max(end for name, (_, end) in spans.items() if name.startswith("train["))


def test_a_group_max_parallel_is_respected(tmp_path):
    box = tmp_path / "stamps"
    box.mkdir()
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""\
max_parallel: 8
tasks:
  train:
    matrix: {{i: [1, 2, 3, 4, 5, 6]}}
    max_parallel: 2
    run: '{STAMP.format(work="sleep 0.4", stamps=box)}'
  other:
    run: '{STAMP.format(work="sleep 0.4", stamps=box)}'
"""
    )
    proc = tuidag("run", "--no-tui", str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    spans = stamps(box)
    train = [span for name, span in spans.items() if name.startswith("train[")]
    assert len(train) == 6
    assert most_at_once(train) == 2  # never more than the group's limit, and the limit was used
    assert most_at_once(list(spans.values())) == 3  # the limit is the group's: `other` ran beside two instances


def start_detached(tmp_path: Path, text: str) -> tuple[str, int]:
    dag = tmp_path / "dag.yaml"
    dag.write_text(text)
    proc = tuidag("run", str(dag), "-d", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    return first.split()[2], int(first.rsplit("engine pid ", 1)[1].rstrip(")"))


def summary(tmp_path: Path, run_id: str) -> dict:
    run = RunStore(tmp_path / ".tuidag").get(run_id)
    wait_until(lambda: run.summary.exists(), timeout=30)
    return json.loads(run.summary.read_text())


def test_cancel_of_a_group_kills_every_instance_tree_and_nothing_else(tmp_path):
    pids = tmp_path / "pids"
    other = tmp_path / "other"
    run_id, engine = start_detached(
        tmp_path,
        f"""\
max_parallel: 8
tasks:
  train:
    matrix: {{seed: [1, 2, 3]}}
    run: sh -c 'sleep 60' & echo $! >> {pids}; wait
  other:
    run: sleep 60 & echo $! > {other}; wait
""",
    )
    try:
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3 and other.exists(), timeout=30)
        trees = read_pids(pids)
        bystander = read_pids(other)
        assert len(trees) == 3 and all(alive(*ref) for ref in trees)
        proc = tuidag("cancel", "train", "--state-dir", str(tmp_path / ".tuidag"), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "train[seed=1]" in proc.stdout and "train[seed=3]" in proc.stdout
        wait_until(lambda: not any(alive(*ref) for ref in trees), timeout=20)
        assert all(alive(*ref) for ref in bystander)  # cancelling the group touched no other task
    finally:
        tuidag("stop", "--state-dir", str(tmp_path / ".tuidag"), cwd=tmp_path)
    outcome = summary(tmp_path, run_id)
    assert outcome["counts"] == {"CANCELLED": 4}
    wait_until(lambda: not psutil.pid_exists(engine) or psutil.Process(engine).status() == psutil.STATUS_ZOMBIE)


def test_cancel_of_a_selection_kills_the_trees_of_the_instances_it_selects_and_no_others(tmp_path):
    run_id, _ = start_detached(
        tmp_path,
        f"""\
max_parallel: 8
tasks:
  train:
    matrix: {{seed: [1, 2], lr: [x, y]}}
    run: sh -c 'sleep 60' & echo $! >> {tmp_path}/pids-${{{{ matrix.seed }}}}; wait
""",
    )
    state = ["--state-dir", str(tmp_path / ".tuidag")]
    try:
        wait_until(lambda: all(len(lines_of(tmp_path / f"pids-{seed}")) == 2 for seed in (1, 2)), timeout=30)
        chosen, kept = read_pids(tmp_path / "pids-2"), read_pids(tmp_path / "pids-1")
        proc = tuidag("cancel", "train[seed=2]", *state, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "train[seed=2,lr=x]" in proc.stdout and "train[seed=2,lr=y]" in proc.stdout
        assert "seed=1" not in proc.stdout
        wait_until(lambda: not any(alive(*ref) for ref in chosen), timeout=20)
        assert all(alive(*ref) for ref in kept)
        nothing = tuidag("cancel", "train[seed=9]", *state, cwd=tmp_path)
        assert nothing.returncode == 1 and "no task named 'train[seed=9]'" in nothing.stderr
        assert tuidag("cancel", "nope[seed=1]", *state, cwd=tmp_path).returncode == 2
    finally:
        tuidag("stop", *state, cwd=tmp_path)
    assert summary(tmp_path, run_id)["counts"] == {"CANCELLED": 4}


def lines_of(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_rerun_of_a_group_runs_again_only_its_failed_instances(tmp_path):
    ran = tmp_path / "ran"
    ok = tmp_path / "ok"
    release = tmp_path / "release"
    run_id, _ = start_detached(
        tmp_path,
        f"""\
tasks:
  train:
    matrix: {{seed: [1, 2, 3]}}
    run: echo $TUIDAG_TASK >> {ran}; test ${{{{ matrix.seed }}}} != 2 || test -e {ok}
  eval:
    depends_on: train
    run: echo eval >> {ran}
  hold:
    run: while [ ! -e {release} ]; do sleep 0.05; done
""",
    )
    state = ["--state-dir", str(tmp_path / ".tuidag")]

    def rerun_train() -> subprocess.CompletedProcess:
        """`tuidag rerun train` once the failure is recorded (until then there is nothing to re-run)."""
        answers = []
        wait_until(
            lambda: answers.append(tuidag("rerun", "train", *state, cwd=tmp_path)) or answers[-1].returncode == 0
        )
        return answers[-1]

    try:
        wait_until(lambda: ran.exists() and len(ran.read_text().split()) == 3, timeout=30)
        proc = rerun_train()
        assert proc.stdout.endswith(": re-running 2 tasks: train[seed=2], eval\n")
        wait_until(lambda: len(ran.read_text().split()) == 4, timeout=30)
        ok.touch()
        proc = rerun_train()
        assert proc.stdout.endswith(": re-running 2 tasks: train[seed=2], eval\n")
        wait_until(lambda: len(ran.read_text().split()) == 6, timeout=30)
    finally:
        release.touch()
    outcome = summary(tmp_path, run_id)
    assert outcome["counts"] == {"SUCCEEDED": 5}
    lines = ran.read_text().split()
    assert sorted(lines) == ["eval", "train[seed=1]", *["train[seed=2]"] * 3, "train[seed=3]"]
    assert lines[-1] == "eval"  # the fan-in, skipped while an instance had failed, ran once they all succeeded


def test_resume_reuses_each_instance_that_succeeded(tmp_path):
    ran = tmp_path / "ran"
    ok = tmp_path / "ok"
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        f"""\
tasks:
  train:
    matrix: {{seed: [1, 2, 3]}}
    run: echo $TUIDAG_TASK >> {ran}; test ${{{{ matrix.seed }}}} != 2 || test -e {ok}
  eval:
    depends_on: train
    run: echo eval >> {ran}
"""
    )
    first = tuidag("run", "--no-tui", str(dag), cwd=tmp_path)
    assert first.returncode == 1 and "train: 2 of 3 done, 1 failed" in first.stdout
    ok.touch()
    again = tuidag("run", "--no-tui", "--resume", str(dag), cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    lines = ran.read_text().split()
    assert sorted(lines[:3]) == ["train[seed=1]", "train[seed=2]", "train[seed=3]"]
    assert lines[3:] == ["train[seed=2]", "eval"]  # only the failed instance ran again, then what needed it


def test_a_python_task_downstream_of_a_matrix_gets_its_results_by_value(tmp_path):
    script = tmp_path / "sweep.py"
    result = tmp_path / "result.json"
    script.write_text(
        f"""\
import json
from tuidag import Dag

dag = Dag("sweep")

@dag.task(matrix={{"lr": [0.5, 2.0], "seed": [1, 2]}})
def train(ctx):
    return ctx.matrix["lr"] * ctx.matrix["seed"]

@dag.task(depends_on=[train])
def pick(ctx):
    scores = ctx.results["train"]
    with open({str(result)!r}, "w") as f:
        json.dump(sorted([list(key), value] for key, value in scores.items()), f)

if __name__ == "__main__":
    dag.main()
"""
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(script), "--no-tui"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=patience(120),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(result.read_text()) == [[[0.5, 1], 0.5], [[0.5, 2], 1.0], [[2.0, 1], 2.0], [[2.0, 2], 4.0]]


def test_the_dask_local_executor_runs_a_matrix(tmp_path):
    """Shell and callable instances on Dask workers: their values, a group's limit, results by value downstream."""
    pytest.importorskip("distributed")
    out = tmp_path / "out"
    out.mkdir()
    script = tmp_path / "sweep.py"
    script.write_text(
        f"""\
import json
from tuidag import Dag

dag = Dag("sweep")
dag.shell(
    "prep", 'echo $TUIDAG_MATRIX_LR-${{{{ matrix.seed }}}} > "{out}/$TUIDAG_TASK"',
    matrix={{"lr": [1, 2], "seed": [1, 2]}}, max_parallel=1,
)

@dag.task(matrix={{"lr": [1, 2]}}, depends_on=["prep"])
def train(ctx):
    return ctx.matrix["lr"] * 10

@dag.task(depends_on=[train])
def pick(ctx):
    with open({str(out / "picked")!r}, "w") as f:
        json.dump(sorted(ctx.results["train"].items()), f)

if __name__ == "__main__":
    dag.main()
"""
    )
    proc = tuidag("run", "--no-tui", "--executor", "dask-local:2", str(script), cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    made = {path.name: path.read_text().strip() for path in out.iterdir() if path.name.startswith("prep")}
    assert made == {f"prep[lr={a},seed={b}]": f"{a}-{b}" for a in (1, 2) for b in (1, 2)}
    assert json.loads((out / "picked").read_text()) == [[1, 10], [2, 20]]
    assert "prep: 4 of 4 done" in proc.stdout and "train: 2 of 2 done" in proc.stdout


def test_a_skypilot_task_file_with_num_jobs_runs_one_instance_per_rank(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    task = tmp_path / "shard.yaml"
    task.write_text(
        f'name: shard\nrun: echo "$SKYPILOT_JOB_RANK/$SKYPILOT_NUM_JOBS $SKYPILOT_TASK_ID" > "{out}/$TUIDAG_TASK"\n'
    )
    proc = tuidag("run", "--no-tui", str(task), "--num-jobs", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {path.name: path.read_text().split() for path in out.iterdir()}
    assert {name: rank for name, (rank, _) in got.items()} == {
        "shard[rank=0]": "0/3",
        "shard[rank=1]": "1/3",
        "shard[rank=2]": "2/3",
    }
    run_id = next((tmp_path / ".tuidag" / "runs").iterdir()).name
    # each job its own SKYPILOT_TASK_ID, as SkyPilot's `sky-managed-<time>_<job name>_<job id>-<task>`
    assert sorted(task_id for _, task_id in got.values()) == [f"sky-managed-{run_id}_shard_{r}-0" for r in range(3)]
    assert "\nshard: 3 of 3 done\n" in proc.stdout
    two = tmp_path / "two.yaml"
    two.write_text("tasks:\n  a: {run: 'true'}\n  b: {run: 'true'}\n")
    proc = tuidag("run", "--no-tui", str(two), "--num-jobs", "3", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "tuidag: --num-jobs runs one task N times (as `sky jobs launch --num-jobs`): two has 2 tasks\n"
    )
    assert not (tmp_path / ".tuidag" / "runs").exists() or len(list((tmp_path / ".tuidag" / "runs").iterdir())) == 1


def test_a_python_exclude_that_matches_nothing_is_said_as_a_note(tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text(
        "from tuidag import Dag\n"
        "dag = Dag('sweep')\n"
        "dag.shell('t', 'true', matrix={'a': [1, 2], 'exclude': [{'a': 3}]})\n"
        "if __name__ == '__main__':\n"
        "    dag.main()\n"
    )
    note = f"{script}:3:1: note: task 't': exclude {{a=3}} matches no combination\n"
    proc = tuidag("run", "--no-tui", str(script), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == note, proc.stderr
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(script), "--no-tui"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 0 and proc.stderr == note, proc.stderr


def test_validate_says_how_many_instances_each_matrix_makes():
    proc = tuidag("validate", "demos/sweep.yaml", cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout
        == "demos/sweep.yaml: ok: sweep, 10 tasks, 13 edges (matrix train: 5 instances; eval: 3 instances)\n"
    )
