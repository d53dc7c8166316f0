"""Wiring one run together: store folder + journal + scheduler + executor. Shared by the CLI's views and `Dag.main()`.

Exit codes: 0 every task succeeded; 1 any task failed, was skipped or cancelled; 2 bad input or usage;
128 + signal number after SIGINT (130), SIGTERM (143) or SIGHUP (129).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .engine import process
from .engine.events import TaskSnapshot
from .engine.executor import Executor
from .engine.local import LocalExecutor
from .engine.scheduler import RunSummary, Scheduler, default_parallel
from .exit_codes import EXIT_FAILED, EXIT_OK, SIGNAL_EXIT
from .model.counts import counted
from .model.spec import DagSpec, FailurePolicy
from .model.targets import needed
from .store.heartbeat import Heartbeat
from .store.journal import JournalWriter
from .store.resume import Reuse, plan_reuse
from .store.run_dag import dag_header
from .store.runs import RunDir, RunStore, link_log, log_file_name

HOOKS_LOG = "hooks.log"  # in the run folder: what the run's hooks printed

if TYPE_CHECKING:
    from .control.server import ControlServer  # imported when the socket is opened (`serve_control`)
    from .live_dag import LiveDag
    from .store.freshness import Freshness


class RunSession:
    """One run: its DAG, store folder, journal and scheduler, and how it was interrupted if it was."""

    def __init__(
        self,
        dag: DagSpec,
        store: RunStore,
        run: RunDir,
        journal: JournalWriter,
        scheduler: Scheduler,
        started: float | None = None,
    ):
        self.dag = dag
        self.store = store
        self.run = run
        self.journal = journal
        self.scheduler = scheduler
        self.started = time.time() if started is None else started
        self.finished_at: float | None = None  # the end of its last task, once `finish` ran
        self.interrupted_by: str | None = None
        self.store_error: str | None = None  # why the run's record is incomplete ("state dir full"), if it is
        self.store_message: str | None = None  # the same, said in full: which folder, what failed, what happens now
        self.on_store_error: Callable[[str], None] | None = None  # how the view tells the user (called once)
        self.control: ControlServer | None = None  # the control channel (control/server.py), once `serve_control` ran
        self.reuse: Reuse | None = None  # what a resumed run took over from the earlier one, and why not more
        journal.on_error = self._journal_failed
        scheduler.on_log_full = self._logs_full
        self.watcher: LiveDag | None = None  # `--watch`: what re-runs tasks when their inputs (or the DAG) change
        self.freshness: Freshness | None = None  # what decides that a task is up to date (tasks with inputs/outputs)
        self.force = False  # --force: every task runs (kept for a DAG that has inputs only once reloaded)
        self.watch_ended = threading.Event()
        self.heartbeat = Heartbeat(run.journal).start()  # after a crash, tells when this process was last alive

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
        force: bool = False,
        run_anyway: Mapping[str, str] | None = None,
        targets: Sequence[str] = (),
        options: Sequence[str] = (),
    ) -> RunSession:
        """`force`: every task runs, up to date or not; `run_anyway`: tasks that run even if up to date, with the
        reason to give (`--from`); `targets`: the tasks asked for (`tuidag run FILE TASK...`, checked to be the
        DAG's); none: every task. `options`: the command-line options that shaped the run (`--env`, `-j`, ...),
        kept in its header so that a run resuming it repeats them."""
        store = RunStore(state_dir)
        reuse = plan_reuse(dag, resume_from, needed(dag, targets)) if resume_from else None
        reused = reuse.values if reuse else {}
        extra = {
            "fingerprints": dag.fingerprints,
            "shared": dag.shared_digests,
            "resumed_from": resume_from.run_id if resume_from else None,
            "targets": list(targets),
            "options": list(options),
            "executor": executor.description if executor is not None else "local",
            **dag_header(dag, default_parallel(dag, max_parallel, executor)[0]),
        }
        run, journal = store.create_run(dag.name, dag.source, list(dag.topological_order), extra)
        if resume_from is not None:  # (what it reuses comes from it)
            for name in reused:
                link_log(resume_from.log_path(name), run.log_path(name))
        freshness = None
        if any(task.inputs or task.outputs for task in dag.tasks.values()):
            from .store.freshness import Freshness

            freshness = Freshness(
                dag,
                state_dir,
                run.run_id,
                run.logs,
                force=force,
                run_anyway=run_anyway,
                on_note=lambda text: print(f"tuidag: note: {text}", file=sys.stderr),
            )
        scheduler = Scheduler(
            dag,
            executor or LocalExecutor(),
            run.run_id,
            run.logs,
            log_name=log_file_name,
            max_parallel=max_parallel,
            kill_grace=kill_grace,
            reused=reused,
            freshness=freshness,
            targets=targets,
        )
        # The first observer: the journal records every event before any view sees it.
        scheduler.subscribe(journal.record, batches=True)
        session = cls(dag, store, run, journal, scheduler)
        session.reuse = reuse
        session.freshness, session.force = freshness, force
        return session

    def serve_control(self) -> None:
        """Open the run's control socket: viewers (`tuidag attach`) and `tuidag cancel`/`pause`/... reach the run
        through it, from any terminal of this user, for as long as it runs."""
        from .control.server import ControlServer

        try:
            self.control = ControlServer(self)
        except OSError as exc:  # no socket (a full disk, a file system without them): the run goes on without one
            print(
                f"tuidag: warning: no control socket for this run ({exc.strerror or exc}): "
                "it can't be attached to or controlled from another terminal",
                file=sys.stderr,
            )

    def watch(self, load: Callable[[], DagSpec] | None = None) -> None:
        """`--watch`: from now on a change to a task's inputs runs it and its downstream again (watch.py), and one
        to the DAG file reloads it with `load` (live_dag.py). Services stay up until watch mode ends."""
        from .live_dag import LiveDag

        self.scheduler.watch_rounds()
        self.watcher = LiveDag(self, load).start()

    def freshness_for(self, dag: DagSpec) -> Freshness | None:
        """What decides which tasks of the DAG reloaded under --watch are up to date: the run's, or a new one when
        the reload brought the first inputs or outputs."""
        if self.freshness is not None:
            self.freshness.dag = dag
        elif any(task.inputs or task.outputs for task in dag.tasks.values()):
            from .store.freshness import Freshness

            self.freshness = Freshness(
                dag,
                self.store.state_dir,
                self.run.run_id,
                self.run.logs,
                force=self.force,
                on_note=lambda text: print(f"tuidag: note: {text}", file=sys.stderr),
            )
        return self.freshness

    @property
    def watching(self) -> bool:
        return self.watcher is not None and not self.watch_ended.is_set()

    def end_watch(self) -> None:
        """Watch mode ends (`q`, `tuidag stop`, a signal): no more rounds; the run ends once its tasks have."""
        self.watch_ended.set()
        if self.watcher is not None:
            threading.Thread(target=self.watcher.stop, name="tuidag-unwatch", daemon=True).start()
        self.scheduler.end_rounds()

    def interrupt(self, signum: int) -> None:
        """A signal asked us to stop: cancel every task (killing every tree) without blocking the caller.
        A second signal means "now": every process of the run gets SIGKILL and tuidag exits at once."""
        if self.interrupted_by is not None:
            self.force_exit(signum)
        self.interrupted_by = signal.Signals(signum).name
        self.watch_ended.set()
        threading.Thread(
            target=self._end_and_cancel,
            args=(f"interrupted by {self.interrupted_by}",),
            name="tuidag-interrupt",
            daemon=True,
        ).start()

    def _end_and_cancel(self, reason: str) -> None:
        if self.watcher is not None:
            self.end_watch()
        self.scheduler.cancel_all(reason)

    def force_exit(self, signum: int) -> None:
        """Don't wait for grace periods or for in-process callables that ignore cancellation: SIGKILL every process
        of the run (the executor's cgroups, leaders' groups and sessions, orphans; tagged ones whatever the
        executor)."""
        killed = self.scheduler.executor.force_kill()
        procs = process.collect_tree(None, run_id=self.run.run_id)
        process.kill_until_empty(procs, None, lambda: process.collect_tree(None, run_id=self.run.run_id))
        name = signal.Signals(signum).name
        processes = counted(max(killed, len(procs)), "process", "processes")
        self.journal.write(
            {
                "type": "run",
                "event": "forced-exit",
                "t": time.time(),
                "signal": name,
                "detail": f"second {name}: killed {processes}",
            }
        )
        os._exit(SIGNAL_EXIT[signal.Signals(signum)])

    def _journal_failed(self, exc: OSError) -> None:
        """The journal can't be written (a full disk): what it says from here on would be untrue, so the run stops
        starting tasks, as the DAG's failure policy stops it when a task fails; the user is told once."""
        self._stop_for_store(exc, "the run's journal can't be written any more")

    def _logs_full(self, exc: OSError) -> None:
        """A task's log could not be created or written for lack of space: the journal's small appends may still
        fit, but no task can start with a log, so it is the same full state dir, with the same consequences."""
        self._stop_for_store(exc, "task logs can't be written any more")

    def _stop_for_store(self, exc: OSError, what: str) -> None:
        cancel_all = self.dag.on_failure is FailurePolicy.CANCEL_ALL
        self._store_failed(
            exc,
            f"{what}, so no more tasks start; running "
            + ("tasks are cancelled (on_failure: cancel-all)" if cancel_all else "tasks finish"),
        )
        self.scheduler.stop(f"not started: {self.store_error}")

    def _store_failed(self, exc: OSError, consequence: str) -> None:
        if self.store_error is not None:
            return
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        self.store_error = "state dir full" if full else "state dir not writable"
        self.store_message = (
            f"tuidag: error: the state dir {self.store.state_dir} is "
            f"{'full' if full else 'not writable'} ({exc.strerror or exc}): {consequence}"
        )
        if self.on_store_error is not None:
            self.on_store_error(self.store_message)
        if self.control is not None:
            self.control.notice(self.store_message)

    def finish(self) -> RunSummary:
        """Wait for the pool, record the outcome in summary.json and close the journal. With a journal that stopped
        early the summary (over the room reserved for it) is the run's record of how every task ended."""
        self.scheduler.close()
        if self.scheduler.freshness is not None:
            self.scheduler.freshness.close()
        self.heartbeat.stop()
        summary = RunSummary(self.scheduler.snapshot(), self.interrupted_by)
        finished = self.finished_at = run_end(summary.snapshots.values(), self.started)
        record = {
            "run_id": self.run.run_id,
            "dag": self.dag.name,
            "source": str(self.dag.source or ""),
            "started_at": self.started,
            "finished_at": finished,
            "duration": self.duration,
            "counts": {s.value: n for s, n in summary.counts.items() if n},
            "outcome": f"incomplete: {self.store_error}" if self.store_error else summary.outcome,
            "interrupted_by": self.interrupted_by,
        }
        record["exit_code"] = self.exit_code(summary)
        hooks = self.run_hooks(record)
        if hooks:
            record["hooks"] = hooks
        if self.journal.error is not None:
            record["journal_error"] = self.journal.error.strerror or str(self.journal.error)
        try:
            self.journal.write_summary(record)
        except OSError as exc:
            self._store_failed(exc, "the run's outcome could not be recorded (summary.json)")
        self.journal.close()
        if self.control is not None:
            self.control.close()  # after the summary: a viewer that sees the channel close finds the outcome
        return summary

    def run_hooks(self, record: dict) -> list[dict[str, object]]:
        """`on_end:` (and `on_run_failure:` when the run failed), before the summary is written so that it records
        how they went; a hook that failed is said on stderr (the terminal, or a detached run's engine.log) and in
        the summary (a foreground viewer's closing lines), and never changes the exit code."""
        given = [("on_end", self.dag.on_end)]
        if record["exit_code"] != EXIT_OK:
            given.append(("on_run_failure", self.dag.on_run_failure))
        commands = [(hook, command) for hook, command in given if command]
        if not commands:
            return []
        from .engine.run_hooks import hook_env, run_hook

        env = hook_env(
            self.run.run_id,
            self.dag.name,
            record["outcome"],
            record["exit_code"],
            record["counts"],
            record["duration"],
            self.run.path,
        )
        results = []
        for hook, command in commands:
            result = run_hook(hook, command, self.dag.workdir, env, self.run.path / HOOKS_LOG)
            if result.problem is not None:
                message = (
                    f"tuidag: warning: {hook} hook {result.problem} (its output is in {self.run.path / HOOKS_LOG})"
                )
                print(message, file=sys.stderr, flush=True)
            results.append(result.record())
        return results

    @property
    def duration(self) -> float:
        """From the start to the end of the last task (or until now while it runs): not how long a view stayed
        open on the finished run."""
        end = self.finished_at if self.finished_at is not None else time.time()
        return max(0.0, end - self.started)

    def exit_code(self, summary: RunSummary) -> int:
        if self.interrupted_by:
            return SIGNAL_EXIT[signal.Signals[self.interrupted_by]]
        return EXIT_OK if summary.ok and self.store_error is None else EXIT_FAILED


def run_end(snapshots: Iterable[TaskSnapshot], started: float) -> float:
    """When the run ended: the latest end of any of its tasks (`started` if none ended)."""
    return max((s.finished_at for s in snapshots if s.finished_at is not None), default=started)


def install_signal_handlers(session: RunSession, signals=(signal.SIGINT, signal.SIGTERM, signal.SIGHUP)) -> None:
    for signum in signals:
        signal.signal(signum, lambda num, _frame: session.interrupt(num))
