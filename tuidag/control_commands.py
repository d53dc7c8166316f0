"""Commands that act on a live run from any terminal or script: cancel, rerun, pause, resume, stop; and the two
that open the UI on a run in another process or a finished one: attach, show.

Each finds the run (`--run RUN`, or the latest live run of `--file FILE`'s state dir or of `--state-dir`), sends one
request over its control socket and prints what changed: the lists the UI's confirmations show. Exit codes: 0 done,
1 refused (the reason is printed: a re-run blocked by a failed dependency), 2 a usage error or no such live run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import cli_options as options
from .cli_common import UsageError, no_such_task, one_run, open_store, printable, state_dir_of, where_runs
from .exit_codes import EXIT_FAILED, EXIT_OK
from .model.counts import counted, number
from .store.runs import RunDir, RunStore


def add_parsers(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False, parents=[state])
    common.add_argument(
        "--run", dest="run_id", metavar="RUN", help="run id (or a unique prefix); default: the latest live run"
    )
    common.add_argument("--file", type=Path, help="a DAG file: its runs, in the state dir next to it")
    cancel = sub.add_parser("cancel", parents=[common], help="cancel tasks of a live run, with everything downstream")
    cancel.add_argument(
        "tasks", nargs="*", metavar="TASK", help="the tasks to cancel, with everything downstream of each"
    )
    cancel.add_argument("--all", action="store_true", help="cancel every unfinished task")
    rerun = sub.add_parser("rerun", parents=[common], help="re-run failed, cancelled or skipped tasks of a live run")
    rerun.add_argument(
        "tasks", nargs="+", metavar="TASK", help="the tasks to run again, with their unfinished downstream"
    )
    sub.add_parser("pause", parents=[common], help="pause a live run: running tasks go on, nothing new starts")
    sub.add_parser("resume", parents=[common], help="resume a paused live run")
    sub.add_parser("stop", parents=[common], help="stop a live run: cancel every unfinished task, and it ends")
    attach = sub.add_parser(
        "attach",
        parents=[state],
        help="open the UI on a run going on in another process (on a finished run: browse it)",
    )
    show = sub.add_parser("show", parents=[state], help="browse a run in the UI: its graph, states and logs")
    for viewer in (attach, show):
        viewer.add_argument(
            "run_id",
            nargs="?",
            metavar="RUN",
            help="run id (or a unique prefix); default: the latest " + ("live run" if viewer is attach else "run"),
        )
        viewer.add_argument("--file", type=Path, help="a DAG file: its runs, in the state dir next to it")
    options.add_notify(attach)
    show.add_argument("--task", metavar="NAME", help="print this task's detail instead (what `i` shows in the UI)")
    show.add_argument("--format", choices=["text", "json"], default="text", help="of --task's detail")


def live_runs(store: RunStore, dag_file: Path | None) -> list[RunDir]:
    """Runs whose engine is alive (it holds the run's owner lock), oldest first."""
    from .store.history import runs_of

    return [run for run in runs_of(store, dag_file) if run.owned()]


def find_live_run(args: argparse.Namespace) -> RunDir:
    """The run a control command is about; UsageError (exit 2) when there is no such live run."""
    from .store.history import matching, runs_of

    store = open_store(state_dir_of(args, args.file))
    where = where_runs(store, args.file)
    if args.run_id:
        run = one_run(matching(runs_of(store, args.file), args.run_id), args.run_id, where)
        if not run.owned():
            raise UsageError(f"run {printable(run.run_id)} is not running (it has ended): nothing to control")
        return run
    live = live_runs(store, args.file)
    if not live:
        raise UsageError(f"no live run {where}")
    return live[-1]


def find_run_to_view(args: argparse.Namespace, live: bool) -> RunDir:
    """`attach`'s run (by default the latest live one) or `show`'s (by default the latest)."""
    from .store.history import matching, runs_of

    store = open_store(state_dir_of(args, args.file))
    where = where_runs(store, args.file)
    if args.run_id:
        return one_run(matching(runs_of(store, args.file), args.run_id), args.run_id, where)
    found = live_runs(store, args.file) if live else runs_of(store, args.file)
    if not found:
        raise UsageError(
            f"no {'live run' if live else 'run'} {where}" + (" (`tuidag show` browses a finished one)" if live else "")
        )
    return found[-1]


def cmd_attach(args: argparse.Namespace) -> int:
    from .ui.viewer import run_viewer  # textual is imported only here

    return run_viewer(find_run_to_view(args, live=True), foreground=False, engine_pid=None, notify=args.notify)


def cmd_show(args: argparse.Namespace) -> int:
    if args.task is None and args.format != "text":
        raise UsageError("--format is for a task's detail: give --task NAME too")
    run = find_run_to_view(args, live=False)
    if args.task is not None:
        from .detail_command import print_detail

        return print_detail(args, run, open_store(state_dir_of(args, args.file)))
    from .ui.viewer import run_viewer

    return run_viewer(run, foreground=False, engine_pid=None)


def _act(args: argparse.Namespace, op: str, word: str, said: Callable[[dict], str], **fields: Any) -> int:
    """Send `op` to the live run and print `said(reply)`; a refusal prints why (after what was done before it)
    and gives exit code 1. No such live run, or a task it does not have: UsageError (exit 2)."""
    from .control.client import ControlClient, NotLive, Refused
    from .store.history import group_instances, has_task

    run = find_live_run(args)
    for task in fields.get("tasks", ()):
        # cancel and rerun take a matrix task's name, or a selection of its instances (the engine, which has their
        # values, says whether it selects any)
        if not has_task(run, task, or_group=True) and group_instances(run, task.partition("[")[0]) is None:
            raise no_such_task(task, [run], f"run {run.run_id} has no task {task!r}")
    try:
        with ControlClient(run) as client:
            answer = client.request(op, **fields)
    except Refused as refused:
        if refused.changed:
            print(f"tuidag: run {run.run_id}: {said({'changed': refused.changed})}")
        print(f"tuidag: {word} refused: {printable(str(refused))}", file=sys.stderr)
        return EXIT_FAILED
    except NotLive as exc:
        raise UsageError(str(exc)) from None
    print(f"tuidag: run {run.run_id}: {said(answer)}")
    return EXIT_OK


def _listed(names: list[str]) -> str:
    shown = ", ".join(printable(n) for n in names[:20])
    return shown + (f" and {number(len(names) - 20)} more" if len(names) > 20 else "")


def _tasks(names: list[str]) -> str:
    return f"{counted(len(names), 'task')}: {_listed(names)}"


def cmd_cancel(args: argparse.Namespace) -> int:
    if args.all == bool(args.tasks):
        raise UsageError("cancel: name the tasks to cancel, or --all (not both)")
    nothing = "nothing to cancel: " + ("every task already finished" if args.all else "already finished")

    def said(answer: dict) -> str:
        return f"cancelling {_tasks(answer['changed'])}" if answer["changed"] else nothing

    if args.all:
        return _act(args, "cancel_all", "cancel", said, origin="cli")
    return _act(args, "cancel", "cancel", said, tasks=args.tasks, origin="cli")


def cmd_rerun(args: argparse.Namespace) -> int:
    return _act(args, "rerun", "rerun", lambda answer: f"re-running {_tasks(answer['changed'])}", tasks=args.tasks)


def cmd_pause(args: argparse.Namespace) -> int:
    return _act(
        args,
        "pause",
        "pause",
        lambda answer: "paused: running tasks go on, nothing new starts" if answer["changed"] else "was already paused",
    )


def cmd_resume(args: argparse.Namespace) -> int:
    return _act(args, "resume", "resume", lambda answer: "resumed" if answer["changed"] else "was not paused")


def cmd_stop(args: argparse.Namespace) -> int:
    return _act(
        args,
        "stop",
        "stop",
        lambda answer: (
            "stopping: "
            + (f"cancelling {_tasks(answer['changed'])}" if answer["changed"] else "every task already finished")
        ),
        origin="cli",
    )


COMMANDS = {
    "cancel": cmd_cancel,
    "rerun": cmd_rerun,
    "pause": cmd_pause,
    "resume": cmd_resume,
    "stop": cmd_stop,
    "attach": cmd_attach,
    "show": cmd_show,
}
