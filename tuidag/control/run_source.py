"""The one surface the terminal UI reads a run through: `RunSource`.

Every shipped way of viewing a run (`tuidag run`, `Dag.main()`, `attach`, `show`) reaches the UI through a
`RemoteRun` (control/remote.py), over the run's control socket or from its journal; tests and screenshots of frozen
scenes use a small in-memory source. The UI is typed against this Protocol, not against either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from ..engine.events import Event, TaskSnapshot
from ..model.spec import DagSpec
from ..store.runs import RunDir, RunStore
from ..store.task_story import TaskDefinition, TaskStory

Observer = Callable[[Event], None]
Usage = Mapping[str, tuple[float, int]]  # task -> (CPU %, bytes of memory) of its whole process tree


class RunSource(Protocol):
    """A run as a view sees it: what it is (the DAG, its folder), its state (snapshot, events, usage), whether it
    can be controlled (`live`), the controls, and how it ended."""

    dag: DagSpec
    run: RunDir
    store: RunStore
    started: float
    foreground: bool  # viewed from the terminal that started it (which stops it on a signal)
    engine_pid: int | None  # the process that runs it; None when no engine runs it (over, or a frozen scene)
    interrupted_by: str | None  # the signal that stopped it, if one did
    store_message: str | None  # why its record is incomplete (a full state dir), said in full
    lost: str | None  # why its engine went away without ending it (it died)
    not_answering: str | None  # why its engine, which holds the run, is taken as stopped (while it is)

    @property
    def live(self) -> bool:
        """An engine is there to take controls; False for the post-mortem view."""

    @property
    def finished(self) -> bool:
        """Nothing more will happen: every task ended, or the engine is gone."""

    @property
    def paused(self) -> bool: ...

    @property
    def watching(self) -> bool:
        """Under --watch: once its tasks have ended the run waits for a change, and is not over."""

    @property
    def max_parallel(self) -> int: ...

    @property
    def ended_at(self) -> float:
        """When the run ended (the post-mortem view's clock stops there)."""

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Call `observer(event)` for every event from now on, from another thread; returns the unsubscribe."""

    def snapshot(self) -> dict[str, TaskSnapshot]:
        """Every task's latest state (read after subscribing: nothing is missed)."""

    def usage(self) -> Usage:
        """The latest sample of the running tasks' usage: a new mapping per sample, never changed in place (a view
        compares it by identity to know whether a new one came)."""

    def definition(self, name: str) -> TaskDefinition | None:
        """What `name` was asked to do, as the run recorded it when it was created (None: a run recorded before
        definitions were kept)."""

    def story(self, name: str) -> TaskStory:
        """`name`'s attempts so far and its return value, from the run's journal (which the engine writes before any
        view hears of an event, so nothing shown is missing from it). It reads a file: a view asks when the user
        opens a task's detail, not for every frame."""

    def branch(self, name: str) -> list[str]:
        """What cancelling `name` would cancel (answered at once: the UI asks on its own thread)."""

    # The controls block until the engine answers: never call them on the UI thread.
    def cancel(self, name: str, reason: str = "") -> list[str]: ...

    def cancel_all(self, reason: str = "") -> list[str]: ...

    def stop(self) -> list[str]:
        """Cancel every task and end the run (as `tuidag stop` does)."""

    def rerun(self, name: str) -> list[str]:
        """RerunRefused says why not."""

    def pause(self) -> bool:
        """False when there was nothing left to pause."""

    def resume(self) -> None: ...

    def interrupt(self, signum: int) -> None:
        """Stop the run as that signal would stop it."""
