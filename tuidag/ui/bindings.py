"""The run screen's keys: every binding with the words the footer, the `?` help and the command palette show, and
which of them each role offers (the post-mortem view lists no control that would only answer "read-only")."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from .screens.help import HelpScreen
from .widgets.graph.canvas import DagCanvas
from .widgets.task_table import TaskTable
from .widgets.timeline import TimelineView

#: The footer's keys, most important first: on a narrow terminal it drops them from the end of this list.
FOOTER_PRIORITY = (
    "quit",
    "help",
    "cancel_branch",
    "rerun",
    "pause",
    "task_detail",
    "search",
    "combined",
    "cancel_all",
    "follow",
    "wrap",
    "list_view",
)
READ_ONLY_REFUSES = ("cancel_branch", "cancel_all", "pause")  # keys that only say "read-only" in the post-mortem view

RUN_BINDINGS: list[BindingType] = [
    Binding("question_mark", "help", "Help", tooltip="Show every key"),
    Binding(
        "c", "cancel_branch", "Cancel", tooltip="Cancel the selected task and everything downstream of it (asks first)"
    ),
    Binding("C", "cancel_all", "Cancel all", tooltip="Cancel every unfinished task (asks first)"),
    Binding(
        "r",
        "rerun",
        "Re-run",
        tooltip="Run the selected failed, cancelled or skipped task again, with its unfinished downstream",
    ),
    Binding(
        "i",
        "task_detail",
        "Detail",
        tooltip="The selected task's detail: command, environment, dependencies, every attempt, why it ran (Enter too)",
    ),
    Binding("enter", "task_detail", "Detail", show=False),
    Binding("p", "pause", "Pause", tooltip="Pause / resume: running tasks go on, nothing new starts while paused"),
    Binding("slash", "search", "Search", tooltip="Search the whole log in the log pane"),
    Binding("n", "search_next", "Next", show=False, tooltip="Next search match"),
    Binding("N", "search_prev", "Prev", show=False, tooltip="Previous search match"),
    Binding("f", "follow", "Follow", tooltip="Toggle following the end of the log"),
    Binding("w", "wrap", "Wrap", tooltip="Toggle wrapping long log lines"),
    Binding("g", "log_top", "Top", show=False, tooltip="Go to the top of the log"),
    Binding("G", "log_bottom", "Bottom", show=False, tooltip="Go to the bottom of the log"),
    Binding(
        "a",
        "combined",
        "All logs",
        tooltip="Toggle the combined view: output of all tasks interleaved, each line prefixed by its task",
    ),
    Binding(
        "v",
        "copy_mode",
        "Copy",
        show=False,
        tooltip="Copy mode in the log pane: move a cursor, select lines, y copies them to the clipboard, esc leaves",
    ),
    Binding(
        "e",
        "open_pager",
        "Pager",
        show=False,
        tooltip="Open the selected task's log in $PAGER (default: less -R); the view comes back when it exits",
    ),
    Binding(
        "E",
        "open_editor",
        "Editor",
        show=False,
        tooltip="Open a copy of the selected task's log, as it is now, in $EDITOR (default: vi)",
    ),
    Binding("Y", "copy_log_path", "Copy path", show=False, tooltip="Copy the path of the selected task's log"),
    Binding("q", "quit", "Quit", tooltip="Quit; while tasks run, asks: stop the run, detach, or back"),
    Binding("escape", "focus_graph", "Graph", show=False),
    Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    Binding(
        "ctrl+c",
        "interrupt",
        "Stop",
        show=False,
        priority=True,
        tooltip="Stop every task now (no question) and quit when all are gone",
    ),
    Binding(
        "m",
        "maximise_log",
        "Max log",
        show=False,
        tooltip="Maximise the log pane (the graph hidden) / put the split back",
    ),
    Binding(
        "plus",
        "grow_log",
        "Log +",
        show=False,
        tooltip="Give the log pane more rows (or drag its top border with the mouse)",
    ),
    Binding("minus", "shrink_log", "Log -", show=False, tooltip="Give the log pane fewer rows"),
    Binding(
        "b",
        "branch_filter",
        "Branch",
        show=False,
        tooltip="Combined view: show only the selected task and everything downstream of it / every task",
    ),
    Binding(
        "T",
        "name_filter",
        "Name filter",
        show=False,
        tooltip="Combined view: show only the tasks whose names contain some text (empty: every task)",
    ),
    Binding(
        "colon",
        "find",
        "Find",
        show=False,
        tooltip="Find a task by name, fuzzy (Ctrl+F too): Enter jumps to it, Esc returns",
    ),
    Binding("ctrl+f", "find", "Find", show=False),
    Binding(
        "F",
        "filter",
        "Filter",
        show=False,
        tooltip="Filter by state: failed, running, unfinished, all again (hidden tasks are dimmed)",
    ),
    Binding(
        "right_square_bracket",
        "next_failed",
        "Next failed",
        show=False,
        tooltip="Select the next failed task (graph order, wrapping around)",
    ),
    Binding(
        "left_square_bracket",
        "previous_failed",
        "Previous failed",
        show=False,
        tooltip="Select the previous failed task",
    ),
    Binding(
        "right_curly_bracket",
        "next_running",
        "Next running",
        show=False,
        tooltip="Select the next running task (graph order, wrapping around)",
    ),
    Binding(
        "left_curly_bracket",
        "previous_running",
        "Previous running",
        show=False,
        tooltip="Select the previous running task",
    ),
    Binding(
        "L",
        "list_view",
        "List",
        tooltip="Toggle between the graph and the list: one row per task, sortable by each column",
    ),
    Binding(
        "d",
        "detach",
        "Detach",
        show=False,
        tooltip="A run in its own process (tuidag run, tuidag attach): close this view, the run goes on",
    ),
    Binding(
        "t",
        "timeline",
        "Timeline",
        show=False,
        tooltip="Toggle between the graph and the timeline: each task's waits and attempts on one time axis",
    ),
    Binding(
        "x",
        "critical_path",
        "Critical path",
        show=False,
        tooltip="Highlight the critical path in the graph and the timeline, listed with durations (again: off)",
    ),
]


if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class KeyHelp(AppHost):
    """Part of `TuidagApp` (ui/app.py): the help screen, the palette's commands and the footer's labels."""

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_help()))

    def key_help(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The help screen's sections: where the keys work, and each key with what it does."""

        def keys_of(bindings: list[BindingType]) -> list[tuple[str, str]]:
            return [
                (" ".join(self.get_key_display(Binding(k, "")) for k in b.key.split(",")), b.tooltip)
                for b in bindings_of(bindings)
            ]

        graph = keys_of(DagCanvas.BINDINGS)
        graph.append(("click", "Select a task"))
        listed = keys_of(TaskTable.BINDINGS)
        listed.append(("click", "Select a task; on a column's title: sort by it (again: the other way)"))
        log = [
            ("↑ ↓", "Scroll a line (scrolling up stops following)"),
            ("PgUp PgDn", "Scroll a page"),
            ("Home End", "Go to the first line / the last line (End follows the end again)"),
            ("← →", "Scroll sideways (when not wrapping)"),
            ("esc", "Back to the graph (or the list)"),
            ("drag", "Select lines with the mouse (copy mode)"),
        ]
        copying = [
            ("j k ↑ ↓", "Move the cursor; the selection follows it"),
            ("PgUp PgDn g G", "Move the cursor a page / to the first or last line"),
            ("shift+↑ shift+↓", "Select from the cursor up or down"),
            ("v space", "v: drop the selection or select from the cursor again; space: select from the cursor"),
            ("y", "Copy the selected lines (or the cursor's) to the clipboard, as plain text, and leave"),
            ("esc q", "Leave copy mode (following the end again if it was)"),
            ("click drag", "Move the cursor / select the lines dragged over"),
        ]
        anywhere = [("tab", "Switch focus between the graph and the log pane (the focused one is lit)")]
        anywhere += [
            (self.get_key_display(b), b.tooltip) for b in bindings_of(self.BINDINGS) if b.tooltip and self._offers(b)
        ]
        timeline = keys_of(TimelineView.BINDINGS)
        timeline.append(("click", "Select a task (dense rows: again for the lower one)"))
        return [
            ("In the graph", graph),
            ("In the list (L shows it)", listed),
            ("In the timeline (t shows it)", timeline),
            ("In the log pane (tab to focus it)", log),
            ("In copy mode (v)", copying),
            ("Anywhere", anywhere),
        ]

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in bindings_of(self.BINDINGS):
            if binding.tooltip and binding.action != "quit" and self._offers(binding):  # Textual offers Quit
                yield SystemCommand(binding.description, binding.tooltip, getattr(self, f"action_{binding.action}"))
        for binding in bindings_of(DagCanvas.BINDINGS):
            moves = binding.action.startswith("move(")
            title = f"Select {binding.description.lower()}" if moves else binding.description
            yield SystemCommand(
                title, binding.tooltip, partial(self.call_later, self.canvas.run_action, binding.action)
            )
        yield SystemCommand("Switch focus", "Between the graph and the log pane", self.action_focus_next)

    def _offers(self, binding: Binding) -> bool:
        """The help, the palette and the footer list no control that only answers "read-only" in the post-mortem
        view."""
        return not self.read_only or binding.action not in READ_ONLY_REFUSES

    def _key_label(self, binding: Binding) -> str | None:
        """A key as the footer names it here (None: not offered); `r` in the post-mortem view starts a resumed run."""
        if not self._offers(binding):
            return None
        return "Resume" if binding.action == "rerun" and self.read_only else binding.description


def bindings_of(bindings: list[BindingType]) -> list[Binding]:
    """A class's BINDINGS as `Binding`s: Textual's type allows tuples too, the run screen writes every key as a
    `Binding`."""
    return [binding for binding in bindings if isinstance(binding, Binding)]
