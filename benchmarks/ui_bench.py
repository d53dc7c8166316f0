"""Speed of the terminal UI, measured on the real app (headless, 160x45) driving real runs.

1. first frame: a 2,000-task layered DAG (layout included) painted within 1 s of constructing the app;
2. key latency: `j` pressed on that graph while it runs, to the repaint showing the new selection (< 100 ms);
3. flood: one task writes 100 MB as fast as it can while the log pane follows it (and again in the combined view):
   event-loop lag (< 100 ms) and RSS growth (< 100 MB);
4. first line: a task selected before its log exists starts and writes a line (its wall-clock time): how long until
   the log pane painted it (< 100 ms);
5. overhead: the 1,000-task layered DAG of `true` under the app vs the headless reporter (same process, -j 8), for
   the first run of the DAG in a state dir and for a run again (the graph's layout then comes from the cache).
   `--dir /dev/shm` keeps the file system out of it (see core_bench.py).

    python benchmarks/ui_bench.py              # 3 repeats, medians
    python benchmarks/ui_bench.py --repeats 5
    python benchmarks/ui_bench.py --only overhead --repeats 7
    python benchmarks/ui_bench.py --only first-line
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from core_bench import layered  # noqa: E402
from tuidag.cli import run_headless  # noqa: E402
from tuidag.engine.events import RunEvent  # noqa: E402
from tuidag.launch import RunSession  # noqa: E402
from tuidag.model.spec import DagSpec, TaskSpec  # noqa: E402
from tuidag.model.state import TaskState  # noqa: E402
from tuidag.ui.app import TuidagApp  # noqa: E402

SIZE = (160, 45)
FLOOD_BYTES = 100_000_000
FLOOD_LINE = "x" * 99  # + newline: 100 bytes a line


def dag_of(tasks: list[tuple[str, list[str]]], command: str, jobs: int = 8) -> DagSpec:
    specs = {name: TaskSpec(name=name, run=command, depends_on=tuple(deps)) for name, deps in tasks}
    return DagSpec(name="bench", tasks=specs, max_parallel=jobs, kill_grace=0.5)


async def wait_until(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not reached")
        await asyncio.sleep(0.005)


async def painted(app: TuidagApp) -> float:
    """Time at which the next screen refresh has happened."""
    done = asyncio.get_running_loop().create_future()
    app.call_after_refresh(lambda: done.done() or done.set_result(time.perf_counter()))
    return await done


def stop(session: RunSession) -> None:
    if not session.scheduler.finished:
        session.scheduler.cancel_all("benchmark over")
        session.scheduler.wait(60)
    session.finish()


async def graph_run(state: Path, presses: int = 20) -> tuple[float, list[float]]:
    """First frame of a 2,000-task DAG while it starts running, then key-press-to-repaint latencies."""
    started = time.perf_counter()
    session = RunSession.create(dag_of(layered(2000), "sleep 0.05"), state)
    app = TuidagApp(session)
    try:
        async with app.run_test(headless=True, size=SIZE):
            first = await painted(app) - started
            latencies = []
            for _ in range(presses):
                before = app.canvas.selected
                pressed = time.perf_counter()
                app.simulate_key("j")
                await wait_until(lambda: app.canvas.selected != before, timeout=5)
                latencies.append(await painted(app) - pressed)
                await asyncio.sleep(0.05)  # a human's pace, while the run goes on
    finally:
        stop(session)
    return first, latencies


async def flood(state: Path, combined: bool) -> tuple[float, float, float, float]:
    """(median lag, max lag, RSS growth MB, seconds) while one task writes 100 MB and the log pane shows it."""
    lines = FLOOD_BYTES // (len(FLOOD_LINE) + 1)
    command = f"while [ ! -f {state}/go ]; do sleep 0.01; done; yes {FLOOD_LINE} | head -n {lines}"
    session = RunSession.create(dag_of([("flood", [])], command), state)
    app = TuidagApp(session)
    me = psutil.Process()
    peak = [0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.02):
            peak[0] = max(peak[0], me.memory_info().rss)

    try:
        async with app.run_test(headless=True, size=SIZE) as pilot:
            await wait_until(lambda: app.model.snapshots["flood"].state is TaskState.RUNNING)
            if combined:
                await pilot.press("a")
            await asyncio.sleep(0.3)
            baseline = peak[0] = me.memory_info().rss
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            lags: list[float] = []
            t0 = time.perf_counter()
            (state / "go").touch()
            def shown() -> int:  # the combined view keeps the latest lines only and counts the rest as dropped
                return app.combined.dropped + app.combined.line_count if combined else app.log_pane.line_count

            while not (app.model.finished and shown() >= lines):
                tick = time.perf_counter()
                await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - tick - 0.01)
                if time.perf_counter() - t0 > 120:
                    raise TimeoutError("the log pane did not catch up")
            seconds = time.perf_counter() - t0
            sampling.set()
            sampler.join()
    finally:
        stop(session)
    return statistics.median(lags), max(lags), (peak[0] - baseline) / 2**20, seconds


async def first_lines(state: Path, trials: int = 10) -> list[float]:
    """Seconds from a task writing its first line to the log pane painting it; the task is selected before its log
    file exists (its upstream waits for a flag), so the pane starts watching the file only when it appears."""
    tasks = []
    for i in range(trials):
        tasks.append((f"gate{i}", []))
        tasks.append((f"late{i}", [f"gate{i}"]))
    specs = {name: TaskSpec(name=name, depends_on=tuple(deps),
                            run=(f"while [ ! -f {state}/{name}.go ]; do sleep 0.005; done" if not deps else
                                 "date +%s.%N; sleep 0.5"))
             for name, deps in tasks}
    session = RunSession.create(DagSpec(name="bench", tasks=specs, max_parallel=2 * trials, kill_grace=0.5), state)
    app = TuidagApp(session)
    latencies = []
    try:
        async with app.run_test(headless=True, size=SIZE):
            for i in range(trials):
                app.canvas.select(f"late{i}")
                await wait_until(lambda: app.log_pane.path == session.run.log_path(f"late{i}"))
                await asyncio.sleep(0.3)  # settled on the selection, as a user would be
                (state / f"gate{i}.go").touch()

                def written() -> float | None:
                    for y in range(app.log_pane.scrollable_content_region.height):
                        text = app.log_pane.render_line(y).text.strip()
                        if text[:1].isdigit():
                            return float(text)
                    return None

                await wait_until(lambda: written() is not None, timeout=10)
                await painted(app)
                latencies.append(time.time() - written())
    finally:
        stop(session)
    return latencies


def run_span(session: RunSession) -> list[float]:
    """Filled with the engine's own start and finish times: the run without the front end's start-up."""
    span: list[float] = []
    session.scheduler.subscribe(lambda e: span.append(e.time) if isinstance(e, RunEvent) and
                                e.kind in ("started", "finished") else None)
    return span


async def tui_run(state: Path) -> tuple[float, float]:
    session = RunSession.create(dag_of(layered(1000), "true"), state)
    span = run_span(session)
    started = time.perf_counter()
    session.scheduler.start()  # as `run_tui` does: the app is built while the first tasks run
    app = TuidagApp(session, exit_on_finish=True)
    await app.run_async(headless=True, size=SIZE)  # the app's own loop, as `tuidag run` drives it; it exits at the end
    elapsed = time.perf_counter() - started
    session.finish()
    return elapsed, span[1] - span[0]


def headless_run(state: Path) -> tuple[float, float]:
    session = RunSession.create(dag_of(layered(1000), "true"), state)
    span = run_span(session)
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        run_headless(session, quiet=True)
    return time.perf_counter() - started, span[1] - span[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=["first-frame", "flood", "first-line", "overhead"],
                        help="measure these parts only")
    parser.add_argument("--dir", help="where state dirs and logs are written (default: the temp dir)")
    args = parser.parse_args()
    wanted = set(args.only or ["first-frame", "flood", "first-line", "overhead"])
    with tempfile.TemporaryDirectory(prefix="tuidag-ui-bench-", dir=args.dir) as tmp:
        def state(tag: str, i: int) -> Path:
            path = Path(tmp) / f"{tag}-{i}"
            path.mkdir()
            return path

        firsts, keys = [], []
        for i in range(args.repeats if "first-frame" in wanted else 0):
            first, latencies = asyncio.run(graph_run(state("graph", i)))
            firsts.append(first)
            keys.extend(latencies)
        if firsts:
            print(f"2,000-task DAG, first frame:  median {statistics.median(firsts) * 1000:6.0f} ms   (target < 1000 ms)")
            print(f"key j -> repainted selection: median {statistics.median(keys) * 1000:6.1f} ms, "
                  f"max {max(keys) * 1000:.1f} ms   (target < 100 ms)")
        for combined in (False, True) if "flood" in wanted else ():
            results = [asyncio.run(flood(state(f"flood{combined}", i), combined)) for i in range(args.repeats)]
            lag, worst, rss, secs = (statistics.median(r[k] for r in results) for k in range(4))
            view = "combined view" if combined else "task log     "
            print(f"100 MB flood, {view}: loop lag median {lag * 1000:.1f} ms, max {worst * 1000:.0f} ms "
                  f"(target < 100 ms); RSS growth {rss:.0f} MB (target < 100 MB); caught up in {secs:.1f} s")
        lines = [t for i in range(args.repeats if "first-line" in wanted else 0)
                 for t in asyncio.run(first_lines(state("first-line", i)))]
        if lines:
            print(f"a new task's first line, written -> on screen: median {statistics.median(lines) * 1000:.0f} ms, "
                  f"max {max(lines) * 1000:.0f} ms over {len(lines)} tasks   (target < 100 ms)")
        first, again, plain = [], [], []
        if "overhead" in wanted:
            seen = state("seen", 0)  # the state dir of a DAG run before: its layout is in the cache
            asyncio.run(tui_run(seen))
        for i in range(args.repeats if "overhead" in wanted else 0):  # alternated, so that a change in the machine's load hits all alike
            first.append(asyncio.run(tui_run(state("tui", i))))
            again.append(asyncio.run(tui_run(seen)))
            plain.append(headless_run(state("plain", i)))
        for runs, which in ((first, "first run"), (again, "run again")) if plain else ():
            for k, what in ((0, "wall, start-up included"), (1, "run only (engine start to finish)")):
                a, b = statistics.median(t[k] for t in runs), statistics.median(p[k] for p in plain)
                print(f"1,000 layered tasks of `true`, -j 8, {which}, {what}: app {a:.2f} s vs headless {b:.2f} s: "
                      f"ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
