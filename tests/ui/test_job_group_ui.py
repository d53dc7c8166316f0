"""A SkyPilot job group in the UI: the tasks stopped once the primary task ended are how the group ends, so the
header says the run succeeded, as the exit code does."""

from __future__ import annotations

from pilot_helpers import open_app, until

from tuidag.launch import RunSession
from tuidag.model.loader import load_dag

GROUP = """\
name: train-eval
execution: parallel
primary_tasks: [trainer]
---
name: trainer
run: echo training
---
name: evaluator
run: while true; do sleep 0.1; done
"""


async def test_a_job_group_that_ended_as_meant_to_is_shown_as_succeeded(tmp_path):
    path = tmp_path / "group.yaml"
    path.write_text(GROUP)
    session = RunSession.create(load_dag(path), tmp_path / "state")
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: app.model.finished, timeout=20, what="the group ended")
        assert app.model.snapshots["evaluator"].state.value == "CANCELLED"
        status = app.header._statuses()[0].plain
        assert status.startswith("✔ finished: 1 succeeded, 1 stopped with their job group"), status
    assert session.exit_code(session.finish()) == 0
