"""Make the README screenshots: run the demos for real in the headless app, save SVGs, convert them to PNG.

    python screenshots/make.py            # writes screenshots/*.png (needs cairosvg: pip install .[screenshots])

Textual's SVG asks for "Fira Code"; without it cairosvg falls back to a proportional font and the columns drift. The
font is replaced with DejaVu Sans Mono (apt-get install fonts-dejavu-core), sized so one cell is exactly as wide as
the SVG lays it out. Look at the PNGs before committing them.
"""
from __future__ import annotations

import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import cairosvg  # noqa: E402
from textual.pilot import Pilot  # noqa: E402

from tuidag.launch import RunSession  # noqa: E402
from tuidag.model.loader import load_dag  # noqa: E402
from tuidag.model.state import TaskState  # noqa: E402
from tuidag.ui.app import TuidagApp  # noqa: E402

SIZE = (160, 45)
CELL_WIDTH = 12.2       # px per cell in Textual's SVG at font-size 20px
DEJAVU_ADVANCE = 0.602  # DejaVu Sans Mono's advance width, in em
S = TaskState
Scene = Callable[[TuidagApp, Pilot], Awaitable[None]]


async def until(pilot: Pilot, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the demo did not reach the scene in time")
        await pilot.pause(0.05)


def count(app: TuidagApp, *states: TaskState) -> int:
    return sum(app.model.counts[s] for s in states)


async def pipeline_running(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: count(app, S.RUNNING) >= 3 and len(app.model.usage) >= 3)
    app.canvas.select("shard-1")
    await until(pilot, lambda: app.log_pane.line_count >= 3)


async def pipeline_combined(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: app.model.snapshots["merge"].state is S.RUNNING)
    await pilot.press("a")
    await until(pilot, lambda: app.log_pane.line_count >= 12)


async def pipeline_cancel(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: count(app, S.RUNNING) >= 3)
    app.canvas.select("shard-2")
    await pilot.press("c")


async def failing_finished(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: app.model.finished)
    app.canvas.select("train")
    await until(pilot, lambda: app.log_pane.line_count >= 4)


async def wide_running(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: count(app, S.SUCCEEDED) >= 20 and count(app, S.RUNNING) >= 6)
    app.canvas.select(next(n for n, s in app.model.snapshots.items() if s.state is S.RUNNING))


async def help_screen(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: count(app, S.RUNNING) >= 1)
    await pilot.press("question_mark")


SHOTS: list[tuple[str, str, Scene]] = [
    ("pipeline", "pipeline.yaml", pipeline_running),
    ("combined", "pipeline.yaml", pipeline_combined),
    ("cancel", "pipeline.yaml", pipeline_cancel),
    ("failing", "failing.yaml", failing_finished),
    ("wide", "wide.yaml", wide_running),
    ("help", "pipeline.yaml", help_screen),
]


async def shoot(name: str, demo: Path, scene: Scene, state_dir: Path) -> Path:
    session = RunSession.create(load_dag(demo), state_dir, kill_grace=0.5)
    app = TuidagApp(session)
    svg = HERE / f"{name}.svg"
    try:
        async with app.run_test(headless=True, size=SIZE) as pilot:
            await scene(app, pilot)
            await pilot.pause(0.3)  # let the log pane and the usage sampler catch up
            app.save_screenshot(svg.name, str(HERE))
    finally:
        if not session.scheduler.finished:
            session.scheduler.cancel_all("screenshot taken")
            session.scheduler.wait(30)
        session.finish()
    return svg


def to_png(svg: Path) -> Path:
    text = svg.read_text()
    font_size = CELL_WIDTH / DEJAVU_ADVANCE
    text = re.sub(r"font-family:[^;\"]*", "font-family:DejaVu Sans Mono", text)
    text = text.replace("font-size: 20px", f"font-size: {font_size:.2f}px")
    png = svg.with_suffix(".png")
    cairosvg.svg2png(bytestring=text.encode(), write_to=str(png), output_width=1600)
    svg.unlink()
    return png


def main() -> None:
    demos = ROOT / "demos"
    with tempfile.TemporaryDirectory() as tmp:
        for name, demo, scene in SHOTS:
            svg = asyncio.run(shoot(name, demos / demo, scene, Path(tmp)))
            print(to_png(svg))


if __name__ == "__main__":
    main()
