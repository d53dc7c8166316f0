"""Strings from the DAG file, the journal or the user are never parsed as Textual markup: a DAG named `etl [/foo]`
raised MarkupError in the graph's border title at start (the run was cancelled and tuidag exited 1). Shown here on the
shipped viewer path: a run served on its control socket, viewed through a RemoteRun."""

from __future__ import annotations

from pilot_helpers import screen_text, until
from test_viewer import viewer
from textual.widgets._toast import Toast

from dags import make_dag, served_run, wait_until

HOSTILE = "etl [/foo] [b]bold[/b] [/]"


def notices(app) -> str:
    """The notices shown, each as its toast draws it (headless, the toasts are not in the DOM to query)."""
    return "\n".join(str(Toast(notice).render()) for notice in app._notifications)


async def test_hostile_names_reasons_and_queries_are_shown_as_written_in_every_view(tmp_path):
    dag = make_dag(
        {
            "long": "echo '[/log]'; sleep 60",
            "lost": {"run": "true", "workdir": tmp_path / "[/nowhere]"},
            "after": {"run": "true", "depends_on": ["long"]},
        },
        name=HOSTILE,
        workdir=tmp_path,
    )
    with served_run(dag, tmp_path) as session:
        wait_until(lambda: session.scheduler.snapshot()["lost"].state.value == "FAILED")
        async with viewer(session.run, session.store) as (app, pilot):
            await until(pilot, lambda: HOSTILE in screen_text(app), what="the DAG's name in the graph's title")
            await pilot.press("t")  # the timeline, titled with the name
            await until(pilot, lambda: "timeline from" in screen_text(app), what="the timeline")
            assert HOSTILE in screen_text(app)
            await pilot.press("t", "L")  # the list, titled with the name
            await until(pilot, lambda: f"{HOSTILE} · 3 tasks" in screen_text(app), what="the list")
            await pilot.press("L")
            await pilot.press("slash", *"[/query]", "enter")  # not found: said with the query as typed
            await until(pilot, lambda: "“[/query]” not found" in screen_text(app), what="the search's result")
            await until(pilot, lambda: "not found: [/query]" in notices(app), what="the search's notice")
            await pilot.press("a", "T", *"[/zz]", "enter")  # a name filter no task matches: said in a notice
            await until(
                pilot, lambda: "no task matches: tasks matching “[/zz]”" in notices(app), what="the filter's notice"
            )
            await pilot.press("a")
            app.canvas.select("long")
            await pilot.pause()
            await pilot.press("c")  # the confirmation names the branch
            await until(
                pilot, lambda: "after" in screen_text(app) and "long" in screen_text(app), what="the cancel question"
            )
            await pilot.press("escape")
            app.canvas.select("lost")
            await pilot.pause()
            await until(pilot, lambda: "[/nowhere]" in screen_text(app), what="the failure's reason and log")
            assert app.is_running
