"""Knowing what needs to run: tuidag's up-to-date checks against make, ninja and Snakemake on one tree, side by side
in one run, medians of --repeats.

The tree: TASKS tasks in 10 layers; each reads READS of INPUTS input files (`in/`, a fixed random sample) and, past
the first layer, the outputs of 2 tasks of the layer above, and writes one output (`out/tK.txt`, the `cat` of what it
reads). It is written as a tuidag YAML file (each task with `inputs:` and `outputs:`), a Makefile, a build.ninja and
a Snakefile, each in a folder of its own with its own copy of the inputs (the tools must not see each other's
outputs), and built once by each before anything is timed.

(a) Nothing changed: `ninja -n`, `make -q`, `snakemake -n`, and tuidag's `tuidag plan` and second `tuidag run` (every
    task up to date). Ratios against ninja, measured in the same run.
(b) One input changed: an input file read by a task half way down the layers gets a new line before each timed
    build (in each tool's own copy): how many tasks ran (outputs rewritten, read from their mtimes, the same way for
    every tool) and the wall time of `ninja`, `make`, `snakemake` and `tuidag run`.
(c) A 1 GB input: `tuidag run` of one task that reads it, in a new state dir (the input is hashed) and again (its
    size, mtime and inode are unchanged: the stat cache answers, nothing is read); `hashlib` on the same bytes beside
    them, for scale. The file is in the page cache throughout (written just before): this is hashing, not the disk.
(d) The cost for DAGs that declare nothing: the same tasks without `inputs:`/`outputs:` (every task runs, as every
    run did before the up-to-date checks), `tuidag run` of this tree against `--before DIR` (a checkout of tuidag
    from before the checks; its `tuidag` package is copied and compiled here), in A/B pairs, each in a state dir of
    its own: the medians and their ratio, which should be within the noise of 1.

tuidag's columns need its up-to-date checks (`inputs:`/`outputs:`, `tuidag plan`); on a tuidag without them they say
so instead of a number. A peer that is not installed is left out with a note: ninja comes from `pip install ninja`
(or the system), Snakemake from `pip install snakemake` (on the PATH, or `--snakemake PATH`), make from the system.

    python benchmarks/cache_bench.py                    # 1,000 tasks, 10,000 inputs, 5 repeats
    python benchmarks/cache_bench.py --dir /dev/shm     # on tmpfs
    python benchmarks/cache_bench.py --tasks 100 --inputs 1000 --repeats 3 --only a b
    python benchmarks/cache_bench.py --dir /dev/shm --only d --before ../tuidag-before   # (d) needs --before
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from core_bench import compile_tuidag, ninja_binary

LAYERS = 10
READS = 10  # input files each task reads
DEPS = 2  # tasks of the layer above each task past the first reads the output of
BIG = 1 << 30  # (c): bytes of the big input
NEEDS_CHECKS = "tuidag: needs the up-to-date checks"


class Task(NamedTuple):
    name: str
    inputs: list[str]  # input files, relative to the tree's folder
    deps: list[str]  # tasks whose outputs it reads

    @property
    def output(self) -> str:
        return f"out/{self.name}.txt"

    def reads(self) -> list[str]:
        return self.inputs + [f"out/{dep}.txt" for dep in self.deps]


def tree(tasks: int, inputs: int, seed: int = 1) -> list[Task]:
    rng = random.Random(seed)
    width = max(1, tasks // LAYERS)
    made: list[Task] = []
    for layer in range(LAYERS):
        for i in range(width):
            deps = [] if layer == 0 else [f"t{layer - 1}_{j}" for j in rng.sample(range(width), min(DEPS, width))]
            files = [f"in/in{k}.txt" for k in sorted(rng.sample(range(inputs), min(READS, inputs)))]
            made.append(Task(f"t{layer}_{i}", files, deps))
    return made


def write_inputs(folder: Path, inputs: int) -> None:
    """The input files, dated a minute ago: a file modified within a second before it is hashed is hashed again
    next time (the stat cache's mtime-granularity rule), and the figures are of the cache answering."""
    (folder / "in").mkdir(parents=True)
    (folder / "out").mkdir()
    old = time.time() - 60
    for k in range(inputs):
        path = folder / "in" / f"in{k}.txt"
        path.write_text(f"input {k}\n")
        os.utime(path, (old, old))


def command(task: Task) -> str:
    return f"cat {' '.join(task.reads())} > {task.output}"


def write_yaml(tasks: list[Task], path: Path, declared: bool = True) -> None:
    """The tuidag file; `declared=False`: without `inputs:`/`outputs:` (every task runs every time)."""
    lines = ["name: cache-bench", "tasks:"]
    for task in tasks:
        lines += [f"  {task.name}:", f"    run: {command(task)}"]
        if task.deps:
            lines.append(f"    depends_on: [{', '.join(task.deps)}]")
        if declared:
            lines += [f"    inputs: [{', '.join(task.inputs)}]", f"    outputs: [{task.output}]"]
    path.write_text("\n".join(lines) + "\n")


def write_make(tasks: list[Task], path: Path) -> None:
    lines = ["all: " + " ".join(task.output for task in tasks), ""]
    for task in tasks:
        lines += [f"{task.output}: {' '.join(task.reads())}", "\tcat $^ > $@", ""]
    path.write_text("\n".join(lines))


def write_ninja(tasks: list[Task], path: Path) -> None:
    lines = ["rule cat", "  command = cat $in > $out", ""]
    lines += [f"build {task.output}: cat {' '.join(task.reads())}" for task in tasks]
    path.write_text("\n".join(lines) + "\n")


def write_snakefile(tasks: list[Task], path: Path) -> None:
    """One rule with a wildcard and the inputs looked up per task: a rule per task would measure Snakemake's parsing
    of 1,000 rules, which no one writes."""
    reads = {task.name: task.reads() for task in tasks}
    path.write_text(
        f"READS = {reads!r}\n\n"
        "rule all:\n"
        '    input: expand("out/{t}.txt", t=READS)\n\n'
        "rule task:\n"
        "    input: lambda wc: READS[wc.t]\n"
        '    output: "out/{t}.txt"\n'
        '    shell: "cat {input} > {output}"\n'
    )


class Peer(NamedTuple):
    """A tool on its own copy of the tree: how to build it, and how to ask whether anything needs building."""

    name: str
    folder: Path
    build: list[str]
    dry: list[str]
    dry_name: str
    env: dict[str, str] | None = None


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of `cmd` (after a `sync`, output thrown away); exits the script if it fails."""
    os.sync()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd)} in {cwd} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return elapsed


def tuidag_has_checks() -> bool:
    """Whether this tuidag has the up-to-date checks: `tuidag plan` is one of its commands."""
    probe = subprocess.run([sys.executable, "-m", "tuidag", "plan", "--help"], capture_output=True)
    return probe.returncode == 0


def snakemake_binary(given: str | None) -> str | None:
    if given:
        return given
    found = shutil.which("snakemake")
    if found:
        return found
    beside = Path(sys.executable).with_name("snakemake")
    return str(beside) if beside.exists() else None


def peers(root: Path, tasks: list[Task], args: argparse.Namespace, checks: bool) -> tuple[list[Peer], list[str]]:
    """The tools to compare, each on its tree (written and built once), and a note for each one left out."""
    made: list[Peer] = []
    notes: list[str] = []
    jobs = str(args.j)

    def tree_for(name: str, write: Callable[[list[Task], Path], None], file: str) -> Path:
        folder = root / name
        write_inputs(folder, args.inputs)
        write(tasks, folder / file)
        return folder

    try:
        ninja = ninja_binary()
    except SystemExit:
        notes.append("ninja: not installed (pip install ninja): left out, ratios are against make")
    else:
        folder = tree_for("ninja", write_ninja, "build.ninja")
        made.append(Peer("ninja", folder, [ninja, "-j", jobs], [ninja, "-n"], "ninja -n"))
    make = shutil.which("make")
    if make is None:
        notes.append("make: not installed (apt-get install make): left out")
    else:
        folder = tree_for("make", write_make, "Makefile")
        # -r: no built-in rules, which make would otherwise try on each of the thousands of files (3x slower here)
        made.append(Peer("make", folder, [make, "-r", "-j", jobs], [make, "-r", "-q"], "make -q"))
    snakemake = snakemake_binary(args.snakemake)
    if snakemake is None:
        notes.append("snakemake: not installed (pip install snakemake, or --snakemake PATH): left out")
    else:
        folder = tree_for("snakemake", write_snakefile, "Snakefile")
        made.append(
            Peer("snakemake", folder, [snakemake, "--cores", jobs], [snakemake, "-n", "--cores", jobs], "snakemake -n")
        )
    if checks:
        folder = tree_for("tuidag", write_yaml, "dag.yaml")
        env = {**os.environ, "TUIDAG_STATE_DIR": str(folder / "state"), "NO_COLOR": "1"}
        tuidag = [sys.executable, "-m", "tuidag"]
        made.append(
            Peer(
                "tuidag",
                folder,
                [*tuidag, "run", "--no-tui", "--quiet", "-j", jobs, "dag.yaml"],
                [*tuidag, "plan", "dag.yaml"],
                "tuidag plan",
                env,
            )
        )
    for peer in made:
        seconds = run(peer.build, peer.folder, peer.env)
        print(f"  first build with {peer.name}: {seconds:.2f}s", flush=True)
    return made, notes


def mtimes(folder: Path) -> dict[str, int]:
    return {entry.name: entry.stat().st_mtime_ns for entry in os.scandir(folder / "out")}


def rewritten(before: dict[str, int], folder: Path) -> int:
    """Outputs rewritten since `before`: the tasks that ran, told the same way whatever the tool says of itself."""
    after = mtimes(folder)
    return sum(after.get(name) != stamp for name, stamp in before.items()) + len(after.keys() - before.keys())


def ratio(seconds: float, base: float | None) -> str:
    return f"{seconds / base:>6.2f}x" if base else f"{'-':>7}"


def nothing_changed(made: list[Peer], repeats: int, checks: bool) -> None:
    print(f"\n(a) nothing changed: the median of {repeats} (ratio against ninja -n)")
    times: dict[str, list[float]] = {peer.name: [] for peer in made}
    again: list[float] = []
    for _ in range(repeats):  # alternately, so a slow minute of the machine falls on every tool alike
        for peer in made:
            before = mtimes(peer.folder)
            times[peer.name].append(run(peer.dry, peer.folder, peer.env))
            assert rewritten(before, peer.folder) == 0, f"{peer.dry_name} wrote outputs"
            if peer.name == "tuidag":
                again.append(run(peer.build, peer.folder, peer.env))
                assert rewritten(before, peer.folder) == 0, "tuidag run re-ran up-to-date tasks"
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians.get("ninja")
    for peer in made:
        print(f"  {peer.dry_name:<22} {medians[peer.name]:>7.3f}s {ratio(medians[peer.name], base)}")
    if again:
        run_again = statistics.median(again)
        print(f"  {'tuidag run (2nd run)':<22} {run_again:>7.3f}s {ratio(run_again, base)}")
    if not checks:
        print(f"  {'tuidag plan / run':<22} {NEEDS_CHECKS}")


def one_changed(made: list[Peer], tasks: list[Task], repeats: int, checks: bool) -> None:
    middle = next(task for task in tasks if task.name.startswith(f"t{LAYERS // 2}_"))
    changed = middle.inputs[0]  # half way down: what runs is the tasks reading it and what is below them
    readers = {task.name for task in tasks if changed in task.inputs}
    print(
        f"\n(b) one input changed ({changed}, read by {len(readers)} task(s) directly): tasks run and the median "
        f"wall time of {repeats} (ratio against ninja)"
    )
    times: dict[str, list[float]] = {peer.name: [] for peer in made}
    ran: dict[str, set[int]] = {peer.name: set() for peer in made}
    for round_ in range(repeats):
        for peer in made:
            with open(peer.folder / changed, "a") as f:
                f.write(f"change {round_}\n")
            before = mtimes(peer.folder)
            times[peer.name].append(run(peer.build, peer.folder, peer.env))
            ran[peer.name].add(rewritten(before, peer.folder))
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians.get("ninja")
    for peer in made:
        counts = "/".join(map(str, sorted(ran[peer.name])))
        print(f"  {peer.name:<10} {counts:>5} tasks ran {medians[peer.name]:>7.3f}s {ratio(medians[peer.name], base)}")
    if not checks:
        print(f"  {'tuidag':<10} {NEEDS_CHECKS}")


def big_input(root: Path, repeats: int, checks: bool) -> None:
    print(f"\n(c) a {BIG >> 30} GB input: the median of {repeats}")
    folder = root / "big"
    folder.mkdir()
    chunk = os.urandom(1 << 20)
    with open(folder / "big.bin", "wb") as f:
        for _ in range(BIG >> 20):
            f.write(chunk)
    data = (folder / "big.bin").read_bytes()
    for name in ("sha256", "blake2b", "md5"):
        start = time.perf_counter()
        hashlib.new(name, data).hexdigest()
        print(f"  hashlib.{name:<8} {time.perf_counter() - start:>7.3f}s  (in process, for scale)")
    del data
    if not checks:
        print(f"  {'tuidag':<16} {NEEDS_CHECKS}")
        return
    (folder / "dag.yaml").write_text(
        "name: big\ntasks:\n  digest:\n    run: wc -c big.bin > out.txt\n"
        "    inputs: [big.bin]\n    outputs: [out.txt]\n"
    )
    cmd = [sys.executable, "-m", "tuidag", "run", "--no-tui", "--quiet", "dag.yaml"]
    first, cached = [], []
    for i in range(repeats):
        env = {**os.environ, "TUIDAG_STATE_DIR": str(folder / f"state{i}"), "NO_COLOR": "1"}
        first.append(run(cmd, folder, env))  # a new state dir: nothing known of big.bin, it is hashed
        cached.append(run(cmd, folder, env))  # unchanged size, mtime and inode: the stat cache answers
    hashed, known = statistics.median(first), statistics.median(cached)
    print(f"  {'tuidag run, hashed':<22} {hashed:>7.3f}s  (a new state dir: the input is read and hashed)")
    print(f"  {'tuidag run, stat cache':<22} {known:>7.3f}s  ({hashed / known:.1f}x faster: nothing read)")


def no_checks(root: Path, tasks: list[Task], args: argparse.Namespace) -> None:
    """(d): the DAG without `inputs:`/`outputs:`, this tuidag against the one at --before, in A/B pairs."""
    print(f"\n(d) the same {len(tasks):,} tasks without inputs/outputs (every task runs): the median of {args.repeats}")
    if not args.before:
        print("  left out: --before DIR (a checkout of tuidag from before the up-to-date checks) is needed")
        return
    folder = root / "plain"
    write_inputs(folder, args.inputs)
    write_yaml(tasks, folder / "dag.yaml", declared=False)
    before = root / "before"
    shutil.copytree(Path(args.before) / "tuidag", before / "tuidag", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(before / "tuidag")], check=True)
    this = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"this tree": this, f"before ({args.before})": str(before)}
    cmd = [sys.executable, "-m", "tuidag", "run", "--no-tui", "--quiet", "-j", str(args.j), "dag.yaml"]
    times: dict[str, list[float]] = {side: [] for side in sides}
    for round_ in range(args.repeats + 1):  # the first pair warms the page cache and is not counted
        for i, (side, path) in enumerate(sides.items()):
            env = {**os.environ, "PYTHONPATH": path, "TUIDAG_STATE_DIR": str(folder / f"state{i}"), "NO_COLOR": "1"}
            seconds = run(cmd, folder, env)
            if round_:
                times[side].append(seconds)
    medians = {side: statistics.median(values) for side, values in times.items()}
    for side, values in times.items():
        spread = ", ".join(f"{v:.2f}" for v in sorted(values))
        print(f"  {side:<40} {medians[side]:>7.3f}s  ({spread})")
    this_median, before_median = medians.values()
    print(f"  this tree / before: {this_median / before_median:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--inputs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("-j", type=int, default=8, help="jobs at once in the builds (default 8)")
    parser.add_argument("--dir", help="where the trees are written (default: the temp dir; /dev/shm: tmpfs)")
    parser.add_argument("--snakemake", help="the snakemake command (default: on the PATH, or beside this Python)")
    parser.add_argument("--only", nargs="+", choices=["a", "b", "c", "d"], default=["a", "b", "c", "d"])
    parser.add_argument("--before", help="(d): a checkout of tuidag from before the up-to-date checks")
    args = parser.parse_args()
    compile_tuidag()
    checks = tuidag_has_checks()
    tasks = tree(args.tasks, args.inputs)
    print(
        f"{len(tasks):,} tasks in {LAYERS} layers, each reading {READS} of {args.inputs:,} inputs (and {DEPS} outputs "
        f"of the layer above), -j {args.j}, {os.cpu_count()} cores, load average {load()}"
    )
    if not checks:
        print(NEEDS_CHECKS + " (`tuidag plan` is not a command of this tuidag): its figures are left out")
    root = Path(tempfile.mkdtemp(prefix="tuidag-cache-bench-", dir=args.dir))
    try:
        if "a" in args.only or "b" in args.only:
            made, notes = peers(root, tasks, args, checks)
            for note in notes:
                print("  " + note)
            if "a" in args.only:
                nothing_changed(made, args.repeats, checks)
            if "b" in args.only:
                one_changed(made, tasks, args.repeats, checks)
        if "c" in args.only:
            big_input(root, args.repeats, checks)
        if "d" in args.only:
            no_checks(root, tasks, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nload average at the end: {load()}")


def load() -> str:
    """The machine's load average (1, 5, 15 minutes): the figures are only comparable within one run."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
