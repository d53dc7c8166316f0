"""Big logs: the log pane indexing a 100 MB file and tailing one written flat out; headless output's memory.

1. index: a 100 MB / 1e6-line log (every 10th line coloured) is indexed by `LogIndex`: time and RSS growth, plus a
   whole-file search that finds nothing and reading 50 lines in the middle.
2. tail: `LogView` in a headless Textual app (driven by Pilot) tails a file while a subprocess writes 100 MB into it as
   fast as it can. An event-loop probe schedules itself every 10 ms (`loop.call_later`) and records how late it fires
   (actual minus scheduled time): the max and median of that lag, how long the view needs after the writer ends to
   show the last line, and the app's RSS growth. It runs twice: as is, and with `gc.freeze()` once the app is up.
   The worst lags are full garbage collections (~100 ms for Textual's ~45k objects on a 2-core VM); freezing the
   objects that exist after start-up takes them out of every later collection.

3. headless: `tuidag run --no-tui` of one task that prints 200 MB of 100-byte lines, of one that prints a single
   200 MB line, and of one that prints 1 GB of lines, its output read from a pipe. The peak RSS of the tuidag process
   (VmHWM, polled) minus that of a run whose task prints one line is its RSS growth; also how much it printed and how
   long it took.

Each repeat runs in a fresh child process so RSS figures don't mix. Medians over the repeats are printed.

    python benchmarks/log_bench.py                 # all three, 3 repeats
    python benchmarks/log_bench.py --only tail --repeats 5
Targets: lag < 100 ms, RSS growth < 100 MB in the UI; < 50 MB headless, whatever the output.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 1 << 20
TOTAL_BYTES = 100 * MB
LINES = 1_000_000
PROBE_INTERVAL = 0.01

WRITER = r"""
import sys
path, total = sys.argv[1], int(sys.argv[2])
line = b"2024-01-01 12:00:00.000 INFO  worker-3 processed item %08d of the batch, payload %s\n"
colour = b"2024-01-01 12:00:00.000 \x1b[33mWARN\x1b[0m  worker-3 slow item %08d of the batch, payload %s\n"
written, i = 0, 0
with open(path, "ab", buffering=0) as f:
    while written < total:
        block = b"".join((colour if (i + k) % 10 == 0 else line) % (i + k, b"x" * 8) for k in range(10000))
        i += 10000
        f.write(block)
        written += len(block)
print(i)
"""


def rss() -> int:
    return psutil.Process().memory_info().rss


def make_big_log(path: Path) -> None:
    """~100 MB in 1e6 lines, the same shape as the writer's."""
    subprocess.run([sys.executable, "-c", WRITER, str(path), str(TOTAL_BYTES)], check=True, capture_output=True)


# ----------------------------------------------------------------------------------------------- child: index
def child_index(path: Path) -> dict:
    from tuidag.views.log_index import LogIndex

    before = rss()
    started = time.perf_counter()
    index = LogIndex(path)
    index.refresh()
    took = time.perf_counter() - started
    grown = rss() - before
    started = time.perf_counter()
    assert index.search("no such text in this log", 0) is None
    search = time.perf_counter() - started
    started = time.perf_counter()
    middle = index.line_count // 2
    for i in range(middle, middle + 50):
        index.line(i)
    read = time.perf_counter() - started
    return {
        "lines": index.line_count,
        "bytes": index.size,
        "index_s": took,
        "rss_mb": grown / MB,
        "search_s": search,
        "read50_ms": read * 1000,
    }


# ------------------------------------------------------------------------------------------------ child: tail
def child_tail(folder: Path, freeze: bool) -> dict:
    return asyncio.run(_tail(folder, freeze))


async def _tail(folder: Path, freeze: bool) -> dict:
    from textual.app import App, ComposeResult

    from tuidag.ui.widgets.log.view import LogView

    class TailApp(App[None]):
        CSS = "LogView { height: 1fr; border: round white; }"

        def compose(self) -> ComposeResult:
            yield LogView()

    path = folder / "flat-out.log"
    path.write_bytes(b"")
    app = TailApp()
    async with app.run_test(size=(160, 45)) as pilot:
        view = app.query_one(LogView)
        view.show_file(path, "flat-out")
        await pilot.pause()
        if freeze:
            gc.freeze()
        before = rss()
        lags: list[float] = []
        probe = _Probe(lags)
        probe.start()
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(TOTAL_BYTES)], stdout=subprocess.PIPE)
        started = time.perf_counter()
        while writer.poll() is None:
            await asyncio.sleep(0.05)
        wrote = time.perf_counter() - started
        lines = int(writer.stdout.read())
        deadline = time.perf_counter() + 120
        while not (view.line_count == lines and view.scroll_offset.y == view.max_scroll_y):
            if time.perf_counter() > deadline:
                raise RuntimeError(f"view stuck at {view.line_count} of {lines} lines")
            await asyncio.sleep(0.01)
        caught_up = time.perf_counter() - started - wrote
        probe.stop()
        grown = rss() - before
    return {
        "lines": lines,
        "write_s": wrote,
        "catch_up_s": caught_up,
        "lag_max_ms": max(lags) * 1000,
        "lag_median_ms": statistics.median(lags) * 1000,
        "lag_p99_ms": _p99(lags) * 1000,
        "rss_mb": grown / MB,
        "peak_rss_mb": probe.peak_growth(before) / MB,
    }


class _Probe:
    """Event-loop lag: a callback scheduled every PROBE_INTERVAL records how late it actually ran."""

    def __init__(self, lags: list[float]) -> None:
        self.lags = lags
        self.peak = 0
        self._handle: asyncio.TimerHandle | None = None
        self._scheduled = 0.0
        self._count = 0

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def peak_growth(self, before: int) -> int:
        return max(0, self.peak - before)

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._scheduled = loop.time() + PROBE_INTERVAL
        self._handle = loop.call_at(self._scheduled, self._fire)

    def _fire(self) -> None:
        self.lags.append(max(0.0, asyncio.get_running_loop().time() - self._scheduled))
        self._count += 1
        if self._count % 10 == 0:
            self.peak = max(self.peak, rss())
        self._schedule()


# ------------------------------------------------------------------------------------------------- headless
HEADLESS_CASES = {
    "one line": "echo hello",  # the baseline
    "200 MB of 100-byte lines": f"yes \"$(printf '%099d' 0)\" | head -c {200 * MB}",
    "a 200 MB single line": f"head -c {200 * MB} /dev/zero | tr '\\0' x; echo",
    "1 GB of 100-byte lines": f"yes \"$(printf '%099d' 0)\" | head -c {1024 * MB}",  # once 5.1 GB
}


def headless_run(folder: Path, command: str) -> dict:
    """Peak RSS of `tuidag run --no-tui` of one task running `command`, with its output drained from a pipe."""
    folder.mkdir()
    (folder / "dag.yaml").write_text(json.dumps({"tasks": {"writer": {"run": command}}}))
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "dag.yaml", "--state-dir", "state"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    printed = 0

    def drain() -> None:
        nonlocal printed
        while data := proc.stdout.read1(1 << 20):
            printed += len(data)

    reader = threading.Thread(target=drain)
    reader.start()
    peak = 0
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peak = max(peak, int(status.split("VmHWM:")[1].split()[0]) * 1024)
        except (OSError, IndexError):
            pass
        time.sleep(0.02)
    reader.join()
    assert proc.returncode == 0, f"{command}: exit {proc.returncode}"
    return {"peak": peak, "printed MB": printed / MB, "seconds": time.perf_counter() - started}


def headless(folder: Path, repeats: int) -> None:
    baseline = [headless_run(folder / f"baseline-{i}", HEADLESS_CASES["one line"])["peak"] for i in range(repeats)]
    print(
        f"headless: peak RSS of a run printing one line (median of {repeats}): "
        f"{statistics.median(baseline) / MB:,.1f} MB"
    )
    for number, (title, command) in enumerate(list(HEADLESS_CASES.items())[1:]):
        results = []
        for i in range(repeats):
            run = folder / f"headless-{number}-{i}"
            result = headless_run(run, command)
            shutil.rmtree(run)
            peak = result.pop("peak")
            results.append({"RSS growth MB": (peak - statistics.median(baseline)) / MB, **result})
        report(f"headless, {title}", results)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


# ---------------------------------------------------------------------------------------------------- parent
def run_child(kind: str, target: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(target)], check=True, capture_output=True, text=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(title: str, results: list[dict]) -> None:
    print(f"{title} (median of {len(results)}):")
    for key in results[0]:
        value = statistics.median(r[key] for r in results)
        print(f"  {key:>14}: {value:,.0f}" if float(value).is_integer() else f"  {key:>14}: {value:,.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["index", "tail", "headless"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, target = args.child
        result = child_index(Path(target)) if kind == "index" else child_tail(Path(target), kind == "tail-frozen")
        print(json.dumps(result))
        return
    with tempfile.TemporaryDirectory(prefix="tuidag-log-bench-") as tmp:
        folder = Path(tmp)
        if args.only in (None, "index"):
            big = folder / "big.log"
            make_big_log(big)
            report(f"index {big.stat().st_size / MB:.0f} MB", [run_child("index", big) for _ in range(args.repeats)])
            big.unlink()
        if args.only in (None, "tail"):
            for kind, title in [
                ("tail", "tail 100 MB written flat out"),
                ("tail-frozen", "the same, gc.freeze() after start-up"),
            ]:
                results = []
                for i in range(args.repeats):
                    run = folder / f"{kind}-{i}"
                    run.mkdir()
                    results.append(run_child(kind, run))
                    (run / "flat-out.log").unlink()
                report(title, results)
        if args.only in (None, "headless"):
            headless(folder, args.repeats)


if __name__ == "__main__":
    main()
