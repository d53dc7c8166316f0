"""The demos show what their comments say, run by the shell tuidag runs tasks with (`/bin/sh`, often dash)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from slowness import patience
from tuidag.model.loader import load_dag

REPO = Path(__file__).resolve().parent.parent


def test_the_pipeline_demos_shards_take_random_durations(tmp_path):
    """Each shard sleeps a random 0.3-0.8 s per step. `$RANDOM` is bash's: under dash it is empty, so every step of
    every shard slept 0.3 s and the shards always finished together. The steps' `sleep` is replaced by one that
    records its argument, so the 16 draws are read without waiting for them."""
    dag = load_dag(REPO / "demos" / "pipeline.yaml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorder = bin_dir / "sleep"
    recorder.write_text('#!/bin/sh\necho "$1" >> "$SLEEP_LOG"\n')
    recorder.chmod(0o755)
    (tmp_path / "tuidag-demo-r.rows").write_text("".join(f"{i}\n" for i in range(1, 21)))
    log = tmp_path / "sleeps"
    for name in ["shard-0", "shard-1", "shard-2", "shard-3"]:
        task = dag.tasks[name]
        env = {
            **os.environ,
            **dag.env,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "SLEEP_LOG": str(log),
            "TMPDIR": str(tmp_path),
            "TUIDAG_RUN_ID": "r",
            "TUIDAG_TASK": name,
        }
        proc = subprocess.run(
            [task.shell, "-c", task.run], env=env, capture_output=True, text=True, timeout=patience(30)
        )
        assert proc.returncode == 0, proc.stderr
        assert f"shard {name[-1]} done" in proc.stdout
    sleeps = [float(line) for line in log.read_text().split()]
    assert len(sleeps) == 16
    assert all(0.3 <= seconds <= 0.8 for seconds in sleeps)
    assert len(set(sleeps)) > 1  # 16 draws of 6 values all alike: once in 470 billion runs


def test_the_sweep_demo_runs_its_grid_less_the_exclude_plus_the_include():
    """What demos/sweep.yaml's comments promise: a 2x3 grid less one combination, one with 5 epochs, eval paired
    with train by seed, report after every eval, and at most 3 trainings at once."""
    dag = load_dag(REPO / "demos" / "sweep.yaml")
    train = dag.groups["train"].instances
    assert train == (
        "train[lr=0.01,seed=1]",
        "train[lr=0.01,seed=2]",
        "train[lr=0.1,seed=1]",
        "train[lr=0.1,seed=2]",
        "train[lr=0.1,seed=3]",
    )
    assert [dag.tasks[name].env["EPOCHS"] for name in train] == ["", "", "5", "", ""]
    assert dag.tasks["eval[seed=2]"].depends_on == ("train[lr=0.01,seed=2]", "train[lr=0.1,seed=2]")
    assert dag.tasks["report"].depends_on == dag.groups["eval"].instances
    assert dag.resources == {"train[*]": 3}
