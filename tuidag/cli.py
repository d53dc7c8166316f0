"""The `tuidag` command: parse arguments, load the DAG, pick a view, return an honest exit code."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from . import cli_options as options
from . import completion, control_commands, history_commands, plan_commands, schema_command, serve_command
from .cli_common import guarded, read_dag, state_dir_of
from .exit_codes import EXIT_OK
from .model.counts import counted
from .model.errors import DagErrors
from .model.spec import DagSpec
from .run_commands import check_targets, outlive_readers, run_dag, with_resources
from .store.runs import RunStore
from .version import __version__
from .views.terminal_text import terminal_line


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
    validate.add_argument("file", type=Path, metavar="FILE", help="the DAG file (YAML, SkyPilot pipeline, .py)")
    options.add_env(validate)
    options.add_resources(validate)

    graph = sub.add_parser("graph", help="print the DAG as text, Graphviz dot or Mermaid")
    graph.add_argument("file", type=Path, metavar="FILE", help="the DAG file (YAML, SkyPilot pipeline, .py)")
    graph.add_argument(
        "--format", choices=["text", "dot", "mermaid"], default="text", help="text (default), dot or mermaid"
    )
    options.add_env(graph)

    plan = sub.add_parser("plan", parents=[state], help="say what a run would do with each task and why; start nothing")
    plan.add_argument("file", type=Path, metavar="FILE", help="the DAG file (YAML, SkyPilot pipeline, .py)")
    plan.add_argument("tasks", nargs="*", metavar="TASK", help="only these tasks and what they need")
    plan.add_argument("--format", choices=["text", "json"], default="text", help="a line per task (default), or JSON")
    options.add_freshness(plan)
    options.add_env(plan)
    options.add_resources(plan)

    history_commands.add_parsers(sub, state)
    plan_commands.add_parsers(sub, state)
    control_commands.add_parsers(sub, state)
    completion.add_parsers(sub)
    schema_command.add_parsers(sub)
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
    return guarded(COMMANDS[args.command], args, outlives_readers=args.command == "run")


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


def _load(
    path: Path, env: list[tuple[str, str]], cache_dir: Path | None = None, resources: dict[str, int] | None = None
) -> DagSpec:
    """The DAG in `path`, with `env` (--env) given to every task; with a `cache_dir`, from there when it holds this
    exact file's model (see model/cache). With `resources` (--resources, for the commands that run or check slots)
    its slot requests are checked against the capacities, and reported with the file's other mistakes."""
    notes: list = []
    try:
        dag = read_dag(path, env, cache_dir, notes)
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
    args.tasks = check_targets(dag, args.tasks)
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


COMMANDS = {
    "run": cmd_run,
    "validate": cmd_validate,
    "graph": cmd_graph,
    "plan": cmd_plan,
    **plan_commands.COMMANDS,
    **history_commands.COMMANDS,
    **control_commands.COMMANDS,
    "completion": cmd_completion,
    **schema_command.COMMANDS,
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
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)  # CPython's own, which its normal exit calls
    if run_exit_handlers is None or any(
        not thread.daemon for thread in threading.enumerate() if thread is not threading.main_thread()
    ):
        sys.exit(code)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a reader that is gone (see views/output), a stream closed already
            pass
    os._exit(code)
