"""Watch mode's figures: how soon a change starts its task again, and what watching costs while nothing changes.

(a) Latency: a headless `tuidag run --watch` of one task whose input is `in.txt` and that appends `date +%s.%N`
    (the moment its process runs) to a file. The input is rewritten CHANGES times, each after the task's previous
    round ended; latency is from just after the write returned to the time the task's process printed, and the
    figure that counts is what is left after the batching interval (watch.STEP_MS: a batch ends once that long passed
    without a change). Median and p95.
(b) Idle CPU: a task with a folder of FILES files (100 folders) as its input; once the first run ended, the CPU time
    (user + system, psutil `cpu_times`) the tuidag process used over SECONDS seconds in which nothing changes, as a
    share of one core.

    python benchmarks/watch_bench.py                          # 50 changes, 10,000 files, 30 s
    python benchmarks/watch_bench.py --changes 10 --files 1000 --seconds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tuidag.watch import STEP_MS


def _start(folder: Path, dag: str) -> tuple[subprocess.Popen, Path]:
    (folder / "dag.yaml").write_text(dag)
    out = folder / "out.txt"
    with out.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tuidag", "run", "--no-tui", "--watch", "-q", str(folder / "dag.yaml")],
            cwd=folder,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    _until(lambda: "ends watch mode" in out.read_text() and "SUCCEEDED" in out.read_text(), 120)
    return proc, out


def _until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit("watch_bench: tuidag did not get there in time")
        time.sleep(0.005)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=60)


def latency(changes: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "in.txt").write_text("0\n")
        proc, out = _start(folder, "tasks:\n  t:\n    run: date +%s.%N >> starts\n    inputs: [in.txt]\n")
        starts = folder / "starts"
        took = []
        try:
            for n in range(1, changes + 1):
                done = out.read_text().count("SUCCEEDED")
                (folder / "in.txt").write_text(f"{n}\n")
                written = time.time()
                _until(lambda n=n: len(starts.read_text().split()) == n + 1, 30)
                took.append(float(starts.read_text().split()[-1]) - written)
                _until(lambda done=done: out.read_text().count("SUCCEEDED") > done, 30)  # the round ended
        finally:
            _stop(proc)
        return took


def idle_cpu(files: int, seconds: float) -> tuple[float, float]:
    """(share of one core over `seconds`, seconds it took to start watching)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for d in range(100):
            sub = folder / "data" / f"d{d:02}"
            sub.mkdir(parents=True)
            for f in range(files // 100):
                (sub / f"f{f}.txt").write_text(f"{d} {f}\n")
        began = time.monotonic()
        proc, _ = _start(folder, "tasks:\n  t:\n    run: 'true'\n    inputs: [data]\n")
        ready = time.monotonic() - began
        try:
            me = psutil.Process(proc.pid)
            before = me.cpu_times()
            time.sleep(seconds)  # the measurement's window: nothing changes
            after = me.cpu_times()
        finally:
            _stop(proc)
        used = (after.user - before.user) + (after.system - before.system)
        return used / seconds, ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=50)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    os.environ.pop("TUIDAG_STATE_DIR", None)
    took = sorted(latency(args.changes))
    median, p95 = statistics.median(took), took[min(len(took) - 1, round(0.95 * (len(took) - 1)))]
    step = STEP_MS / 1000
    print(
        f"(a) change -> task's new process, {len(took)} changes: median {median * 1000:.0f} ms, p95 {p95 * 1000:.0f} "
        f"ms; beyond the {STEP_MS} ms batching interval: median {(median - step) * 1000:.0f} ms, "
        f"p95 {(p95 - step) * 1000:.0f} ms"
    )
    share, ready = idle_cpu(args.files, args.seconds)
    print(
        f"(b) watching {args.files:,} files, nothing changing, {args.seconds:.0f} s: {share * 100:.2f}% of a core "
        f"(first run and watches set up in {ready:.1f} s)"
    )


if __name__ == "__main__":
    main()
