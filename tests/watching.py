"""A headless `tuidag run --watch` as a user runs it, for the watch-mode tests: a real tuidag process on a DAG file in
a temporary folder, its output in a file, ended with SIGTERM when the test is done with it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dags import wait_until
from slowness import patience

REPO = Path(__file__).resolve().parent.parent


def lines(path: Path) -> list[str]:
    """The words of a file the tasks append to (marks, pids), none while it does not exist."""
    return path.read_text().split() if path.exists() else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Watching:
    """A headless `tuidag run --watch` of a DAG file, its output in a file."""

    def __init__(self, proc: subprocess.Popen, out: Path, folder: Path):
        self.proc = proc
        self.out = out
        self.folder = folder

    def output(self) -> str:
        """What it printed, task names unpadded (`[a]  -->` is `[a] -->`)."""
        return re.sub(r"\] +-->", "] -->", self.out.read_text())

    def said(self, text: str) -> bool:
        return text in self.output()

    def count(self, text: str) -> int:
        return self.output().count(text)

    def generations(self) -> list[str]:
        """The lines that start a round (`tuidag: gen 2: a.txt changed -> a, b`), not those that end one."""
        return [line for line in self.output().splitlines() if re.match(r"tuidag: gen \d+: ", line)]

    def edit(self, dag: str) -> None:
        """Write the DAG file anew, as an editor saves it."""
        (self.folder / "dag.yaml").write_text(dag)

    def journal(self) -> list[dict]:
        """The run's journal records."""
        path = next((self.folder / ".tuidag" / "runs").glob("*/journal.jsonl"))
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def tuidag(self, *args: str) -> subprocess.CompletedProcess:
        """Another tuidag command in the run's folder (`stop`, `show`), as a user runs it from another terminal."""
        return subprocess.run(
            [sys.executable, "-m", "tuidag", *args],
            cwd=self.folder,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=patience(30),
        )

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """End watch mode with `sig`, as a user does; its exit code once it exited."""
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=patience(30))


@contextmanager
def watching(tmp_path: Path, dag: str, *options: str) -> Iterator[Watching]:
    """`tuidag run --no-tui --watch dag.yaml` in `tmp_path`, once it says it watches (its first run under way)."""
    (tmp_path / "dag.yaml").write_text(dag)
    out = tmp_path / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuidag", "run", "--no-tui", "--watch", *options, str(tmp_path / "dag.yaml")],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    run = Watching(proc, out, tmp_path)
    try:
        wait_until(lambda: run.said("ends watch mode"), timeout=30)
        yield run
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=patience(30))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
