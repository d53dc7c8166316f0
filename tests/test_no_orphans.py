"""No process of a run survives, however the run or the task ends, whatever the task's tree does.

Every combination of (way of ending) x (kind of tree) runs against real processes. A process counts as surviving if
its pid is alive with the create time recorded at start (a recycled pid never counts). The check happens at the
moment tuidag reports the task CANCELLED/FAILED, or the moment the tuidag process exits: no grace afterwards.
The UI ways of ending (c, C, q, closing the terminal) are covered in tests/ui/.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from dags import alive, make_dag, read_pids, start_run, wait_until
from slowness import patience
from test_cli import write
from test_escapes import CGROUPS
from trees import TREE_IDS, TREES

GRACE = 0.3


def started(pids, tree) -> list[tuple[int, float]]:
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) >= tree.processes, timeout=15)
    refs = read_pids(pids)
    assert len(refs) == tree.processes, f"expected {tree.processes} live processes, got {len(refs)}"
    return refs


def survivors(refs) -> list[int]:
    return [pid for pid, ctime in refs if alive(pid, ctime)]


@pytest.mark.parametrize("tree", TREES, ids=TREE_IDS)
@pytest.mark.parametrize("way", ["cancel-branch", "cancel-all", "timeout", "cancel-all-policy"])
def test_engine_endings(tmp_path, tree, way):
    if tree.escapes and not CGROUPS:
        pytest.skip(
            "without cgroups, a process that left the group and session and dropped the tags ends with the "
            "run, not with its attempt (test_escapes.py checks that)"
        )
    pids = tmp_path / "pids"
    task = {"run": tree.command(pids)}
    tasks = {
        "root": "true",
        "victim": {**task, "depends_on": ["root"]},
        "downstream": {"run": "true", "depends_on": ["victim"]},
    }
    if way == "timeout":
        # generous: the fifty-children tree must finish starting first
        task_timeout = 3.0
        tasks["victim"]["timeout"] = task_timeout
    go = tmp_path / "go"
    if way == "cancel-all-policy":  # fails once the test has recorded the tree
        tasks["failing"] = {"run": f"until [ -e {go} ]; do sleep 0.02; done; exit 1"}
    policy = "cancel-all" if way == "cancel-all-policy" else "skip-downstream"
    dag = make_dag(tasks, on_failure=policy, kill_grace=GRACE, max_parallel=4)
    scheduler, rec = start_run(dag, tmp_path)
    refs = started(pids, tree)
    go.touch()
    if way == "cancel-branch":
        scheduler.cancel("victim")
    elif way == "cancel-all":
        scheduler.cancel_all()
    expected = "FAILED" if way == "timeout" else "CANCELLED"
    event = rec.wait_state("victim", expected, timeout=20)
    assert survivors(refs) == [], f"survived {expected}: {survivors(refs)}"
    if way == "timeout":
        assert event.snapshot.reason == "timeout"
    assert scheduler.wait(patience(20))
    scheduler.close()
    assert scheduler.snapshot()["downstream"].state.value in ("CANCELLED", "SKIPPED")


@pytest.mark.parametrize("tree", TREES, ids=TREE_IDS)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_signals_to_headless_tuidag(tmp_path, tree, sig):
    pids = tmp_path / "pids"
    dag = write(
        tmp_path / "dag.yaml", f"kill_grace: {GRACE}\ntasks:\n  victim:\n    run: {_yaml_str(tree.command(pids))}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        refs = started(pids, tree)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=patience(30))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert survivors(refs) == []


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
