"""The local executor beside the Dask one (`--executor dask-local:2`, a LocalCluster of 2 worker processes started for
the run), on the layered DAG of `core_bench` and on a chain.

- layered: `tuidag run --no-tui --quiet -j 8` of the 1,000-task layered DAG of `true` commands, whole wall time
  (for Dask that includes importing `distributed`, starting the cluster and closing it).
- chain: per-task overhead of a 200-task chain of `true` (each task waits for the one before it), as
  (wall time of the chain - wall time of a 1-task DAG) / 199, so start-up and shut-down are taken out; the
  1-task DAG's own time is printed too (for Dask: importing it, starting the cluster and closing it).

    python benchmarks/dask_bench.py                # 3 repeats, medians
    python benchmarks/dask_bench.py --repeats 5
    python benchmarks/dask_bench.py --repeats 5 --dir /dev/shm
    python benchmarks/dask_bench.py --cluster      # on a cluster started with the dask CLI (dask_cluster_bench.py)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from core_bench import layered, timed, write_yaml

REPO = Path(__file__).resolve().parent.parent
EXECUTORS = {"local": [], "dask-local:2": ["--executor", "dask-local:2"]}


def chain(n: int) -> list[tuple[str, list[str]]]:
    return [(f"c{i}", [f"c{i - 1}"] if i else []) for i in range(n)]


def run(dag: Path, options: list[str], work: Path) -> float:
    env = {**os.environ, "PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"}
    return timed(
        [
            sys.executable,
            "-m",
            "tuidag",
            "run",
            "--no-tui",
            "--quiet",
            "-j",
            "8",
            "--state-dir",
            str(work / "state"),
            *options,
            str(dag),
        ],
        work,
        env,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--dir",
        help="where the DAGs, logs and journals are written (default: the temp dir; "
        "/dev/shm keeps the file system out of it, see core_bench.py)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="instead: the figures on a cluster started with the dask CLI (dask_cluster_bench.py)",
    )
    args = parser.parse_args()
    if args.cluster:
        import dask_cluster_bench

        sys.argv = [sys.argv[0], "--repeats", str(args.repeats), *(["--dir", args.dir] if args.dir else [])]
        dask_cluster_bench.main()
        return
    with tempfile.TemporaryDirectory(prefix="tuidag-dask-bench-", dir=args.dir) as folder:
        work = Path(folder)
        dags = {
            "layered": (layered(1000), work / "layered.yaml"),
            "chain": (chain(200), work / "chain.yaml"),
            "one": (chain(1), work / "one.yaml"),
        }
        for tasks, path in dags.values():
            write_yaml(tasks, path)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeats):
            for executor, options in EXECUTORS.items():  # alternately, so drift hits both alike
                for name, (_, path) in dags.items():
                    times.setdefault((executor, name), []).append(run(path, options, work))
        med = {key: statistics.median(values) for key, values in times.items()}
        print(f"median of {args.repeats}, -j 8, {os.cpu_count()} CPUs")
        print(f"{'executor':<14}{'layered 1,000':>15}{'chain 200':>12}{'1 task':>9}{'per chain task':>16}")
        for executor in EXECUTORS:
            per_task = (med[executor, "chain"] - med[executor, "one"]) / 199 * 1000
            print(
                f"{executor:<14}{med[executor, 'layered']:>14.2f}s{med[executor, 'chain']:>11.2f}s"
                f"{med[executor, 'one']:>8.2f}s{per_task:>13.1f} ms"
            )
        ratio = med["dask-local:2", "layered"] / med["local", "layered"]
        print(f"layered: dask-local:2 / local = {ratio:.2f}x")


if __name__ == "__main__":
    main()
