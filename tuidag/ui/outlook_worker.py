"""The app's outlook: the ETA and the critical path, worked out on a thread.

Expected durations are read from the store's earlier runs once the run started (their journals: not on the UI
thread); the outlook (`views/run_outlook.py`) is worked out again on a worker thread after task transitions, at most
once a tick, or every few seconds on a live run (a task running past its expected duration moves the end).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual import work

from ..store.expected import expected_for_run, seconds
from ..store.journal import read_header
from ..views.layout.style import Zoom
from ..views.run_outlook import Outlook, outlook, path_rows
from ..views.timeline_layout import Density

OUTLOOK_EVERY = 5.0  # seconds between two forecasts of a live run when no task changed


if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class OutlookWorker(AppHost):
    """Part of `TuidagApp` (ui/app.py): the history, the forecast worker, the critical path panel (`x`)."""

    async def action_critical_path(self) -> None:
        """`x`: the critical path highlighted in the graph and the timeline and listed in a side panel, or off."""
        self._critical_on = not self._critical_on
        if not self._critical_on:
            self.critical_panel.remove_class("visible")
            self.canvas.set_critical(())
            self.timeline.set_critical(())
            return
        if not self.critical_panel.is_attached:
            await self.footer.screen.mount(self.critical_panel, before=self.footer)
        self.critical_panel.add_class("visible")
        self.critical_panel.border_title = "critical path (x)"
        if self._outlook is not None:  # the last one at once; a newer one follows if a task changed since
            self._show_outlook(self._outlook)
        else:
            self.critical_panel.show_path(None, [], None)
            self._outlook_due = True
        self._refresh_outlook()

    @work(thread=True, group="expected", exit_on_error=False)
    def _load_expected(self) -> None:
        """Expected durations from the store's earlier runs (their journals are read: not on the UI thread)."""
        try:
            header = read_header(self.source.run.journal)  # the run's fingerprints, as its engine recorded them
            found = seconds(expected_for_run(self.source.store, header, exclude=self.source.run.run_id))
        except (OSError, ValueError):
            found = {}  # an unreadable store: the ETA says there is no history
        self.call_from_thread(self._expected_loaded, found)

    def _expected_loaded(self, expected: dict[str, float]) -> None:
        self._expected = expected
        self.canvas.expected = expected
        self.header.history = bool(expected)
        self.header.refresh()
        self._outlook_due = True
        self._refresh_outlook()

    def _refresh_outlook(self) -> None:
        """Work the outlook out again if a task changed since (or, on a live run, every few seconds: a task
        running past its expected duration moves the end), when some task has history or the path is shown."""
        if self._outlook_busy or not (self._expected or self._critical_on):
            return  # without history there is no ETA to work out (the header says so), only a path to show
        now = time.monotonic()
        if not self._outlook_due and (self.model.finished or now - self._outlook_at < OUTLOOK_EVERY):
            return
        self._outlook_due, self._outlook_busy, self._outlook_at = False, True, now
        model = self.model
        # Copied here, on the UI thread, which is the one changing them.
        self._work_out_outlook(
            dict(model.snapshots),
            {name: list(segs) for name, segs in model.timeline.segments.items()},
            model.clock(),
            model.finished,
        )

    # A description, or Textual writes one from the arguments' reprs: thousands of snapshots, on every call.
    @work(thread=True, group="outlook", exit_on_error=False, description="forecast")
    def _work_out_outlook(self, snapshots, segments, now: float, finished: bool) -> None:
        try:
            result = outlook(
                self._shape, snapshots, segments, now=now, expected=self._expected or {}, finished=finished
            )
        finally:
            self._outlook_busy = False
        self.call_from_thread(self._outlook_ready, result)

    def _outlook_ready(self, result: Outlook) -> None:
        self._outlook = result
        self.header.forecast = result if self._expected is not None else None
        self.header.refresh()
        if self._expected:  # with history: the timeline shows what is still to come
            forecast = result.forecast
            self.timeline.set_forecast(forecast.spans if forecast else {}, forecast.end if forecast else None)
        if self._critical_on:
            self._show_outlook(result)

    def _show_outlook(self, result: Outlook) -> None:
        self.canvas.set_critical(result.path)
        self.timeline.set_critical(result.path)
        if result.finished:
            note = "the chain of tasks that set the run's length"
        elif not self._expected:
            note = "no history: tasks never run before count as taking no time"
        else:
            note = "~ forecast from earlier runs (median of the last successful attempts)"
        self.critical_panel.show_path(result, path_rows(result, self.model.snapshots), note)

    def _timeline_density(self) -> Density:
        """The timeline's rows follow the graph's zoom: full tiles, full rows; one-line tiles, compact rows; dots,
        dense rows (two tasks a row)."""
        zoom = self.graph.zoom if self.graph is not None else Zoom.FULL
        return {Zoom.FULL: Density.FULL, Zoom.COMPACT: Density.COMPACT, Zoom.DOTS: Density.DENSE}[zoom]
