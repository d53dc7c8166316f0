"""Speed of the terminal UI, measured on the real app (headless, 160x45) driving real runs.

1. first frame: a 2,000-task layered DAG (layout included) painted within 1 s of constructing the app;
2. key latency: `j` pressed on that graph while it runs, to the repaint showing the new selection (< 100 ms);
3. flood: one task writes 100 MB as fast as it can while the log pane follows it (and again in the combined view):
   event-loop lag (< 100 ms) and RSS growth (< 100 MB);
4. first line: a task selected before its log exists starts and writes a line (its wall-clock time): how long until
   the log pane painted it (< 100 ms);
5. overhead: the 1,000-task layered DAG of `true` under the app vs the headless reporter (same process, -j 8), for
   the first run of the DAG in a state dir and for a run again (the graph's layout then comes from the cache); and
   as `tuidag run` shows it, the engine forked off and the app a viewer of it over the control socket (wall: until
   the viewer saw the end), and a detached run with a viewer attached for all of it (the engine waits for it).
   `--dir /dev/shm` keeps the file system out of it (see core_bench.py);
6. big: layered DAGs of 2,000 and 5,000 tasks, run as `tuidag run` does (the scheduler started, then the app built;
   -j 8 of `sleep 30`: the graph is live but mostly pending, as a big run looks for most of its life):
   - first frame: constructing the app -> the first frame showing the laid-out graph, in a fresh state dir and again
     in that state dir (its cache then holds the layout); target < 1000 ms at 2,000 tasks (none set at 5,000);
   - keys pressed at a human's pace, each timed to the last frame of the repaint showing its effect (median and max
     over 20 presses a run, all repeats pooled; target: every press < 100 ms): `j` and `l` (the selection moves; at
     the end of a line it starts over, unmeasured), `z` (zoom: each level laid out on its first visit), `o`
     (orientation), `F` (state filter), the finder (`:` opens it, `t` `1` `2` `3` are typed, each keystroke timed,
     Esc closes it; 5 rounds), `L` (list view, then the graph again).
   Textual paints at most 60 frames a second: an effect that takes k frames (a typed letter, then the matches) shows
   after at least (k - 1) x 16.7 ms. Headless, Textual composes each frame but skips encoding it for the terminal:
   the benchmark encodes it (as a terminal needs it, written nowhere), so a frame costs what it costs a user; only
   writing it to a terminal is left out.
7. timeline: on the running 2,000-task DAG of 6., `t` to the last frame of the timeline in the graph's place (its
   first frame; again on each later `t`, and `t` back to the graph), then keys in the timeline, each timed as in 6.:
   `j` (selection), `Z` / `z` alternately (time scale), `F` (the state filter lists the rows again) and `x` (the
   critical path worked out on a thread, then highlighted). Targets: first frame < 1 s, keys < 100 ms. `j` in the
   graph is measured first in the same run, for comparison on a machine whose load varies.

    python benchmarks/ui_bench.py              # 3 repeats, medians
    python benchmarks/ui_bench.py --repeats 5
    python benchmarks/ui_bench.py --only overhead --repeats 7
    python benchmarks/ui_bench.py --only first-line
    python benchmarks/ui_bench.py --only big --repeats 3
    python benchmarks/ui_bench.py --only timeline --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import statistics
import sys
import tempfile
import threading
import time
import unicodedata
from pathlib import Path

import psutil
from textual import events
from textual.app import REPLACED_KEYS, _character_to_key, _get_unicode_name_from_key

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from core_bench import layered  # noqa: E402

from tuidag.control.remote import RemoteRun  # noqa: E402
from tuidag.engine.events import RunEvent  # noqa: E402
from tuidag.launch import RunSession  # noqa: E402
from tuidag.model.spec import DagSpec, TaskSpec  # noqa: E402
from tuidag.model.state import TaskState  # noqa: E402
from tuidag.run_commands import run_headless  # noqa: E402
from tuidag.ui.app import TuidagApp  # noqa: E402
from tuidag.ui.screens.finder import FinderScreen  # noqa: E402

SIZE = (160, 45)
FLOOD_BYTES = 100_000_000
FLOOD_LINE = "x" * 99  # + newline: 100 bytes a line
BIG_SIZES = (2000, 5000)
BIG_COMMAND = "sleep 30"
BIG_PRESSES = 20
FINDER_ROUNDS = 5
FINDER_TYPED = "t123"
KEY_TARGET = 0.1
FIRST_FRAME_TARGET = {2000: 1.0}
#: (label, key) of the `big` key measurements, in the order they are made
BIG_KEYS = (
    ("j: selection down", "j"),
    ("l: selection right", "l"),
    ("z: zoom", "z"),
    ("o: orientation", "o"),
    ("F: state filter", "F"),
    (": finder opens", ":"),
    ("finder keystroke (t 1 2 3)", "t123"),
    ("esc: finder closes", "escape"),
    ("L: list view <-> graph", "L"),
)


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


def viewed(session: RunSession, **options) -> TuidagApp:
    """The app as users get it: the run started and served on its control socket (as its engine serves it, here in
    this process), the app a viewer of it (as `tuidag run` shows it)."""
    session.serve_control()
    session.scheduler.start()
    return TuidagApp(RemoteRun.attach(session.run, session.store, foreground=True), **options)


def stop(session: RunSession) -> None:
    if not session.scheduler.finished:
        session.scheduler.cancel_all("benchmark over")
        session.scheduler.wait(60)
    session.finish()


async def graph_run(state: Path, presses: int = 20) -> tuple[float, list[float]]:
    """First frame of a 2,000-task DAG while it starts running, then key-press-to-repaint latencies."""
    started = time.perf_counter()
    session = RunSession.create(dag_of(layered(2000), "sleep 0.05"), state)
    app = viewed(session)
    try:
        async with app.run_test(headless=True, size=SIZE):
            first = await painted(app) - started
            latencies = []
            for _ in range(presses):
                before = app.canvas.selected
                pressed = time.perf_counter()
                app.simulate_key("j")
                await wait_until(lambda before=before: app.canvas.selected != before, timeout=5)
                latencies.append(await painted(app) - pressed)
                await asyncio.sleep(0.05)  # a human's pace, while the run goes on
    finally:
        stop(session)
    return first, latencies


class Frames:
    """Every frame the app sends to its terminal, with the time it was done; and the first one showing the graph.
    Headless, Textual composes frames but skips encoding them for the terminal: that is done here, written nowhere."""

    def __init__(self, app: TuidagApp):
        self.times: list[float] = []
        self.first_graph: float | None = None
        display = app._display

        def displayed(screen, renderable) -> None:
            display(screen, renderable)
            if renderable is None:
                return
            if hasattr(renderable, "render_segments"):
                renderable.render_segments(app.console)
            now = time.perf_counter()
            self.times.append(now)
            if self.first_graph is None and app.canvas.graph is not None:
                self.first_graph = now

        app._display = displayed

    def last(self, after: float, until: float) -> float:
        shown = [t for t in self.times if after < t <= until]
        if not shown:
            raise RuntimeError("no frame was painted")
        return shown[-1]


def press(app: TuidagApp, key: str) -> None:
    """Send `key` as the terminal driver does, with its character (the finder's input types it), without the waits
    of `Pilot.press`."""
    if len(key) == 1 and not key.isalnum():
        key = _character_to_key(key)
    try:
        char = unicodedata.lookup(_get_unicode_name_from_key(REPLACED_KEYS.get(key, key)))
    except KeyError:
        char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    app.post_message(event)


async def settled(app: TuidagApp) -> float:
    """Time at which everything asked for so far is painted, including what it scheduled for after that refresh
    (a new layout scrolls to the selection once painted)."""
    await painted(app)
    return await painted(app)


async def timed_key(app: TuidagApp, frames: Frames, key: str, probe) -> float:
    """Seconds from `key` reaching the app to the last frame of the repaint that shows its effect: `probe()` returns
    another object, then the screen settles; the frame is the last one painted by then."""
    before = probe()
    pressed = time.perf_counter()
    press(app, key)
    await wait_until(lambda: probe() is not before, timeout=30)
    done = await settled(app)
    return frames.last(pressed, done) - pressed


async def big_run(state: Path, n: int, keys: bool, presses: int = BIG_PRESSES) -> tuple[float, dict[str, list[float]]]:
    """First frame of an n-task layered DAG whose run has started; with `keys`, then the key-press latencies."""
    session = RunSession.create(dag_of(layered(n), BIG_COMMAND), state)
    session.scheduler.start()  # the first tasks start while the app is built
    started = time.perf_counter()
    app = viewed(session)
    frames = Frames(app)
    latencies: dict[str, list[float]] = {label: [] for label, _ in BIG_KEYS}
    try:
        async with app.run_test(headless=True, size=SIZE):
            await wait_until(lambda: frames.first_graph is not None, timeout=60)
            first = frames.first_graph - started
            await settled(app)
            if not keys:
                return first, latencies
            canvas = app.canvas
            labels = dict((key, label) for label, key in BIG_KEYS)

            async def pace() -> None:
                await asyncio.sleep(0.05)  # a human's pace, while the run goes on

            for key, direction in (("j", "down"), ("l", "right")):
                for _ in range(presses):
                    if canvas._neighbour(canvas.selected, direction) is None:  # the end of the line: start over
                        app.select_task(canvas.graph.columns[0][len(latencies[labels[key]]) % 7])
                        await settled(app)
                        await pace()
                    latencies[labels[key]].append(await timed_key(app, frames, key, lambda: canvas.selected))
                    await pace()
            for key, probe in (
                ("z", lambda: canvas.graph),
                ("o", lambda: canvas.graph),
                ("F", lambda: app.model.state_filter),
            ):
                for _ in range(presses):
                    latencies[labels[key]].append(await timed_key(app, frames, key, probe))
                    await pace()
            for _ in range(FINDER_ROUNDS):
                latencies[labels[":"]].append(await timed_key(app, frames, ":", lambda: app.screen))
                assert isinstance(app.screen, FinderScreen)
                await pace()
                for letter in FINDER_TYPED:
                    latencies[labels[FINDER_TYPED]].append(
                        await timed_key(app, frames, letter, lambda: app.screen.found)
                    )
                    await pace()
                latencies[labels["escape"]].append(await timed_key(app, frames, "escape", lambda: app.screen))
                await pace()
            for _ in range(presses):
                latencies[labels["L"]].append(await timed_key(app, frames, "L", lambda: app.table.active))
                await pace()
    finally:
        stop(session)
    return first, latencies


TIMELINE_TASKS = 2000
#: (label, key) of the timeline measurements, in the order they are made
TIMELINE_KEYS = (
    ("j in the graph (same load)", "graph-j"),
    ("t: timeline's first frame", "t"),
    ("t: back to the graph", "t-back"),
    ("j: selection down", "j"),
    ("Z / z: time scale", "zZ"),
    ("F: state filter", "F"),
    ("x: critical path", "x"),
)


async def timeline_run(state: Path, n: int = TIMELINE_TASKS, presses: int = BIG_PRESSES) -> dict[str, list[float]]:
    """Key-press latencies of the timeline on an n-task layered DAG whose run has started (see 7. above)."""
    session = RunSession.create(dag_of(layered(n), BIG_COMMAND), state)
    session.scheduler.start()
    app = viewed(session)
    frames = Frames(app)
    latencies: dict[str, list[float]] = {label: [] for label, _ in TIMELINE_KEYS}
    labels = {key: label for label, key in TIMELINE_KEYS}

    async def pace() -> None:
        await asyncio.sleep(0.05)

    try:
        async with app.run_test(headless=True, size=SIZE):
            await wait_until(lambda: frames.first_graph is not None, timeout=60)
            await settled(app)
            timeline, canvas = app.timeline, app.canvas
            for _ in range(presses):
                if canvas._neighbour(canvas.selected, "down") is None:
                    app.select_task(canvas.graph.columns[0][0])
                    await settled(app)
                latencies[labels["graph-j"]].append(await timed_key(app, frames, "j", lambda: canvas.selected))
                await pace()
            for _ in range(5):
                latencies[labels["t"]].append(await timed_key(app, frames, "t", lambda: timeline.active))
                await pace()
                latencies[labels["t-back"]].append(await timed_key(app, frames, "t", lambda: timeline.active))
                await pace()
            await timed_key(app, frames, "t", lambda: timeline.active)
            for _ in range(presses):
                if timeline.selected == timeline.rows[-1]:
                    app.select_task(timeline.rows[0])
                    await settled(app)
                latencies[labels["j"]].append(await timed_key(app, frames, "j", lambda: timeline.selected))
                await pace()
            for i in range(presses):
                latencies[labels["zZ"]].append(await timed_key(app, frames, "Zz"[i % 2], lambda: timeline.time_scale))
                await pace()
            for _ in range(presses):
                latencies[labels["F"]].append(await timed_key(app, frames, "F", lambda: timeline.rows))
                await pace()
            for _ in range(presses):
                latencies[labels["x"]].append(await timed_key(app, frames, "x", lambda: timeline.critical))
                await pace()
    finally:
        stop(session)
    return latencies


def report_timeline(keys: dict[str, list[float]], repeats: int) -> None:
    print(
        f"timeline: real app at {SIZE[0]}x{SIZE[1]}, {TIMELINE_TASKS:,}-task layered DAG, -j 8 of `{BIG_COMMAND}` "
        f"running; {repeats} repeats; ms"
    )
    for label, key in TIMELINE_KEYS:
        times = keys[label]
        median, worst = statistics.median(times), max(times)
        target = FIRST_FRAME_TARGET[TIMELINE_TASKS] if key == "t" else KEY_TARGET
        mark = "PASS" if worst < target else "FAIL"
        print(
            f"{TIMELINE_TASKS:>6,}  {label:<32} {median * 1000:8.1f} {worst * 1000:8.1f}   "
            f"< {target * 1000:.0f} ms   {mark}   n={len(times)}"
        )


def report_big(n: int, fresh: list[float], again: list[float], keys: dict[str, list[float]]) -> None:
    target = FIRST_FRAME_TARGET.get(n)

    def verdict(value: float, limit: float | None) -> str:
        return "-" if limit is None else "PASS" if value < limit else "FAIL"

    for which, firsts in (("first frame, fresh state dir", fresh), ("first frame, state dir reused", again)):
        median = statistics.median(firsts)
        wanted = f"< {target * 1000:.0f} ms" if target else "none set"
        print(
            f"{n:>6,}  {which:<32} {median * 1000:8.0f} {max(firsts) * 1000:8.0f}   {wanted:<10} "
            f"{verdict(median, target)}"
        )
    for label, _ in BIG_KEYS:
        times = keys[label]
        median, worst = statistics.median(times), max(times)
        mark = verdict(worst, KEY_TARGET)
        print(
            f"{n:>6,}  {label:<32} {median * 1000:8.1f} {worst * 1000:8.1f}   < {KEY_TARGET * 1000:.0f} ms   "
            f"{mark}{' (max)' if mark == 'FAIL' and median < KEY_TARGET else ''}   n={len(times)}"
        )


async def flood(state: Path, combined: bool) -> tuple[float, float, float, float]:
    """(median lag, max lag, RSS growth MB, seconds) while one task writes 100 MB and the log pane shows it."""
    lines = FLOOD_BYTES // (len(FLOOD_LINE) + 1)
    command = f"while [ ! -f {state}/go ]; do sleep 0.01; done; yes {FLOOD_LINE} | head -n {lines}"
    session = RunSession.create(dag_of([("flood", [])], command), state)
    app = viewed(session)
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
    specs = {
        name: TaskSpec(
            name=name,
            depends_on=tuple(deps),
            run=(f"while [ ! -f {state}/{name}.go ]; do sleep 0.005; done" if not deps else "date +%s.%N; sleep 0.5"),
        )
        for name, deps in tasks
    }
    session = RunSession.create(DagSpec(name="bench", tasks=specs, max_parallel=2 * trials, kill_grace=0.5), state)
    app = viewed(session)
    latencies = []
    try:
        async with app.run_test(headless=True, size=SIZE):
            for i in range(trials):
                app.canvas.select(f"late{i}")
                await wait_until(lambda i=i: app.log_pane.path == session.run.log_path(f"late{i}"))
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
    session.scheduler.subscribe(
        lambda e: span.append(e.time) if isinstance(e, RunEvent) and e.kind in ("started", "finished") else None
    )
    return span


async def tui_run(state: Path) -> tuple[float, float]:
    session = RunSession.create(dag_of(layered(1000), "true"), state)
    span = run_span(session)
    started = time.perf_counter()
    session.scheduler.start()  # the app is built while the first tasks run
    app = viewed(session, exit_on_finish=True)
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


def engine_fork(state: Path, wait_for_viewer: bool) -> tuple[int, Path]:
    """Fork the engine as `tuidag run` does (before this process starts threads for the run): the child creates the
    run, says where it is on a pipe and runs it headless, serving its control socket; with `wait_for_viewer` it starts
    once a viewer subscribed (a viewer attached to a detached run for the whole of it). Returns (pid, run folder)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            session = RunSession.create(dag_of(layered(1000), "true"), state)
            if "serve_control" not in run_headless.__code__.co_names:  # before main served it from run_headless
                session.serve_control()
            start = session.scheduler.start
            if wait_for_viewer:

                def start_when_viewed() -> None:
                    while session.control is None or not session.control.viewers:
                        time.sleep(0.001)
                    start()

                session.scheduler.start = start_when_viewed
            os.write(write_end, f"{session.run.path}\n".encode())
            os.close(write_end)
            code = run_headless(session, quiet=True)
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        folder = Path(ready.readline().strip())
    return pid, folder


def run_span_of(folder: Path) -> float:
    from tuidag.store.journal import replay

    rep = replay(folder / "journal.jsonl")
    return rep.finished_at - rep.started_at


async def viewer_run(state: Path, detached: bool) -> tuple[float, float]:
    """The UI as `tuidag run` shows it: a viewer (this process) of an engine process, connected over the run's control
    socket; or a viewer attached to a detached run (the engine waits for it, so it views the whole run)."""
    from tuidag.store.runs import RunDir, RunStore
    from tuidag.ui.viewer import _open

    pid, folder = engine_fork(state, wait_for_viewer=detached)
    started = time.perf_counter()  # the run exists, as when the other modes start their clocks
    run = RunDir(folder.name, folder)
    remote = _open(run, RunStore(state), not detached, pid)
    app = TuidagApp(remote, exit_on_finish=True)
    await app.run_async(headless=True, size=SIZE)
    elapsed = time.perf_counter() - started
    remote.close()
    os.waitpid(pid, 0)
    return elapsed, run_span_of(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["first-frame", "flood", "first-line", "overhead", "big", "timeline"],
        help="measure these parts only",
    )
    parser.add_argument("--dir", help="where state dirs and logs are written (default: the temp dir)")
    args = parser.parse_args()
    wanted = set(args.only or ["first-frame", "flood", "first-line", "overhead", "big", "timeline"])
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
            print(
                f"2,000-task DAG, first frame:  median {statistics.median(firsts) * 1000:6.0f} ms   (target < 1000 ms)"
            )
            print(
                f"key j -> repainted selection: median {statistics.median(keys) * 1000:6.1f} ms, "
                f"max {max(keys) * 1000:.1f} ms   (target < 100 ms)"
            )
        for combined in (False, True) if "flood" in wanted else ():
            results = [asyncio.run(flood(state(f"flood{combined}", i), combined)) for i in range(args.repeats)]
            lag, worst, rss, secs = (statistics.median(r[k] for r in results) for k in range(4))
            view = "combined view" if combined else "task log     "
            print(
                f"100 MB flood, {view}: loop lag median {lag * 1000:.1f} ms, max {worst * 1000:.0f} ms "
                f"(target < 100 ms); RSS growth {rss:.0f} MB (target < 100 MB); caught up in {secs:.1f} s"
            )
        lines = [
            t
            for i in range(args.repeats if "first-line" in wanted else 0)
            for t in asyncio.run(first_lines(state("first-line", i)))
        ]
        if lines:
            print(
                f"a new task's first line, written -> on screen: median {statistics.median(lines) * 1000:.0f} ms, "
                f"max {max(lines) * 1000:.0f} ms over {len(lines)} tasks   (target < 100 ms)"
            )
        first, again, plain, viewed, attached = [], [], [], [], []
        if "overhead" in wanted:
            seen = state("seen", 0)  # the state dir of a DAG run before: its layout is in the cache
            asyncio.run(tui_run(seen))
            asyncio.run(viewer_run(seen, detached=False))
        for i in range(
            args.repeats if "overhead" in wanted else 0
        ):  # alternated, so that a change in the machine's load hits all alike
            first.append(asyncio.run(tui_run(state("tui", i))))
            again.append(asyncio.run(tui_run(seen)))
            plain.append(headless_run(state("plain", i)))
            viewed.append(asyncio.run(viewer_run(seen, detached=False)))
            attached.append(asyncio.run(viewer_run(seen, detached=True)))
        for runs, which in (
            (
                (first, "first run"),
                (again, "run again"),
                (viewed, "engine + viewer (tuidag run)"),
                (attached, "detached, a viewer attached"),
            )
            if plain
            else ()
        ):
            for k, what in ((0, "wall, start-up included"), (1, "run only (engine start to finish)")):
                a, b = statistics.median(t[k] for t in runs), statistics.median(p[k] for p in plain)
                print(
                    f"1,000 layered tasks of `true`, -j 8, {which}, {what}: app {a:.2f} s vs headless {b:.2f} s: "
                    f"ratio {a / b:.2f}"
                )
        if "big" in wanted:
            results = {n: ([], [], {label: [] for label, _ in BIG_KEYS}) for n in BIG_SIZES}
            for i in range(args.repeats):
                for n in BIG_SIZES:
                    fresh, again, keys = results[n]
                    dir_ = state(f"big{n}", i)
                    first, latencies = asyncio.run(big_run(dir_, n, keys=True))
                    fresh.append(first)
                    for label, times in latencies.items():
                        keys[label].extend(times)
                    again.append(asyncio.run(big_run(dir_, n, keys=False))[0])
            print(
                f"big DAGs: real app at {SIZE[0]}x{SIZE[1]}, layered, -j 8 of `{BIG_COMMAND}` running; "
                f"{args.repeats} repeats; ms"
            )
            print(f"{'tasks':>6}  {'measurement':<32} {'median':>8} {'max':>8}   {'target':<10} verdict")
            for n in BIG_SIZES:
                report_big(n, *results[n])
        if "timeline" in wanted:
            pooled: dict[str, list[float]] = {label: [] for label, _ in TIMELINE_KEYS}
            for i in range(args.repeats):
                for label, times in asyncio.run(timeline_run(state("timeline", i))).items():
                    pooled[label].extend(times)
            report_timeline(pooled, args.repeats)


if __name__ == "__main__":
    main()
