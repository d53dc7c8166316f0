"""How each task state looks: one glyph, colour and word per state, shared by the canvas tiles and the header.

Every one of the twelve states gets its own glyph *and* colour, so a state reads without colour too. Colours are fixed
hex values rather than theme variables so screenshots and snapshot tests don't depend on the theme. A task outside
the run's targets is drawn faint everywhere (`FAINT`): it is not part of this run.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style

from ..model.state import TaskState
from ..model.targets import NOT_A_TARGET

S = TaskState


@dataclass(frozen=True)
class StateLook:
    glyph: str
    colour: str
    word: str
    plural: str | None = None  # the word after a count of more than one, where it is not `word` (`3 not targets`)

    def word_for(self, n: int) -> str:
        """The word after a count of `n`."""
        return self.plural if n != 1 and self.plural else self.word

    @property
    def style(self) -> Style:
        return Style(color=self.colour)


LOOKS: dict[TaskState, StateLook] = {
    S.PENDING: StateLook("○", "#9e9e9e", "pending"),
    S.QUEUED: StateLook("◌", "#5f87ff", "queued"),
    S.RUNNING: StateLook("●", "#00d7ff", "running"),
    S.READY: StateLook("◉", "#00ffaf", "ready"),
    S.RETRYING: StateLook("↻", "#d75fd7", "retrying"),
    S.CANCELLING: StateLook("⊗", "#ff8700", "stopping"),
    S.SUCCEEDED: StateLook("✔", "#5fd75f", "done"),
    S.FAILED: StateLook("✘", "#ff5f5f", "failed"),
    S.CANCELLED: StateLook("⊘", "#d7d700", "cancelled"),
    S.SKIPPED: StateLook("↷", "#af875f", "skipped"),
    S.UP_TO_DATE: StateLook("≡", "#5fafaf", "up to date"),
    S.UNTARGETED: StateLook("–", "#5f5f70", NOT_A_TARGET, "not targets"),
}

#: States drawn faint in the graph, the list and the timeline, as tasks the state filter hides are.
FAINT = frozenset({S.UNTARGETED})

#: The critical path (`x`): names of its tasks in the graph, the timeline and the side panel.
CRITICAL_COLOUR = "#ffaf00"
#: A running task past twice its usual duration says so in this.
LONG_COLOUR = "#ff8700"

#: Order of the per-state counts in the header: what needs attention first.
COUNT_ORDER = (
    S.RUNNING,
    S.READY,
    S.CANCELLING,
    S.RETRYING,
    S.QUEUED,
    S.PENDING,
    S.SUCCEEDED,
    S.UP_TO_DATE,
    S.FAILED,
    S.CANCELLED,
    S.SKIPPED,
    S.UNTARGETED,
)
