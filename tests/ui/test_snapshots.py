"""Snapshots of the run screen, made deterministic: the scheduler is never started, the app is fed synthetic engine
events, the clock is frozen, the run id is fixed and paths are relative to a temporary working directory.

Update after an intended change with `pytest tests/ui/test_snapshots.py --snapshot-update`, then look at the SVGs.
"""

from __future__ import annotations

import random

from frozen_runs import T0, feed, frozen_app, settled
from pilot_helpers import until

from tuidag.engine.events import RunEvent
from tuidag.model.state import TaskState
from tuidag.ui.app import TuidagApp
from tuidag.ui.run_model import UsageSample

S = TaskState
SIZE = (160, 45)
PIPELINE = {
    "fetch": "true",
    **{f"shard-{i}": {"run": "true", "depends_on": ["fetch"]} for i in range(4)},
    "merge": {"run": "true", "depends_on": [f"shard-{i}" for i in range(4)]},
    "report": {"run": "true", "depends_on": ["merge"]},
    "lint": "true",
    "docs": {"run": "true", "depends_on": ["lint"]},
}


FETCH_LOG = (
    "=== tuidag: fetch attempt 1 started at 2026-01-01T00:00:00 ===\nfetching 2000 rows\n"
    "downloading 100%\nfetched 2000 rows\n"
)


def in_progress(tmp_path, monkeypatch) -> TuidagApp:
    app = frozen_app(PIPELINE, tmp_path, monkeypatch, now=75.0, logs={"fetch": FETCH_LOG})
    feed(app, 1, "fetch", S.SUCCEEDED, attempt=1, exit_code=0, started_at=T0, finished_at=T0 + 12.3)
    feed(app, 2, "shard-0", S.SUCCEEDED, attempt=1, exit_code=0, started_at=T0 + 12.4, finished_at=T0 + 40.0)
    feed(app, 3, "shard-1", S.RUNNING, attempt=1, started_at=T0 + 12.4, pid=4242)
    feed(app, 4, "shard-2", S.RUNNING, attempt=2, started_at=T0 + 12.5, pid=4243)
    feed(app, 5, "shard-3", S.QUEUED)
    feed(app, 6, "lint", S.RETRYING, attempt=1, exit_code=1, started_at=T0 + 1.0, reason="exit code 1")
    app.engine_event(UsageSample({"shard-1": (97.4, 231 << 20), "shard-2": (12.0, 48 << 20)}))
    return app


class TestSnapshots:
    def test_run_in_progress(self, snap_compare, tmp_path, monkeypatch):
        app = in_progress(tmp_path, monkeypatch)
        assert snap_compare(app, terminal_size=SIZE, run_before=settled(app, "lint", S.RETRYING))

    def test_finished_run_with_failure_and_skipped_tasks(self, snap_compare, tmp_path, monkeypatch):
        log = (
            "=== tuidag: shard-2 attempt 2 started at 2026-01-01T00:00:14 ===\nprocessing shard 2\n"
            "error: loss is NaN at step 120\n"
        )
        app = frozen_app(PIPELINE, tmp_path, monkeypatch, now=500.0, logs={"shard-2": log})
        done = dict(attempt=1, exit_code=0)
        feed(app, 1, "fetch", S.SUCCEEDED, started_at=T0, finished_at=T0 + 12.3, **done)
        for i in (0, 1, 3):
            feed(app, 2 + i, f"shard-{i}", S.SUCCEEDED, started_at=T0 + 12.4, finished_at=T0 + 40 + i, **done)
        feed(
            app,
            6,
            "shard-2",
            S.FAILED,
            attempt=2,
            exit_code=3,
            started_at=T0 + 12.4,
            finished_at=T0 + 61.0,
            reason="exit code 3",
        )
        feed(app, 7, "merge", S.SKIPPED, reason="upstream 'shard-2' failed", finished_at=T0 + 61.0)
        feed(app, 8, "report", S.SKIPPED, reason="upstream 'shard-2' failed", finished_at=T0 + 61.0)
        feed(app, 9, "lint", S.SUCCEEDED, started_at=T0, finished_at=T0 + 2.0, **done)
        feed(
            app,
            10,
            "docs",
            S.CANCELLED,
            attempt=1,
            exit_code=-15,
            started_at=T0 + 2.0,
            finished_at=T0 + 30.0,
            reason="cancelled by user",
        )
        app.engine_event(RunEvent(11, T0 + 61.0, "finished", "failed"))

        async def run_before(pilot) -> None:
            await until(pilot, lambda: app.model.finished, what="finished applied")
            app.canvas.select("shard-2")

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)

    def test_cancel_confirmation(self, snap_compare, tmp_path, monkeypatch):
        app = in_progress(tmp_path, monkeypatch)

        async def run_before(pilot) -> None:
            await settled(app, "lint", S.RETRYING)(pilot)
            app.run_started = True  # as if it had started the (fake) run: the controls are live
            app.canvas.select("shard-1")

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before, press=["c"])

    def test_run_in_progress_at_80x24(self, snap_compare, tmp_path, monkeypatch):
        app = in_progress(tmp_path, monkeypatch)
        assert snap_compare(app, terminal_size=(80, 24), run_before=settled(app, "lint", S.RETRYING))

    def test_cancel_all_confirmation_at_80x24(self, snap_compare, tmp_path, monkeypatch):
        app = in_progress(tmp_path, monkeypatch)

        async def run_before(pilot) -> None:
            await settled(app, "lint", S.RETRYING)(pilot)
            app.run_started = True

        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before, press=["C"])

    def test_help_screen(self, snap_compare, tmp_path, monkeypatch):
        app = frozen_app(PIPELINE, tmp_path, monkeypatch, now=0.0)
        assert snap_compare(app, terminal_size=SIZE, press=["question_mark"])

    def test_large_dag_scrolled(self, snap_compare, tmp_path, monkeypatch):
        rng = random.Random(5)
        tasks: dict = {}
        names = [f"step-{i:03d}" for i in range(240)]
        for i, task in enumerate(names):
            layer = i // 30
            earlier = names[max(0, layer - 2) * 30 : layer * 30]
            deps = rng.sample(earlier, rng.randint(1, 2)) if layer else []
            tasks[task] = {"run": "true", "depends_on": deps}
        app = frozen_app(tasks, tmp_path, monkeypatch, now=30.0, name="large")
        for i, task in enumerate(names[:70]):
            feed(app, i + 1, task, S.SUCCEEDED, attempt=1, exit_code=0, started_at=T0, finished_at=T0 + 1 + i % 7)
        for i, task in enumerate(names[70:76]):
            feed(app, 100 + i, task, S.RUNNING, attempt=1, started_at=T0 + 20)
        presses = ["j"] * 12 + ["l"] * 4
        assert snap_compare(app, terminal_size=SIZE, press=presses, run_before=settled(app, names[75], S.RUNNING))
