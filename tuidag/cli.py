"""The `tuidag` command: parse arguments, load the DAG, pick a view, return an honest exit code."""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from . import cli_options as options
from . import completion, control_commands, history_commands, plan_commands, serve_command
from .cli_common import UsageError, no_such_task, one_run, open_store, printable, state_dir_of
from .exit_codes import EXIT_OK, EXIT_USAGE
from .model.counts import counted
from .model.errors import DagErrors
from .model.loader import load_dag
from .model.spec import DagSpec
from .store.journal import read_header
from .store.runs import RunDir, RunStore, StateDirError, default_state_dir, run_command
from .version import __version__
from .views.terminal_text import terminal_line


def with_resources(dag: DagSpec, resources: dict[str, int]) -> DagSpec:
    """The DAG with --resources over its capacities and every slot request checked (DagErrors when one can't be met)."""
    from .model.resources import resolve

    return resolve(dag, resources)


def build_parser(only_run: bool = False) -> argparse.ArgumentParser:
    """Every command's parser; `only_run`: the top level and `run` alone, for a command line that starts with `run`
    (the other twenty-odd commands' parsers were 3 ms of every run's start-up)."""
    parser = options.Parser(prog="tuidag", description="Run DAGs of tasks, live in the terminal or headless.")
    parser.add_argument("--version", action="version", version=f"tuidag {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    state = options.Parser(add_help=False)
    options.add_state_dir(state)

    run = sub.add_parser("run", help="run a DAG")
    # Required, but optional to argparse: in `run --resume FILE` the file is taken as --resume's RUN_ID (see
    # _file_after_resume); the usage line shows it as required.
    run.add_argument("file", type=Path, nargs="?", metavar="FILE", help="the DAG file (YAML, SkyPilot pipeline, .py)")
    run.usage = "tuidag run [options] FILE [TASK ...]"
    run.set_defaults(run_parser=run)
    options.add_run_options(run)
    if only_run:
        return parser

    validate = sub.add_parser("validate", help="check a DAG file and exit")
    validate.add_argument("file", type=Path)
    options.add_env(validate)
    options.add_resources(validate)

    graph = sub.add_parser("graph", help="print the DAG as text, Graphviz dot or Mermaid")
    graph.add_argument("file", type=Path)
    graph.add_argument("--format", choices=["text", "dot", "mermaid"], default="text")
    options.add_env(graph)

    plan = sub.add_parser("plan", parents=[state], help="say what a run would do with each task and why; start nothing")
    plan.add_argument("file", type=Path)
    plan.add_argument("tasks", nargs="*", metavar="TASK", help="only these tasks and what they need")
    plan.add_argument("--format", choices=["text", "json"], default="text")
    options.add_freshness(plan)
    options.add_env(plan)
    options.add_resources(plan)

    history_commands.add_parsers(sub, state)
    plan_commands.add_parsers(sub, state)
    control_commands.add_parsers(sub, state)
    completion.add_parsers(sub)
    serve_command.add_parsers(sub, state)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == completion.HIDDEN:  # a shell's TAB: task names, run ids (not in --help)
        return completion.complete(argv[1:])
    parser = build_parser(only_run=bool(argv) and argv[0] == "run")
    args, rest = parser.parse_known_args(argv)
    if args.command == "run":
        take_targets(args, rest, args.run_parser)
        _file_after_resume(args)
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return guarded(COMMANDS[args.command], args)


def take_targets(args: argparse.Namespace, rest: list[str], parser: argparse.ArgumentParser) -> None:
    """The targets of `run` wherever they are among its options: argparse takes the positional arguments it meets
    first (`run FILE TASK`) and leaves the ones after an option (`run FILE -j 2 TASK`) over, which are targets too.
    What is left over that looks like an option is not one of `run`'s: an error, as argparse says it. Each target
    is kept once, in the order given."""
    unknown = [arg for arg in rest if arg.startswith("-")]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.tasks = list(dict.fromkeys([*args.tasks, *rest]))


def _file_after_resume(args: argparse.Namespace) -> None:
    """`tuidag run --resume FILE`: argparse gives FILE to --resume's optional RUN_ID. FILE is required, so when it is
    missing the value can only have been meant as FILE, and --resume as "the latest run"; `run FILE --resume`,
    `run --resume RUN_ID FILE` and `run FILE --resume RUN_ID` read as they always did."""
    if args.file is not None:
        return
    if args.resume is None or args.resume == "latest":
        args.run_parser.error("the following arguments are required: FILE")
    args.file, args.resume = Path(args.resume), "latest"


def guarded(command, args: argparse.Namespace) -> int:
    """Run a command, turning user mistakes into their message and exit code 2 (never a traceback), and output that
    can't be written into exit 0 (a reader that had enough) or 1 (lost: a full device, a terminal gone). `run`
    outlives its output instead (`outlive_readers`)."""
    from .views.output import CommandOutput, OutputLost

    stdout = sys.stdout
    if command is not cmd_run and stdout is not None and not isinstance(stdout, CommandOutput):
        sys.stdout = CommandOutput(stdout)
    try:
        code = command(args)
        sys.stdout.flush()  # what is still buffered is the command's output too
        return code
    except DagErrors as exc:
        for err in exc.errors:
            print(terminal_line(str(err)), file=sys.stderr)  # keys and values are the file's text
        return EXIT_USAGE
    except (UsageError, StateDirError) as exc:
        # some say several lines (a list of matching runs), each built from printable parts: kept as lines
        print("tuidag: " + "\n".join(map(terminal_line, str(exc).split("\n"))), file=sys.stderr)
        return EXIT_USAGE
    except OutputLost as lost:  # `graph`, `runs`, `logs` into a reader that had enough, or output that was lost
        if isinstance(lost.error, BrokenPipeError):
            return EXIT_OK
        try:
            print(f"tuidag: cannot write the output: {lost}", file=sys.stderr)
        except OSError:
            pass
        return 1
    finally:
        if isinstance(sys.stdout, CommandOutput) and sys.stdout.stream is stdout:
            sys.stdout = stdout


def _load(
    path: Path, env: list[tuple[str, str]], cache_dir: Path | None = None, resources: dict[str, int] | None = None
) -> DagSpec:
    """The DAG in `path`, with `env` (--env) given to every task; with a `cache_dir`, from there when it holds this
    exact file's model (see model/cache). With `resources` (--resources, for the commands that run or check slots)
    its slot requests are checked against the capacities, and reported with the file's other mistakes."""
    notes: list = []
    try:
        dag = _read(path, env, cache_dir, notes)
        if resources is not None:
            dag = with_resources(dag, resources)
    except DagErrors as exc:
        if resources is None:
            raise
        from .model.resources import with_slot_errors

        raise with_slot_errors(exc, resources) from None
    for note in notes:  # e.g. SkyPilot keys that only matter on a cloud
        note = note.given(dag.resources)
        if note is not None:
            print(terminal_line(str(note)), file=sys.stderr)
    return dag


def _read(path: Path, env: list[tuple[str, str]], cache_dir: Path | None, notes: list) -> DagSpec:
    if path.suffix == ".py":  # a Python file defining a tuidag.Dag, imported as a module
        from .model.python_loader import load_python

        return load_python(path, notes).with_env(dict(env))
    if cache_dir is not None:
        from .model.cache import load_dag_cached

        return load_dag_cached(path, cache_dir, notes, env)
    return load_dag(path, notes, env=env)


def cmd_validate(args: argparse.Namespace) -> int:
    dag = _load(args.file, args.env, resources=args.resources)
    edges = sum(len(t.depends_on) for t in dag.tasks.values())
    sweeps = "; ".join(f"{name}: {counted(len(group.instances), 'instance')}" for name, group in dag.groups.items())
    print(
        f"{terminal_line(str(args.file))}: ok: {terminal_line(dag.name)}, {counted(len(dag.tasks), 'task')}, "
        f"{counted(edges, 'edge')}" + (f" (matrix {terminal_line(sweeps)})" if sweeps else "")
    )
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from .views.graph_text import FORMATS

    sys.stdout.write(FORMATS[args.format](_load(args.file, args.env)))
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    state_dir = state_dir_of(args, args.file)
    RunStore(state_dir).check()  # before its cache is read
    dag = _load(args.file, args.env, state_dir / "cache", args.resources)
    check_targets(dag, args.tasks)
    return plan_commands.show_plan(
        dag, state_dir, tasks=args.tasks, force=args.force, from_tasks=args.from_tasks, output_format=args.format
    )


def cmd_completion(args: argparse.Namespace) -> int:
    sys.stdout.write(completion.script(args.shell, build_parser()))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    outlive_readers()
    state_dir = state_dir_of(args, args.file)
    RunStore(state_dir).check()  # before its cache is read
    dag = _load(args.file, args.env, state_dir / "cache", args.resources)
    return run_dag(dag, args)


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
    check_targets(dag, args.tasks)
    dag = with_resources(dag, getattr(args, "resources", {}))  # before anything starts or is stored
    if getattr(args, "num_jobs", None) is not None:
        from .model.matrix import num_jobs_problem, with_num_jobs

        problem = num_jobs_problem(dag, args.num_jobs)
        if problem:
            raise UsageError(problem)
        dag = with_num_jobs(dag, args.num_jobs)
    refuse_services_on_dask(dag, getattr(args, "executor", None) or dag.executor)
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
    return run_headless(session, quiet=args.quiet, watch=args.watch, notify=getattr(args, "notify", None))


def watch_note(plan) -> str:
    """What `--watch` looks at, said once it starts: which files re-run which tasks, and how it ends."""
    from .watch import STEP_MS

    count = sum(len(entries) for entries in plan.inputs.values())
    if not count:
        what = "no task declares inputs, so nothing re-runs on a change (declare `inputs` to re-run a task)"
    else:
        what = (
            f"watching {counted(count, 'input')} of {counted(len(plan.inputs), 'task')} "
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


def check_targets(dag: DagSpec, targets: Sequence[str]) -> None:
    """Every target is a task of the DAG, or a usage error naming the first that is not (with the closest name),
    before anything is started or stored."""
    from .model.targets import unknown_targets

    for name in unknown_targets(dag, targets):
        where = terminal_line(str(dag.source)) if dag.source is not None else f"the DAG {dag.name!r}"
        raise no_such_task(name, [], f"{where} has no task {name!r}", names=dag.tasks)


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
            return run_headless(session, quiet=True, watch=getattr(args, "watch", False), notify="never")

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


def run_headless(session, quiet: bool = False, watch: bool = False, notify: str | None = None) -> int:
    """Run the session, printing its progress on stdout; on a terminal, a note (a bell, a desktop notification)
    when it ends or its first task fails, as `notify` (--notify, else the DAG's `notify:`) says."""
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
    session.scheduler.start()
    if watch:
        session.watch()
        print(f"tuidag: {terminal_line(watch_note(session.watcher.plan))}", flush=True)
    while True:  # a timeout lets signal handlers run promptly
        done = session.scheduler.wait(0.2)
        if session.watching:  # under --watch the run stays until watch mode ends
            if done:
                session.watch_ended.wait(0.2)
        elif done:
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


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "graph": cmd_graph,
    "plan": cmd_plan,
    **plan_commands.COMMANDS,
    **history_commands.COMMANDS,
    **control_commands.COMMANDS,
    "completion": cmd_completion,
    **serve_command.COMMANDS,
}


def entry() -> None:
    """Console-script entry point."""
    exit_now(main())


def exit_now(code: int) -> None:
    """Exit with `code`, skipping the interpreter's teardown when nothing needs it: freeing every module and object
    one by one took 5 ms after a run of one task and 23 ms after one of 1,000 (a loaded 2-core machine). What exiting
    must still do is done first: the exit handlers (`atexit`: logging, multiprocessing, weakref finalizers) and the
    flush of stdout and stderr. A thread that is not a daemon (a library's, in a Python DAG) means a normal exit,
    which waits for it."""
    if any(not thread.daemon for thread in threading.enumerate() if thread is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader that is gone (see views/output), a stream closed already
            pass
    os._exit(code)
