"""The app's part for a DAG file edited under --watch: the graph, the list and the timeline take the run's new DAG
(its tasks as the file now has them, and those it removed, which stay CANCELLED), and a file with errors is said
until an edit loads.

The run's DAG reaches the app through its source (control/remote.py adopts each `dag` event's); the model notes
that it changed (`RunModel.reshaped`) when it applies the event, or a task it did not know, and the feed calls
`_reshape` before it draws what changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model.counts import counted
from ..model.forecast import shape_of
from ..views.headless import TASK_COLOURS
from ..views.layout.build import dag_deps
from ..views.layout.folding import Folding
from ..views.terminal_text import terminal_line
from .messages import DagNews

if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class DagReshape(AppHost):
    """Part of `TuidagApp` (ui/app.py): the run's DAG as its file now says it, and what an edit with errors did."""

    def _reshape(self) -> None:
        """Lay the run's DAG out anew (groups the user unfolded stay unfolded), with the new tasks PENDING until
        their first event; the selection stays on its task."""
        model, dag = self.model, self.source.dag
        model.reshaped = False
        new = [name for name in dag.topological_order if name not in self._prefix_colours]
        model.add_tasks(dag.topological_order)
        for name in new:
            self._prefix_colours[name] = TASK_COLOURS[len(self._prefix_colours) % len(TASK_COLOURS)]
        unfolded = set(self.folding.groups) - self.folding.folded
        folding = Folding(dag_deps(dag), {name: group.instances for name, group in dag.groups.items()})
        folding.folded -= unfolded
        self.folding = folding
        self.canvas.title_prefix = f"{dag.name} · {counted(model.total, 'task')}"
        self.canvas.reshape(folding)
        self.table.reshape(self.reading_order, folding)
        self.timeline.folding = folding
        if self.timeline.active:
            self.timeline.relist()
        self._finder = None
        self._shape = shape_of(dag, self.source.max_parallel)
        self._outlook_due = True

    def _say_earlier_dag_errors(self) -> None:
        """The DAG file's errors came before this viewer did (the journal had them): say them as they were said."""
        if self.model.dag_error is not None and not self.read_only:  # (a run under --watch is live between rounds)
            self.post_message(DagNews("dag-error", self.model.dag_error))

    def on_dag_news(self, news: DagNews) -> None:
        """Say that the DAG file has errors (until an edit loads), or loads again."""
        if news.kind == "dag-error":
            lines = news.detail.split("\n")
            shown = "\n".join(terminal_line(line) for line in lines[:5])
            more = f"\n... and {counted(len(lines) - 5, 'more error')}" if len(lines) > 5 else ""
            self.notify(
                f"{shown}{more}\nthe run goes on with the DAG as it was, until the file is fixed",
                title="The DAG file has errors",
                severity="error",
                timeout=30,
            )
        elif self._dag_error_shown:
            self.notify(terminal_line(news.detail), title="The DAG file loads again", timeout=5)
        self._dag_error_shown = news.kind == "dag-error"
        self.header.refresh()
