"""`--watch` on a run: the file watcher (watch.py) wired to the run, and the DAG file reloaded when it is edited.

A change to a task's inputs starts a round (engine/rounds.py). A change to the DAG file loads it again, with what
the command line added when the run started (`--env`, `--resources`, `-J`: the `load` the run was given):
- a file with errors keeps the run's DAG as it was; the located errors go to the run as a `dag-error` event, which
  the journal records, the headless output prints (`tuidag: FILE:LINE:COL: ... (keeping the DAG as it was)`) and a
  viewer shows until an edit loads;
- a file that loads is what the run goes on with (model/dag_diff.py: its tasks and those it removed): a `dag` event
  records it, then new and changed tasks run with their downstream, removed ones are cancelled, and what is watched
  follows its inputs (engine/dag_reload.py). An edit that changes no task starts nothing.
Inputs changed in the same batch as the DAG file run in the same round, by the DAG as it then is.

What can't change while the run goes on (its slot capacities, its executor, a job group) is refused as an error
would be: the run must be started again for that. `max_parallel` and `kill_grace` stay as the run began.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .model.dag_diff import diff, fixed_settings_changed
from .model.errors import DagError, DagErrors
from .model.spec import DagSpec
from .store.run_dag import dag_record
from .watch import InputWatcher, WatchPlan, trigger_text


class LiveDag:
    """The watcher of one run and what its DAG file's edits do to it."""

    def __init__(self, session: Any, load: Callable[[], DagSpec] | None):
        """`session`: the run (launch.RunSession). `load()` reads the DAG file again as the run was started with it
        (DagErrors when it has errors); None: its edits are not looked at (a DAG without a file)."""
        self.session = session
        self.load = load
        self.broken = False  # the last edit had errors (a good one then says so, even if it changes nothing)
        plan = WatchPlan(session.dag, session.store.state_dir)
        scheduler = session.scheduler
        self.watcher = InputWatcher(plan, scheduler.refresh, self.dag_file_changed if load is not None else None)

    def dag_file_changed(self, others: list[str]) -> WatchPlan | None:
        """On the watcher's thread: the DAG file changed (and the inputs `others` in the same batch). What to
        watch from now on (None: as before)."""
        plan = self.watcher.plan
        assert plan.dag_file is not None and self.load is not None  # only DAG files are reloaded
        file = plan.shown(plan.dag_file)
        trigger = trigger_text([file, *(plan.shown(p) for p in others)])
        scheduler = self.session.scheduler
        try:
            new = self._load(scheduler.dag)
        except DagErrors as exc:
            self.broken = True
            scheduler.dag_error("\n".join(str(error) for error in exc.errors))
            inputs = plan.affected(others)  # the inputs changed beside it still count, by the DAG as it was
            if inputs:
                scheduler.refresh(inputs, trigger_text([plan.shown(p) for p in others]))
            return None
        change = diff(scheduler.dag, frozenset(scheduler.removed), new)
        reloaded = WatchPlan(new, self.session.store.state_dir)
        also = reloaded.affected(others)
        if change.empty and not self.broken:
            if also:
                scheduler.refresh(also, trigger)
            return reloaded
        self.broken = False
        union = change.union
        scheduler.reload(
            change,
            dag_record(union, scheduler.max_parallel),
            change.describe(file),
            trigger,
            self.session.freshness_for(union),
            also,
        )
        self.session.dag = union
        return reloaded

    def _load(self, run: DagSpec) -> DagSpec:
        """The DAG file as it is now, or DagErrors: its own, what the run can't take on, any failure to read it."""
        assert self.load is not None
        try:
            new = self.load()
        except DagErrors:
            raise
        except Exception as exc:  # a loader's failure must not end the watcher: said as the DAG's error
            raise DagErrors([DagError(f"{run.source}: could not be loaded: {exc}")]) from None
        fixed = fixed_settings_changed(run, new)
        if run.job_group is not None:
            fixed.append("its tasks (a job group's DAG is not reloaded)")
        if fixed:
            raise DagErrors(
                [DagError(f"{run.source}: {', '.join(fixed)} can't change while the run goes on: start it again")]
            )
        return new

    @property
    def plan(self) -> WatchPlan:
        """What is watched now."""
        return self.watcher.plan

    def start(self) -> LiveDag:
        """Watch from now on; a note on stderr if the watches could not be set up is the caller's (OSError)."""
        self.watcher.start()
        return self

    def stop(self) -> None:
        self.watcher.stop()
