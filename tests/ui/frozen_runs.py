"""Runs for deterministic snapshots: no engine runs them, the app is fed synthetic engine events, the clock is
frozen, the run id is fixed and paths are relative to a temporary working directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pilot_helpers import until

from dags import make_dag
from tuidag.control.client import NotLive
from tuidag.control.run_source import Observer, Usage
from tuidag.engine.events import TaskEvent, TaskSnapshot
from tuidag.model.spec import DagSpec
from tuidag.model.state import TaskState
from tuidag.store.runs import RunDir, RunStore
from tuidag.store.task_story import TaskDefinition, TaskStory, definition_from_spec, task_story
from tuidag.ui.app import TuidagApp

T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC
RUN_ID = "20260101-000000-000-snap"


class FrozenRun:
    """An in-memory `RunSource` no engine runs: every task as given (pending unless fed otherwise through the app's
    `engine_event`), no usage, and controls that say there is no engine to take them."""

    def __init__(
        self,
        dag: DagSpec,
        run: RunDir,
        store: RunStore,
        started: float,
        snapshots: dict[str, TaskSnapshot] | None = None,
    ):
        self.dag, self.run, self.store, self.started = dag, run, store, started
        self.foreground = True
        self.engine_pid: int | None = None
        self.interrupted_by: str | None = None
        self.store_message: str | None = None
        self.lost: str | None = None
        self.not_answering: str | None = None
        self._snaps = snapshots or {name: TaskSnapshot(name, TaskState.PENDING) for name in dag.topological_order}
        self._usage: Usage = {}

    live = True
    finished = False
    paused = False
    watching = False

    @property
    def max_parallel(self) -> int:
        return self.dag.max_parallel

    @property
    def ended_at(self) -> float:
        return self.started

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        return lambda: None

    def snapshot(self) -> dict[str, TaskSnapshot]:
        return dict(self._snaps)

    def usage(self) -> Usage:
        return self._usage

    def definition(self, name: str) -> TaskDefinition | None:
        return definition_from_spec(self.dag, name, self.run.run_id)

    def story(self, name: str) -> TaskStory:
        return task_story(self.run.journal, name)

    def branch(self, name: str) -> list[str]:
        return [n for n in [name, *self.dag.descendants(name)] if not self._snaps[n].state.terminal]

    def _no_engine(self, *args, **kwargs):
        raise NotLive("no engine runs this run")

    cancel = cancel_all = stop = rerun = pause = resume = interrupt = _no_engine


def frozen_app(
    tasks: dict | DagSpec,
    tmp_path: Path,
    monkeypatch,
    *,
    now: float,
    name: str = "pipeline",
    logs: dict[str, str] | None = None,
) -> TuidagApp:
    """The app on a run no engine runs: `tasks` as `make_dag` takes them, or a loaded `DagSpec`."""
    monkeypatch.chdir(tmp_path)
    dag = tasks if isinstance(tasks, DagSpec) else make_dag(tasks, name=name, workdir=tmp_path)
    run = RunDir(RUN_ID, Path("state") / "runs" / RUN_ID)
    run.logs.mkdir(parents=True)
    for task, text in (logs or {}).items():
        run.log_path(task).write_text(text)
    return TuidagApp(FrozenRun(dag, run, RunStore(Path("state")), T0), start=False, clock=lambda: T0 + now)


def feed(app: TuidagApp, seq: int, name: str, state: TaskState, **fields) -> None:
    app.engine_event(TaskEvent(seq, T0, None, TaskSnapshot(name, state, **fields)))


def settled(app: TuidagApp, name: str, state: TaskState):
    async def run_before(pilot) -> None:
        await until(pilot, lambda: app.model.snapshots[name].state is state, what="events applied")

    return run_before
