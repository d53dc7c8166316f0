"""tuidag vs ninja on the same layered DAG of `true` commands, measured side by side in one run.

The DAG: 10 layers of N/10 tasks; every task past the first layer depends on 2 tasks of the layer above. N=1 (one
task, in the default sizes) is the start-up and shut-down of a run: the fixed cost every run pays. It is written
as a tuidag YAML file and as a build.ninja, then `tuidag run --no-tui --quiet -j 8` (per-task logs and journal
included) and `ninja -j 8` run alternately; the script prints the median wall times and their ratio. tuidag runs
twice per round: as a run of a file it ran before (the validated model comes from the state dir's cache, as ninja
reads its own logs of earlier builds) and as the first run of a file ("1st run": the cache emptied before it).

A third column, "py floor", is the least any Python program can do for the same job: a bare thread pool that runs the
same commands with `subprocess`, each into a new log file of its own, in dependency order (no journal, no states, no
output). It shows how much of the gap to ninja is the language's own start-up and process spawning; tuidag / floor is
the part that is tuidag's own. tuidag runs a third time per round with `TUIDAG_CGROUPS=off` ("no cgroups"): as root (or
in a delegated cgroup subtree) each attempt otherwise gets a cgroup of its own, and the two columns side by side show
what they cost. `--baseline DIR` adds a fourth: the same run again by the tuidag checked out in DIR (imported from
there), interleaved with this one's, so a change is measured in A/B pairs under the same load. `--bare` adds the
engine alone: tuidag with every per-attempt extra switched off inside the process (no cgroups, no log headers, no
journal lines, no printed events), which shows how much of tuidag / floor is left when those guarantees are gone.

Both Python programs create one file per task and ninja creates none, so the file system shows in the ratios. On
ext4 without a journal, creating a file right after many were deleted is slow: the kernel skips inodes freed in the
last minutes (up to 300 s while their inode-table block is still dirty) one by one, and 5,000 new files can then take
seconds instead of 0.15 s (measured here: 4 s for 5,000 files for two minutes after 100,000 were deleted, back to
normal after about five). So the script deletes nothing until every size is measured, and it first times creating
1,000 files where it works and prints that, which shows a disk in that state; `--dir /dev/shm` runs everything on
tmpfs to take it out. Every timed command starts after a `sync`.

tuidag's bytecode is compiled first, as `pip install` does (the figures would otherwise include compiling every
module on every start when PYTHONDONTWRITEBYTECODE is set).

    python benchmarks/core_bench.py                 # N=1, 1000 and 5000, 5 repeats each
    python benchmarks/core_bench.py --sizes 1000 --repeats 9
    python benchmarks/core_bench.py --dir /dev/shm  # on tmpfs
    python benchmarks/core_bench.py --baseline ../tuidag-before  # against another checkout, in A/B pairs
    python benchmarks/core_bench.py --sizes 1000 5000 --bare     # and the engine with its extras switched off
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYERS = 10
PROBE_FILES = 1000  # files created to show how fast the file system creates them right now


def layered(n: int, seed: int = 1) -> list[tuple[str, list[str]]]:
    """`LAYERS` layers of n / LAYERS tasks; a DAG smaller than that (N=1: the start-up of a run) is one layer."""
    rng = random.Random(seed)
    layers = LAYERS if n >= 2 * LAYERS else 1
    width = n // layers
    tasks: list[tuple[str, list[str]]] = []
    for layer in range(layers):
        for i in range(width):
            name = f"t{layer}_{i}"
            deps = [] if layer == 0 else [f"t{layer - 1}_{j}" for j in rng.sample(range(width), 2)]
            tasks.append((name, deps))
    return tasks


def write_yaml(tasks, path: Path) -> None:
    lines = ["name: layered", "tasks:"]
    for name, deps in tasks:
        lines.append(f"  {name}:")
        lines.append("    run: 'true'")
        if deps:
            lines.append(f"    depends_on: [{', '.join(deps)}]")
    path.write_text("\n".join(lines) + "\n")


def write_ninja(tasks, path: Path) -> None:
    lines = ["rule t", "  command = true", ""]
    for name, deps in tasks:
        lines.append(f"build {name}: t" + (" | " + " ".join(deps) if deps else ""))
    lines.append("default " + " ".join(name for name, _ in tasks))
    path.write_text("\n".join(lines) + "\n")


def timed(cmd: list[str], cwd: Path, env: dict | None = None, forget: Path | None = None) -> float:
    if forget is not None:  # a first run of the file: no validated model in the state dir's cache
        shutil.rmtree(forget, ignore_errors=True)
    os.sync()  # no run pays for writing back what the one before it left dirty
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return elapsed


def ninja_binary() -> str:
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # the PyPI package ships the binary
    except ImportError:
        sys.exit("ninja not found: pip install ninja")
    return os.path.join(ninja.BIN_DIR, "ninja")


FLOOR = """
import os, subprocess, sys, threading, yaml
from concurrent.futures import ThreadPoolExecutor
tasks = yaml.load(open(sys.argv[1]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["tasks"]
children = {name: [] for name in tasks}
waiting = {name: len(t.get("depends_on", [])) for name, t in tasks.items()}
for name, t in tasks.items():
    for dep in t.get("depends_on", []):
        children[dep].append(name)
logs = f"floor-logs/{os.getpid()}"  # fresh files every run, as a run's logs outlive it
os.makedirs(logs)
lock, done, left = threading.Lock(), threading.Event(), [len(tasks)]
pool = ThreadPoolExecutor(int(sys.argv[2]))
def work(name):
    fd = os.open(f"{logs}/{name}.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    subprocess.Popen(["/bin/sh", "-c", tasks[name]["run"]], stdin=subprocess.DEVNULL, stdout=fd,
                     stderr=subprocess.STDOUT, start_new_session=True).wait()
    os.close(fd)
    with lock:
        left[0] -= 1
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                pool.submit(work, child)
        if left[0] == 0:
            done.set()
for name, count in waiting.items():
    if count == 0:
        pool.submit(work, name)
done.wait()
pool.shutdown()
"""

BARE = """
import os, sys
os.environ["TUIDAG_CGROUPS"] = "off"
from tuidag.engine import shell_attempt
from tuidag.store import journal
from tuidag.views import headless
for owner, name in ((shell_attempt, "write_header"), (journal.JournalWriter, "record"),
                    (headless.HeadlessReporter, "__call__")):
    assert hasattr(owner, name), f"--bare: {owner.__name__}.{name} is gone: update core_bench.BARE"
shell_attempt.write_header = lambda *args: None  # no `=== tuidag: ... ===` line in each log
journal.JournalWriter.record = lambda self, events: None  # the journal keeps its header only
headless.HeadlessReporter.__call__ = lambda self, event: None  # no printed events (the summary stays)
from tuidag.cli import entry
sys.argv[0] = "tuidag"
entry()
"""


def compile_tuidag(baseline: str | None) -> None:
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("tuidag")
    if spec is None or spec.origin is None:
        sys.exit("tuidag is not importable: pip install -e .")
    compileall.compile_dir(os.path.dirname(spec.origin), quiet=1)
    if baseline is not None:
        if not os.path.isfile(os.path.join(baseline, "tuidag", "__main__.py")):
            sys.exit(f"--baseline {baseline}: no tuidag/__main__.py there")
        compileall.compile_dir(os.path.join(baseline, "tuidag"), quiet=1)


def file_creation(root: Path) -> float:
    """Seconds to create PROBE_FILES empty files in a new folder under `root` (kept until the end: deleting them would
    slow down the measurements that follow)."""
    folder = root / "probe"
    folder.mkdir()
    os.sync()
    start = time.perf_counter()
    for i in range(PROBE_FILES):
        os.close(os.open(folder / f"{i}.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return time.perf_counter() - start


class Times(dict):
    """Median seconds by runner: ninja, tuidag (run again), cold (1st run), off (no cgroups), floor, baseline, bare."""


def bench(n: int, repeats: int, jobs: int, work: Path, baseline: str | None, bare: bool = False) -> Times:
    work.mkdir()
    tasks = layered(n)
    write_yaml(tasks, work / "dag.yaml")
    write_ninja(tasks, work / "build.ninja")
    env = {**os.environ, "TUIDAG_STATE_DIR": str(work / "state")}
    off_env = {**env, "TUIDAG_CGROUPS": "off"}
    tuidag_cmd = [sys.executable, "-m", "tuidag", "run", "--no-tui", "--quiet", "-j", str(jobs), "dag.yaml"]
    runs: dict[str, tuple[list[str], dict | None, Path | None]] = {
        "ninja": ([ninja_binary(), "-j", str(jobs)], None, None),
        "cold": (tuidag_cmd, env, work / "state" / "cache"),
        "tuidag": (tuidag_cmd, env, None),
        "off": (tuidag_cmd, off_env, None),
        "floor": ([sys.executable, "-c", FLOOR, "dag.yaml", str(jobs)], None, None),
    }
    if baseline is not None:  # the other checkout first on the path, with a state dir of its own
        base_env = {**env, "PYTHONPATH": baseline, "TUIDAG_STATE_DIR": str(work / "state-baseline")}
        timed(tuidag_cmd, work, base_env)  # its DAG cache filled, as this tree's is by "cold" before "tuidag"
        runs["baseline"] = (tuidag_cmd, base_env, None)
    if bare:
        runs["bare"] = ([sys.executable, "-c", BARE, *tuidag_cmd[3:]], env, None)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats):
        order = list(runs.items())
        if round_ % 2:  # "tuidag" and "baseline" alternate which goes first (cold stays before tuidag)
            order.reverse()
        for name, (cmd, run_env, forget) in order:
            times[name].append(timed(cmd, work, run_env, forget=forget))
    return Times({name: statistics.median(values) for name, values in times.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 1000, 5000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("-j", type=int, default=8)
    parser.add_argument("--dir", help="where the DAGs, logs and journals are written (default: the temp dir)")
    parser.add_argument("--baseline", metavar="DIR", help="a tuidag checkout to time too, in A/B pairs with this one")
    parser.add_argument("--bare", action="store_true", help="time the engine with its per-attempt extras off too")
    args = parser.parse_args()
    if args.baseline is not None:
        args.baseline = os.path.abspath(args.baseline)
    print(
        f"layered DAG, {LAYERS} layers, 2 deps per task, command `true`, -j {args.j}, "
        f"median of {args.repeats}, {os.cpu_count()} cores, load average {load()}"
    )
    compile_tuidag(args.baseline)
    root = Path(tempfile.mkdtemp(prefix="tuidag-bench-", dir=args.dir))
    try:
        report(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def seconds(value: float) -> str:
    return f"{value * 1000:.1f}ms" if value < 1 else f"{value:.2f}s"


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def report(root: Path, args: argparse.Namespace) -> None:
    print(
        f"creating {PROBE_FILES:,} files in {root.parent}: {file_creation(root) * 1000:.0f} ms "
        "(tens of ms on an idle ext4 disk; hundreds after many files were deleted there in the last minutes)"
    )
    print("times, then / ninja; tuidag = a run again, 1st run = the DAG cache emptied, no cgroups = TUIDAG_CGROUPS=off")
    extra = (["baseline"] if args.baseline else []) + (["bare"] if args.bare else [])
    columns = ["ninja", "tuidag", "1st run", "no cgroups", "py floor", *extra]
    header = f"{'N':>6}  " + "  ".join(f"{c:>15}" for c in columns) + f"  {'tuidag/floor':>12}  {'no cg/floor':>11}"
    header += "".join(f"  {name + '/floor':>14}" for name in extra)
    print(header)
    for n in args.sizes:
        repeats = args.repeats * 4 if n < 100 else args.repeats  # a start-up is quick and noisy: more samples
        t = bench(n, repeats, args.j, root / str(n), args.baseline, args.bare)
        keys = ["ninja", "tuidag", "cold", "off", "floor", *extra]
        cells = [f"{seconds(t[k]):>7} ({t[k] / t['ninja']:.2f}x)" for k in keys]
        line = f"{n:>6}  " + "  ".join(cells) + f"  {t['tuidag'] / t['floor']:>11.2f}x  {t['off'] / t['floor']:>10.2f}x"
        line += "".join(f"  {t[name] / t['floor']:>13.2f}x" for name in extra)
        print(line, flush=True)
    print(f"load average at the end: {load()}")


if __name__ == "__main__":
    main()
