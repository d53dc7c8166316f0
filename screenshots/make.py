"""Make the README screenshots: run the demos for real in the headless app and draw the screen as a terminal does.

    python screenshots/make.py            # writes screenshots/*.png (needs Pillow: pip install .[screenshots])

Why not Textual's SVG: it lays rows out 24.4 px apart for a 20 px font and clips each row, so box-drawing characters
(designed to join across a line height of 1.164 em) came out with gaps: open rounded corners, dashed vertical lines,
tiles that looked broken. Here each cell is drawn like a terminal draws it: one cell is exactly the font's advance
wide and its ascent + descent high, so DejaVu Sans Mono's box characters meet their neighbours; characters it lacks
come from DejaVu Sans, centred in their cell. Look at the PNGs before committing them.
"""
from __future__ import annotations

import asyncio
import io
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Awaitable, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from PIL import Image, ImageDraw, ImageFont  # noqa: E402
from rich.cells import cell_len  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.segment import Segment  # noqa: E402
from rich.style import Style  # noqa: E402
from textual.pilot import Pilot  # noqa: E402

from tuidag.launch import RunSession  # noqa: E402
from tuidag.model.loader import load_dag  # noqa: E402
from tuidag.model.state import TaskState  # noqa: E402
from tuidag.ui.app import TuidagApp  # noqa: E402

SIZE = (160, 45)
FONT_SIZE = 20  # DejaVu Sans Mono at 20 px: a 12 x 24 px cell
FONTS = Path("/usr/share/fonts/truetype/dejavu")
FOREGROUND, BACKGROUND = (224, 224, 224), (18, 18, 24)  # for segments without colours (the app sets nearly all)
S = TaskState
Scene = Callable[[TuidagApp, Pilot], Awaitable[None]]


# ------------------------------------------------------------------------------------------------------- scenes
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
    """The fan-out and fan-in at once: `setup`, the middle of the tall column of workers and `gather`, with
    workers done, running and queued, and a running worker's log."""
    await until(pilot, lambda: count(app, S.SUCCEEDED) >= 24 and count(app, S.RUNNING) >= 6)
    app.usage_interval = None
    setup = app.graph.tiles["setup"]
    view = app.canvas.scrollable_content_region.height
    in_view = [n for n in app.graph.columns[1]
               if abs(app.graph.tiles[n].mid - setup.mid) < view // 2 - 2 and app.model.snapshots[n].state is S.RUNNING]
    app.canvas.select(in_view[0] if in_view else "setup")
    app.canvas.scroll_to(y=setup.mid - view // 2, animate=False, immediate=True)
    await until(pilot, lambda: app.log_pane.line_count >= 1)


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


# ------------------------------------------------------------------------------------------------------- drawing
def screen_lines(app: TuidagApp) -> list[list[Segment]]:
    """The screen as the terminal gets it (what `App.export_screenshot` records), one list of segments per row."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    segments = list(console._record_buffer)
    return list(Segment.split_and_crop_lines(segments, width, pad=True))[:height]


@lru_cache(maxsize=None)
def font(name: str) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONTS / name), FONT_SIZE)


@lru_cache(maxsize=None)
def _missing_glyph() -> bytes:
    return bytes(font("DejaVuSansMono.ttf").getmask("\ue000"))  # a private-use code point: the font's "no glyph"


@lru_cache(maxsize=None)
def glyph_font(char: str, bold: bool) -> tuple[ImageFont.FreeTypeFont, bool]:
    """The font to draw `char` with, and whether it is the monospace one (otherwise centre it in its cell)."""
    mono = font("DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf")
    if char.isspace() or bytes(font("DejaVuSansMono.ttf").getmask(char)) != _missing_glyph():
        return mono, True
    return font("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"), False


def _rgb(colour, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if colour is None or colour.is_default:
        return default
    triplet = colour.get_truecolor()
    return triplet.red, triplet.green, triplet.blue


def _colours(style: Style) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    fg, bg = _rgb(style.color, FOREGROUND), _rgb(style.bgcolor, BACKGROUND)
    if style.reverse:
        fg, bg = bg, fg
    if style.dim:
        fg = tuple((f + b) // 2 for f, b in zip(fg, bg))
    return fg, bg


def draw(lines: list[list[Segment]], columns: int) -> Image.Image:
    """Every cell: its background, then its character in the cell's box, as a terminal draws it."""
    mono = font("DejaVuSansMono.ttf")
    ascent, descent = mono.getmetrics()
    cell_w, cell_h = round(mono.getlength("M")), ascent + descent
    image = Image.new("RGB", (columns * cell_w, len(lines) * cell_h), BACKGROUND)
    pen = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        y = row * cell_h
        column = 0
        for segment in line:
            if segment.control:
                continue
            style = segment.style or Style()
            fg, bg = _colours(style)
            for char in segment.text:
                width = cell_len(char)
                if not width or column + width > columns:  # zero-width (a joiner), or past the right edge
                    continue
                x = column * cell_w
                pen.rectangle([x, y, x + width * cell_w - 1, y + cell_h - 1], fill=bg)
                if not char.isspace():
                    face, is_mono = glyph_font(char, bool(style.bold))
                    if is_mono:
                        pen.text((x, y), char, font=face, fill=fg, anchor="la")
                    else:
                        pen.text((x + width * cell_w / 2, y + ascent), char, font=face, fill=fg, anchor="ms")
                if style.underline:
                    pen.line([x, y + ascent + 2, x + width * cell_w - 1, y + ascent + 2], fill=fg)
                column += width
    return image


async def shoot(name: str, demo: Path, scene: Scene, state_dir: Path) -> Path:
    session = RunSession.create(load_dag(demo), state_dir, kill_grace=0.5)
    app = TuidagApp(session)
    png = HERE / f"{name}.png"
    try:
        async with app.run_test(headless=True, size=SIZE) as pilot:
            await scene(app, pilot)
            await pilot.pause(0.3)  # let the log pane and the usage sampler catch up
            draw(screen_lines(app), app.size.width).save(png, optimize=True)
    finally:
        if not session.scheduler.finished:
            session.scheduler.cancel_all("screenshot taken")
            session.scheduler.wait(30)
        session.finish()
    return png


def main() -> None:
    demos = ROOT / "demos"
    only = set(sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        for name, demo, scene in SHOTS:
            if not only or name in only:
                print(asyncio.run(shoot(name, demos / demo, scene, Path(tmp))))


if __name__ == "__main__":
    main()
