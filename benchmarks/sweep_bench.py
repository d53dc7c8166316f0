"""A sweep in the terminal UI: a 1,000-instance matrix against 1,000 plain tasks of the same shape
(prepare -> 1,000 -> report, -j 8 of `sleep 30`: live, mostly pending), each run as `tuidag run` shows it (the
engine's control socket served in this process, the app a viewer of it), headless at 160x45:

- validate: loading and checking the DAG file (the matrix expanded);
- first frame: constructing the app -> the first frame showing the graph (a fresh state dir: no cached layout);
- keys, each timed to the last frame of the repaint showing its effect (median and max over 20 presses, at a human's
  pace; target < 100 ms): on the matrix, `l` (prepare -> the folded group's tile), `+` (unfold: the 1,000
  instances laid out as a packed layer the first time, in a fresh state dir; a layout made before later), `j` after
  unfolding (the selection among the instances), `-` (fold back);
  on the plain tasks, `l` (prepare -> the first of the 1,000) and `j`; then `t` to the timeline (the group one
  row) and back, on both.

    python benchmarks/sweep_bench.py              # 3 repeats, medians
    python benchmarks/sweep_bench.py --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from ui_bench import SIZE, Frames, settled, stop, timed_key, viewed, wait_until  # noqa: E402

from tuidag.launch import RunSession  # noqa: E402
from tuidag.model.loader import load_dag  # noqa: E402

N = 1000
PRESSES = 20
MATRIX = f"""name: sweep
max_parallel: 8
kill_grace: 0.5
tasks:
  prepare: {{run: "true"}}
  train:
    depends_on: prepare
    matrix: {{i: [{", ".join(str(i) for i in range(N))}]}}
    run: sleep 30
  report: {{run: "true", depends_on: train}}
"""
PLAIN = (
    'name: plain\nmax_parallel: 8\nkill_grace: 0.5\ntasks:\n  prepare: {run: "true"}\n'
    + "".join(f"  train-{i:04d}: {{run: sleep 30, depends_on: prepare}}\n" for i in range(N))
    + "  report: {run: 'true', depends_on: ["
    + ", ".join(f"train-{i:04d}" for i in range(N))
    + "]}\n"
)


async def sweep_run(path: Path, state: Path, matrix: bool) -> tuple[float, float, dict[str, list[float]]]:
    started = time.perf_counter()
    dag = load_dag(path)
    validated = time.perf_counter() - started
    session = RunSession.create(dag, state)
    started = time.perf_counter()
    app = viewed(session)
    frames = Frames(app)
    keys: dict[str, list[float]] = {}
    try:
        async with app.run_test(headless=True, size=SIZE):
            await wait_until(lambda: frames.first_graph is not None, timeout=60)
            first = frames.first_graph - started
            await settled(app)
            canvas = app.canvas

            async def timed(label: str, key: str, probe) -> None:
                keys.setdefault(label, []).append(await timed_key(app, frames, key, probe))
                await asyncio.sleep(0.05)  # a human's pace, while the run goes on

            for press in range(PRESSES):
                app.select_task("prepare")
                await settled(app)
                await timed("l: to the group" if matrix else "l: to the first task", "l", lambda: canvas.selected)
                if matrix:
                    unfold = "+: unfold, first time" if press == 0 else "+: unfold again"
                    await timed(unfold, "plus", lambda: canvas.graph)
                    for _ in range(3):
                        await timed("j: after unfolding", "j", lambda: canvas.selected)
                    await timed("-: fold back", "minus", lambda: canvas.graph)
                else:
                    for _ in range(3):
                        await timed("j: among the 1,000", "j", lambda: canvas.selected)
            for _ in range(PRESSES // 4):  # the timeline: the group one row (folded), or 1,000 rows
                await timed("t: the timeline", "t", lambda: app.timeline.active)
                await timed("t: back to the graph", "t", lambda: app.timeline.active)
    finally:
        stop(session)
    return validated, first, keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tuidag-sweep-bench-") as tmp:
        for label, text, matrix in (("1,000-instance matrix", MATRIX, True), ("1,000 plain tasks", PLAIN, False)):
            path = Path(tmp) / f"{'matrix' if matrix else 'plain'}.yaml"
            path.write_text(text)
            validates, firsts, keys = [], [], {}
            for i in range(args.repeats):
                validated, first, latencies = asyncio.run(sweep_run(path, Path(tmp) / f"state-{matrix}-{i}", matrix))
                validates.append(validated)
                firsts.append(first)
                for key, times in latencies.items():
                    keys.setdefault(key, []).extend(times)
            print(
                f"{label}: validate {statistics.median(validates) * 1000:.0f} ms, "
                f"first frame {statistics.median(firsts) * 1000:.0f} ms (medians of {args.repeats})"
            )
            for key, times in keys.items():
                print(
                    f"  {key:<22} median {statistics.median(times) * 1000:6.1f} ms, max {max(times) * 1000:6.1f} ms"
                    f"   ({len(times)} presses; target < 100 ms)"
                )


if __name__ == "__main__":
    main()
