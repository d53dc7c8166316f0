"""Watch mode in the UI (Pilot, the app on a real engine through its control socket, as `tuidag run` shows it): the
header says the latest generation and what triggered it; `q` (then Stop) ends watch mode with nothing left running."""

from __future__ import annotations

from pilot_helpers import open_app, until

from dags import alive, read_pids
from tuidag.ui.screens.choice import ChoiceScreen


def _count(path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


async def test_q_in_watch_mode_ends_it_and_leaves_no_process_and_the_header_shows_the_generation(tmp_path, new_session):
    (tmp_path / "a.txt").write_text("1\n")
    pids = tmp_path / "pids"
    session = new_session(
        {"slow": {"run": f"echo $$ >> {pids}; sleep 120 & echo $! >> {pids}; wait", "inputs": ("a.txt",)}}
    )
    async with open_app(session) as (app, pilot):
        session.watch()
        await until(pilot, lambda: _count(pids) == 2, timeout=30, what="the first attempt's tree")
        first = read_pids(pids)
        (tmp_path / "a.txt").write_text("2\n")
        await until(pilot, lambda: _count(pids) == 4, timeout=30, what="the restarted attempt's tree")
        await until(pilot, lambda: app.model.generation is not None, timeout=30, what="the generation on screen")
        assert "gen 2: a.txt changed -> slow" in app.header._first_line(200).plain
        refs = read_pids(pids)
        assert not [ref for ref in first if alive(*ref)]
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("s")
        await until(pilot, lambda: app.return_code is not None, timeout=30, what="the app's exit")
        assert session.watch_ended.is_set()
        assert session.scheduler.wait(30)
    assert [ref for ref in refs if alive(*ref)] == []
