"""The graph at every size, as snapshots: each zoom level and orientation on the demos and on the shapes that used
to read badly (a 66-task wide DAG, a 20-step chain, a 12-task 7-layer pipeline, a 500-task random DAG), at the
style the app chooses for the screen and at the ones a user can pick. States are fed synthetically (some done, a
few running, one failed) so colours and glyphs show.

Update after an intended change with `pytest tests/ui/test_graph_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from frozen_runs import T0, feed, frozen_app
from pilot_helpers import until

from tuidag.api import load_python
from tuidag.model.loader import load_dag
from tuidag.model.state import TaskState
from tuidag.views.layout.style import Orientation, Zoom

S = TaskState
REPO = Path(__file__).resolve().parents[2]
LR, TD = Orientation.LR, Orientation.TD

WIDE = {
    "setup": "true",
    **{f"worker-{i:02d}": {"run": "true", "depends_on": ["setup"]} for i in range(64)},
    "gather": {"run": "true", "depends_on": [f"worker-{i:02d}" for i in range(64)]},
}
CHAIN = {f"step-{i:02d}": {"run": "true", "depends_on": [f"step-{i - 1:02d}"] if i else []} for i in range(20)}
ML = {
    "download": [],
    "prepare-data": ["download"],
    "tokenize": ["prepare-data"],
    "features": ["prepare-data"],
    "train-small": ["tokenize", "features"],
    "train-large": ["tokenize", "features"],
    "train-baseline": ["features"],
    "evaluate": ["train-small", "train-large", "train-baseline"],
    "report": ["evaluate"],
    "export": ["evaluate"],
    "publish": ["report", "export"],
    "notify": ["publish"],
}
ML = {name: {"run": "true", "depends_on": deps} for name, deps in ML.items()}


def random_dag(n: int = 500, width: int = 25, seed: int = 11) -> dict:
    rng = random.Random(seed)
    names = [f"t{i:03d}" for i in range(n)]
    tasks = {}
    for i, name in enumerate(names):
        layer = i // width
        earlier = names[max(0, layer - 2) * width : layer * width]
        tasks[name] = {"run": "true", "depends_on": rng.sample(earlier, rng.randint(1, 3)) if layer else []}
    return tasks


SHAPES = {"wide": WIDE, "chain": CHAIN, "ml": ML, "random500": random_dag()}
DEMOS = ("pipeline.yaml", "skypilot_pipeline.yaml", "etl.py", "wide.yaml")


def progress(app) -> int:
    """The first 40% done (the 3rd of them failed), the next (up to) 4 running, the rest pending; returns how many
    run."""
    names = list(app.model.snapshots)
    done = int(len(names) * 0.4)
    running = min(4, len(names) - done)
    for i, name in enumerate(names):
        if i < done:
            state = S.FAILED if i == 2 else S.SUCCEEDED
            feed(
                app,
                i + 1,
                name,
                state,
                attempt=1,
                exit_code=1 if state is S.FAILED else 0,
                started_at=T0 + i,
                finished_at=T0 + i + 1 + i % 5,
            )
        elif i < done + running:
            feed(app, i + 1, name, S.RUNNING, attempt=1, started_at=T0 + i, pid=1000 + i)
    return running


def app_for(tasks, tmp_path, monkeypatch, zoom: Zoom | None = None, orientation: Orientation | None = None):
    app = frozen_app(tasks, tmp_path, monkeypatch, now=60.0, name="graph")
    app.canvas.zoom_choice, app.canvas.orientation_choice = zoom, orientation
    app.running_fed = progress(app)
    return app


def fed(app):
    async def run_before(pilot) -> None:
        await until(pilot, lambda: app.model.counts[S.RUNNING] == app.running_fed, what="events applied")
        await pilot.pause()
        # How far the view scrolled depends on whether the first failure was selected before or after the first
        # layout (timing): scroll to it from the top, as a fresh layout does.
        app.canvas.scroll_to(0, 0, animate=False, immediate=True)
        app.canvas.scroll_to_selected()
        await pilot.pause()

    return run_before


class TestChosenStyle:
    """What a user sees first: the style the app chooses for the DAG on the screen."""

    @pytest.mark.parametrize("shape", SHAPES)
    @pytest.mark.parametrize("size", [(160, 45), (80, 24)], ids=["160x45", "80x24"])
    def test_shape(self, snap_compare, tmp_path, monkeypatch, shape, size):
        app = app_for(SHAPES[shape], tmp_path, monkeypatch)
        assert snap_compare(app, terminal_size=size, run_before=fed(app))

    @pytest.mark.parametrize("demo", DEMOS)
    def test_demo(self, snap_compare, tmp_path, monkeypatch, demo):
        path = REPO / "demos" / demo
        app = app_for(load_python(path) if demo.endswith(".py") else load_dag(path), tmp_path, monkeypatch)
        assert snap_compare(app, terminal_size=(160, 45), run_before=fed(app))


class TestEveryStyle:
    """Each zoom level in each orientation, as picked with z / Z / o."""

    @pytest.mark.parametrize("zoom", list(Zoom), ids=lambda z: z.value)
    @pytest.mark.parametrize("orientation", [LR, TD], ids=["lr", "td"])
    def test_wide(self, snap_compare, tmp_path, monkeypatch, zoom, orientation):
        app = app_for(WIDE, tmp_path, monkeypatch, zoom, orientation)
        assert snap_compare(app, terminal_size=(160, 45), run_before=fed(app))

    @pytest.mark.parametrize(
        "shape,zoom,orientation",
        [
            ("chain", Zoom.FULL, LR),
            ("chain", Zoom.COMPACT, TD),
            ("ml", Zoom.FULL, LR),
            ("ml", Zoom.COMPACT, TD),
            ("random500", Zoom.COMPACT, LR),
            ("random500", Zoom.DOTS, TD),
            ("random500", Zoom.FULL, TD),
        ],
    )
    def test_shape(self, snap_compare, tmp_path, monkeypatch, shape, zoom, orientation):
        app = app_for(SHAPES[shape], tmp_path, monkeypatch, zoom, orientation)
        assert snap_compare(app, terminal_size=(160, 45), run_before=fed(app))
