"""Wiring one run together: store folder + journal + scheduler + executor. Shared by the CLI's views and `Dag.main()`.

Exit codes: 0 every task succeeded; 1 any task failed, was skipped or cancelled; 2 bad input or usage;
128 + signal number after SIGINT (130), SIGTERM (143) or SIGHUP (129).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from .engine import process
from .engine.executor import Executor
from .exit_codes import EXIT_FAILED, EXIT_OK, SIGNAL_EXIT
from .engine.local import LocalExecutor
from .engine.scheduler import RunSummary, Scheduler
from .model.spec import DagSpec
from .model.state import TaskState
from .store.journal import JournalWriter, replay
from .store.runs import RunDir, RunStore, log_file_name, write_summary

class RunSession:
    """One run: its DAG, store folder, journal and scheduler, and how it was interrupted if it was."""

    def __init__(self, dag: DagSpec, store: RunStore, run: RunDir, journal: JournalWriter, scheduler: Scheduler,
                 started: float | None = None):
        self.dag = dag
        self.store = store
        self.run = run
        self.journal = journal
        self.scheduler = scheduler
        self.started = time.time() if started is None else started
        self.interrupted_by: str | None = None

    @classmethod
    def create(
        cls,
        dag: DagSpec,
        state_dir: Path,
        *,
        max_parallel: int | None = None,
        kill_grace: float | None = None,
        executor: Executor | None = None,
        resume_from: RunDir | None = None,
    ) -> "RunSession":
        store = RunStore(state_dir)
        prints = dag.fingerprints
        reused = reusable_tasks(dag, prints, resume_from) if resume_from else []
        extra = {"fingerprints": prints, "resumed_from": resume_from.run_id if resume_from else None}
        run, journal = store.create_run(dag.name, dag.source, list(dag.topological_order), extra)
        for name in reused:
            _link_log(resume_from.log_path(name), run.log_path(name))
        scheduler = Scheduler(dag, executor or LocalExecutor(), run.run_id, run.logs, log_name=log_file_name,
                              max_parallel=max_parallel, kill_grace=kill_grace, reused=reused)
        # The first observer: the journal records every event before any view sees it.
        scheduler.subscribe(journal.record, batches=True)
        return cls(dag, store, run, journal, scheduler)

    def interrupt(self, signum: int) -> None:
        """A signal asked us to stop: cancel every task (killing every tree) without blocking the caller.
        A second signal means "now": every process of the run gets SIGKILL and tuidag exits at once."""
        if self.interrupted_by is not None:
            self.force_exit(signum)
        self.interrupted_by = signal.Signals(signum).name
        threading.Thread(target=self.scheduler.cancel_all, args=(f"interrupted by {self.interrupted_by}",),
                         name="tuidag-interrupt", daemon=True).start()

    def force_exit(self, signum: int) -> None:
        """Don't wait for grace periods or for in-process callables that ignore cancellation: SIGKILL every process
        of the run (the executor's cgroups, leaders' groups and sessions, orphans; tagged ones whatever the
        executor)."""
        killed = self.scheduler.executor.force_kill()
        procs = process.collect_tree(None, run_id=self.run.run_id)
        process.kill_until_empty(procs, None, lambda: process.collect_tree(None, run_id=self.run.run_id))
        self.journal.write({"type": "run", "event": "forced-exit", "t": time.time(),
                            "detail": f"second {signal.Signals(signum).name}: "
                                      f"killed {max(killed, len(procs))} process(es)"})
        os._exit(SIGNAL_EXIT[signum])

    def finish(self) -> RunSummary:
        """Wait for the pool, record the outcome in summary.json and close the journal."""
        self.scheduler.close()
        summary = RunSummary(self.scheduler.snapshot(), self.interrupted_by)
        finished = time.time()
        write_summary(self.run, {
            "run_id": self.run.run_id, "dag": self.dag.name, "source": str(self.dag.source or ""),
            "started_at": self.started, "finished_at": finished, "duration": finished - self.started,
            "counts": {s.value: n for s, n in summary.counts.items() if n},
            "outcome": summary.outcome, "interrupted_by": self.interrupted_by,
        })
        self.journal.close()
        return summary

    def exit_code(self, summary: RunSummary) -> int:
        if self.interrupted_by:
            return SIGNAL_EXIT[signal.Signals[self.interrupted_by]]
        return EXIT_OK if summary.ok else EXIT_FAILED


def reusable_tasks(dag: DagSpec, prints: dict[str, str], earlier: RunDir) -> list[str]:
    """Tasks that SUCCEEDED in `earlier` with the same definition, and whose upstream is all reused too (a task
    downstream of one that runs again must run again)."""
    rep = replay(earlier.journal)
    old_prints = rep.header.get("fingerprints", {})
    reused: dict[str, None] = {}  # ordered set
    for name in dag.topological_order:
        record = rep.tasks.get(name)
        if (record is not None and record.state is TaskState.SUCCEEDED and old_prints.get(name) == prints[name]
                and all(dep in reused for dep in dag.tasks[name].depends_on)):
            reused[name] = None
    return list(reused)


def _link_log(old: Path, new: Path) -> None:
    """The new run's log of a reused task is the earlier run's file (a hard link: it survives either run's folder
    being deleted)."""
    try:
        os.link(old, new)
    except FileNotFoundError:
        pass
    except OSError:
        import shutil

        shutil.copyfile(old, new)


def install_signal_handlers(session: RunSession, signals=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) -> None:
    for signum in signals:
        signal.signal(signum, lambda num, _frame: session.interrupt(num))
