"""The two header lines: which run this is and what it is doing; progress and counts per state."""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from ...model.durations import format_duration
from ...model.state import TaskState
from ..run_model import RunModel
from ..state_style import COUNT_ORDER, LOOKS

S = TaskState
BAR_WIDTH = 30
#: Terminal states in the order they fill the progress bar.
_BAR_ORDER = (S.SUCCEEDED, S.FAILED, S.CANCELLED, S.SKIPPED)


class RunHeader(Widget):
    def __init__(self, dag_name: str, run_id: str, model: RunModel, *, id: str | None = None):
        super().__init__(id=id)
        self.dag_name = dag_name
        self.run_id = run_id
        self.model = model

    def render(self) -> Text:
        width = self.size.width
        first = Text.assemble((" tuidag ", "bold reverse"), " ", (self.dag_name, "bold"), "  ",
                              (f"run {self.run_id}", "dim"))
        right = Text.assemble(self._status(), f"   elapsed {format_duration(self.model.elapsed())} ")
        first.append(" " * max(1, width - first.cell_len - right.cell_len))
        first.append_text(right)
        second = Text(" ")
        second.append_text(self._bar())
        second.append(f" {self.model.done}/{self.model.total}  ")
        for state in COUNT_ORDER:
            n = self.model.counts[state]
            if n:
                look = LOOKS[state]
                second.append(look.glyph, look.colour)
                second.append(f" {n} {look.word}  ")
        return Text("\n").join([first, second])

    def _status(self) -> Text:
        model = self.model
        if model.finished:
            failed = {s: model.counts[s] for s in _BAR_ORDER[1:] if model.counts[s]}
            if not failed:
                return Text(f"✔ finished: all {model.total} succeeded · q quits", LOOKS[S.SUCCEEDED].colour)
            parts = ", ".join(f"{n} {LOOKS[s].word}" for s, n in failed.items())
            return Text(f"✘ finished: {parts} · q quits", LOOKS[S.FAILED].colour)
        if model.stopping:
            return Text("⊗ stopping… waiting for every process to exit", LOOKS[S.CANCELLING].colour)
        if model.paused:
            return Text(" ‖ PAUSED: nothing new starts · p resumes ", "bold reverse #d7d700")
        return Text("● running", LOOKS[S.RUNNING].colour)

    def _bar(self) -> Text:
        """Finished tasks as a bar coloured by outcome, the rest dim."""
        total = max(1, self.model.total)
        bar = Text()
        filled = 0
        done = 0
        for state in _BAR_ORDER:
            done += self.model.counts[state]
            upto = done * BAR_WIDTH // total
            bar.append("━" * (upto - filled), LOOKS[state].colour)
            filled = upto
        bar.append("━" * (BAR_WIDTH - filled), "#444444")
        return bar
