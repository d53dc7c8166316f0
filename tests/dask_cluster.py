"""A Dask cluster started as its users start one: `dask scheduler` and `dask worker` processes from the command line,
each in a process group of its own, on free ports, killed with real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil

from dags import wait_until

DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class CliCluster:
    """`workers`: (name, threads, resources or None). Worker log copies go to `folder`/worker-logs."""

    def __init__(self, folder: Path, workers: list[tuple[str, int, str | None]], env: dict | None = None):
        self.folder = folder
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = {**os.environ, "TUIDAG_WORKER_LOG_DIR": str(folder / "worker-logs"), **(env or {})}
        self.scheduler = self._start(
            "scheduler",
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--dashboard-address", ":0"],
        )
        self.workers: dict[str, subprocess.Popen] = {}
        try:
            wait_until(self._listening, timeout=60)
            for name, threads, resources in workers:
                self.add_worker(name, threads, resources)
            self.wait_for_workers(len(workers))
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, command: list[str]) -> subprocess.Popen:
        with open(self.folder / f"{name}.log", "ab") as log:
            return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)

    def _listening(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def add_worker(self, name: str, threads: int = 2, resources: str | None = None) -> None:
        command = [
            DASK,
            "worker",
            self.address,
            "--nthreads",
            str(threads),
            "--name",
            name,
            "--dashboard-address",
            ":0",
        ]
        if resources:
            command += ["--resources", resources]
        self.workers[name] = self._start(f"worker-{name}", command)

    def worker_names(self) -> list[str]:
        from distributed import Client

        with Client(self.address, timeout="20s") as client:
            return sorted(str(w["name"]) for w in client.scheduler_info(n_workers=-1)["workers"].values())

    def wait_for_workers(self, count: int) -> None:
        wait_until(lambda: len(self.worker_names()) >= count, timeout=60, poll=0.2)

    def worker_process(self, name: str) -> psutil.Process:
        """The worker process itself (the nanny's child), not its nanny."""
        nanny = psutil.Process(self.workers[name].pid)
        (worker,) = [p for p in nanny.children() if "resource_tracker" not in " ".join(p.cmdline())]
        return worker

    def stop(self) -> None:
        for proc in [*self.workers.values(), self.scheduler]:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
