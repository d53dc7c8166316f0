"""`tuidag plan` (and `run --dry-run`): what a run would do with each task and why, starting nothing; `tuidag cache`:
the content cache's size, and pruning it."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from .cli_common import UsageError, state_dir_of
from .exit_codes import EXIT_OK
from .model.counts import counted
from .model.spec import DagSpec
from .model.targets import needed
from .views.terminal_text import terminal_line

FROM_REASON = "--from {task}: runs even if up to date"


def add_parsers(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    cache = sub.add_parser("cache", parents=[state], help="the content cache of task outputs: its size, and pruning")
    cache.add_argument("file", type=Path, nargs="?", metavar="FILE", help="a DAG file, to use the state dir next to it")
    cache.add_argument(
        "--max-size",
        metavar="SIZE",
        help="remove the least recently used entries until the cache holds at most SIZE (500M, 10G, 0 empties it)",
    )


def run_anyway(dag: DagSpec, tasks: Iterable[str]) -> dict[str, str]:
    """`--from TASK...`: each task and everything downstream of it -> the reason it runs even if up to date."""
    from .model.targets import expand_targets

    chosen: dict[str, str] = {}
    for task in expand_targets(dag, tasks):  # a matrix task: each of its instances
        if task not in dag.tasks:
            from .model.errors import did_you_mean

            known = [*dag.groups, *dag.tasks]
            raise UsageError(f"--from: no task '{task}' in {dag.name}{did_you_mean(task, known)}")
        for name in [task, *dag.descendants(task)]:
            chosen.setdefault(name, FROM_REASON.format(task=task))
    return chosen


def show_plan(
    dag: DagSpec,
    state_dir: Path,
    *,
    tasks: Iterable[str] = (),
    force: bool = False,
    from_tasks: Iterable[str] = (),
    output_format: str = "text",
) -> int:
    """Print every task's verdict (of `tasks` and what they need, as a run of those targets would run them, when
    given): `train: run: input x changed`."""
    from .store.freshness import plan

    names = list(tasks)  # (checked to be the DAG's by the caller, as a run's targets are)
    wanted = set(needed(dag, names)) if names else None
    verdicts = plan(dag, state_dir, force=force, run_anyway=run_anyway(dag, from_tasks), tasks=wanted)
    if output_format == "json":
        rows = [
            {"task": name, "action": verdict.action, "reason": verdict.reason, "run_id": verdict.run_id}
            for name, verdict in verdicts.items()
        ]
        json.dump({"dag": dag.name, "tasks": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    for name, verdict in verdicts.items():
        print(terminal_line(f"{name}: {verdict.describe()}"))
    counts: dict[str, int] = {}
    for verdict in verdicts.values():
        counts[verdict.action] = counts.get(verdict.action, 0) + 1
    print(f"{counted(len(verdicts), 'task')}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
    return EXIT_OK


def cmd_cache(args: argparse.Namespace) -> int:
    from .store.content_cache import ContentCache, max_size, parse_size, size_text
    from .store.index import NAME, Index
    from .store.runs import RunStore

    state_dir = state_dir_of(args, args.file)
    if not (state_dir / NAME).exists():
        print(f"{terminal_line(str(state_dir))}: no content cache yet (no task with outputs has run here)")
        return EXIT_OK
    RunStore(state_dir).check()
    index = Index(state_dir)
    try:
        cache = ContentCache(state_dir, index)
        if args.max_size is not None:
            try:
                limit = parse_size(args.max_size)
            except ValueError:
                raise UsageError(f"--max-size: expected a size like 500M or 10G, got {args.max_size!r}") from None
            count, freed = cache.prune(limit)
            print(f"removed {counted(count, 'entry', 'entries')} ({size_text(freed)}), least recently used first")
        count, size = cache.size()
        print(
            f"{terminal_line(str(cache.root))}: {counted(count, 'file')}, {size_text(size)} "
            f"(cap {size_text(max_size())}: set with $TUIDAG_CACHE_MAX_SIZE)"
        )
    finally:
        index.close()
    return EXIT_OK


COMMANDS: Mapping[str, object] = {"cache": cmd_cache}
