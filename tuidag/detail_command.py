"""`tuidag show RUN --task NAME`: a task's detail on stdout, the facts the UI's detail screen (`i`) shows, drawn by
the same code (views/task_detail.py) from the same source (a `RemoteRun` on the run's record), so the two can't
disagree; a matrix task's instances side by side (views/group_detail.py). `--format json` gives them as data. Exit
codes: 0, 2 for a run or task that is not there."""

from __future__ import annotations

import argparse
import json

from .cli_common import no_such_task
from .exit_codes import EXIT_OK
from .store.runs import RunDir, RunStore


def print_detail(args: argparse.Namespace, run: RunDir, store: RunStore) -> int:
    from .control.client import NotLive
    from .control.remote import RemoteRun
    from .views.group_detail import group_detail, group_text
    from .views.task_detail import detail_text, task_detail
    from .views.terminal_text import terminal_line

    try:  # a live run as a viewer sees it (its clock still runs); one that is over as its record says
        source = RemoteRun.attach(run, store) if run.owned() else RemoteRun.stored(run, store)
    except NotLive:  # it ended meanwhile
        source = RemoteRun.stored(run, store)
    try:
        group = source.dag.groups.get(args.task) if args.task not in source.dag.tasks else None
        if group is not None:  # a matrix task: its instances side by side
            facts = group_detail(group, source.snapshot())
            text = group_text(facts, run.run_id)
        elif args.task in source.dag.tasks:
            facts = task_detail(source, args.task)
            text = detail_text(facts)
        else:
            names = [*source.dag.groups, *source.dag.tasks]
            raise no_such_task(args.task, [run], f"run {run.run_id} has no task {args.task!r}", names)
    finally:
        source.close()
    if args.format == "json":
        # ensure_ascii: every string escaped, so no byte of the run's text reaches the terminal as a control
        print(json.dumps(facts, indent=2, ensure_ascii=True))
    else:
        for line in text.split("\n"):
            print(terminal_line(line))
    return EXIT_OK
