"""The command line's options and their value types, shared by the commands that take them (and by `Dag.main()`,
which takes exactly `tuidag run`'s): a bad value is argparse's usage error, exit 2, before anything is loaded."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from .model.durations import parse_duration
from .model.errors import short_repr
from .model.spec import MAX_COUNT, NOTIFY_CHOICES

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Parser(argparse.ArgumentParser):
    """argparse's parser, its help as wide as argparse makes it (`help_width`) without importing `shutil` for that:
    argparse makes a help formatter for every option it is given, and the first one imported shutil, which loads the
    bz2, lzma and zlib modules (2.4 ms of every command's start-up, measured on a loaded 2-core machine). Sub-command
    parsers are of the same class."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=help_width())  # type: ignore[call-arg]


def help_width() -> int:
    """`shutil.get_terminal_size().columns - 2`, argparse's width: $COLUMNS, else the width of the terminal on
    stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns if columns > 0 else 80) - 2


def duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"expected an integer from 1 to {MAX_COUNT:,}, got {short_repr(text)}")
    return value


def env_arg(text: str) -> tuple[str, str]:
    """`KEY=VALUE`, or `KEY` for the value tuidag itself has (as `sky --env KEY` takes it)."""
    key, equals, value = text.partition("=")
    if not _ENV_NAME.fullmatch(key):
        raise argparse.ArgumentTypeError(
            f"expected KEY or KEY=VALUE with KEY made of letters, digits and '_' (not "
            f"starting with a digit), got {text!r}"
        )
    if not equals:
        if key not in os.environ:
            raise argparse.ArgumentTypeError(f"{key} is not set in tuidag's environment: give its value, {key}=VALUE")
        value = os.environ[key]
    return key, value


def resources_arg(text: str) -> dict[str, int]:
    from .model.resources import parse_capacities

    try:
        return parse_capacities(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_resources(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--resources",
        type=resources_arg,
        default={},
        metavar="KIND=N[,KIND=N...]",
        help="slot capacities, e.g. gpu=2,db=1, over the file's 'resources'; a SkyPilot task's "
        "accelerators hold slots of their name when it has one here (V100=4)",
    )


def add_notify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--notify",
        choices=NOTIFY_CHOICES,
        help="ring the terminal (a bell and a desktop notification) when the run ends (end, the default), when a "
        "task fails (failure) or never, over the DAG's 'notify'; never in a pipe or under CI",
    )


def add_env(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env",
        action="append",
        type=env_arg,
        default=[],
        metavar="KEY[=VALUE]",
        help="set a variable for every task, over the file's own (KEY alone: the value tuidag has); "
        "fills a SkyPilot file's null envs; repeatable",
    )


def add_run_options(run: argparse.ArgumentParser) -> None:
    """The options of `tuidag run`, shared with `Dag.main()` so a Python DAG takes exactly the same ones."""
    run.add_argument(
        "tasks",
        nargs="*",
        metavar="TASK",
        help="run only these tasks and the tasks they need (default: every task)",
    )
    view = run.add_mutually_exclusive_group()
    view.add_argument("--tui", dest="tui", action="store_true", default=None, help="always open the terminal UI")
    view.add_argument("--no-tui", dest="tui", action="store_false", help="never open the terminal UI")
    run.add_argument("-j", "--max-parallel", type=positive_int, help="tasks running at once (default: from file)")
    run.add_argument("--kill-grace", type=duration_arg, help="SIGTERM -> SIGKILL grace period (default 5s)")
    run.add_argument("-q", "--quiet", action="store_true", help="headless: only state changes and the summary")
    run.add_argument("--exit-on-finish", action="store_true", help="close the UI when the run finishes")
    add_notify(run)
    run.add_argument(
        "--watch",
        action="store_true",
        help="after the run, stay: a change to a task's inputs runs it and everything downstream again (q or "
        "Ctrl+C ends it)",
    )
    run.add_argument(
        "-d",
        "--detach",
        action="store_true",
        help="run in the background, detached from the terminal: prints the run id and how to attach",
    )
    run.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="RUN_ID",
        help="reuse the tasks that succeeded in the latest (or the given) run of this DAG",
    )
    run.add_argument(
        "--executor",
        metavar="KIND",
        help="where tasks run: local (default), dask (an existing cluster: --dask-address), or "
        "dask-local[:N] (a local Dask cluster of N worker processes, one per CPU by default)",
    )
    run.add_argument(
        "--dask-address",
        metavar="tcp://HOST:8786",
        help="the Dask scheduler for --executor dask (default: from the file, or $DASK_SCHEDULER_ADDRESS)",
    )
    run.add_argument(
        "--dask-timeout",
        type=duration_arg,
        metavar="DURATION",
        help="how long to wait for the Dask scheduler to answer (default 5s)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="start nothing: say what would run, be up to date or restored, and why"
    )
    add_freshness(run)
    run.add_argument(
        "--num-jobs",
        type=positive_int,
        metavar="N",
        help="run the file's one task N times, as `sky jobs launch --num-jobs N`: a matrix of N instances with "
        "SKYPILOT_JOB_RANK 0..N-1 and SKYPILOT_NUM_JOBS",
    )
    add_env(run)
    add_resources(run)
    add_state_dir(run)


def add_freshness(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force", "--no-cache", dest="force", action="store_true", help="run every task, even the up-to-date ones"
    )
    parser.add_argument(
        "--from",
        dest="from_tasks",
        action="append",
        default=[],
        metavar="TASK",
        help="run TASK and everything downstream of it even if up to date (repeatable)",
    )


def add_state_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="where runs are kept (default: .tuidag next to the DAG file, or $TUIDAG_STATE_DIR)",
    )
