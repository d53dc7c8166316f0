"""The `tuidag` command: parse arguments, load the DAG, pick a view, return an honest exit code."""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from .exit_codes import EXIT_OK, EXIT_USAGE
from .model.durations import format_duration, parse_duration
from .model.errors import DagErrors
from .model.loader import load_dag
from .model.spec import DagSpec
from .store.journal import read_header
from .store.runs import STATE_DIR_ENV, RunDir, RunStore, StateDirError, default_state_dir


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class UsageError(Exception):
    """A user mistake on the command line: printed as one line, exit code 2."""


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _env_arg(text: str) -> tuple[str, str]:
    """`KEY=VALUE`, or `KEY` for the value tuidag itself has (as `sky --env KEY` takes it)."""
    key, equals, value = text.partition("=")
    if not _ENV_NAME.fullmatch(key):
        raise argparse.ArgumentTypeError(f"expected KEY or KEY=VALUE with KEY made of letters, digits and '_' (not "
                                         f"starting with a digit), got {text!r}")
    if not equals:
        if key not in os.environ:
            raise argparse.ArgumentTypeError(f"{key} is not set in tuidag's environment: give its value, {key}=VALUE")
        value = os.environ[key]
    return key, value


def _resources_arg(text: str) -> dict[str, int]:
    from .model.resources import parse_capacities

    try:
        return parse_capacities(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_resources(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resources", type=_resources_arg, default={}, metavar="KIND=N[,KIND=N...]",
                        help="slot capacities, e.g. gpu=2,db=1, over the file's 'resources'; a SkyPilot task's "
                             "accelerators hold slots of their name when it has one here (V100=4)")


def with_resources(dag: DagSpec, args: argparse.Namespace) -> DagSpec:
    """The DAG with --resources over its capacities and every slot request checked (DagErrors when one can't be met)."""
    from .model.resources import resolve

    return resolve(dag, getattr(args, "resources", {}))


def _add_env(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", action="append", type=_env_arg, default=[], metavar="KEY[=VALUE]",
                        help="set a variable for every task, over the file's own (KEY alone: the value tuidag has); "
                             "fills a SkyPilot file's null envs; repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tuidag", description="Run DAGs of tasks, live in the terminal or headless.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    state = argparse.ArgumentParser(add_help=False)
    _add_state_dir(state)

    run = sub.add_parser("run", help="run a DAG")
    # Required, but optional to argparse: in `run --resume FILE` the file is taken as --resume's RUN_ID (see
    # _file_after_resume); the usage line shows it as required.
    run.add_argument("file", type=Path, nargs="?", metavar="FILE", help="the DAG file (YAML, SkyPilot pipeline, .py)")
    run.usage = "tuidag run [options] FILE"
    run.set_defaults(run_parser=run)
    add_run_options(run)

    validate = sub.add_parser("validate", help="check a DAG file and exit")
    validate.add_argument("file", type=Path)
    _add_env(validate)
    _add_resources(validate)

    graph = sub.add_parser("graph", help="print the DAG as text, Graphviz dot or Mermaid")
    graph.add_argument("file", type=Path)
    graph.add_argument("--format", choices=["text", "dot", "mermaid"], default="text")
    _add_env(graph)

    runs = sub.add_parser("runs", parents=[state], help="list earlier runs")
    runs.add_argument("file", type=Path, nargs="?", help="a DAG file, to use the state dir next to it")

    logs = sub.add_parser("logs", parents=[state], help="print a task's log")
    logs.add_argument("task")
    logs.add_argument("--run", dest="run_id", help="run id (or a unique prefix); default: the latest run that has TASK")
    logs.add_argument("-f", "--follow", action="store_true", help="follow a live log until the task ends")
    logs.add_argument("--file", type=Path, help="a DAG file, to use the state dir next to it")
    logs.add_argument("--raw", action="store_true",
                      help="print the bytes as they are on a terminal too (by default a terminal gets them made "
                           "safe: colours kept, other control sequences neutralised)")
    return parser


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The options of `tuidag run`, shared with `Dag.main()` so a Python DAG takes exactly the same ones."""
    view = run.add_mutually_exclusive_group()
    view.add_argument("--tui", dest="tui", action="store_true", default=None, help="always open the terminal UI")
    view.add_argument("--no-tui", dest="tui", action="store_false", help="never open the terminal UI")
    run.add_argument("-j", "--max-parallel", type=_positive_int, help="tasks running at once (default: from file)")
    run.add_argument("--kill-grace", type=_duration_arg, help="SIGTERM -> SIGKILL grace period (default 5s)")
    run.add_argument("-q", "--quiet", action="store_true", help="headless: only state changes and the summary")
    run.add_argument("--exit-on-finish", action="store_true", help="close the UI when the run finishes")
    run.add_argument("--resume", nargs="?", const="latest", metavar="RUN_ID",
                     help="reuse the tasks that succeeded in the latest (or the given) run of this DAG")
    run.add_argument("--executor", metavar="KIND",
                     help="where tasks run: local (default), dask (an existing cluster: --dask-address), or "
                          "dask-local[:N] (a local Dask cluster of N worker processes, one per CPU by default)")
    run.add_argument("--dask-address", metavar="tcp://HOST:8786",
                     help="the Dask scheduler for --executor dask (default: from the file, or $DASK_SCHEDULER_ADDRESS)")
    _add_env(run)
    _add_resources(run)
    _add_state_dir(run)


def _add_state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", type=Path, help="where runs are kept (default: .tuidag next to the DAG "
                                                       "file, or $TUIDAG_STATE_DIR)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        _file_after_resume(args)
    return guarded(COMMANDS[args.command], args)


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
    """Run a command, turning user mistakes into their message and exit code 2 (never a traceback)."""
    try:
        return command(args)
    except DagErrors as exc:
        for err in exc.errors:
            print(err, file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, StateDirError) as exc:
        print(f"tuidag: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `graph`, `runs`, `logs` into a reader that had enough (`run` outlives its readers)
        from .views.output import discard_output

        discard_output(sys.stdout)  # or the interpreter's last flush fails again, noisily
        return EXIT_OK


def _load(path: Path, env: list[tuple[str, str]], cache_dir: Path | None = None) -> DagSpec:
    """The DAG in `path`, with `env` (--env) given to every task; with a `cache_dir`, from there when it holds this
    exact file's model (see model/cache)."""
    if path.suffix == ".py":  # a Python file defining a tuidag.Dag, imported as a module
        from .api import load_python

        return load_python(path).with_env(dict(env))
    notes: list = []
    if cache_dir is not None:
        from .model.cache import load_dag_cached

        dag = load_dag_cached(path, cache_dir, notes, env)
    else:
        dag = load_dag(path, notes, env=env)
    for note in notes:  # e.g. SkyPilot keys that only matter on a cloud
        print(note, file=sys.stderr)
    return dag


def cmd_validate(args: argparse.Namespace) -> int:
    dag = with_resources(_load(args.file, args.env), args)
    edges = sum(len(t.depends_on) for t in dag.tasks.values())
    print(f"{args.file}: ok: {dag.name}, {len(dag.tasks)} task{'' if len(dag.tasks) == 1 else 's'}, "
          f"{edges} edge{'' if edges == 1 else 's'}")
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from .views.graph_text import FORMATS

    sys.stdout.write(FORMATS[args.format](_load(args.file, args.env)))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    outlive_readers()
    state_dir = _state_dir(args, args.file)
    RunStore(state_dir).check()  # before its cache is read
    dag = _load(args.file, args.env, state_dir / "cache")
    return run_dag(dag, args)


def outlive_readers() -> None:
    """A run's output may go to a reader that stops early (`| head -1`): that must stop the printing, not the run
    and not the truth of its exit code (see views/output)."""
    from .views.output import ReaderSafe

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, ReaderSafe):
            setattr(sys, name, ReaderSafe(stream))


def run_dag(dag: DagSpec, args: argparse.Namespace) -> int:
    """Run a loaded DAG with the options of `tuidag run`."""
    from .launch import RunSession  # the engine is imported only once there is something to run

    outlive_readers()
    dag = with_resources(dag, args)  # before anything starts or is stored
    state_dir = args.state_dir or default_state_dir(dag.source)
    store = open_store(state_dir)
    earlier = find_resumable(store, dag, args.resume) if args.resume else None
    executor = make_executor(dag, args)
    session = RunSession.create(dag, state_dir, max_parallel=args.max_parallel, kill_grace=args.kill_grace,
                                resume_from=earlier, executor=executor)
    if session.scheduler.parallel_note:
        print(f"tuidag: {session.scheduler.parallel_note}", file=sys.stderr)
    if earlier:
        reused = [n for n, s in session.scheduler.snapshot().items() if s.reused]
        print(f"tuidag: resuming {earlier.run_id}: reusing {len(reused)} of {len(dag.tasks)} tasks"
              + (f" ({', '.join(reused)})" if 0 < len(reused) <= 10 else ""), file=sys.stderr)
    tui = sys.stdout.isatty() and sys.stdin.isatty() if args.tui is None else args.tui
    if tui:
        from .ui.app import run_tui  # textual is imported only here

        return run_tui(session, exit_on_finish=args.exit_on_finish)
    return run_headless(session, quiet=args.quiet)


def make_executor(dag: DagSpec, args: argparse.Namespace):
    """The executor `--executor` (or the file's `executor:`) asks for; None for the local one. Dask is imported only
    here, only when asked for."""
    from .model.executor_choice import choose_executor

    try:
        choice = choose_executor(getattr(args, "executor", None) or dag.executor,
                                 getattr(args, "dask_address", None) or dag.dask_address)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not choice.uses_dask:
        return None
    from .engine.dask_executor import INSTALL_HINT, dask_missing

    if dask_missing():
        raise UsageError(INSTALL_HINT)
    from .engine.dask_executor import DaskExecutor, DaskUnreachable

    try:
        return DaskExecutor(choice.address, local_workers=choice.workers, dag_env=dag.env, resources=dag.resources)
    except DaskUnreachable as exc:
        raise UsageError(str(exc)) from None


def run_headless(session, quiet: bool = False) -> int:
    from .model.collector import freeze_survivors
    from .launch import install_signal_handlers
    from .views.headless import HeadlessReporter, counts_line, summary_table, use_colour

    colour = use_colour(sys.stdout)
    reporter = HeadlessReporter(sys.stdout, session.scheduler.log_headers, quiet=quiet, colour=colour)
    session.scheduler.subscribe(reporter)
    session.on_store_error = lambda message: print(message, file=sys.stderr, flush=True)
    install_signal_handlers(session)
    reporter.start(list(session.dag.topological_order))
    freeze_survivors()  # the DAG, the store and the engine live until exit: full collections during the run skip them
    print(f"tuidag: run {session.run.run_id} of {session.dag.name} ({len(session.dag.tasks)} "
          f"task{'' if len(session.dag.tasks) == 1 else 's'}), "
          f"logs in {session.run.logs}", flush=True)
    session.scheduler.start()
    while not session.scheduler.wait(0.2):  # a timeout lets signal handlers run promptly
        pass
    summary = session.finish()
    reporter.stop()
    out = sys.stdout
    out.write("\n" + summary_table(summary.snapshots, colour))
    out.write(reporter.failure_tails(summary.snapshots))
    out.write(counts_line(summary.snapshots, session.duration))
    if session.interrupted_by:
        out.write(f"tuidag: interrupted by {session.interrupted_by}; every task was stopped\n")
    if session.store_error:
        out.write(f"tuidag: run incomplete: {session.store_error} (see the error above)\n")
    out.flush()
    return session.exit_code(summary)


def _state_dir(args: argparse.Namespace, dag_file: Path | None) -> Path:
    return args.state_dir or default_state_dir(dag_file)


def open_store(state_dir: Path) -> RunStore:
    """The store, after reaping what runs interrupted by a crash left behind (and saying so)."""
    from .store.reaper import reap_interrupted

    store = RunStore(state_dir)
    store.check()  # a state dir others can write to is refused, not read or reaped
    for report in reap_interrupted(store):
        if report.processes:
            listed = ", ".join(f"{task}: pid {pid} ({name})" for task, pid, name in report.processes[:10])
            more = f" and {len(report.processes) - 10} more" if len(report.processes) > 10 else ""
            print(f"tuidag: run {report.run_id} was interrupted; killed {len(report.processes)} leftover "
                  f"process(es): {listed}{more}", file=sys.stderr)
        else:
            print(f"tuidag: run {report.run_id} was interrupted; no leftover processes", file=sys.stderr)
    return store


def find_resumable(store: RunStore, dag: DagSpec, which: str) -> RunDir:
    from .store.history import matching

    if which == "latest":
        runs = [r for r in store.runs() if read_header(r.journal).get("dag") == dag.name]
        if not runs:
            raise UsageError(f"--resume: no earlier run of {dag.name!r} in {store.state_dir}")
        run = runs[-1]
    else:
        run = _one_run(matching(store.runs(), which), which, f"in {store.state_dir}", "--resume: ")
    if run.owned():
        raise UsageError(f"--resume: run {run.run_id} is still running (pid {read_header(run.journal).get('pid')})")
    return run


def _one_run(found: list[RunDir], run_id: str, where: str, prefix: str = "") -> RunDir:
    """The one run `run_id` names, or a usage error saying there is none or listing the ones it could mean."""
    if not found:
        raise UsageError(f"{prefix}no run {run_id!r} {where}")
    if len(found) > 1:
        listed = "\n".join(f"  {_printable(run.run_id)}  {_printable(read_header(run.journal).get('dag', '?'))}"
                           for run in reversed(found[-10:]))
        more = f"\n  ... and {len(found) - 10} older" if len(found) > 10 else ""
        raise UsageError(f"{prefix}run id {run_id!r} is ambiguous: {len(found)} runs {where} start with it "
                         f"(give more of the id):\n{listed}{more}")
    return found[0]


def _printable(text: object) -> str:
    """A value read from the store, safe to print in a table: control characters (escape sequences, newlines)
    shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def _where(store: RunStore, dag_file: Path | None) -> str:
    return f"of {dag_file} in {store.state_dir}" if dag_file is not None else f"in {store.state_dir}"


def _no_runs(store: RunStore, args: argparse.Namespace) -> str:
    """Why nothing was found, and where runs are kept: a user in the wrong folder learns where to look."""
    from .store.history import nearby_state_dirs

    message = f"no runs {_where(store, args.file)}"
    if args.file is not None:
        others = len(store.runs())
        if others:
            message += f" ({others} run{'s' if others > 1 else ''} of other DAG files there: `tuidag runs "
            message += f"--state-dir {store.state_dir}` lists them)"
        return message
    if args.state_dir is not None or os.environ.get(STATE_DIR_ENV):
        return message
    message += ("\nruns are kept in .tuidag/ next to each DAG file (or in --state-dir DIR, or $TUIDAG_STATE_DIR): "
                "pass the DAG file, e.g. `tuidag runs FILE`, `tuidag logs TASK --file FILE`")
    found = nearby_state_dirs(Path.cwd())
    if found:
        listed = ", ".join(_printable(os.path.relpath(path)) for path in found)
        message += f"\nfolders below this one that hold runs: {listed}"
    return message


def cmd_runs(args: argparse.Namespace) -> int:
    from datetime import datetime

    from .store.history import run_info, runs_of

    store = open_store(_state_dir(args, args.file))
    runs = runs_of(store, args.file)
    if not runs:
        print(_no_runs(store, args))
        return EXIT_OK
    rows = [("RUN", "DAG", "STARTED", "DURATION", "TASKS", "OUTCOME")]
    for run in runs:
        info = run_info(run)
        started = datetime.fromtimestamp(info.started_at).strftime("%Y-%m-%d %H:%M:%S") if info.started_at else "-"
        counts = " ".join(f"{k.lower()}={v}" for k, v in sorted(info.counts.items()))
        rows.append(tuple(map(_printable, (info.run_id, info.dag, started, format_duration(info.duration), counts,
                                           info.outcome))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    from .store.history import has_task, matching, runs_of
    from .views.logs import LogPrinter, UnsafeLog, copy_log, follow_log

    store = open_store(_state_dir(args, args.file))
    runs = runs_of(store, args.file)
    where = _where(store, args.file)
    if args.run_id:
        run = _one_run(matching(runs, args.run_id), args.run_id, where)
        if not has_task(run, args.task):
            _no_such_task(args.task, [run], f"run {run.run_id} has no task {args.task!r}")
    elif not runs:
        raise UsageError(_no_runs(store, args))
    else:  # the latest run that has the task: a shared state dir also holds other DAGs' runs
        with_task = [r for r in runs if has_task(r, args.task)]
        if not with_task:
            _no_such_task(args.task, runs, f"no run {where} has a task {args.task!r}")
        run = with_task[-1]
    path = run.log_path(args.task)
    out = LogPrinter(sys.stdout.buffer, sanitize=not args.raw and sys.stdout.isatty(), encoding=sys.stdout.encoding)
    try:
        if args.follow:
            follow_log(run, args.task, out)
        elif os.path.lexists(path):
            copy_log(path, out)
        else:
            print(f"tuidag: {args.task} has no output yet ({path})", file=sys.stderr)
    except UnsafeLog as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def _no_such_task(task: str, runs: list[RunDir], message: str) -> None:
    from .model.errors import did_you_mean

    names: dict[str, None] = {}
    for run in reversed(runs[-20:]):  # the most recent runs' task names, for a suggestion
        names.update(dict.fromkeys(read_header(run.journal).get("tasks", ())))
    raise UsageError(_printable(message + did_you_mean(task, names)))


COMMANDS = {"run": cmd_run, "validate": cmd_validate, "graph": cmd_graph, "runs": cmd_runs, "logs": cmd_logs}


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
