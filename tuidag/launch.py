"""Wiring one run together: store folder + journal + scheduler + executor. Shared by the CLI's views and `Dag.main()`.

Exit codes: 0 every task succeeded; 1 any task failed, was skipped or cancelled; 2 bad input or usage;
128 + signal number after SIGINT (130), SIGTERM (143) or SIGHUP (129).
"""
from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .engine.executor import Executor
from .engine.local import LocalExecutor
from .engine.scheduler import RunSummary, Scheduler
from .model.spec import DagSpec
from .store.journal import JournalWriter
from .store.runs import RunDir, RunStore, log_file_name, write_summary

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


@dataclass
class RunSession:
    dag: DagSpec
    store: RunStore
    run: RunDir
    journal: JournalWriter
    scheduler: Scheduler
    started: float = field(default_factory=time.time)
    interrupted_by: str | None = None

    @classmethod
    def create(
        cls,
        dag: DagSpec,
        state_dir: Path,
        *,
        max_parallel: int | None = None,
        kill_grace: float | None = None,
        executor: Executor | None = None,
        reused: tuple[str, ...] = (),
    ) -> "RunSession":
        store = RunStore(state_dir)
        run, journal = store.create_run(dag.name, dag.source, list(dag.topological_order))
        scheduler = Scheduler(dag, executor or LocalExecutor(), run.run_id, run.logs, log_name=log_file_name,
                              max_parallel=max_parallel, kill_grace=kill_grace, reused=reused)
        scheduler.subscribe(journal)  # first observer: the journal sees every event before any view does
        return cls(dag, store, run, journal, scheduler)

    def interrupt(self, signum: int) -> None:
        """A signal asked us to stop: cancel every task (killing every tree) without blocking the caller."""
        if self.interrupted_by is None:
            self.interrupted_by = signal.Signals(signum).name
        threading.Thread(target=self.scheduler.cancel_all, args=(f"interrupted by {self.interrupted_by}",),
                         name="tuidag-interrupt", daemon=True).start()

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


def install_signal_handlers(session: RunSession, signals=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) -> None:
    for signum in signals:
        signal.signal(signum, lambda num, _frame: session.interrupt(num))
