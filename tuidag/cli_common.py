"""What the `tuidag` subcommands share: finding the state dir and the runs in it, and saying what went wrong.

Below `cli` (the parser and the commands) and `control_commands` (commands that act on a live run), so both use
one way of finding a run and neither imports the other.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from .exit_codes import EXIT_OK, EXIT_USAGE
from .model.counts import counted
from .model.errors import DagErrors
from .model.spec import DagSpec
from .store.journal import read_header
from .store.runs import STATE_DIR_ENV, RunDir, RunStore, StateDirError, default_state_dir
from .views.terminal_text import terminal_line


class UsageError(Exception):
    """A user mistake on the command line: printed as one line, exit code 2."""


def state_dir_of(args: argparse.Namespace, dag_file: Path | None) -> Path:
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
            print(
                f"tuidag: run {report.run_id} was interrupted; killed "
                f"{counted(len(report.processes), 'leftover process', 'leftover processes')}: {listed}{more}",
                file=sys.stderr,
            )
        else:
            print(f"tuidag: run {report.run_id} was interrupted; no leftover processes", file=sys.stderr)
    return store


def one_run(found: list[RunDir], run_id: str, where: str, prefix: str = "") -> RunDir:
    """The one run `run_id` names, or a usage error saying there is none or listing the ones it could mean."""
    if not found:
        raise UsageError(f"{prefix}no run {run_id!r} {where}")
    if len(found) > 1:
        listed = "\n".join(
            f"  {printable(run.run_id)}  {printable(read_header(run.journal).get('dag', '?'))}"
            for run in reversed(found[-10:])
        )
        more = f"\n  ... and {len(found) - 10} older" if len(found) > 10 else ""
        raise UsageError(
            f"{prefix}run id {run_id!r} is ambiguous: {len(found)} runs {where} start with it "
            f"(give more of the id):\n{listed}{more}"
        )
    return found[0]


def printable(text: object) -> str:
    """A value read from the store, safe to print in a table: control characters (escape sequences, newlines)
    shown as '?'."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def where_runs(store: RunStore, dag_file: Path | None) -> str:
    return f"of {dag_file} in {store.state_dir}" if dag_file is not None else f"in {store.state_dir}"


def no_runs(store: RunStore, args: argparse.Namespace) -> str:
    """Why nothing was found, and where runs are kept: a user in the wrong folder learns where to look."""
    from .store.history import nearby_state_dirs

    message = f"no runs {where_runs(store, args.file)}"
    if args.file is not None:
        others = len(store.runs())
        if others:
            message += f" ({others} run{'s' if others > 1 else ''} of other DAG files there: `tuidag runs "
            message += f"--state-dir {store.state_dir}` lists them)"
        return message
    if args.state_dir is not None or os.environ.get(STATE_DIR_ENV):
        return message
    message += (
        "\nruns are kept in .tuidag/ next to each DAG file (or in --state-dir DIR, or $TUIDAG_STATE_DIR): "
        "pass the DAG file, e.g. `tuidag runs FILE`, `tuidag logs TASK --file FILE`"
    )
    found = nearby_state_dirs(Path.cwd())
    if found:
        listed = ", ".join(printable(os.path.relpath(path)) for path in found)
        message += f"\nfolders below this one that hold runs: {listed}"
    return message


def no_such_task(task: str, runs: list[RunDir], message: str, names: Iterable[str] = ()) -> UsageError:
    """The error for a task name none of `runs` (nor `names`, a DAG's tasks) has: `message`, with the closest name
    of their tasks suggested (` (did you mean 'train-large'?)`). Every command that takes task names (`run`'s
    targets, `logs`, `runs --task`, `cancel`, `rerun`) says it this way."""
    from .model.errors import did_you_mean

    known: dict[str, None] = dict.fromkeys(names)
    for run in reversed(runs[-20:]):  # the most recent runs' task names, for a suggestion
        known.update(dict.fromkeys(read_header(run.journal).get("tasks", ())))
    return UsageError(printable(message + did_you_mean(task, known)))


def guarded(command, args: argparse.Namespace, outlives_readers: bool = False) -> int:
    """Run a command, turning user mistakes into their message and exit code 2 (never a traceback), and output that
    can't be written into exit 0 (a reader that had enough) or 1 (lost: a full device, a terminal gone). A command
    that `outlives_readers` (`run`: see run_commands.outlive_readers) keeps running when its output can't be written."""
    from .views.output import CommandOutput, OutputLost

    stdout = sys.stdout
    if not outlives_readers and stdout is not None and not isinstance(stdout, CommandOutput):
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


def read_dag(
    path: Path, env: list[tuple[str, str]], cache_dir: Path | None = None, notes: list | None = None
) -> DagSpec:
    """The DAG in `path` (a Python file defining a tuidag.Dag, or YAML: from `cache_dir` when it holds this exact
    file's model), with `env` (--env) given to every task. DagErrors, located, when the file has mistakes."""
    if path.suffix == ".py":  # a Python file defining a tuidag.Dag, imported as a module
        from .model.python_loader import load_python

        return load_python(path, notes).with_env(dict(env))
    if cache_dir is not None:
        from .model.cache import load_dag_cached

        return load_dag_cached(path, cache_dir, notes, env)
    from .model.loader import load_dag

    return load_dag(path, notes, env=env)
