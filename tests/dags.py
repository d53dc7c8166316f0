"""Building DAGs and runs in tests without going through a file format."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from slowness import patience
from tuidag.engine import LocalExecutor, Scheduler
from tuidag.engine.events import Event, TaskEvent
from tuidag.model import DagSpec, FailurePolicy, TaskSpec

#: A diamond (a -> b, c -> d) beside a lone task e.
DIAMOND = {
    "a": "true",
    "b": {"run": "true", "depends_on": ["a"]},
    "c": {"run": "true", "depends_on": ["a"]},
    "d": {"run": "true", "depends_on": ["b", "c"]},
    "e": "true",
}


def stubborn_trees(pids: Path) -> str:
    """YAML tasks `a` and `b` whose process trees resist a polite stop: `a` leaves a child that ignores SIGTERM, `b` a
    grandchild in a session of its own. Their three pids go to `pids`, one per line, once they run."""
    return f"""\
  a:
    run: sh -c 'trap "" TERM; echo $$ >> {pids}; sleep 60' & echo $$ >> {pids}; wait
  b:
    run: setsid sleep 60 & echo $! >> {pids}; wait
"""


def make_dag(
    tasks: dict[str, Any],
    *,
    name: str = "test",
    max_parallel: int = 4,
    workdir: Path | None = None,
    on_failure: str = "skip-downstream",
    kill_grace: float = 1.0,
    env: dict | None = None,
) -> DagSpec:
    """tasks: name -> command, or name -> dict(run=..., depends_on=[...], retries=..., ...)."""
    specs = {}
    for task_name, value in tasks.items():
        fields = {"run": value} if isinstance(value, str) else dict(value)
        fields["depends_on"] = tuple(fields.get("depends_on", ()))
        specs[task_name] = TaskSpec(name=task_name, **fields)
    return DagSpec(
        name=name,
        tasks=specs,
        max_parallel=max_parallel,
        on_failure=FailurePolicy(on_failure),
        kill_grace=kill_grace,
        env=env or {},
        workdir=workdir or Path.cwd(),
    )


class Recorder:
    """An observer that keeps every event, thread-safely, and can wait for conditions."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def task_events(self, task: str | None = None) -> list[TaskEvent]:
        with self._cond:
            return [e for e in self.events if isinstance(e, TaskEvent) and (task is None or e.task == task)]

    def states(self, task: str) -> list[str]:
        return [e.new.value for e in self.task_events(task) if e.is_transition]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Until `predicate` holds, for `timeout` seconds of a quiet machine (longer on a busy one)."""
        deadline = time.monotonic() + patience(timeout)
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("condition not reached before the deadline")
                self._cond.wait(left)

    def wait_state(self, task: str, state: str, timeout: float = 10.0) -> TaskEvent:
        def seen() -> bool:
            return any(e.task == task and e.new.value == state for e in self.events if isinstance(e, TaskEvent))

        self.wait_for(seen, timeout)
        return [e for e in self.task_events(task) if e.new.value == state][-1]


def local_executor(dag: DagSpec) -> LocalExecutor:
    return LocalExecutor()


#: What `start_run` runs attempts with: the Dask tests swap in a Dask executor to run the same tests on a cluster.
new_executor: Callable[[DagSpec], Any] = local_executor


def start_run(dag: DagSpec, tmp_path: Path, observers=(), **kwargs) -> tuple[Scheduler, Recorder]:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    scheduler = Scheduler(dag, new_executor(dag), f"test-{uuid.uuid4().hex[:12]}", logs, **kwargs)
    recorder = Recorder()
    scheduler.subscribe(recorder)
    for observer in observers:
        scheduler.subscribe(observer(scheduler))
    scheduler.start()
    return scheduler, recorder


@contextmanager
def served_run(dag: DagSpec, tmp_path: Path, gate: Path | None = None) -> Iterator[Any]:
    """A run (RunSession) started and served on its control socket in this process, as an engine serves it; however
    the test ends, `gate` is opened, every task cancelled and the run finished (the socket removed)."""
    from tuidag.launch import RunSession

    session = RunSession.create(dag, tmp_path / "state")
    session.serve_control()
    session.scheduler.start()
    try:
        yield session
    finally:
        if gate is not None:
            gate.touch()
        session.scheduler.cancel_all("test over")
        session.scheduler.wait(patience(30))
        session.finish()


def finish(scheduler: Scheduler, timeout: float = 30.0) -> dict:
    assert scheduler.wait(patience(timeout)), "run did not finish before the deadline"
    scheduler.close()
    return {name: snap.state.value for name, snap in scheduler.snapshot().items()}


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, poll: float = 0.02) -> None:
    """Until `predicate` holds, for `timeout` seconds of a quiet machine (longer on a busy one)."""
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the deadline")
        time.sleep(poll)


def alive(pid: int, create_time: float) -> bool:
    """Is this exact process (pid + create time) still running and not a zombie?"""
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def read_pids(path: Path) -> list[tuple[int, float]]:
    """Pids a task wrote to a file (one per line), with their create times, read while they are alive."""
    refs = []
    for line in path.read_text().split():
        pid = int(line)
        try:
            refs.append((pid, psutil.Process(pid).create_time()))
        except psutil.Error:
            pass
    return refs
