"""`tuidag report` on a synthetic run of N tasks (5,000 by default): the target is under 2 s for the whole command.

The run is written straight into a temporary state dir (tests/stored_runs.py), with a realistic schedule: 10 layers
of N/10 tasks, each task past the first depending on 2 of the layer above, durations of 1-60 s scheduled by the
forecast simulation with max_parallel 16; every 50th task fails once and is retried, and 5 tasks fail for good (their
logs are read for the report). Timed: `tuidag report RUN -o FILE` as a user runs it (a new Python process, imports
included; wall and CPU time, the latter steadier on a shared machine), and, in this process, the facts and the HTML
on their own.

    python benchmarks/report_bench.py                # N=5000, 5 repeats
    python benchmarks/report_bench.py --tasks 2000 --repeats 9
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from stored_runs import Plan, write_run  # noqa: E402
from tuidag.model.collector import collector_paused  # noqa: E402
from tuidag.model.forecast import simulate  # noqa: E402
from tuidag.views.report import render_html  # noqa: E402
from tuidag.views.report_facts import report_facts  # noqa: E402


def synthetic_run(state: Path, n: int) -> str:
    rng = random.Random(19)
    width = max(1, n // 10)
    names = [f"layer{i // width}-task{i % width}" for i in range(n)]
    deps = {
        names[i]: sorted({names[(i // width - 1) * width + rng.randrange(width)] for _ in range(2)})
        for i in range(width, n)
    }
    durations = {name: rng.uniform(1, 60) for name in names}
    spans = simulate(
        deps, names, now=1_800_000_000.0, finished={}, running={}, expected=durations, max_parallel=16
    ).spans
    plans = {}
    failing = set(names[n // 2 :: n // 5][:5])
    for i, name in enumerate(names):
        start, end = spans[name]
        if i % 50 == 0:  # failed once, retried at once, the second attempt took the rest
            cut = start + (end - start) / 3
            attempts = [(start, cut), (cut + 0.01, end)]
        else:
            attempts = [(start, end)]
        plans[name] = Plan(start - 0.01, attempts, "FAILED" if name in failing else "SUCCEEDED")
    logs = {name: "".join(f"{name}: step {k} of a long job\n" for k in range(500)) for name in failing}
    run = write_run(state, "20260101-000000-000-bench", plans, dag="bench", deps=deps, max_parallel=16, logs=logs)
    return run.run_id


def median_of(repeats: int, action) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        with collector_paused():  # as `tuidag report` does
            action()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        run_id = synthetic_run(state, args.tasks)
        out = Path(tmp) / "report.html"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "tuidag", "report", run_id, "--state-dir", str(state), "-o", str(out)]
        subprocess.run(command, env=env, check=True, capture_output=True)  # bytecode compiled, files in the cache
        cpu_times = []

        def report_command() -> None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(command, env=env, check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_times.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)

        cli = median_of(args.repeats, report_command)
        run = next(r for r in __import__("tuidag.store.runs", fromlist=["RunStore"]).RunStore(state).runs())
        facts_time = median_of(args.repeats, lambda: report_facts(run))
        facts = report_facts(run)
        html_time = median_of(args.repeats, lambda: render_html(facts))
        journal = run.journal.stat().st_size
        print(
            f"{args.tasks:,} tasks, journal {journal / 1e6:.1f} MB, report {out.stat().st_size / 1e6:.1f} MB "
            f"({sum(s['kind'] == 'running' for s in facts['segments']):,} attempt bars)"
        )
        print(
            f"tuidag report (new process): median {cli:.2f} s over {args.repeats}, "
            f"CPU {statistics.median(cpu_times):.2f} s"
            f"  (target < 2 s)"
        )
        print(f"  facts (journal, timeline, critical path, speedups): {facts_time:.2f} s; HTML: {html_time:.2f} s")


if __name__ == "__main__":
    main()
