"""Up-to-date checks on a 1,000-task DAG against ninja and make, measured side by side in one run.

The tree: 10,000 input files of 100 bytes; 1,000 tasks, each reading 10 of them (chosen with a fixed seed) and
writing one output (`cat` of its inputs). The same DAG is written as a tuidag YAML file (`inputs`, `outputs`), a
build.ninja and a Makefile, and each is built once. Then, medians of `--repeats`:

(a) nothing changed: `tuidag run --no-tui -q` (every task up to date, the stat cache warm), `tuidag plan`,
    `ninja -n` and `make -q`;
(b) one input changed (its content; the tasks that read it must run): how many tasks ran and the wall time of
    `tuidag run` and of `ninja` (a real build of what is out of date);
(c) the same DAG without `inputs`/`outputs` (what every run did before up-to-date checks): `tuidag run`, so the cost
    of a run that checks nothing stays visible.

    python benchmarks/up_to_date_bench.py [--dir /dev/shm] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TASKS, FILES, PER_TASK = 1000, 10_000, 10


def make_tree(base: Path) -> list[list[int]]:
    (base / "in").mkdir()
    (base / "out").mkdir()
    for i in range(FILES):
        (base / "in" / f"f{i:05d}.txt").write_text(f"{i:05d}" * 20)
    old = time.time() - 60
    for i in range(FILES):
        os.utime(base / "in" / f"f{i:05d}.txt", (old, old))
    rng = random.Random(28)
    reads = [sorted(rng.sample(range(FILES), PER_TASK)) for _ in range(TASKS)]
    lines = ["tasks:"]
    plain = ["tasks:"]
    ninja = ["rule cat", "  command = cat $in > $out", ""]
    make = [".PHONY: all", "all: " + " ".join(f"out/t{i:04d}.txt" for i in range(TASKS)), ""]
    for i, files in enumerate(reads):
        names = [f"in/f{f:05d}.txt" for f in files]
        command = f"cat {' '.join(names)} > out/t{i:04d}.txt"
        lines += [
            f"  t{i:04d}:",
            f"    run: {command}",
            f"    inputs: [{', '.join(names)}]",
            f"    outputs: [out/t{i:04d}.txt]",
        ]
        plain += [f"  t{i:04d}:", f"    run: {command}"]
        ninja.append(f"build out/t{i:04d}.txt: cat {' '.join(names)}")
        make += [f"out/t{i:04d}.txt: {' '.join(names)}", "\tcat $^ > $@"]
    (base / "dag.yaml").write_text("\n".join(lines) + "\n")
    (base / "plain.yaml").write_text("\n".join(plain) + "\n")
    (base / "build.ninja").write_text("\n".join(ninja) + "\n")
    (base / "Makefile").write_text("\n".join(make) + "\n")
    return reads


def timed(command: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(command[:4])} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return seconds


def tuidag(*args: str) -> list[str]:
    return [sys.executable, "-m", "tuidag", *args]


def latest_counts(base: Path, state: str) -> dict[str, int]:
    runs = sorted(p for p in (base / state / "runs").iterdir() if not p.name.startswith("."))
    return json.loads((runs[-1] / "summary.json").read_text())["counts"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "tuidag")], check=True)
    base = Path(tempfile.mkdtemp(prefix="tuidag-up-to-date-bench-", dir=args.dir))
    try:
        reads = make_tree(base)
        state = ["--state-dir", str(base / "state")]
        first = timed(tuidag("run", "--no-tui", "-q", "-j", "8", *state, "dag.yaml"), base)
        timed(["ninja", "-j", "8"], base)
        timed(["make", "-j", "8", "-s"], base)
        print(f"first build: tuidag {first:.2f} s (every task run, every file hashed)")
        results: dict[str, list[float]] = {}
        for _ in range(args.repeats):
            for name, command, ok in (
                ("tuidag run", tuidag("run", "--no-tui", "-q", "-j", "8", *state, "dag.yaml"), (0,)),
                ("tuidag plan", tuidag("plan", *state, "dag.yaml"), (0,)),
                ("ninja -n", ["ninja", "-n"], (0,)),
                ("make -q", ["make", "-q"], (0,)),
            ):
                results.setdefault(name, []).append(timed(command, base, ok))
        counts = latest_counts(base, "state")
        print(f"(a) nothing changed ({counts}), median of {args.repeats}:")
        for name, times in results.items():
            print(f"    {name:12s} {statistics.median(times) * 1000:7.0f} ms")
        ratio = statistics.median(results["tuidag run"]) / statistics.median(results["ninja -n"])
        print(f"    tuidag run / ninja -n: {ratio:.1f}x")
        changed = {"tuidag": [], "ninja": []}
        ran = {"tuidag": 0, "ninja": 0}
        for round_ in range(args.repeats):
            victim = reads[round_][0]
            path = base / "in" / f"f{victim:05d}.txt"
            path.write_text(f"changed {round_} " * 10)
            readers = sum(victim in files for files in reads)
            changed["tuidag"].append(timed(tuidag("run", "--no-tui", "-q", "-j", "8", *state, "dag.yaml"), base))
            ran["tuidag"] = latest_counts(base, "state").get("SUCCEEDED", 0)
            proc_start = time.perf_counter()
            out = subprocess.run(["ninja", "-j", "8"], cwd=base, capture_output=True, text=True).stdout
            changed["ninja"].append(time.perf_counter() - proc_start)
            ran["ninja"] = out.count("] cat ")
            assert ran["tuidag"] == readers, (ran, readers)
        print(f"(b) one input changed, median of {args.repeats} ({readers} tasks read it):")
        for name, times in changed.items():
            print(f"    {name:12s} {statistics.median(times) * 1000:7.0f} ms, {ran[name]} tasks ran")
        plain = [
            timed(tuidag("run", "--no-tui", "-q", "-j", "8", "--state-dir", str(base / "plain"), "plain.yaml"), base)
        ]
        for _ in range(args.repeats - 1):
            plain.append(
                timed(
                    tuidag("run", "--no-tui", "-q", "-j", "8", "--state-dir", str(base / "plain"), "plain.yaml"), base
                )
            )
        print(f"(c) the DAG without inputs/outputs (every task runs): tuidag run {statistics.median(plain):.2f} s")
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
