"""Runs for deterministic snapshots: the scheduler is never started, the app is fed synthetic engine events, the
clock is frozen, the run id is fixed and paths are relative to a temporary working directory."""
from __future__ import annotations

from pathlib import Path

from dags import make_dag
from pilot_helpers import until
from tuidag.engine.events import TaskEvent, TaskSnapshot
from tuidag.launch import RunSession
from tuidag.model.spec import DagSpec
from tuidag.model.state import TaskState
from tuidag.store.runs import RunDir
from tuidag.ui.app import TuidagApp

T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC
RUN_ID = "20260101-000000-000-snap"


def frozen_app(tasks: dict | DagSpec, tmp_path: Path, monkeypatch, *, now: float, name: str = "pipeline",
               logs: dict[str, str] | None = None) -> TuidagApp:
    """The app on a run that never starts: `tasks` as `make_dag` takes them, or a loaded `DagSpec`."""
    monkeypatch.chdir(tmp_path)
    dag = tasks if isinstance(tasks, DagSpec) else make_dag(tasks, name=name, workdir=tmp_path)
    session = RunSession.create(dag, Path("state"))
    session.finish()  # never started: only its model and a fixed, relative run folder are used
    run = RunDir(RUN_ID, Path("state") / "runs" / RUN_ID)
    run.logs.mkdir(parents=True)
    for task, text in (logs or {}).items():
        run.log_path(task).write_text(text)
    session.run, session.started = run, T0
    return TuidagApp(session, start=False, clock=lambda: T0 + now, usage_interval=None)


def feed(app: TuidagApp, seq: int, name: str, state: TaskState, **fields) -> None:
    app.engine_event(TaskEvent(seq, T0, None, TaskSnapshot(name, state, **fields)))


def settled(app: TuidagApp, name: str, state: TaskState):
    async def run_before(pilot) -> None:
        await until(pilot, lambda: app.model.snapshots[name].state is state, what="events applied")
    return run_before
