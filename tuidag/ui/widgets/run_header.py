"""The two header lines: which run this is and what it is doing; progress and counts per state.

Each line is laid out for the width it gets, dropping what matters least first instead of wrapping or cutting the
end off: on a narrow terminal the run id goes, then the `tuidag` badge and the words around the status and the
counts, then the progress bar shrinks. A viewer keeps its role (`◆ attached`) and the run id longer: the engine's
pid and the badge go first, then the ETA's words. What the run is doing, its elapsed time and the counts stay, and so
does a state filter (`F`), on the right of the second line: it may lose words but never its tag. Resource slots in
use (`gpu 1/2`), when the DAG declares capacities, follow the counts: the bar shrinks before they go, the counts'
words after. A running run's ETA (the app's forecast) sits before the elapsed time; it goes before the status' words
do.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.widget import Widget

from ...engine.job_group import stopped_by_group
from ...model.counts import counted, states_said
from ...model.dag_diff import REMOVED
from ...model.durations import format_duration
from ...model.resources import slot_counts
from ...model.service import SERVICE_STOPPED
from ...model.state import TaskState
from ...views.run_outlook import Outlook, eta_forms
from ...views.terminal_text import terminal_line
from ..run_model import RunModel, StateFilter
from ..state_style import COUNT_ORDER, LOOKS

S = TaskState
FILTER_STYLE = "bold #000000 on #5fafff"
BAR_WIDTHS = (30, 20, 10)  # the progress bar's widths, from roomy to narrow (dropped after the narrowest)
#: Terminal states in the order they fill the progress bar.
_BAR_ORDER = (S.SUCCEEDED, S.UP_TO_DATE, S.FAILED, S.CANCELLED, S.SKIPPED)


class RunHeader(Widget):
    def __init__(
        self,
        dag_name: str,
        run_id: str,
        model: RunModel,
        *,
        capacities: Mapping[str, int] | None = None,
        id: str | None = None,
    ):
        super().__init__(id=id)
        self.dag_name = dag_name
        self.run_id = run_id
        self.model = model
        self.capacities = dict(capacities or {})  # resource slots per kind
        self.role = ""  # a viewer's: foreground, attached or post-mortem (with the engine's pid)
        self.forecast: Outlook | None = None  # the app's forecast, once it has the expected durations
        self.history: bool | None = None  # some task has run before (None: the store not read yet)

    def render(self) -> Text:
        width = self.size.width
        text = Text("\n").join([self._first_line(width), self._second_line(width)])
        text.no_wrap, text.overflow = True, "crop"  # a line that is still too wide is cut, never wrapped
        return text

    def _first_line(self, width: int) -> Text:
        """`tuidag  NAME  run ID` on the left, status and elapsed time on the right, in the first form that fits."""
        elapsed = format_duration(self.model.elapsed())
        badge = Text.assemble((" tuidag ", "bold reverse"), " ")
        name = Text(self.dag_name, "bold")
        run = Text(f"  run {self.run_id}", "dim")
        statuses = self._statuses()
        role = Text(f"  ◆ {self.role}", "bold #00afd7") if self.role else Text()
        times = [(f"   elapsed {elapsed} ", f"  {elapsed} ")]
        etas = (
            []
            if self.model.stopping or self.model.finished
            else eta_forms(self.forecast, self.model.clock(), self.history, self.model.paused)
        )
        # The ETA goes after the run id and the badge (its fuller form first), before the status' words.
        times[:0] = [(f"   {eta} · elapsed {elapsed} ", f"  {eta} · {elapsed} ") for eta in etas]
        # A viewer keeps saying which one it is, and the run's id: the engine's pid and the badge go first, then
        # the ETA's words; only then, as for any run, the run id and the rest (the fullest status still comes first).
        brief = " · ".join(part for part in self.role.split(" · ") if not part.startswith("engine pid"))
        role_word = Text(f"  ◆ {brief}", "bold #00afd7")
        viewer = (
            (
                Text.assemble(badge, name, run, role),
                Text.assemble(badge, name, run, role_word),
                Text.assemble(" ", name, run, role_word),
            )
            if self.role
            else ()
        )
        forms = []
        for status in statuses:
            forms += [
                (left, Text.assemble(status, time))
                for time in [long for long, _ in times] + [short for _, short in times]
                for left in viewer
            ]
            forms += [
                (left, Text.assemble(status, time))
                for long, short in times
                for left, time in (
                    (Text.assemble(badge, name, run, role), long),
                    (Text.assemble(badge, name, role), long),
                    (Text.assemble(badge, name, run), long),
                    (Text.assemble(badge, name), long),
                    (Text.assemble(" ", name), short),
                )
            ]
        for left, right in forms:
            if left.cell_len + 1 + right.cell_len <= width:
                return _spread(left, right, width)
        # Narrower still: the status and time win, the name gets what is left (cut with an ellipsis).
        right = Text.assemble(" ", statuses[-1], f" {elapsed} ")
        room = width - right.cell_len - 2
        if room >= 4:
            name.truncate(room, overflow="ellipsis")
            return _spread(Text.assemble(" ", name), right, width)
        return right

    def _statuses(self) -> list[Text]:
        """What the run is doing, from the fullest wording to the shortest; in watch mode, first with its latest
        generation and what triggered it (`gen 4: src/model.py changed -> train, eval`), then with its number; and
        while the DAG file has errors, first with the first of them (`FILE:LINE:COL: ...`), then with a word."""
        forms = plain = self._run_statuses()
        model = self.model
        if model.generation is not None:
            generation = terminal_line(model.generation)  # it names files: no control characters on screen
            number = generation.partition(":")[0]
            forms = [
                Text.assemble(plain[0], (f" · {generation}", "bold #00afd7")),
                Text.assemble(plain[0], (f" · {number}", "bold #00afd7")),
                *forms,
            ]
        if model.dag_error is not None:
            error = terminal_line(model.dag_error.split("\n")[0])
            forms = [
                Text.assemble(plain[0], (f" · ⚠ {error} (keeping the DAG as it was)", "bold #ff5f5f")),
                Text.assemble(plain[0], (" · ⚠ the DAG file has errors", "bold #ff5f5f")),
                *forms,
            ]
        return forms

    def _end_statuses(self) -> list[Text]:
        """The run's end, longest form first: how its tasks ended (`✔ finished: all 3 succeeded · q quits`); under
        --watch a round's end (`✔ all 3 succeeded · watching for changes`: the run waits for a change, not over)."""
        model = self.model
        lead, tail, bare = (
            ("", " · watching for changes", "watching") if model.watching else ("finished: ", " · q quits", "finished")
        )
        # tasks a job group stopped once its primary tasks ended: how the group is meant to end, not a failure
        stopped = sum(stopped_by_group(snap) for snap in model.snapshots.values()) if model.counts[S.CANCELLED] else 0
        failed = {s: n for s in _BAR_ORDER[1:] if (n := model.counts[s] - (stopped if s is S.CANCELLED else 0))}
        # tasks whose end the journal does not hold (tuidag was killed, or the disk filled up): no success
        unrecorded = model.targeted - model.done
        if not failed and not unrecorded:
            ok = LOOKS[S.SUCCEEDED].colour
            untargeted = model.counts[S.UNTARGETED]
            aside = f", {untargeted} {LOOKS[S.UNTARGETED].word_for(untargeted)}" if untargeted else ""
            if stopped:
                services = sum(snap.reason == SERVICE_STOPPED for snap in model.snapshots.values())
                removed = sum(snap.reason == REMOVED for snap in model.snapshots.values())
                grouped = stopped - services - removed
                done = ", ".join(
                    [f"{model.targeted - stopped} succeeded"]
                    + ([f"{grouped} stopped with their job group"] if grouped else [])
                    + ([f"{services} {'service' if services == 1 else 'services'} stopped"] if services else [])
                    + ([f"{removed} removed from the DAG file"] if removed else [])
                )
                done += aside
                return [Text(f"✔ {lead}{done}{tail}", ok), Text(f"✔ {lead}{done}", ok), Text(f"✔ {bare}", ok)]
            return [
                Text(f"✔ {lead}all {model.targeted} succeeded{aside}{tail}", ok),
                Text(f"✔ {lead}all {model.targeted} succeeded{aside}", ok),
                Text(f"✔ {lead}all {model.targeted} succeeded", ok),
                Text(f"✔ {bare}", ok),
            ]
        parts = ", ".join(
            [f"{n} {LOOKS[s].word}" for s, n in failed.items()]
            + ([f"{unrecorded} with no recorded end"] if unrecorded else [])
        )
        bad = LOOKS[S.FAILED].colour
        return [
            Text(f"✘ {lead}{parts}{tail}", bad),
            Text(f"✘ {lead}{parts}", bad),
            Text(f"✘ {parts}", bad),
            Text(f"✘ {bare}", bad),
        ]

    def _run_statuses(self) -> list[Text]:
        model = self.model
        if model.settled is not None and model.watching and not model.stopping:  # the same, its services up
            return _settled(model.settled)
        if model.finished:
            return self._end_statuses()
        if model.stopping:
            colour = LOOKS[S.CANCELLING].colour
            return [Text("⊗ stopping… waiting for every process to exit", colour), Text("⊗ stopping…", colour)]
        if model.paused:
            paused = "bold reverse #d7d700"
            return [
                Text(" ‖ PAUSED: nothing new starts · p resumes ", paused),
                Text(" ‖ PAUSED · p resumes ", paused),
                Text(" ‖ PAUSED ", paused),
            ]
        return [Text("● running", LOOKS[S.RUNNING].colour)]

    def _second_line(self, width: int) -> Text:
        """Progress bar, done/total and the count of each state, in the first form that fits."""
        model = self.model
        done = f" {model.done}/{model.targeted}  "
        counts = [(LOOKS[state], model.counts[state]) for state in COUNT_ORDER if model.counts[state]]
        worded = Text()
        bare = Text()
        for look, n in counts:
            worded.append(look.glyph, look.colour)
            worded.append(f" {n} {look.word_for(n)}  ")
            bare.append(look.glyph, look.colour)
            bare.append(f"{n} ")
        forms = [(bar, worded) for bar in BAR_WIDTHS] + [(0, worded), (BAR_WIDTHS[-1], bare), (0, bare)]
        lines = []
        for bar_width, tally in forms:
            line = Text(" ")
            if bar_width:
                line.append_text(self._bar(bar_width))
            line.append(done if bar_width else done.lstrip())
            line.append_text(tally)
            lines.append(line)
        groups = [lines[: len(BAR_WIDTHS) + 1], lines[len(BAR_WIDTHS) + 1 :]]
        slots = self._slots_in_use()
        if slots:  # tried first, with every bar width of the worded counts
            groups.insert(0, [Text.assemble(line, slots) for line in groups[0]])
        tags = self._filter_tags()
        if not tags:
            return next((line for group in groups for line in group if line.cell_len <= width), lines[-1])
        # With a filter on, the bar shrinks before the filter loses words, and those go before the counts' words.
        for group in groups:
            for tag in tags:
                for line in group:
                    if line.cell_len + 1 + tag.cell_len <= width:
                        return _spread(line, tag, width)
        return Text.assemble(tags[-1], lines[-1])  # too narrow for both: the filter first, so it is never cropped

    def _slots_in_use(self) -> Text | None:
        """`gpu 1/2  db 0/1`: slots held by running tasks, per declared kind (None when the DAG declares none)."""
        if not self.capacities:
            return None
        used = dict.fromkeys(self.capacities, 0)
        for snap in self.model.snapshots.values():
            if snap.slots and snap.state.active:
                for kind, count in slot_counts(snap.slots).items():
                    used[kind] = used.get(kind, 0) + count
        text = Text()
        for kind, capacity in self.capacities.items():
            text.append(f"{kind} {used[kind]}/{capacity}", "bold" if used[kind] >= capacity > 0 else "")
            text.append("  ")
        return text

    def _filter_tags(self) -> list[Text]:
        """What says a state filter is on, from the fullest wording to the shortest; none when all tasks show.
        Counts elsewhere stay totals: this is the one place that says how many tasks are shown."""
        model = self.model
        state_filter = model.state_filter
        if state_filter is StateFilter.ALL:
            return []
        shown = sum(model.counts[state] for state in state_filter.states)
        word = state_filter.word
        return [
            Text(f" filter: {word} ({shown} of {model.total} shown) · F ", FILTER_STYLE),
            Text(f" filter: {word} ({shown} of {model.total}) ", FILTER_STYLE),
            Text(f" filter: {word} ", FILTER_STYLE),
        ]

    def _bar(self, width: int) -> Text:
        """Finished tasks as a bar coloured by outcome, the rest dim."""
        total = max(1, self.model.targeted)
        bar = Text()
        filled = 0
        done = 0
        for state in _BAR_ORDER:
            done += self.model.counts[state]
            upto = done * width // total
            bar.append("━" * (upto - filled), LOOKS[state].colour)
            filled = upto
        bar.append("━" * (width - filled), "#444444")
        return bar


def _spread(left: Text, right: Text, width: int) -> Text:
    """`left`, blank space, `right` flush with the right edge."""
    return Text.assemble(left, " " * max(1, width - left.cell_len - right.cell_len), right)


def _settled(counts: dict[str, int]) -> list[Text]:
    """A round of --watch whose tasks all ended while its services stay up: `✔ all 2 succeeded · 1 service up ·
    watching for changes` (`✘ 1 failed, 1 succeeded · ...` when one did not succeed)."""
    counts = dict(counts)
    up = counts.pop("up", 0)
    services = f" · {counted(up, 'service')} up" if up else ""
    bad = {state: n for state, n in counts.items() if state not in (S.SUCCEEDED.value, S.UP_TO_DATE.value) and n}
    parts = states_said(counts)
    if bad:
        style, said = LOOKS[S.FAILED].colour, f"✘ {parts}"
    elif set(counts) == {S.SUCCEEDED.value}:
        style, said = LOOKS[S.SUCCEEDED].colour, f"✔ all {counts[S.SUCCEEDED.value]} succeeded"
    else:
        style, said = LOOKS[S.SUCCEEDED].colour, f"✔ {parts}"
    return [
        Text(f"{said}{services} · watching for changes", style),
        Text(f"{said} · watching", style),
        Text(said.split(" ")[0] + " watching", style),
    ]
