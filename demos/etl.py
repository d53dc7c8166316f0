"""A Python DAG: callables with their own log files, a shell task, an isolated (killable) task.

tuidag run demos/etl.py          # or: python demos/etl.py --no-tui
"""

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from tuidag import Dag

log = logging.getLogger(__name__)
dag = Dag("etl", max_parallel=4)


@dag.task()
def extract(ctx):
    print("pulling rows")  # goes to extract's log file, not the terminal
    rows = []
    for page in range(5):
        if ctx.cancelled.is_set():  # cancellation is cooperative: look at ctx.cancelled and return
            return None
        rows.extend(range(page * 20, page * 20 + 20))
        print(f"page {page + 1}/5: {len(rows)} rows")
        time.sleep(0.15)
    return len(rows)  # kept in the run journal, and ctx.results["extract"] for dependents


@dag.task(depends_on=[extract], retries=1)
def transform(ctx):
    rows = ctx.results["extract"]
    # Threads the task starts (here a pool) write to the task's log too.
    with ThreadPoolExecutor(4) as pool:
        sums = list(pool.map(lambda shard: _shard(ctx, shard, rows), range(4)))
    log.info("transformed %d rows into %d shards", rows, len(sums))  # logging lands in this task's log
    return {"rows": rows, "sums": sums}


def _shard(ctx, shard, rows):
    total = 0
    for i in range(shard, rows, 4):
        if ctx.cancelled.wait(0.002):
            break
        total += i
    print(f"shard {shard}: {total}")
    return total


@dag.task(depends_on=[transform], isolate=True)
def score(ctx):
    """Runs in a child process: it can be killed like a shell task (press c on it in the UI)."""
    print(f"scoring in pid {os.getpid()}")
    sums = ctx.results["transform"]["sums"]
    time.sleep(0.5)
    return sum(sums) / len(sums)


dag.shell("load", 'echo "loading into the warehouse"; sleep 0.3; echo done', depends_on=[score])


if __name__ == "__main__":
    dag.main()
