"""The UI keeps working while tasks write hostile output: invalid UTF-8, binary garbage, a single 5 MB line and
100 MB as fast as they can. Each log is shown with its real line count, and the app still answers keys."""

from __future__ import annotations

import sys

from pilot_helpers import open_app, select, until

from test_runtime_faults import WRITERS

HOSTILE = ["invalid-utf8", "binary", "five-mb-line", "hundred-mb"]


async def test_hostile_output_leaves_the_ui_working(new_session):
    tasks = {name: f'{sys.executable} -c "{WRITERS[name]}"' for name in HOSTILE}
    session = new_session(tasks, max_parallel=4)
    async with open_app(session) as (app, pilot):
        await until(pilot, lambda: session.scheduler.finished, timeout=120, what="the writers finishing")
        for name in HOSTILE:
            await select(app, pilot, name)
            data = session.run.log_path(name).read_bytes()
            lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            await until(
                pilot,
                lambda lines=lines: app.log_pane.line_count == lines,
                timeout=60,
                what=f"{name}: all {lines} lines indexed",
            )
            await pilot.press("G")  # the end of each log can be reached and drawn
            await pilot.press("g")
        await pilot.press("slash")
        await pilot.press(*"zzz-no-such-text", "enter")  # a search through the last (100 MB) log
        await pilot.press("j")  # the app still answers keys after all of that
        assert {n: s.state.value for n, s in session.scheduler.snapshot().items()} == dict.fromkeys(
            HOSTILE, "SUCCEEDED"
        )
