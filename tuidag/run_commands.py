"""`tuidag run`'s work once its DAG is loaded: checking the targets and options against it, then running it in the
foreground (headless, printing its progress), in the background (the engine in a process of its own, with the
terminal UI as its viewer, or detached with `-d`), or planning it (`--dry-run`). `Dag.main()` runs a Python DAG
through `run_dag` too."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import plan_commands
from .cli_common import UsageError, guarded, no_such_task, one_run, open_store, printable, read_dag
from .exit_codes import EXIT_OK
from .model.counts import counted
from .model.errors import DagErrors
from .model.spec import DagSpec
from .store.journal import read_header
from .store.runs import RunDir, RunStore, default_state_dir, run_command
from .views.terminal_text import terminal_line


def with_resources(dag: DagSpec, resources: dict[str, int]) -> DagSpec:
    """The DAG with --resources over its capacities and every slot request checked (DagErrors when one can't be met)."""
    from .model.resources import resolve

    return resolve(dag, resources)


def outlive_readers() -> None:
    """A run's output may go to a reader that stops early (`| head -1`): that must stop the printing, not the run
    and not the truth of its exit code (see views/output)."""
    from .views.output import ReaderSafe, keep_standard_descriptors

    keep_standard_descriptors()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, ReaderSafe):
            setattr(sys, name, ReaderSafe(stream))


def run_dag(dag: DagSpec, args: argparse.Namespace) -> int:
    """Run a loaded DAG with the options of `tuidag run`. With --detach the engine runs in a process of its own,
    detached from the terminal (see background.py), and this returns as soon as the run exists."""
    outlive_readers()
    args.tasks = check_targets(dag, args.tasks)
    dag = prepared(dag, args)  # before anything starts or is stored
    state_dir = args.state_dir or default_state_dir(dag.source)
    store = open_store(state_dir)
    if getattr(args, "dry_run", False):
        return plan_commands.show_plan(dag, state_dir, tasks=args.tasks, force=args.force, from_tasks=args.from_tasks)
    plan_commands.run_anyway(dag, getattr(args, "from_tasks", []))  # an unknown task: a usage error, nothing started
    earlier = find_resumable(store, dag, args.resume) if args.resume else None
    tui = sys.stdout.isatty() and sys.stdin.isatty() if args.tui is None else args.tui
    if getattr(args, "detach", False) or tui:
        return _run_in_background(dag, args, state_dir, earlier, view=tui and not args.detach)
    session = _new_session(dag, args, state_dir, earlier)
    return run_headless(session, args.quiet, watch_mode(dag, args), getattr(args, "notify", None))


def prepared(dag: DagSpec, args: argparse.Namespace) -> DagSpec:
    """The DAG as the command line makes it (--resources over its capacities, -J over its matrix jobs), checked for
    what the executor can't run. DagErrors or UsageError (a located or a command-line mistake)."""
    dag = with_resources(dag, getattr(args, "resources", {}))
    if getattr(args, "num_jobs", None) is not None:
        from .model.matrix import num_jobs_problem, with_num_jobs

        problem = num_jobs_problem(dag, args.num_jobs)
        if problem:
            raise UsageError(problem)
        dag = with_num_jobs(dag, args.num_jobs)
    refuse_services_on_dask(dag, getattr(args, "executor", None) or dag.executor)
    return dag


def watch_mode(dag: DagSpec, args: argparse.Namespace) -> Callable[[], DagSpec] | bool:
    """Under --watch, how the run reads its DAG file again when it is edited: as `tuidag run` read it (its --env,
    --resources, -J); True for a DAG that has no file; False without --watch."""
    path = dag.source
    if not getattr(args, "watch", False) or path is None:
        return getattr(args, "watch", False) is True

    def load() -> DagSpec:
        from .model.errors import DagError

        try:
            return prepared(read_dag(path, getattr(args, "env", [])), args)
        except UsageError as exc:
            raise DagErrors([DagError(f"{path}: {exc}")]) from None

    return load


def watch_note(plan) -> str:
    """What `--watch` looks at, said once it starts: which files re-run which tasks, and how it ends."""
    from .watch import STEP_MS

    count = sum(len(entries) for entries in plan.inputs.values())
    if not count:
        what = (
            "no task declares inputs: only an edit of the DAG file re-runs tasks (declare `inputs` to re-run a task)"
            if plan.dag_file
            else "no task declares inputs, so nothing re-runs on a change (declare `inputs` to re-run a task)"
        )
    else:
        what = (
            f"watching {counted(count, 'input')} of {counted(len(plan.inputs), 'task')}"
            f"{', and the DAG file to reload it' if plan.dag_file else ''} "
            f"(changes gathered until {STEP_MS} ms pass without one)"
        )
    return f"{what}; q, Ctrl+C or `tuidag stop` ends watch mode"


def refuse_services_on_dask(dag: DagSpec, executor: str | None) -> None:
    """A service task can't run on the Dask executor: its readiness check (a port, a URL on localhost, its log) and its
    ordered stop need the machine it runs on, and a Dask worker is elsewhere. Refused, located at the first service,
    before anything is started or stored."""
    if executor is None or executor.strip().partition(":")[0] not in ("dask", "dask-local"):
        return
    from .model.errors import DagError

    services = [task for task in dag.tasks.values() if task.service is not None]
    if services:
        message = (
            f"task '{services[0].name}': a service can't run on the Dask executor (its readiness check and its stop "
            "need the machine it runs on): run this DAG with --executor local"
        )
        raise DagErrors([DagError(message, services[0].location)])


def check_targets(dag: DagSpec, targets: Sequence[str]) -> list[str]:
    """The targets as the DAG's tasks (a matrix task, or a selection of its instances like `train[seed=2]`, is its
    instances), or a usage error naming the first that is none (with the closest name), before anything is started
    or stored."""
    from .model.targets import expand_targets, unknown_targets

    tasks = expand_targets(dag, targets)
    for name in unknown_targets(dag, tasks):
        where = terminal_line(str(dag.source)) if dag.source is not None else f"the DAG {dag.name!r}"
        raise no_such_task(name, [], f"{where} has no task {name!r}", names=[*dag.groups, *dag.tasks])
    return tasks


def _new_session(dag: DagSpec, args: argparse.Namespace, state_dir: Path, earlier: RunDir | None):
    """The run's store folder, journal, executor and scheduler, ready to start; its notes said on stderr."""
    from .launch import RunSession  # the engine is imported only once there is something to run
    from .model.targets import needed

    executor = make_executor(dag, args)
    session = RunSession.create(
        dag,
        state_dir,
        max_parallel=args.max_parallel,
        kill_grace=args.kill_grace,
        resume_from=earlier,
        executor=executor,
        force=getattr(args, "force", False),
        run_anyway=plan_commands.run_anyway(dag, getattr(args, "from_tasks", [])),
        targets=args.tasks,
        options=repeated_options(args),
    )
    if session.scheduler.parallel_note:
        print(f"tuidag: {session.scheduler.parallel_note}", file=sys.stderr)
    if session.reuse is not None:
        assert earlier is not None  # what a run reuses is planned from the earlier run
        note = session.reuse.describe(
            len(needed(dag, args.tasks)), env_options=[key for key, _ in args.env], targets=bool(args.tasks)
        )
        print(f"tuidag: resuming {earlier.run_id}: {printable(note)}", file=sys.stderr)
    return session


def repeated_options(args: argparse.Namespace) -> list[str]:
    """The options of `args` that shape what a run does and that a run resuming it must repeat, or it would not
    reuse what this one did (`--env` changes every task's definition) or would run differently (`-j`, the executor,
    the capacities). `--env KEY` is kept with the value it had. Not kept: one-off choices (`--force`, `--from`, the
    view, `--detach`)."""
    repeated: list[str] = []
    for key, value in getattr(args, "env", []):
        repeated += ["--env", f"{key}={value}"]
    if getattr(args, "max_parallel", None):
        repeated += ["-j", str(args.max_parallel)]
    if getattr(args, "kill_grace", None) is not None:
        repeated += ["--kill-grace", f"{args.kill_grace}s"]
    if getattr(args, "resources", None):
        repeated += ["--resources", ",".join(f"{kind}={n}" for kind, n in args.resources.items())]
    for option in ("executor", "dask_address", "num_jobs"):
        value = getattr(args, option, None)
        if value is not None:
            repeated += ["--" + option.replace("_", "-"), str(value)]
    if getattr(args, "dask_timeout", None) is not None:
        repeated += ["--dask-timeout", f"{args.dask_timeout}s"]
    return repeated


def _run_in_background(
    dag: DagSpec, args: argparse.Namespace, state_dir: Path, earlier: RunDir | None, view: bool
) -> int:
    """The engine in a process of its own (background.py), so the run can outlive this terminal. With `view` this
    process becomes its foreground viewer (the terminal UI; `d` detaches); without (`-d`) it says how to reach the
    run and exits 0."""
    from .background import EngineFailed, start_engine

    def engine(ready) -> int:
        def work(_args: argparse.Namespace) -> int:
            session = _new_session(dag, args, state_dir, earlier)
            ready(session.run.run_id, str(session.run.path))
            # its viewer (if any) rings the terminal: the engine's own output is engine.log
            return run_headless(session, True, watch_mode(dag, args), "never")

        return guarded(work, args)

    # A foreground run is stopped by the terminal's signals (Ctrl+C, a hang-up) from the start: one that comes
    # before the viewer is up is kept here and passed on by the viewer, as soon as it reaches the engine.
    early: list[int] = []
    if view:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda num, _frame: early.append(num))
    try:
        started = start_engine(engine)
    except EngineFailed as failed:
        return failed.code
    runs_dir = RunStore(state_dir).runs_dir
    if view:
        from .ui.viewer import run_viewer  # textual is imported only here

        return run_viewer(
            RunDir(started.run_id, runs_dir / started.run_id),
            foreground=True,
            engine_pid=started.pid,
            exit_on_finish=args.exit_on_finish,
            early_signals=early,
            notify=getattr(args, "notify", None),
        )
    print(
        f"tuidag: run {started.run_id} of {terminal_line(dag.name)} started in the background "
        f"(engine pid {started.pid})\n"
        f"tuidag: watch it:  {run_command('attach', started.run_id, state_dir)}\n"
        f"tuidag: stop it:   {run_command('stop', started.run_id, state_dir)}\n"
        f"tuidag: logs in {runs_dir / started.run_id / 'logs'}",
        flush=True,
    )
    return EXIT_OK


def make_executor(dag: DagSpec, args: argparse.Namespace):
    """The executor `--executor` (or the file's `executor:`) asks for; None for the local one. Dask is imported only
    here, only when asked for."""
    from .model.executor_choice import choose_executor

    try:
        choice = choose_executor(
            getattr(args, "executor", None) or dag.executor, getattr(args, "dask_address", None) or dag.dask_address
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not choice.uses_dask:
        return None
    from .engine.dask.cluster import CONNECT_TIMEOUT, INSTALL_HINT, DaskUnreachable, dask_missing

    if dask_missing():
        raise UsageError(INSTALL_HINT)
    from .engine.dask.executor import DaskExecutor

    timeout = getattr(args, "dask_timeout", None) or CONNECT_TIMEOUT
    try:
        return DaskExecutor(
            choice.address, local_workers=choice.workers, dag_env=dag.env, resources=dag.resources, timeout=timeout
        )
    except DaskUnreachable as exc:
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:  # Ctrl+C while connecting: nothing started yet, nothing to stop
        where = f"the Dask scheduler at {choice.address}" if choice.address else "the local Dask cluster"
        print(f"tuidag: interrupted while connecting to {where}", file=sys.stderr, flush=True)
        raise SystemExit(130) from None


def run_headless(
    session, quiet: bool = False, watch: Callable[[], DagSpec] | bool = False, notify: str | None = None
) -> int:
    """Run the session, printing its progress on stdout; on a terminal, a note (a bell, a desktop notification)
    when it ends or its first task fails, as `notify` (--notify, else the DAG's `notify:`) says. `watch`: --watch,
    and how to read the DAG file again when it is edited (`watch_mode`), or True for a DAG without a file."""
    import os

    from .launch import install_signal_handlers
    from .model.collector import freeze_survivors
    from .model.targets import needed
    from .views.headless import HeadlessReporter, counts_line, insight_lines, summary_table, use_colour
    from .views.run_notes import RunNotes, notify_choice, state_counts

    colour = use_colour(sys.stdout)
    reporter = HeadlessReporter(sys.stdout, session.scheduler.log_headers, quiet=quiet, colour=colour)
    notes = RunNotes.for_stream(notify_choice(notify, session.dag.notify), sys.stdout, os.environ)
    reporter.notes = (notes, session.dag.name)
    session.scheduler.subscribe(reporter)
    session.serve_control()
    session.on_store_error = lambda message: print(message, file=sys.stderr, flush=True)
    install_signal_handlers(session)
    reporter.start(list(session.dag.topological_order), session.dag.groups)
    freeze_survivors()  # the DAG, the store and the engine live until exit: full collections during the run skip them
    scheduler = session.scheduler
    where = scheduler.executor.description
    follows = (
        f", max_parallel {scheduler.max_parallel}: {scheduler.parallel_source}" if scheduler.parallel_source else ""
    )
    targets = scheduler.targets
    tasks = counted(len(session.dag.tasks), "task")
    if targets:  # `3 of 10 tasks for the targets eval, report`
        shown = ", ".join(targets[:5]) + (f" and {len(targets) - 5:,} more" if len(targets) > 5 else "")
        tasks = (
            f"{len(needed(session.dag, targets)):,} of {tasks} for the target{'s' if len(targets) > 1 else ''} {shown}"
        )
    print(
        f"tuidag: run {session.run.run_id} of {terminal_line(session.dag.name)} "
        f"({terminal_line(tasks)}{'' if where == 'local' else ' on ' + where}{follows}), "
        f"logs in {session.run.logs}",
        flush=True,
    )
    if watch:
        session.scheduler.watch_rounds()  # before the start: services stay up once the first round's tasks ended
    session.scheduler.start()
    if watch:
        session.watch(None if watch is True else watch)
        print(f"tuidag: {terminal_line(watch_note(session.watcher.plan))}", flush=True)
    while True:  # a timeout lets signal handlers run promptly
        if session.watching:  # under --watch the run stays until watch mode ends (a signal ends it too)
            session.watch_ended.wait(1.0)
        elif session.scheduler.wait(0.2):
            break
    summary = session.finish()
    reporter.stop()
    out = sys.stdout
    out.write("\n" + summary_table(summary.snapshots, colour))
    out.write(reporter.failure_tails(summary.snapshots))
    out.write(insight_lines(session.dag, summary.snapshots, session.started, session.scheduler.max_parallel))
    if session.dag.groups:
        from .views.group_progress import group_lines

        out.write("".join(terminal_line(line) + "\n" for line in group_lines(session.dag.groups, summary.snapshots)))
    out.write(counts_line(summary.snapshots, session.duration))
    if session.interrupted_by:
        out.write(f"tuidag: interrupted by {session.interrupted_by}; every task was stopped\n")
    if session.store_error:
        out.write(f"tuidag: run incomplete: {session.store_error} (see the error above)\n")
    counts = state_counts(summary.snapshots.values())
    out.write(notes.run_ended(session.dag.name, counts, session.duration, bool(session.interrupted_by)))
    out.flush()
    return session.exit_code(summary)


def find_resumable(store: RunStore, dag: DagSpec, which: str) -> RunDir:
    from .store.history import matching

    if which == "latest":
        runs = [r for r in store.runs() if read_header(r.journal).get("dag") == dag.name]
        if not runs:
            raise UsageError(f"--resume: no earlier run of {dag.name!r} in {store.state_dir}")
        run = runs[-1]
    else:
        found = matching(store.runs(), which)
        if not found and which in dag.tasks:  # `run FILE --resume TASK`: --resume took the target as its run id
            raise UsageError(
                f"--resume: no run {which!r} in {store.state_dir}; to resume the latest run with {which} as a "
                f"target, put it before --resume: tuidag run FILE {which} --resume"
            )
        run = one_run(found, which, f"in {store.state_dir}", "--resume: ")
    if run.owned():
        raise UsageError(f"--resume: run {run.run_id} is still running (pid {read_header(run.journal).get('pid')})")
    return run
