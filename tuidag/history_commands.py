"""Commands that read the run store: `runs` (history, trends, one task across runs), `logs` and `report`.

Beside `control_commands` (commands on a live run), below `cli`, which only parses and dispatches.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .cli_common import UsageError, no_runs, no_such_task, one_run, open_store, printable, state_dir_of, where_runs
from .exit_codes import EXIT_FAILED, EXIT_OK
from .model.durations import format_duration
from .model.state import COMPLETE_OUTCOMES
from .store.journal import read_header
from .store.runs import RunDir, RunStore
from .views.report_file import parse_mode

if TYPE_CHECKING:
    from .store.history import RunInfo


def add_parsers(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    runs = sub.add_parser("runs", parents=[state], help="list earlier runs")
    runs.add_argument("file", type=Path, nargs="?", metavar="FILE", help="a DAG file, to use the state dir next to it")
    runs.add_argument("--task", metavar="NAME", help="one task's state, duration and attempts in each run")

    logs = sub.add_parser("logs", parents=[state], help="print a task's log")
    logs.add_argument("task", metavar="TASK", help="the task whose log to print (a matrix task: each instance's)")
    logs.add_argument("--run", dest="run_id", help="run id (or a unique prefix); default: the latest run that has TASK")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="follow a live log until the task ends (a matrix task's: all)"
    )
    logs.add_argument("--file", type=Path, help="a DAG file, to use the state dir next to it")
    logs.add_argument(
        "--raw",
        action="store_true",
        help="print the bytes as they are on a terminal too (by default a terminal gets them made "
        "safe: colours kept, other control sequences neutralised)",
    )
    report = sub.add_parser("report", parents=[state], help="write a run's report: one HTML file (or JSON)")
    report.add_argument("run_id", nargs="?", metavar="RUN", help="run id (or a unique prefix); default: the latest run")
    report.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it (default: tuidag-report-RUN.html or .json here; - for stdout)",
    )
    report.add_argument("--format", choices=["html", "json"], default="html", help="html (default) or json")
    report.add_argument(
        "--mode",
        type=_mode_arg,
        default=None,
        metavar="OCTAL",
        help="the file's permissions (default 600: it holds log lines, which may hold secrets; "
        "644 to let others read it)",
    )
    report.add_argument("--file", type=Path, help="a DAG file, to use the state dir next to it (and its runs)")


def cmd_runs(args: argparse.Namespace) -> int:
    from .store.history import run_info, runs_of

    store = open_store(state_dir_of(args, args.file))
    runs = runs_of(store, args.file)
    if not runs:
        print(no_runs(store, args))
        return EXIT_OK
    if args.task is not None:
        return _task_runs(store, runs, args)
    rows: list[tuple[str, ...]] = [("RUN", "DAG", "STARTED", "DURATION", "TASKS", "OUTCOME")]
    infos = [run_info(run) for run in runs]
    for run, info in zip(runs, infos):
        counts = " ".join(f"{k.lower()}={v}" for k, v in sorted(info.counts.items()))
        rows.append(
            tuple(
                map(
                    printable,
                    (
                        info.run_id,
                        info.dag,
                        _when(info.started_at),
                        format_duration(info.duration),
                        counts,
                        _live_outcome(run, info.outcome),
                    ),
                )
            )
        )
    # Where each run ran, once any ran elsewhere than here (on Dask): the executor and its scheduler.
    where = [str(read_header(run.journal).get("executor") or "local") for run in runs]
    if any(w != "local" for w in where):
        rows = [(*row, printable(w)) for row, w in zip(rows, ["EXECUTOR", *where])]
    _print_table(rows)
    trends = _trends(infos)
    if trends:
        print(f"\nduration trend per DAG, oldest to newest (the last {TREND_RUNS} complete runs):")
        _print_table(trends)
    return EXIT_OK


TREND_RUNS = 20


def _trends(infos: list[RunInfo]) -> list[tuple[str, ...]]:
    """For each DAG with two complete runs or more: a sparkline of its last runs' durations, the latest and the
    median. Runs still going on, interrupted or cancelled are left out: their durations say nothing about the DAG;
    nor do runs of some targets only (tasks of them UNTARGETED), which ran a part of it."""
    from statistics import median

    from .views.sparkline import sparkline

    durations: dict[str, list[float]] = {}
    for info in infos:
        if info.duration is not None and info.outcome in COMPLETE_OUTCOMES and not info.counts.get("UNTARGETED"):
            durations.setdefault(info.dag, []).append(info.duration)
    return [
        (
            printable(dag),
            sparkline(values[-TREND_RUNS:]),
            f"latest {format_duration(values[-1])}",
            f"median {format_duration(median(values[-TREND_RUNS:]))}",
            _range(values[-TREND_RUNS:]),
        )
        for dag, values in durations.items()
        if len(values) >= 2
    ]


def _range(values: list[float]) -> str:
    """What the sparkline spans: it scales lowest to highest, so a small wobble looks as tall as a big change."""
    return f"range {format_duration(min(values))}-{format_duration(max(values))}"


def _task_runs(store: RunStore, runs: list[RunDir], args: argparse.Namespace) -> int:
    """`runs --task NAME`: one task's state, duration and attempts in each run that has it, and its trend; a matrix
    task's instances together (`_group_row`)."""
    from .model.state import TaskState
    from .store.history import group_instances, run_info, task_record
    from .views.sparkline import sparkline

    rows: list[tuple[str, ...]] = [("RUN", "STARTED", "STATE", "DURATION", "ATTEMPTS")]
    durations = []
    for run in runs:
        record = task_record(run, args.task)
        if record is None:
            instances = group_instances(run, args.task)  # a matrix task: its instances together
            if instances is not None:
                group = _group_row(run, instances)
                if group.seconds is not None and group.succeeded and run_info(run).outcome in COMPLETE_OUTCOMES:
                    durations.append(group.seconds)
                rows.append(tuple(map(printable, (run.run_id, _when(group.started_at), *group[1:4]))))
            continue
        duration = record.duration if not record.reused else None
        if duration is not None and record.state is TaskState.SUCCEEDED and run_info(run).outcome in COMPLETE_OUTCOMES:
            durations.append(duration)  # a trend of complete runs only, as the DAG's
        rows.append(
            tuple(
                map(
                    printable,
                    (
                        run.run_id,
                        _when(record.started_at),
                        record.state.value + (" (reused)" if record.reused else ""),
                        format_duration(duration),
                        record.attempt,
                    ),
                )
            )
        )
    if len(rows) == 1:
        raise no_such_task(args.task, runs, f"no run {where_runs(store, args.file)} has a task {args.task!r}")
    _print_table(rows)
    if len(durations) >= 2:
        last = durations[-TREND_RUNS:]
        print(f"\nits last {len(last)} successes, oldest to newest: {sparkline(last)}  {_range(last)}")
    return EXIT_OK


class _GroupRow(NamedTuple):
    started_at: float | None
    state: str  # `3 succeeded`, `2 succeeded, 1 failed`
    duration: str
    attempts: int
    succeeded: bool  # every instance did
    seconds: float | None  # from the first instance's start to the last one's end


def _group_row(run: RunDir, instances: list[str]) -> _GroupRow:
    """A matrix task in one run: its instances' states counted, from the first one's start to the last one's end,
    their attempts summed. The journal is read once (`task_record` would read it once per instance)."""
    from .model.counts import states_said
    from .model.state import TaskState
    from .store.journal import replay

    tasks = replay(run.journal).tasks
    records = [tasks[name] for name in instances if name in tasks]
    counts: dict[str, int] = {}
    for name in instances:
        state = tasks[name].state.value if name in tasks else TaskState.PENDING.value
        counts[state] = counts.get(state, 0) + 1
    starts = [r.started_at for r in records if r.started_at is not None]
    ends = [r.finished_at for r in records if r.finished_at is not None]
    seconds = max(ends) - min(starts) if starts and ends and len(ends) == len(instances) else None
    return _GroupRow(
        min(starts) if starts else None,
        states_said(counts),
        format_duration(seconds),
        sum(r.attempt for r in records),
        counts == {TaskState.SUCCEEDED.value: len(instances)},
        seconds,
    )


def _when(timestamp: float | None) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S") if timestamp else "-"


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _live_outcome(run: RunDir, outcome: str) -> str:
    """A live run says who runs it and who watches: `running (pid 123, 2 viewers)`."""
    if outcome != "running":
        return outcome
    from .control.client import live_status

    status = live_status(run)
    if status is None or type(status.get("pid")) is not int or type(status.get("viewers")) is not int:
        return _silent_outcome(run, outcome)
    viewers = status["viewers"]
    paused = ", paused" if status.get("paused") is True else ""
    return f"running (pid {status['pid']}, {viewers} viewer{'' if viewers == 1 else 's'}{paused})"


def _silent_outcome(run: RunDir, outcome: str) -> str:
    """A live run whose engine did not answer: `running (pid 123, stopped: not answering until continued)` when it
    is stopped (SIGSTOP, Ctrl+Z), `running (pid 123, not answering)` otherwise (too busy, or just ending)."""
    from .control.run_record import process_stopped

    pid = read_header(run.journal).get("pid")
    if type(pid) is not int or pid <= 0:
        return outcome
    if process_stopped(pid):
        return f"running (pid {pid}, stopped: not answering until continued)"
    return f"running (pid {pid}, not answering)"


def cmd_logs(args: argparse.Namespace) -> int:
    from .store.history import group_instances, has_task, matching, runs_of
    from .views.logs import LogPrinter, UnsafeLog, copy_log, follow_logs

    store = open_store(state_dir_of(args, args.file))
    runs = runs_of(store, args.file)
    where = where_runs(store, args.file)
    if args.run_id:
        run = one_run(matching(runs, args.run_id), args.run_id, where)
        if not has_task(run, args.task, or_group=True):
            raise no_such_task(args.task, [run], f"run {run.run_id} has no task {args.task!r}")
    elif not runs:
        raise UsageError(no_runs(store, args))
    else:  # the latest run that has the task: a shared state dir also holds other DAGs' runs
        with_task = [r for r in runs if has_task(r, args.task, or_group=True)]
        if not with_task:
            raise no_such_task(args.task, runs, f"no run {where} has a task {args.task!r}")
        run = with_task[-1]
    instances = group_instances(run, args.task)
    sanitize = not args.raw and sys.stdout.isatty()
    try:
        if instances is not None:
            return _group_logs(run, instances, args.follow, sanitize)
        path = run.log_path(args.task)
        out = LogPrinter(sys.stdout.buffer, sanitize=sanitize, encoding=sys.stdout.encoding)
        if args.follow and (cut := follow_logs(run, {args.task: out})) is not None:
            print(f"tuidag: error: {printable(cut)}", file=sys.stderr)
            return EXIT_FAILED
        elif os.path.lexists(path):
            copy_log(path, out)
        else:
            return _no_output(store, run, runs, args)
    except UnsafeLog as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def _group_logs(run: RunDir, instances: list[str], follow: bool, sanitize: bool) -> int:
    """A matrix task's logs: each instance's under a `==> name <==` heading (a blank line before every heading but
    the first), one after another, or with `follow` as they grow, until every instance has ended. An instance
    without a log yet is left out until it has one; exit 1 when none has any (and the run is over)."""
    from .views.logs import Headed, LogPrinter, copy_log, follow_logs

    encoding = sys.stdout.encoding

    def heading(name: str, after: bool) -> bytes:
        blank = "\n" if after else ""
        return f"{blank}==> {printable(name)} <==\n".encode(encoding, "replace")

    last: list[str | None] = [None]
    printers = {
        name: LogPrinter(Headed(sys.stdout.buffer, name, last, heading), sanitize=sanitize, encoding=encoding)
        for name in instances
    }
    if follow:
        cut = follow_logs(run, printers)
        if cut is not None:
            print(f"tuidag: error: {printable(cut)}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK
    shown = 0
    for name, out in printers.items():
        path = run.log_path(name)
        if os.path.lexists(path):
            copy_log(path, out)
            shown += 1
    if not shown:
        state = "yet" if run.owned() else f"in run {run.run_id}"
        print(f"tuidag: none of the {len(instances)} instances has output {state}", file=sys.stderr)
        return EXIT_OK if run.owned() else EXIT_FAILED
    return EXIT_OK


def _no_output(store: RunStore, run: RunDir, runs: list[RunDir], args: argparse.Namespace) -> int:
    """A task without a log in `run`: one that has not started yet in a live run has no output *yet* (exit 0); one
    that never ran there (cancelled or skipped before it started, not a target, or the run ended first) is said to
    have never run, why, and which run last has output of it (exit 1)."""
    from .model.state import TaskState
    from .store.history import task_record

    task = args.task
    record = task_record(run, task)
    live = run.owned()
    if record is None or record.attempt or (live and not record.state.terminal):
        print(f"tuidag: {printable(task)} has no output yet ({printable(run.log_path(task))})", file=sys.stderr)
        return EXIT_OK
    if record.reused:
        why = "its result was reused from an earlier run"
    elif record.state is TaskState.UNTARGETED:
        why = "it was not a target of that run"
    elif record.state.terminal:
        reason = f" ({printable(record.reason)})" if record.reason else ""
        when = "" if record.state is TaskState.SKIPPED else " before it started"
        why = f"it was {record.state.value.lower()}{when}{reason}"
    else:
        why = f"the run ended before it started (it was {record.state.value})"
    print(f"tuidag: {printable(task)} never ran in run {run.run_id}: {why}", file=sys.stderr)
    earlier = [r for r in runs if r is not run and os.path.lexists(r.log_path(task))]
    if earlier:
        from shlex import quote

        where = (f" --file {quote(printable(args.file))}" if args.file else "") + (
            f" --state-dir {quote(printable(args.state_dir))}" if args.state_dir else ""
        )
        print(
            f"tuidag: the latest run with output of it is {earlier[-1].run_id}: "
            f"tuidag logs {printable(task)} --run {earlier[-1].run_id}{where}",
            file=sys.stderr,
        )
    else:
        print(f"tuidag: no run {where_runs(store, args.file)} has output of it", file=sys.stderr)
    return EXIT_FAILED


def cmd_report(args: argparse.Namespace) -> int:
    from .model.collector import collector_paused
    from .store.history import matching, runs_of
    from .views.report import render_html, render_json
    from .views.report_facts import report_facts
    from .views.report_file import DEFAULT_MODE, ReportFileError, write_report

    store = open_store(state_dir_of(args, args.file))
    runs = runs_of(store, args.file)
    if args.run_id:
        run = one_run(matching(runs, args.run_id), args.run_id, where_runs(store, args.file))
    elif not runs:
        raise UsageError(no_runs(store, args))
    else:
        run = runs[-1]
    with collector_paused():  # tens of thousands of records and segments, no cycles: nothing for it to find
        facts = report_facts(run)
        text = render_html(facts) if args.format == "html" else render_json(facts)
    if args.output == "-":
        sys.stdout.write(text)
        return EXIT_OK
    path = Path(args.output or f"tuidag-report-{run.run_id}.{args.format}")
    mode = DEFAULT_MODE if args.mode is None else args.mode
    try:
        write_report(path, text.encode("utf-8", "replace"), mode)
    except ReportFileError as exc:
        raise UsageError(f"cannot write the report to {printable(path)}: {exc}") from None
    private = " (only you can read it; --mode 644 lets others)" if mode == DEFAULT_MODE else f" (mode {mode:o})"
    print(
        f"tuidag: report of run {run.run_id} ({printable(facts['run']['dag'])}) written to {printable(path)}" + private
    )
    return EXIT_OK


def _mode_arg(text: str) -> int:
    try:
        return parse_mode(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


COMMANDS = {"runs": cmd_runs, "logs": cmd_logs, "report": cmd_report}
