"""Make the README screenshots: run the demos (and two DAGs made up below) for real in the headless app and draw the
screen as a terminal does.

    python screenshots/make.py            # writes screenshots/*.png (needs Pillow: pip install .[screenshots])
    python screenshots/make.py list dots  # only these scenes (the names in SHOTS)

Why not Textual's SVG: it lays rows out 24.4 px apart for a 20 px font and clips each row, so box-drawing characters
(designed to join across a line height of 1.164 em) came out with gaps: open rounded corners, dashed vertical lines,
tiles that looked broken. Here each cell is drawn like a terminal draws it: one cell is exactly the font's advance
wide and its ascent + descent high, so DejaVu Sans Mono's box characters meet their neighbours; characters it lacks
come from DejaVu Sans, centred in their cell. Look at the PNGs before committing them.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from PIL import Image, ImageDraw, ImageFont  # noqa: E402
from rich.cells import cell_len  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.segment import Segment  # noqa: E402
from rich.style import Style  # noqa: E402
from textual import events  # noqa: E402
from textual.pilot import Pilot  # noqa: E402

from tuidag.control.remote import RemoteRun  # noqa: E402
from tuidag.launch import RunSession  # noqa: E402
from tuidag.model.loader import load_dag  # noqa: E402
from tuidag.model.state import TaskState  # noqa: E402
from tuidag.run_commands import run_headless  # noqa: E402
from tuidag.ui.app import TuidagApp  # noqa: E402
from tuidag.ui.state_style import COUNT_ORDER  # noqa: E402

SIZE = (160, 45)
FONT_SIZE = 20  # DejaVu Sans Mono at 20 px: a 12 x 24 px cell
FONTS = Path("/usr/share/fonts/truetype/dejavu")
FOREGROUND, BACKGROUND = (224, 224, 224), (18, 18, 24)  # for segments without colours (the app sets nearly all)
S = TaskState
#: Plays a scene on the running app; returns how long the screen may settle before the picture (None: SETTLE).
Scene = Callable[[TuidagApp, Pilot], Awaitable[float | None]]
SETTLE = 0.3  # let the log pane and the usage sampler catch up


# ------------------------------------------------------------------------------------------------------- scenes
async def until(pilot: Pilot, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the demo did not reach the scene in time")
        await pilot.pause(0.05)


def count(app: TuidagApp, *states: TaskState) -> int:
    return sum(app.model.counts[s] for s in states)


async def type_keys(app: TuidagApp, pilot: Pilot, *keys: str) -> None:
    """Press keys like `pilot.press`, but without its wait for the process to go idle after each key: a big run
    keeps it busy, and the pilot then waits a whole second per key while the run goes on."""
    for key in keys:
        app._driver.send_message(events.Key(key, {"colon": ":"}.get(key, key if len(key) == 1 else None)))
        await pilot.pause(0.03)


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
    """The run over; `train`, the first task to fail, selected by the app itself, its log in the pane."""
    await until(pilot, lambda: app.model.finished and app.canvas.selected == "train")
    await until(pilot, lambda: app.log_pane.line_count >= 4)


def freeze_usage(app: TuidagApp) -> None:
    """Keep the CPU and memory figures on screen as they are now (the engine sends new ones every second)."""
    frozen = app.source.usage()
    app.source.usage = lambda: frozen


def _worker_sleep(name: str) -> float:
    """How long a worker of demos/wide.yaml sleeps (its command: `sleep 0.$(( (i * 37) % 9 + 1 ))`)."""
    i = int(name.rsplit("-", 1)[1])
    return ((i * 37) % 9 + 1) / 10


def _longest_running_worker(app: TuidagApp) -> str:
    """The running worker that will run on the longest, so it is still running when the picture is taken."""
    running = [s for s in app.model.snapshots.values() if s.state is S.RUNNING and s.name.startswith("worker-")]
    return max(running, key=lambda s: (s.started_at or 0.0) + _worker_sleep(s.name)).name


async def wide_running(app: TuidagApp, pilot: Pilot) -> None:
    """64 workers between `setup` and `gather`, packed into sub-columns with one bus on each side: done, running and
    queued at once, and a running worker's log."""
    await until(pilot, lambda: count(app, S.SUCCEEDED) >= 24 and count(app, S.RUNNING) >= 6)
    freeze_usage(app)
    app.canvas.select(_longest_running_worker(app))
    await until(pilot, lambda: app.log_pane.line_count >= 1)


async def list_running(app: TuidagApp, pilot: Pilot) -> float:
    """The list in the graph's place (`L`), sorted by state (`s`): running tasks first, then queued, pending, done.
    Rows move at most twice a second: the picture is taken just after they did, when the order is the states'."""
    await until(pilot, lambda: count(app, S.SUCCEEDED) >= 20 and count(app, S.RUNNING) >= 6)
    await pilot.press("L", "s")
    rank = {state: i for i, state in enumerate(COUNT_ORDER)}

    def ready() -> bool:
        """Rows in the states' order, the first one (running) selected and its log shown. The selection is followed
        wherever its row moves: a finished one would take the view down to the done rows."""
        table = app.table
        if table.selected != table.rows[0] and app.model.snapshots[table.rows[0]].state is S.RUNNING:
            table.action_ends(-1)
        ranks = [rank[app.model.snapshots[name].state] for name in table.rows]
        return (
            ranks == sorted(ranks)
            and table.selected == table.rows[0]
            and app.model.snapshots[table.selected].state is S.RUNNING
            and app.log_pane.line_count >= 1
        )

    await until(pilot, ready, timeout=10)
    return 0.0  # at once: a row that changes state now keeps its place until the next re-sort


async def deep_running(app: TuidagApp, pilot: Pilot) -> None:
    """A deep pipeline, top down as the app chose; the training task selected, its log in the pane."""
    await until(
        pilot, lambda: app.model.snapshots["train-model"].state is S.RUNNING and "train-model" in app.model.usage
    )
    freeze_usage(app)
    app.canvas.select("train-model")
    await until(pilot, lambda: app.log_pane.line_count >= 4)


async def timeline_running(app: TuidagApp, pilot: Pilot) -> None:
    """The deep pipeline run again, in the timeline (`t`) while the model trains, the critical path listed (`x`):
    attempts on one axis, the running bar growing, what the forecast says is still to come after it, the ETA."""
    await until(
        pilot,
        lambda: (
            app.model.snapshots["train-model"].state is S.RUNNING
            and app.model.snapshots["train-baseline"].state is S.SUCCEEDED
            and app.timeline.forecast
        ),
    )
    freeze_usage(app)
    app.select_task("train-model")
    await pilot.press("t", "x")
    await until(pilot, lambda: app.timeline.critical and app.log_pane.line_count >= 3)


async def finder_open(app: TuidagApp, pilot: Pilot) -> None:
    """`:` on 5,000 tasks with a few letters typed: the best matches, each with its state as the run is now."""
    await until(pilot, lambda: count(app, S.SUCCEEDED) >= 1000)
    await type_keys(app, pilot, "colon")

    def done(stage: str) -> int:
        return sum(app.model.snapshots[f"{stage}-{i:03d}"].state is S.SUCCEEDED for i in range(WIDTH))

    # the stage the run is in by the time the finder is open, so the matches are in every state
    stage = next((stage for stage in STAGES if done(stage) < WIDTH * 0.6), STAGES[-1])
    await type_keys(app, pilot, *f"{stage[:3]}42")


async def dots_running(app: TuidagApp, pilot: Pilot) -> None:
    """5,000 tasks as dots, mid-run: done, running, queued, pending, and the first failure (selected on its own,
    its log in the pane) with the branch it skipped."""
    await until(
        pilot, lambda: count(app, S.SUCCEEDED) >= 2200 and count(app, S.FAILED) >= 2 and count(app, S.RUNNING) >= 8
    )
    await until(pilot, lambda: app.log_pane.line_count >= 2)


def sweep_midway(app: TuidagApp) -> bool:
    states = [app.model.snapshots[n].state for n in app.folding.groups["train"]]
    return states.count(S.SUCCEEDED) >= 2 and states.count(S.RUNNING) >= 2


async def sweep_folded(app: TuidagApp, pilot: Pilot) -> None:
    """demos/sweep.yaml mid-run: each matrix one tile (its bar of done / running / queued, its durations)."""
    await until(pilot, lambda: sweep_midway(app))
    app.canvas.select("train")


async def sweep_unfolded(app: TuidagApp, pilot: Pilot) -> None:
    """The same, `train` unfolded with `+` into its instances; `eval` still one tile."""
    await until(pilot, lambda: sweep_midway(app))
    app.canvas.select("train")
    await pilot.press("plus")
    app.canvas.select("train[lr=0.1,seed=1]")


async def copy_mode(app: TuidagApp, pilot: Pilot) -> None:
    """The failed test run's log in copy mode (`v`), the traceback selected (`k` up to its first line): `y` would
    copy those lines."""
    await until(pilot, lambda: app.model.finished and app.canvas.selected == "test-api")
    await until(pilot, lambda: app.log_pane.line_count >= 30)
    await pilot.press("plus", "plus", "plus", "v", *["k"] * 7)


async def help_screen(app: TuidagApp, pilot: Pilot) -> None:
    await until(pilot, lambda: count(app, S.RUNNING) >= 1)
    await pilot.press("question_mark")


async def detail_open(app: TuidagApp, pilot: Pilot) -> None:
    """`build`'s detail (`i`) once the run is over: its command, environment (a token as dots), links to what it
    depends on and what needs it, why it ran, and its three attempts, the first two failed."""
    await until(pilot, lambda: app.model.finished)
    app.select_task("build")
    await pilot.press("i")
    await until(pilot, lambda: type(app.screen).__name__ == "TaskDetailScreen")


# ------------------------------------------------------------------------------------------------ made-up DAGs
#: Twelve tasks in seven layers: too deep to read left to right on a 160-column screen, so the app lays it out top down.
DEEP_PIPELINE = """\
name: train-pipeline
max_parallel: 4
tasks:
  download-raw:
    run: echo "downloading 2.1 GB"; sleep 0.6; echo done
  download-labels:
    run: echo "downloading labels"; sleep 0.4; echo done
  clean-text:
    depends_on: download-raw
    run: echo "dropped 1,204 empty rows"; sleep 0.5
  check-labels:
    depends_on: download-labels
    run: echo "0 unknown labels"; sleep 0.3
  join:
    depends_on: [clean-text, check-labels]
    run: echo "joined 812,391 rows"; sleep 0.3
  split:
    depends_on: join
    run: echo "train 90% / test 10%"; sleep 0.2
  featurize:
    depends_on: split
    run: echo "tf-idf, 50k features"; sleep 0.5
  train-model:
    depends_on: featurize
    run: |
      for epoch in 1 2 3 4 5 6 7 8 9 10 11 12; do
        echo "epoch $epoch/12  loss 0.$(( 900 - epoch * 61 ))  acc 0.$(( 610 + epoch * 27 ))"; sleep 0.4
      done
  train-baseline:
    depends_on: featurize
    run: echo "logistic regression"; sleep 0.8; echo "acc 0.712"
  evaluate:
    depends_on: [train-model, train-baseline]
    run: echo "model 0.934 vs baseline 0.712"
  export-onnx:
    depends_on: train-model
    run: echo "wrote model.onnx"
  model-card:
    depends_on: train-model
    run: echo "wrote MODEL_CARD.md"
"""

#: A test run whose failure is worth copying into an issue: a traceback at the end of its log.
FAILED_TESTS = """\
name: ci
tasks:
  build:
    run: echo "compiled 214 modules"; sleep 0.3
  test-unit:
    depends_on: build
    run: for i in $(seq 1 12); do printf 'tests/unit/test_%02d.py \\033[32mPASSED\\033[0m\\n' $i; done
  test-api:
    depends_on: build
    run: |
      for i in $(seq 1 24); do printf 'tests/api/test_routes.py::test_case_%02d \\033[32mPASSED\\033[0m\\n' $i; done
      printf 'tests/api/test_routes.py::test_upload_large \\033[31mFAILED\\033[0m\\n'
      echo 'Traceback (most recent call last):'
      echo '  File "api/routes.py", line 88, in upload'
      echo '    chunk = stream.read(CHUNK_SIZE)'
      echo '  File "api/stream.py", line 41, in read'
      echo '    raise TimeoutError(f"no data for {self.timeout}s")'
      echo 'TimeoutError: no data for 30s'
      printf '\\033[31m1 failed\\033[0m, 24 passed in 3.12s\\n'
      exit 1
  deploy:
    depends_on: [test-unit, test-api]
    run: echo deploying
"""

#: A build that fails twice (a flaky network) before it succeeds: what the detail screen shows.
RELEASE = """\
name: release
env:
  REGISTRY: ghcr.io/acme
  REGISTRY_TOKEN: ghp_not-a-real-token
tasks:
  fetch-deps:
    run: echo "resolved 143 packages"; sleep 0.2
  lint:
    run: echo "0 problems"; sleep 0.1
  build:
    depends_on: [fetch-deps, lint]
    retries: 2
    inputs: [src]
    outputs: [dist/app.tar]
    env:
      TARGET: linux-amd64
    run: |
      echo "building $TARGET (attempt $TUIDAG_ATTEMPT)"; sleep 0.4
      if [ "$TUIDAG_ATTEMPT" -lt 3 ]; then echo "error: fetching base image: connection reset by peer" >&2; exit 1; fi
      mkdir -p dist && tar -cf dist/app.tar src
  test:
    depends_on: build
    run: echo "212 passed"; sleep 0.3
  publish:
    depends_on: [build, test]
    run: echo "pushed $REGISTRY/app:1.4.2"
"""


def release_dag(tmp: Path) -> Path:
    path = made_up("release.yaml", lambda: RELEASE)(tmp)
    (path.parent / "src").mkdir(exist_ok=True)
    (path.parent / "src" / "main.c").write_text("int main(void) { return 0; }\n")
    return path


STAGES = ("fetch", "parse", "clean", "dedupe", "tokenize", "embed", "index", "score", "rank", "publish")
WIDTH = 500  # tasks per stage: 5,000 in all


def big_dag() -> str:
    """Ten stages of 500 tasks, each depending on two of the stage before (a fixed draw): mostly `true`, some
    short sleeps, and two tasks that fail (their downstream is skipped)."""
    rng = random.Random(7)
    lines = ["name: crawl", "max_parallel: 16", "tasks:"]
    for layer, stage in enumerate(STAGES):
        for i in range(WIDTH):
            lines.append(f"  {stage}-{i:03d}:")
            if layer:
                deps = ", ".join(f"{STAGES[layer - 1]}-{j:03d}" for j in sorted(rng.sample(range(WIDTH), 2)))
                lines.append(f"    depends_on: [{deps}]")
            if (layer, i) in ((2, 137), (3, 402)):
                lines += [
                    "    run: |",
                    f"      echo 'reading shard {i}'",
                    f"      echo 'error: shard {i}: 3 malformed records' >&2",
                    "      exit 1",
                ]
            elif rng.random() < 0.04:
                lines.append(f"    run: echo 'working on {stage} {i}'; sleep 0.{rng.randint(3, 9)}")
            else:
                lines.append("    run: 'true'")
    return "\n".join(lines) + "\n"


Demo = Callable[[Path], Path]  # writes a DAG file into a temporary folder, returns its path


def demo(name: str) -> Demo:
    return lambda tmp: ROOT / "demos" / name


def made_up(file_name: str, text: Callable[[], str]) -> Demo:
    def write(tmp: Path) -> Path:
        path = tmp / "dags" / file_name
        if not path.exists():  # written once: the layout cache then serves every scene of it
            path.parent.mkdir(exist_ok=True)
            path.write_text(text())
        return path

    return write


def with_history(demo: Demo) -> Demo:
    """The DAG run once to its end first (headless, in the same state dir), so the scene's run has history: an ETA,
    progress bars, a forecast."""

    def write(tmp: Path) -> Path:
        path = demo(tmp)
        with contextlib.redirect_stdout(io.StringIO()):
            run_headless(RunSession.create(load_dag(path), tmp, kill_grace=0.5), quiet=True)
        return path

    return write


SHOTS: list[tuple[str, Demo, Scene]] = [
    ("pipeline", demo("pipeline.yaml"), pipeline_running),
    ("combined", demo("pipeline.yaml"), pipeline_combined),
    ("cancel", demo("pipeline.yaml"), pipeline_cancel),
    ("failing", demo("failing.yaml"), failing_finished),
    ("wide", demo("wide.yaml"), wide_running),
    ("list", demo("wide.yaml"), list_running),
    ("deep", made_up("train-pipeline.yaml", lambda: DEEP_PIPELINE), deep_running),
    ("timeline", with_history(made_up("train-pipeline.yaml", lambda: DEEP_PIPELINE)), timeline_running),
    ("finder", made_up("crawl.yaml", big_dag), finder_open),
    ("dots", made_up("crawl.yaml", big_dag), dots_running),
    ("help", demo("pipeline.yaml"), help_screen),
    ("copy", made_up("ci.yaml", lambda: FAILED_TESTS), copy_mode),
    ("sweep", demo("sweep.yaml"), sweep_folded),
    ("sweep-unfolded", demo("sweep.yaml"), sweep_unfolded),
    ("detail", release_dag, detail_open),
]


# ------------------------------------------------------------------------------------------------------- drawing
def screen_lines(app: TuidagApp) -> list[list[Segment]]:
    """The screen as the terminal gets it (what `App.export_screenshot` records), one list of segments per row."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    segments = list(console._record_buffer)
    return list(Segment.split_and_crop_lines(segments, width, pad=True))[:height]


@cache
def font(name: str) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONTS / name), FONT_SIZE)


@cache
def _missing_glyph() -> bytes:
    return bytes(font("DejaVuSansMono.ttf").getmask("\ue000"))  # a private-use code point: the font's "no glyph"


@cache
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
    """The run served on its control socket, as its engine serves it, and viewed as `tuidag run` views it."""
    session = RunSession.create(load_dag(demo), state_dir, kill_grace=0.5)
    session.serve_control()
    session.scheduler.start()
    remote = RemoteRun.attach(session.run, session.store, foreground=True)
    app = TuidagApp(remote)
    png = HERE / f"{name}.png"
    try:
        async with app.run_test(headless=True, size=SIZE) as pilot:
            settle = await scene(app, pilot)
            await pilot.pause(SETTLE if settle is None else settle)
            draw(screen_lines(app), app.size.width).save(png, optimize=True)
    finally:
        remote.close()
        if not session.scheduler.finished:
            session.scheduler.cancel_all("screenshot taken")
            session.scheduler.wait(30)
        session.finish()
    return png


def main() -> None:
    only = set(sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        for name, dag_file, scene in SHOTS:
            if not only or name in only:
                started = time.monotonic()
                png = asyncio.run(shoot(name, dag_file(Path(tmp)), scene, Path(tmp)))
                print(f"{png}  ({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
