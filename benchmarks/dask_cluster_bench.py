"""tuidag on a Dask cluster started with the `dask` command line (a scheduler and three workers of 2 threads, one with
`--resources gpu=2`, each a process group of its own), side by side:

- layered: the 200-task layered DAG of `true` commands (core_bench's), whole wall time of `tuidag run --executor dask`
  (no -j: max_parallel is the cluster's 6 worker threads) against a plain script that submits the same DAG with
  `client.submit`
  (each task a `subprocess.run(["sh", "-c", "true"])`, dependencies as futures) and waits for it, both as fresh
  processes (importing Dask and connecting included); and the local executor on the same DAG;
- scheduler RSS: before, at its peak during, and after a run whose one task prints 1 GB (the output goes to the
  worker's copy and the client's log, never through the scheduler);
- worker loss: from `kill -9` of the worker process running an attempt (its nanny restarts it) to every process of
  that attempt gone on the host, and to tuidag's retry (attempt 2) running.

    python benchmarks/dask_cluster_bench.py --repeats 3 --dir /dev/shm
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from core_bench import layered, timed, write_yaml

REPO = Path(__file__).resolve().parent.parent
DASK = str(Path(sys.executable).parent / "dask")
ENV = {**os.environ, "PYTHONPATH": f"{REPO}:{os.environ.get('PYTHONPATH', '')}"}

PLAIN = """
import subprocess, sys, json
from distributed import Client, wait

def run(*deps):
    subprocess.run(["sh", "-c", "true"], check=True)

tasks = json.load(open(sys.argv[2]))
with Client(sys.argv[1]) as client:
    futures = {}
    for name, deps in tasks:
        futures[name] = client.submit(run, *[futures[d] for d in deps], key=name, pure=False)
    wait(list(futures.values()))
"""


class Cluster:
    def __init__(self, folder: Path):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = {**ENV, "TUIDAG_WORKER_LOG_DIR": str(folder / "worker-logs")}
        self.procs = [
            self._start(
                [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--dashboard-address", ":0"]
            )
        ]
        self._wait(lambda: self._listening())
        for name, extra in (("w1", []), ("w2", []), ("w3", ["--resources", "gpu=2"])):
            self.procs.append(
                self._start(
                    [
                        DASK,
                        "worker",
                        self.address,
                        "--nthreads",
                        "2",
                        "--name",
                        name,
                        "--dashboard-address",
                        ":0",
                        *extra,
                    ]
                )
            )
        self.wait_for_workers(3)

    def _start(self, command):
        return subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env, start_new_session=True
        )

    @staticmethod
    def _wait(predicate, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not start")
            time.sleep(0.05)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def wait_for_workers(self, count: int) -> None:
        from distributed import Client

        with Client(self.address) as client:
            client.wait_for_workers(count, timeout=60)

    @property
    def scheduler(self) -> psutil.Process:
        return psutil.Process(self.procs[0].pid)

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()


def tuidag(dag: Path, work: Path, *options: str) -> float:
    return timed(
        [
            sys.executable,
            "-m",
            "tuidag",
            "run",
            "--no-tui",
            "--quiet",
            "--state-dir",
            str(work / "state"),
            *options,
            str(dag),
        ],
        work,
        ENV,
    )


def layered_figures(cluster: Cluster, work: Path, repeats: int) -> None:
    import json

    tasks = layered(200)
    dag, listing, script = work / "layered.yaml", work / "layered.json", work / "plain.py"
    write_yaml(tasks, dag)
    listing.write_text(json.dumps(tasks))
    script.write_text(PLAIN)
    times: dict[str, list[float]] = {}
    for _ in range(repeats):  # alternately, so drift hits all alike
        times.setdefault("plain", []).append(
            timed([sys.executable, str(script), cluster.address, str(listing)], work, ENV)
        )
        times.setdefault("tuidag", []).append(
            tuidag(dag, work, "--executor", "dask", "--dask-address", cluster.address)
        )
        times.setdefault("local", []).append(tuidag(dag, work, "-j", "6"))
    med = {key: statistics.median(values) for key, values in times.items()}
    print(
        f"layered 200, median of {repeats}: plain client.submit {med['plain']:.2f} s, tuidag on the cluster "
        f"{med['tuidag']:.2f} s ({med['tuidag'] / med['plain']:.2f}x), tuidag local {med['local']:.2f} s"
    )


def rss_figures(cluster: Cluster, work: Path) -> None:
    dag = work / "big.yaml"
    dag.write_text("tasks:\n  big: {run: \"head -c 1000000000 /dev/zero | tr '\\\\0' 'x'\"}\n")
    scheduler = cluster.scheduler
    before = scheduler.memory_info().rss
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], scheduler.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    took = tuidag(dag, work, "--executor", "dask", "--dask-address", cluster.address)
    done.set()
    sampler.join()
    time.sleep(1)
    after = scheduler.memory_info().rss
    mb = 1 << 20
    print(
        f"scheduler RSS with a task printing 1 GB ({took:.1f} s): before {before / mb:.0f} MB, peak "
        f"{peak[0] / mb:.0f} MB (+{(peak[0] - before) / mb:.0f}), after {after / mb:.0f} MB "
        f"(+{(after - before) / mb:.0f})"
    )


def loss_figures(cluster: Cluster, work: Path, repeats: int) -> None:
    gone, retried = [], []
    for i in range(repeats):
        run = work / f"loss{i}"
        run.mkdir()
        pids, retry = run / "pids", run / "retry"
        dag = run / "dag.yaml"
        dag.write_text(f"""\
tasks:
  long:
    retries: 1
    run: |
      if [ "$TUIDAG_ATTEMPT" = 1 ]; then sleep 60 & echo $$ $! $PPID > {pids}.new; mv {pids}.new {pids}; wait; fi
      touch {retry}
""")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tuidag",
                "run",
                "--no-tui",
                "--quiet",
                "--state-dir",
                str(run / "state"),
                "--executor",
                "dask",
                "--dask-address",
                cluster.address,
                str(dag),
            ],
            cwd=run,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        Cluster._wait(pids.exists)
        leader, child, worker = (int(p) for p in pids.read_text().split())
        tree = [psutil.Process(leader), psutil.Process(child)]
        start = time.perf_counter()
        os.kill(worker, signal.SIGKILL)
        end_gone = end_retry = None
        while end_gone is None or end_retry is None:
            now = time.perf_counter()
            if end_gone is None and not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree):
                end_gone = now
            if end_retry is None and retry.exists():
                end_retry = now
            if now - start > 60:
                raise RuntimeError("the attempt's tree or the retry: not within 60 s")
            time.sleep(0.002)
        proc.wait(timeout=60)
        gone.append(end_gone - start)
        retried.append(end_retry - start)
        cluster.wait_for_workers(3)  # the nanny restarted the worker
    print(
        f"kill -9 of a worker, median of {repeats}: its attempt's processes gone after "
        f"{statistics.median(gone) * 1000:.0f} ms, the retry running after {statistics.median(retried) * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", help="where the DAGs, logs and journals are written (default: the temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tuidag-dask-cluster-bench-", dir=args.dir) as folder:
        work = Path(folder)
        cluster = Cluster(work)
        try:
            print(f"{os.cpu_count()} CPUs; a dask CLI cluster of 3 workers x 2 threads")
            layered_figures(cluster, work, args.repeats)
            rss_figures(cluster, work)
            loss_figures(cluster, work, args.repeats)
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
