"""A cancel that ends the run is still answered, and cancelling a big branch is linear work."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from dags import make_dag, wait_until
from slowness import patience
from tuidag.control.client import ControlClient
from tuidag.launch import RunSession

REPO = Path(__file__).resolve().parent.parent


def test_a_cancel_that_ends_the_run_is_answered_before_the_channel_closes(tmp_path):
    """The engine closes the channel once every task has ended, and the cancel that ended them may still be building
    its reply: the reply was lost ("run ... ended before it answered", exit 2) though everything was cancelled. Here
    the cancel returns only once the engine has begun closing the channel."""
    session = RunSession.create(
        make_dag({"a": "sleep 600", "b": {"run": "true", "depends_on": ["a"]}}), tmp_path / "state"
    )
    session.serve_control()
    session.scheduler.start()
    closing = threading.Event()
    close, cancel = session.control.close, session.scheduler.cancel

    def close_noting(*args, **kwargs):
        closing.set()
        close(*args, **kwargs)

    def cancel_then_wait_for_the_close(*args, **kwargs):
        affected = cancel(*args, **kwargs)
        assert closing.wait(patience(10)), "the run did not end after its last task was cancelled"
        # Until the channel stopped serving (it had, at once, when it closed without waiting for this reply); while
        # the engine rightly waits for this reply, it doesn't stop, and this gives up after a second.
        session.control.transport.stopped.wait(1.0)
        return affected

    session.control.close = close_noting
    session.scheduler.cancel = cancel_then_wait_for_the_close

    def engine_main():  # what the engine's main thread does: wait for the end of the run, then finish it
        session.scheduler.wait()
        session.finish()

    wait_until(lambda: session.scheduler.snapshot()["a"].state.value == "RUNNING")
    engine = threading.Thread(target=engine_main)
    engine.start()
    try:
        with ControlClient(session.run, timeout=patience(20)) as client:
            answer = client.request("cancel", tasks=["a"])
        assert answer["ok"] and answer["changed"] == ["a", "b"]
    finally:
        session.scheduler.cancel_all("test over")
        engine.join(patience(30))
    assert not engine.is_alive()


def test_cancelling_two_branches_of_30000_tasks_answers_with_every_task(tmp_path):
    """Two running roots with 30,000 dependents each: collecting the cancelled tasks with a list's `in` took 18 s,
    past the moment the run ended, so the CLI said the run ended before it answered (exit 2).
    benchmarks/cancel_bench.py measures the time it takes."""
    dag = tmp_path / "big.yaml"
    lines = ["max_parallel: 4", "tasks:", "  A: {run: sleep 600}", "  B: {run: sleep 600}"]
    for root in "AB":
        lines += [f"  {root.lower()}{i:05d}: {{run: 'true', depends_on: {root}}}" for i in range(30_000)]
    dag.write_text("\n".join(lines) + "\n")
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def tuidag(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tuidag", *args, "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=patience(120),
            env=env,
            cwd=tmp_path,
        )

    started = tuidag("run", "-d", str(dag))
    assert started.returncode == 0, started.stderr
    try:
        wait_until(lambda: len(list(state.glob("runs/*/logs/[AB].log"))) == 2, timeout=120, poll=0.2)
        cancel = tuidag("cancel", "A", "B")
        assert cancel.returncode == 0, cancel.stderr
        assert "cancelling 60,002 tasks: A, a00000, a00001," in cancel.stdout + cancel.stderr
    finally:
        tuidag("stop")
    wait_until(lambda: "cancelled=60002" in tuidag("runs").stdout, timeout=60, poll=0.5)
