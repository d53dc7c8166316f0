"""Driving `TuidagApp` under Pilot as users get it: a run served on its control socket, viewed through a
`RemoteRun`; poll for conditions against a deadline, clean up."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from textual.pilot import Pilot

from slowness import patience
from tuidag.control.remote import RemoteRun
from tuidag.launch import RunSession
from tuidag.ui.app import TuidagApp
from tuidag.views.layout.style import Orientation, Zoom

SIZE = (160, 45)


@asynccontextmanager
async def open_app(
    session: RunSession, *, size: tuple[int, int] = SIZE, start: bool = True, foreground: bool = True, **kwargs
) -> AsyncIterator[tuple[TuidagApp, Pilot]]:
    """The app on `session` started and served as its engine serves it, viewed as `tuidag run` views it (the
    foreground viewer; `foreground=False`: as `tuidag attach` does). `start=False`: the run never starts, and the
    app shows it frozen (`FrozenRun`). Afterwards no task is left running and the session is finished."""
    from frozen_runs import FrozenRun

    remote = None
    try:
        if start:
            remote = served_and_viewed(session, foreground=foreground)
            app = TuidagApp(remote, **kwargs)
        else:
            app = TuidagApp(
                FrozenRun(session.dag, session.run, session.store, session.started, session.scheduler.snapshot()),
                start=False,
                **kwargs,
            )
        async with app.run_test(headless=True, size=size) as pilot:
            if start:  # once the app is up, as a quick run's first events reach a viewer on screen
                session.scheduler.start()
            await pilot.pause()
            yield app, pilot
    finally:
        if remote is not None:
            remote.close()
        if start and not session.scheduler.finished:
            session.scheduler.cancel_all("test teardown")
            assert session.scheduler.wait(patience(10))
        session.finish()


def served_and_viewed(session: RunSession, *, foreground: bool = True) -> RemoteRun:
    """Serve `session`'s run on its control socket (as its engine does) and attach a viewer to it; the caller starts
    the run (if the test has not)."""
    session.serve_control()
    return RemoteRun.attach(session.run, session.store, foreground=foreground)


async def until(pilot: Pilot, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Let the app run until `predicate()` holds; fail after `timeout` seconds (of a quiet machine)."""
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {patience(timeout):.0f}s")
        await pilot.pause(0.05)


def ui_states(app: TuidagApp) -> dict[str, str]:
    """Task states as the UI shows them (after its batched updates)."""
    return {name: snap.state.value for name, snap in app.model.snapshots.items()}


async def select(app: TuidagApp, pilot: Pilot, name: str) -> None:
    """Select a task as a click would (the navigation keys have their own test)."""
    app.canvas.select(name)
    await pilot.pause()


def screen_text(app: TuidagApp) -> str:
    """What the terminal shows, as plain text lines (the composed screen, dialogs included)."""
    from io import StringIO

    from rich.console import Console

    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=StringIO(),
        record=True,
        force_terminal=True,
        color_system="truecolor",
        legacy_windows=False,
        safe_box=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def pin_style(app: TuidagApp, pilot: Pilot, zoom: Zoom, orientation: Orientation = Orientation.LR) -> None:
    """Show the graph at this zoom and orientation, as if the user had chosen them with z / o."""
    app.canvas.zoom_choice, app.canvas.orientation_choice = zoom, orientation
    app.canvas.relayout()
    await until(pilot, lambda: app.graph.zoom is zoom and app.graph.orientation is orientation, what="relaid out")
    await pilot.pause()


def in_view(app: TuidagApp, name: str) -> bool:
    """The whole tile is inside the visible part of the canvas."""
    tile = app.graph.tiles[name]
    x, y = app.canvas.scroll_offset
    view = app.canvas.scrollable_content_region
    return (
        x <= tile.x
        and tile.x + tile.width <= x + view.width
        and y <= tile.y
        and tile.y + tile.height <= y + view.height
    )
