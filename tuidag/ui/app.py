"""The terminal UI of a run: header, graph canvas, log pane, footer (ui/viewer.py opens it on a run's engine).

Threading model: the engine calls `TuidagApp.engine_event` from its own threads, and that only appends the event to
a deque. A timer (20 per second) drains the deque on the UI thread, applies the whole batch to the `RunModel` and
repaints just the tiles that changed. Nothing is posted per event or per log line (measured: `call_from_thread` per
event blocks the engine, `post_message` per line stalls the loop for seconds; batching keeps the lag ~10 ms).
Live CPU/memory of running trees is sampled once a second on a worker thread and goes through the same deque.
Controls that may block (cancelling kills process trees) run on worker threads too.
"""
from __future__ import annotations

import asyncio
import gc
import signal
import threading
import time
from collections import deque
from functools import partial
from typing import Callable, Iterable

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.markup import escape
from textual.notifications import SeverityLevel
from textual.binding import Binding
from textual.driver import Driver
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input
from textual.worker import get_current_worker

from ..control.client import NotLive, Refused
from ..control.protocol import cancel_reason
from ..control.remote import ANSWERING, ENGINE_GONE, NOT_ANSWERING, REAPED, RemoteRun
from ..model.collector import collector_paused, freeze_survivors
from ..engine import output_routing
from ..engine.events import Event, RunEvent, TaskEvent, TaskSnapshot
from ..engine.scheduler import RerunRefused
from ..launch import RunSession
from ..model.state import TaskState
from ..views.fuzzy import FuzzyFinder
from ..views.layout.build import dag_deps, layout_dag
from ..views.layout.layout import GraphLayout
from ..views.layout.style import LayoutStyle, Zoom
from ..views.headless import TASK_COLOURS
from ..views.combined_log import CombinedLog
from ..views.task_filter import TaskFilter
from ..views.timeline_layout import Density
from ..views.run_outlook import Outlook, outlook, path_rows
from ..model.forecast import shape_of
from ..store.expected import expected_for_run, seconds
from ..store.journal import read_header, read_journal
from .messages import EngineGone, EngineNews, RunFinished, TaskSelected
from .run_model import RunModel, StateFilter, UsageSample
from .screens.choice import ChoiceScreen
from .screens.confirm import ConfirmScreen
from .screens.finder import FinderScreen
from .screens.help import HelpScreen
from .state_style import LOOKS
from .widgets.graph.canvas import DagCanvas
from .widgets.key_footer import KeyFooter
from .widgets.log.view import LogView
from .widgets.run_header import RunHeader
from .widgets.split_panes import SplitPanes
from .widgets.task_name_bar import TaskNameBar
from .widgets.task_table import TaskTable
from .widgets.timeline import TimelineView
from .widgets.critical_panel import CriticalPathPanel
from ..model.counts import counted

S = TaskState
DRAIN_INTERVAL = 1 / 20
HEADER_INTERVAL = 0.2  # counts and progress repaint at most this often (a big run changes them on every drain)
TICK_INTERVAL = 1.0
OUTLOOK_EVERY = 5.0  # seconds between two forecasts of a live run when no task changed
GC_YOUNG_THRESHOLD = 2_500  # allocations between two collections of the youngest generation (Python default: 700)
RERUNNABLE = (S.FAILED, S.CANCELLED, S.SKIPPED)
USER_HOLD = 5.0  # seconds after the user acted on the selection during which the app does not move it
#: The footer's keys, most important first: on a narrow terminal it drops them from the end of this list.
FOOTER_PRIORITY = ("quit", "help", "cancel_branch", "rerun", "pause", "search", "combined", "cancel_all", "follow",
                   "wrap", "list_view")


class SearchBar(Input):
    """The `/` prompt: Enter searches the log pane, Esc gives up."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def action_close(self) -> None:
        self.app.close_search()


class TuidagApp(App[None]):
    """The run screen. Construct it from a `RunSession`; `start=False` leaves the scheduler alone so a test can feed
    synthetic events through `engine_event`, and `clock` freezes time for deterministic snapshots."""

    CSS_PATH = "app.tcss"
    TITLE = "tuidag"
    AUTO_FOCUS = "#graph"  # not the first focusable widget (the hidden search bar): the footer is built for the graph
    BINDINGS = [
        Binding("question_mark", "help", "Help", tooltip="Show every key"),
        Binding("c", "cancel_branch", "Cancel",
                tooltip="Cancel the selected task and everything downstream of it (asks first)"),
        Binding("C", "cancel_all", "Cancel all", tooltip="Cancel every unfinished task (asks first)"),
        Binding("r", "rerun", "Re-run",
                tooltip="Run the selected failed, cancelled or skipped task again, with its unfinished downstream"),
        Binding("p", "pause", "Pause", tooltip="Pause / resume: running tasks go on, nothing new starts while paused"),
        Binding("slash", "search", "Search", tooltip="Search the whole log in the log pane"),
        Binding("n", "search_next", "Next", show=False, tooltip="Next search match"),
        Binding("N", "search_prev", "Prev", show=False, tooltip="Previous search match"),
        Binding("f", "follow", "Follow", tooltip="Toggle following the end of the log"),
        Binding("w", "wrap", "Wrap", tooltip="Toggle wrapping long log lines"),
        Binding("g", "log_top", "Top", show=False, tooltip="Go to the top of the log"),
        Binding("G", "log_bottom", "Bottom", show=False, tooltip="Go to the bottom of the log"),
        Binding("a", "combined", "All logs",
                tooltip="Toggle the combined view: output of all tasks interleaved, each line prefixed by its task"),
        Binding("q", "quit", "Quit", tooltip="Quit; while tasks run, asks, then stops every task first"),
        Binding("escape", "focus_graph", "Graph", show=False),
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("ctrl+c", "interrupt", "Stop", show=False, priority=True,
                tooltip="Stop every task now (no question) and quit when all are gone"),
        Binding("m", "maximise_log", "Max log", show=False,
                tooltip="Maximise the log pane (the graph hidden) / put the split back"),
        Binding("plus", "grow_log", "Log +", show=False,
                tooltip="Give the log pane more rows (or drag its top border with the mouse)"),
        Binding("minus", "shrink_log", "Log -", show=False, tooltip="Give the log pane fewer rows"),
        Binding("b", "branch_filter", "Branch", show=False,
                tooltip="Combined view: show only the selected task and everything downstream of it / every task"),
        Binding("T", "name_filter", "Name filter", show=False,
                tooltip="Combined view: show only the tasks whose names contain some text (empty: every task)"),
        Binding("colon", "find", "Find", show=False,
                tooltip="Find a task by name, fuzzy (Ctrl+F too): Enter jumps to it, Esc returns"),
        Binding("ctrl+f", "find", "Find", show=False),
        Binding("F", "filter", "Filter", show=False,
                tooltip="Filter by state: failed, running, unfinished, all again (hidden tasks are dimmed)"),
        Binding("right_square_bracket", "next_failed", "Next failed", show=False,
                tooltip="Select the next failed task (graph order, wrapping around)"),
        Binding("left_square_bracket", "previous_failed", "Previous failed", show=False,
                tooltip="Select the previous failed task"),
        Binding("right_curly_bracket", "next_running", "Next running", show=False,
                tooltip="Select the next running task (graph order, wrapping around)"),
        Binding("left_curly_bracket", "previous_running", "Previous running", show=False,
                tooltip="Select the previous running task"),
        Binding("L", "list_view", "List",
                tooltip="Toggle between the graph and the list: one row per task, sortable by each column"),
        Binding("d", "detach", "Detach", show=False,
                tooltip="A run in its own process (tuidag run, tuidag attach): close this view, the run goes on"),
        Binding("t", "timeline", "Timeline", show=False,
                tooltip="Toggle between the graph and the timeline: each task's waits and attempts on one time axis"),
        Binding("x", "critical_path", "Critical path", show=False,
                tooltip="Highlight the critical path in the graph and the timeline, listed with durations (again: "
                        "off)"),
    ]

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Textual's notice, with markup off unless asked for: messages hold task and DAG names, paths, searches."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def __init__(self, session: RunSession | RemoteRun, *, exit_on_finish: bool = False, start: bool = True,
                 clock: Callable[[], float] = time.time, usage_interval: float | None = 1.0,
                 signals: Iterable[int] = (), driver_class: type[Driver] | None = None,
                 early_signals: list[int] | None = None):
        """`early_signals`: where the caller's own handlers note `signals` until the app installs its handlers (a
        signal in between is acted on when the app starts, not lost)."""
        super().__init__(driver_class=driver_class)
        self._early_signals = early_signals if early_signals is not None else []
        if any(task.func is not None for task in session.dag.tasks.values()):
            # Routing in front of the streams the app will put back when it ends: a callable still running then
            # (or starting later) keeps writing to its log, not to the terminal.
            output_routing.install()
        # Textual puts these in place of sys.stdout/sys.stderr while it runs: behind a router, what a Python task
        # prints reaches its log from the first write on, not only once another task starts.
        self._capture_stdout = output_routing.routed(self._capture_stdout)
        self._capture_stderr = output_routing.routed(self._capture_stderr)
        self.session = session
        self.scheduler = session.scheduler
        self.exit_on_finish = exit_on_finish
        self.usage_interval = usage_interval
        self._start = start
        self._signals = tuple(signals)
        self.run_started = False
        self._gc_threshold: tuple[int, ...] | None = None  # the collector's thresholds before the run started
        self._inbox: deque[Event | UsageSample] = deque()
        self._header_dirty = False
        self._header_painted = 0.0
        self._stop_sampling = threading.Event()
        self._combined_on = False
        self._combined: CombinedLog | None = None  # built when first looked at
        self._combined_pending: list[str] = []  # tasks started since the combined log was last looked at
        self._store_error_shown = False
        self._finder: FuzzyFinder | None = None  # built on the first `:`
        self._reading_order: tuple[GraphLayout | None, list[str]] = (None, [])  # of which layout, for ] [ } {
        self._user_moved = False       # the user moved the selection (the app's own moves don't count)
        self._user_acted_at = -USER_HOLD  # when the user last acted on the selection (c, r, a confirmation)
        self._moving_for_user = False  # the app is moving the selection itself (to the first failure)
        self._first_failure_seen = False
        dag = session.dag
        with collector_paused():
            self._unsubscribe = self.scheduler.subscribe(self.engine_event)  # before the snapshot: nothing is missed
            self.model = RunModel(self.scheduler.snapshot(), session.started, clock)
            self.model.paused = self.scheduler.paused  # paused before this view came: the event is behind it
            if self.read_only:  # the post-mortem view: the run's clock stopped at its end
                self.model.finished_at = session.ended_at
            self.model.seed_timeline(read_journal(session.run.journal))  # what happened before the app subscribed
            self._parents = {name: task.depends_on for name, task in dag.tasks.items()}
            self._prefix_colours = {name: TASK_COLOURS[i % len(TASK_COLOURS)]
                                    for i, name in enumerate(dag.topological_order)}
        # The widgets are kept here, not queried: timers may still fire while the screen is being torn down.
        self.header = RunHeader(dag.name, session.run.run_id, self.model, capacities=dag.resources, id="header")
        self.header.role = self._role()
        self.canvas = DagCanvas(dag_deps(dag), self._layout, self.model, self._parents, dag.children,
                                on_select=self._selection_moved, id="graph")
        self.canvas.title_prefix = f"{dag.name} · {counted(self.model.total, 'task')}"
        # Mounted on the first `L` (most runs never look at it); its selection moves the graph's, which shows the log.
        # Its default order is the graph's reading order, set when it is shown (the layout comes with the screen).
        self.table = TaskTable(dag.name, dag.topological_order, self.model, on_select=self.canvas.select, id="list")
        # Mounted on the first `t`, like the list; its selection moves the graph's too.
        self.timeline = TimelineView(dag.name, self.model, lambda: self.reading_order, self._timeline_density,
                                     on_select=self.canvas.select, id="timeline")
        self.log_pane = LogView(id="log")
        # Mounted on the first `/`: an Input costs the start-up a few ms of styles and timers, and most runs never
        # search.
        self.search_bar = SearchBar(placeholder="search the log: Enter searches, Esc closes", id="search")
        self._focus_before_search: DagCanvas | TaskTable | LogView = self.canvas
        self.footer = KeyFooter(priority=FOOTER_PRIORITY, label=self._key_label)
        self.panes = SplitPanes(id="panes")
        self._graph_focused_before_max = False
        self._task_filter = TaskFilter()
        self.task_name_bar = TaskNameBar(placeholder="show the tasks whose names contain: Enter filters (empty: all), "
                                                     "Esc closes", id="task-name")
        self._focus_before_task_name: DagCanvas | LogView = self.canvas
        # The forecast (ETA, critical path): expected durations are read from the store once the run started; the
        # outlook is worked out on a thread after task transitions, at most once a tick.
        self._shape = shape_of(dag, self.scheduler.max_parallel)
        self._expected: dict[str, float] | None = None
        self._outlook: Outlook | None = None
        self._outlook_due = False
        self._outlook_busy = False
        self._outlook_at = 0.0
        self._critical_on = False
        self.critical_panel = CriticalPathPanel(id="critical")  # mounted on the first `x`

    @property
    def graph(self) -> GraphLayout | None:
        """The graph as laid out now (None until the canvas knows its size)."""
        return self.canvas.graph

    def _layout(self, style: LayoutStyle) -> GraphLayout:
        """Lay the DAG out for the canvas, read back from the state dir's cache when it was laid out so before."""
        with collector_paused():  # the layout of a big DAG is tens of thousands of objects, all kept
            return layout_dag(self.session.dag, style, cache_dir=self.session.store.state_dir / "cache")

    # ---------------------------------------------------------------------------------------------- engine side
    def engine_event(self, event: Event) -> None:
        """Engine observer, called on engine threads: never touches the UI. The end of the run (once per run) is
        drained at once instead of at the next tick, so the final state, and with --exit-on-finish the exit, don't
        wait up to a tick for it."""
        self._inbox.append(event)
        if type(event) is RunEvent:
            if event.kind == "finished":
                self.post_message(RunFinished())  # thread-safe; once per run
            elif event.kind == ENGINE_GONE:
                self.post_message(EngineGone())
            elif event.kind in (NOT_ANSWERING, ANSWERING, REAPED):
                self.post_message(EngineNews(event.kind, event.detail))

    # ------------------------------------------------------------------------------------------------- building
    def compose(self) -> ComposeResult:
        yield self.header
        with self.panes:
            yield self.canvas
            yield self.log_pane
        yield self.footer

    def on_mount(self) -> None:
        self.set_interval(DRAIN_INTERVAL, self._drain)
        self.set_interval(TICK_INTERVAL, self._tick)
        loop = asyncio.get_running_loop()
        for signum in self._signals:
            loop.add_signal_handler(signum, self._on_signal, signum)
        if self.session.interrupted_by and not self.read_only:  # (the record of an interrupted run stays open)
            # The run was stopped by a signal before the app was built (its engine said so): show it
            # stopping and exit when it has (without this the app stayed open, its run over, its terminal gone).
            self.model.stopping = True
        elif self._early_signals:
            # A signal came after the caller reached the run but before the handlers above (a terminal closed while
            # the viewer opened): act on it now, as it would have been.
            self.call_later(self._on_signal, self._early_signals[-1])
        self.canvas.focus()
        self._select_first_failure(self.model.snapshots.values())  # tasks that failed before the app subscribed
        if self._start:
            # Start right away rather than after the first frame: building and painting the screen (~0.1 s) then
            # overlaps the first tasks instead of delaying the whole run. The first frame follows within a frame.
            self._start_run()

    def _start_run(self) -> None:
        # Everything built so far (layout, widgets, styles) lives as long as the app: keep it out of the garbage
        # collector's full passes, which otherwise stall the screen for ~0.1 s now and then on a big run.
        freeze_survivors()
        # Painting allocates many short-lived objects (strips, segments): at the default threshold (700) the young
        # generation was collected ~60 times in a 1 s run and the middle one every ~0.2 s, 40 ms of pauses in all.
        # Collect it a few times less often (much larger, and each pause grows past 10 ms: a key press waits for it).
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *self._gc_threshold[1:])
        self.run_started = True
        self.scheduler.start()
        # After the first frame: reading earlier runs' journals takes tenths of a second of a thread's time (the
        # interpreter's, shared with the screen) when the state dir holds runs of thousands of tasks.
        self.call_after_refresh(self._load_expected)
        if self.usage_interval:
            self._sample_usage()

    def on_unmount(self) -> None:
        gc.unfreeze()
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
        self._stop_sampling.set()
        self._unsubscribe()
        loop = asyncio.get_running_loop()
        for signum in self._signals:
            loop.remove_signal_handler(signum)

    @property
    def run_active(self) -> bool:
        """Tasks may still be running or start: quitting must stop them first."""
        return self.run_started and not self.scheduler.finished

    # ------------------------------------------------------------------------------------------ applying events
    def _drain(self) -> None:
        inbox = self._inbox
        batch = [inbox.popleft() for _ in range(len(inbox))]
        if batch:
            was_finished = self.model.finished
            changed = self.model.apply(batch)
            running = S.RUNNING
            if self._combined is not None:
                for event in batch:
                    if type(event) is TaskEvent and event.old is not running and event.snapshot.state is running:
                        self._combined_pending.append(event.snapshot.name)
            if self._combined_on and self._combined_pending:
                self._add_to_combined()
            self.canvas.refresh_tasks(changed)
            self.table.refresh_tasks(changed)
            self.timeline.refresh_tasks(changed)
            if not self._first_failure_seen:
                self._select_first_failure(e.snapshot for e in batch if type(e) is TaskEvent)
            if not self._outlook_due:  # a task changed state, or the run was paused or resumed
                self._outlook_due = any(e.old is not e.snapshot.state if type(e) is TaskEvent else
                                        type(e) is RunEvent and e.kind in ("paused", "resumed") for e in batch)
            self._header_dirty = True
            if self.model.finished and not was_finished:
                self._on_finished()
        now = time.monotonic()
        if self._header_dirty and now - self._header_painted >= HEADER_INTERVAL:
            self._header_dirty, self._header_painted = False, now
            self.header.refresh()
        if self.model.stopping and self.scheduler.finished and not self._inbox:
            self.exit()

    @property
    def combined(self) -> CombinedLog:
        """Every task's output since the run's start, interleaved (what `a` shows): built when first looked at
        from every task that has started by then, whether or not the app saw it start (the run starts before the
        app subscribes), then the tasks that start later."""
        if self._combined is None:
            self._combined = CombinedLog()
            self._combined_pending = [name for name, snap in self.model.snapshots.items()
                                      if snap.attempt and not snap.reused]
        if self._combined_pending:
            self._add_to_combined()
        return self._combined

    def _add_to_combined(self) -> None:
        """Tasks are added to the combined log when it is looked at, not as they start: a big run starts hundreds a
        second, and the log reads a task's file from its start whenever it is added. Each prefix has the task's
        colour in the headless output."""
        pending, self._combined_pending = self._combined_pending, []
        for task in pending:
            snap = self.model.snapshots[task]
            self._combined.add(task, self.session.run.log_path(task), started=snap.started_at,
                               colour=self._prefix_colours.get(task))

    def _on_finished(self) -> None:
        self._outlook_due = True
        self._refresh_outlook()  # the finished run's path, from what happened
        if self.exit_on_finish and not self.model.stopping:
            self.exit()

    def _tick(self) -> None:
        """Once a second: elapsed times of live tasks and of the run."""
        live = [n for n, s in self.model.snapshots.items() if s.state in (S.RUNNING, S.RETRYING, S.CANCELLING)]
        self.canvas.refresh_tasks(live)
        self.table.refresh_tasks(live)
        self.timeline.tick()
        self._refresh_outlook()
        self.header.refresh()
        if self.session.store_message and not self._store_error_shown:  # set once, from an engine thread
            self._store_error_shown = True
            self.notify(self.session.store_message.removeprefix("tuidag: error: "), title="Run incomplete",
                        severity="error", timeout=24 * 3600)

    @work(thread=True, exclusive=True, group="usage", exit_on_error=False)
    def _sample_usage(self) -> None:
        """CPU % and memory of each running task's whole process tree, off the UI thread.

        The first sample comes one interval after the start: a CPU % needs an earlier reading of the same process
        anyway, and the start (psutil's import, a process object per running task) then stays out of the busiest
        moment, when the screen is built while the first tasks start."""
        worker = get_current_worker()
        while not self._stop_sampling.wait(self.usage_interval) and not worker.is_cancelled:
            sample = {}
            for name, snap in self.scheduler.snapshot().items():
                if snap.state is S.RUNNING:
                    usage = self.scheduler.usage(name)
                    if usage is not None:
                        sample[name] = usage
            self._inbox.append(UsageSample(sample))

    # ------------------------------------------------------------------------------------------------ selection
    @property
    def selected_task(self) -> str | None:
        """The one selection every view shares (the graph's, the list's, the finder's): the task keys act on."""
        return self.table.selected if self.table.active else self.canvas.selected

    def select_task(self, name: str) -> None:
        """Select `name` in every view, bring it into view and show its log."""
        self.canvas.select(name)
        self.table.select(name)
        self.timeline.select(name)

    @on(RunFinished)
    def _on_run_finished(self) -> None:
        self._drain()

    @on(TaskSelected)
    def _show_selected_log(self, message: TaskSelected) -> None:
        if message.task == self.selected_task:  # not a selection made before the app moved it on its own
            self._show_log_of(message.task)

    def _selection_moved(self, task: str) -> None:
        """Every move of the selection (keys, clicks, the finder, jumps) but the app's own is the user's."""
        if not self._moving_for_user:
            self._user_moved = True
        self._show_log_of(task)

    def _user_acts(self) -> None:
        """The user acts on the selection as it is (it was never moved: the first task): it is theirs now too."""
        self._user_acted_at = time.monotonic()

    def _select_first_failure(self, snapshots: Iterable[TaskSnapshot]) -> None:
        """The first task of the run to fail is selected, so its log shows, unless the user moved the selection or
        acted on it in the last USER_HOLD seconds (a failure selected right after `c` took the next `c`)."""
        failed = [snap for snap in snapshots if snap.state is S.FAILED]
        if not failed:
            return
        self._first_failure_seen = True
        if not self._user_moved and time.monotonic() - self._user_acted_at >= USER_HOLD:
            first = min(failed, key=lambda snap: snap.finished_at or 0.0)
            self._moving_for_user = True
            try:
                self.select_task(first.name)
            finally:
                self._moving_for_user = False

    def _show_log_of(self, task: str) -> None:
        """The selection moved (called by the canvas right away, so both repaint in one frame)."""
        if not self._combined_on:
            self.log_pane.show_file(self.session.run.log_path(task), task)

    # -------------------------------------------------------------------------------------------------- actions
    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_help()))

    def key_help(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The help screen's sections: where the keys work, and each key with what it does."""
        def keys_of(bindings: list[Binding]) -> list[tuple[str, str]]:
            return [(" ".join(self.get_key_display(Binding(k, "")) for k in b.key.split(",")), b.tooltip)
                    for b in bindings]

        graph = keys_of(DagCanvas.BINDINGS)
        graph.append(("click", "Select a task"))
        listed = keys_of(TaskTable.BINDINGS)
        listed.append(("click", "Select a task; on a column's title: sort by it (again: the other way)"))
        log = [("↑ ↓", "Scroll a line (scrolling up stops following)"),
               ("PgUp PgDn", "Scroll a page"),
               ("Home End", "Go to the first line / the last line (End follows the end again)"),
               ("← →", "Scroll sideways (when not wrapping)"),
               ("esc", "Back to the graph (or the list)")]
        anywhere = [("tab", "Switch focus between the graph and the log pane (the focused one is lit)")]
        anywhere += [(self.get_key_display(b), b.tooltip) for b in self.BINDINGS if b.tooltip and self._offers(b)]
        timeline = keys_of(TimelineView.BINDINGS)
        timeline.append(("click", "Select a task (dense rows: again for the lower one)"))
        return [("In the graph", graph), ("In the list (L shows it)", listed),
                ("In the timeline (t shows it)", timeline), ("In the log pane (tab to focus it)", log),
                ("Anywhere", anywhere)]

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            if binding.tooltip and binding.action != "quit" and self._offers(binding):  # Textual offers Quit
                yield SystemCommand(binding.description, binding.tooltip, getattr(self, f"action_{binding.action}"))
        for binding in DagCanvas.BINDINGS:
            moves = binding.action.startswith("move(")
            title = f"Select {binding.description.lower()}" if moves else binding.description
            yield SystemCommand(title, binding.tooltip, partial(self.call_later, self.canvas.run_action, binding.action))
        yield SystemCommand("Switch focus", "Between the graph and the log pane", self.action_focus_next)

    def action_cancel_branch(self) -> None:
        name = self.selected_task
        if name is None or not self._may_control():
            return
        self._user_acts()
        branch = self.scheduler.branch(name)
        if not branch:
            self.notify(f"{name} and everything downstream of it already finished")
            return
        question = f"Cancel [b]{escape(name)}[/b] and everything downstream of it? {_these(branch)} will stop:"
        cancel = partial(self.scheduler.cancel, name, cancel_reason("cancel", "viewer"))
        self.push_screen(ConfirmScreen(question, self._describe(branch), "Running tasks get SIGTERM, then SIGKILL."),
                         partial(self._confirmed, cancel))

    def action_cancel_all(self) -> None:
        if not self._may_control():
            return
        unfinished = self._unfinished()
        if not unfinished:
            self.notify("every task already finished")
            return
        question = f"Cancel every unfinished task? {_these(unfinished)} will stop:"
        self.push_screen(ConfirmScreen(question, self._describe(unfinished),
                                       "Running tasks get SIGTERM, then SIGKILL."),
                         partial(self._confirmed, partial(self.scheduler.cancel_all,
                                                          cancel_reason("cancel_all", "viewer"))))

    def _confirmed(self, control: Callable[[], object], yes: bool | None) -> None:
        self._user_acts()
        if yes:
            self.run_worker(partial(self._control, control), thread=True, group="control", description="cancel")

    def action_rerun(self) -> None:
        if self.read_only:
            self._offer_resume()
            return
        name = self.selected_task
        if name is None or self.model.stopping or not self.run_started:
            return
        self._user_acts()
        snap = self.model.snapshots[name]
        if snap.state not in RERUNNABLE:
            self.notify(f"{name} is {LOOKS[snap.state].word}: only failed, cancelled or skipped tasks re-run")
            return
        self.run_worker(partial(self._control, partial(self.scheduler.rerun, name)), thread=True, group="control",
                        description="rerun")

    def action_pause(self) -> None:
        if self._may_control():
            self.run_worker(partial(self._control, self._toggle_pause), thread=True, group="control",
                            description="pause")

    def _toggle_pause(self) -> None:
        if self.scheduler.paused:
            self.scheduler.resume()
        elif not self.scheduler.pause():
            self.call_from_thread(self.notify,
                                  "the run is finished: nothing left to pause (r re-runs the selected task)")

    async def action_search(self) -> None:
        if not self.search_bar.is_attached:
            await self.footer.screen.mount(self.search_bar, before=self.footer)  # the run screen, even under a dialog
        if self.focused in (self.canvas, self.table, self.timeline, self.log_pane):
            self._focus_before_search = self.focused
        self.search_bar.add_class("visible")
        self._focus(self.search_bar)

    def close_search(self) -> None:
        """Leave the search bar for the pane the user was in (the graph's keys must work again right away)."""
        self.search_bar.remove_class("visible")
        self._focus(self._focus_before_search)

    def action_focus_graph(self) -> None:
        """Esc in the log pane: back to the graph, or to the list when it is shown (unless the log pane is maximised:
        there is no graph to go to)."""
        if not self.panes.maximised:
            self._focus(self.table if self.table.active else self.timeline if self.timeline.active else self.canvas)

    async def action_list_view(self) -> None:
        """`L`: the list in the graph's place, or the graph back; the selection carries over both ways."""
        if self.table.active:
            self.table.hide()
            self.panes.remove_class("-list")
            self._focus(self.canvas)
            self.call_after_refresh(self.canvas.scroll_to_selected)  # the list may have moved it out of view
            return
        width = (self.timeline if self.timeline.active else self.canvas).scrollable_content_region.width
        self._hide_timeline()
        if not self.table.is_attached:
            self.table.styles.height = self.canvas.styles.height  # the split as the user left it
            await self.canvas.parent.mount(self.table, after=self.canvas)
        self.panes.add_class("-list")
        self.table.set_order(self.reading_order)
        self.table.show(self.canvas.selected, width)
        self._focus(self.table)

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.close_search()
        query = event.value
        if query and not self.log_pane.search(query):
            self.notify(f"not found: {query}", severity="warning")

    def action_search_next(self) -> None:
        self._search_again(self.log_pane.search_next)

    def action_search_prev(self) -> None:
        self._search_again(self.log_pane.search_prev)

    def _search_again(self, step: Callable[[], bool]) -> None:
        if not self.log_pane.query:
            self.notify("nothing to repeat: search with / first")
        elif not step():
            self.notify(f"not found: {self.log_pane.query}", severity="warning")

    def action_follow(self) -> None:
        self.log_pane.toggle_follow()
        self.notify(f"follow {'on' if self.log_pane.following else 'off'}", timeout=1.5)

    def action_wrap(self) -> None:
        self.log_pane.toggle_wrap()
        self.notify(f"wrap {'on' if self.log_pane.wrap else 'off'}", timeout=1.5)

    def action_log_top(self) -> None:
        self.log_pane.scroll_home()

    def action_log_bottom(self) -> None:
        self.log_pane.scroll_end()

    def action_combined(self) -> None:
        self._combined_on = not self._combined_on
        if self._combined_on:
            self.log_pane.show_combined(self.combined, self._task_filter.describe())
        elif self.selected_task:
            self.log_pane.show_file(self.session.run.log_path(self.selected_task), self.selected_task)

    # ------------------------------------------------------------------- log pane: its size, the combined filter
    def action_maximise_log(self) -> None:
        """The log pane gets the graph's rows too (its bottom border as well, so 80x24 shows 20 log lines), or back."""
        maximised = self.panes.toggle_maximised()
        self.log_pane.one_title_row = maximised
        if maximised:
            self._graph_focused_before_max = self.focused is self.canvas
            self._focus(self.log_pane)
        elif self._graph_focused_before_max:
            self._focus(self.canvas)

    def action_grow_log(self) -> None:
        if not self.panes.maximised:
            self.panes.step(1)

    def action_shrink_log(self) -> None:
        """Smaller; a maximised pane goes back to the split."""
        if self.panes.maximised:
            self.action_maximise_log()
        else:
            self.panes.step(-1)

    def action_branch_filter(self) -> None:
        if self._combined_only("b"):
            branch = None if self._task_filter.branch is not None else self.selected_task
            self._set_task_filter(self._task_filter.with_branch(branch))

    async def action_name_filter(self) -> None:
        if not self._combined_only("T"):
            return
        if not self.task_name_bar.is_attached:
            await self.footer.screen.mount(self.task_name_bar, before=self.footer)
        if self.focused in (self.canvas, self.log_pane):
            self._focus_before_task_name = self.focused
        self.task_name_bar.value = self._task_filter.name
        self.task_name_bar.add_class("visible")
        self._focus(self.task_name_bar)

    def close_task_name_bar(self) -> None:
        self.task_name_bar.remove_class("visible")
        self._focus(self._focus_before_task_name)

    @on(Input.Submitted, "#task-name")
    def _task_name_submitted(self, event: Input.Submitted) -> None:
        self.close_task_name_bar()
        self._set_task_filter(self._task_filter.with_name(event.value))

    def _combined_only(self, key: str) -> bool:
        if not self._combined_on:
            self.notify(f"{key} filters the combined view: press a to show it first")
        return self._combined_on

    def _set_task_filter(self, task_filter: TaskFilter) -> None:
        """Re-filter the lines the combined log holds (nothing is read again) and show them from the end."""
        self._task_filter = task_filter
        tasks = task_filter.tasks(self.session.dag)
        self.combined.show_only(tasks)
        self.log_pane.show_combined(self.combined, task_filter.describe())
        if tasks is not None and not tasks:
            self.notify(f"no task matches: {task_filter.describe()}", severity="warning")

    async def action_quit(self) -> None:
        if not self.run_active:
            self.exit()
            return
        if self.viewing:
            self._ask_viewer_quit()
            return
        if self.model.stopping:
            self.notify("stopping: waiting for every process to exit")
            return
        unfinished = self._unfinished()
        question = f"Quit? The run is not finished: {_these(unfinished).lower()} will be cancelled first:"
        self.push_screen(ConfirmScreen(question, self._describe(unfinished),
                                       "tuidag exits once every process is gone."),
                         self._quit_confirmed)

    def _quit_confirmed(self, yes: bool | None) -> None:
        if yes:
            self._stop(partial(self.scheduler.cancel_all, "cancelled: tuidag quit"))

    def action_interrupt(self) -> None:
        """Ctrl+C: the user wants the run stopped, now. Recorded as SIGINT (exit code 130), like the headless view."""
        if self.run_active:
            self._on_signal(signal.SIGINT)
        else:
            self.exit()

    def _on_signal(self, signum: int) -> None:
        """SIGINT/SIGTERM/SIGHUP: cancel everything (the session does it on its own thread), then exit. A viewer
        attached to a run it did not start only closes: the run goes on."""
        if self.viewing and (self.read_only or not self.session.foreground):
            self.exit(None if self.read_only else DETACHED)
            return
        self._stop(partial(self.session.interrupt, signum))

    def _stop(self, cancel: Callable[[], object]) -> None:
        if not self.run_active:
            self.exit()
            return
        self.model.stopping = True
        self.header.refresh()
        self.run_worker(partial(self._control, cancel), thread=True, group="control", description="stop")

    # ------------------------------------------------------------------------------ finding, filtering, jumping
    def action_find(self) -> None:
        if self._finder is None:
            self._finder = FuzzyFinder(self.reading_order)
        self.push_screen(FinderScreen(self._finder, self.model), self._found)

    def _found(self, name: str | None) -> None:
        if name is not None:
            self.select_task(name)

    def action_filter(self) -> None:
        """`F`: all → failed → running → unfinished → all. The graph dims hidden tasks; counts stay totals."""
        self.model.state_filter = self.model.state_filter.next()
        self.canvas.refresh_all()
        self.table.refilter()
        if self.timeline.active:
            self.timeline.relist()
        self.header.refresh()

    def action_next_failed(self) -> None:
        self._jump(StateFilter.FAILED, 1)

    def action_previous_failed(self) -> None:
        self._jump(StateFilter.FAILED, -1)

    def action_next_running(self) -> None:
        self._jump(StateFilter.RUNNING, 1)

    def action_previous_running(self) -> None:
        self._jump(StateFilter.RUNNING, -1)

    @property
    def reading_order(self) -> list[str]:
        """Every task as the graph reads: layer by layer, each in its reading order (it changes with the layout)."""
        graph, order = self._reading_order
        if graph is not self.graph:
            order = [name for column in self.graph.columns for name in column] if self.graph else []
            self._reading_order = (self.graph, order)
        return order

    def _jump(self, group: StateFilter, step: int) -> None:
        """Select the next (`step` 1) or previous (-1) task in one of `group`'s states, after the selection in
        reading order, wrapping around."""
        selected = self.selected_task
        if selected is None:
            return
        order, snapshots, states = self.reading_order, self.model.snapshots, group.states
        here = order.index(selected)
        for k in range(1, len(order) + 1):
            name = order[(here + k * step) % len(order)]
            if snapshots[name].state in states:
                if name == selected:
                    self.notify(f"no other {group.word} task", timeout=2)
                else:
                    self.select_task(name)
                return
        self.notify(f"no {group.word} task", timeout=2)

    # ------------------------------------------------------------------------------- timeline and critical path
    async def action_timeline(self) -> None:
        """`t`: the timeline in the graph's place (the list's too, if it is shown), or the graph back; the selection
        carries over both ways."""
        if self.timeline.active:
            self._hide_timeline()
            self._focus(self.canvas)
            self.call_after_refresh(self.canvas.scroll_to_selected)
            return
        if self.table.active:
            self.table.hide()
            self.panes.remove_class("-list")
        if not self.timeline.is_attached:
            self.timeline.styles.height = self.canvas.styles.height  # the split as the user left it
            await self.canvas.parent.mount(self.timeline, after=self.canvas)
        self.panes.add_class("-timeline")
        self.timeline.show(self.canvas.selected)
        self._focus(self.timeline)

    def _hide_timeline(self) -> None:
        if self.timeline.active:
            self.timeline.hide()
            self.panes.remove_class("-timeline")

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
            self._show_outlook()
        else:
            self.critical_panel.show_path(None, [], None)
            self._outlook_due = True
        self._refresh_outlook()

    @work(thread=True, group="expected", exit_on_error=False)
    def _load_expected(self) -> None:
        """Expected durations from the store's earlier runs (their journals are read: not on the UI thread)."""
        try:
            header = read_header(self.session.run.journal)  # the run's fingerprints, in this process or another
            found = seconds(expected_for_run(self.session.store, header, exclude=self.session.run.run_id))
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
        self._work_out_outlook(dict(model.snapshots), {name: list(segs) for name, segs in
                                                         model.timeline.segments.items()},
                               model.clock(), model.finished)

    # A description, or Textual writes one from the arguments' reprs: thousands of snapshots, on every call.
    @work(thread=True, group="outlook", exit_on_error=False, description="forecast")
    def _work_out_outlook(self, snapshots, segments, now: float, finished: bool) -> None:
        try:
            result = outlook(self._shape, snapshots, segments, now=now, expected=self._expected or {},
                             finished=finished)
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
            self._show_outlook()

    def _show_outlook(self) -> None:
        result = self._outlook
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

    # -------------------------------------------------------------------------------------------------- helpers
    def _focus(self, widget: Widget) -> None:
        """Focus `widget` before the next key is handled. `Widget.focus()` defers the move to the app's message
        queue, behind keys already typed: `t` then `z` at once zoomed the graph the timeline had just replaced."""
        widget.screen.set_focus(widget)

    def _may_control(self) -> bool:
        if self.read_only:
            self.notify(READ_ONLY, timeout=3)
            return False
        if not self.run_started:
            return False
        if self.model.stopping:
            self.notify("stopping: waiting for every process to exit")
            return False
        return True

    def _unfinished(self) -> list[str]:
        live = [n for n, s in self.model.snapshots.items() if s.state.active]
        return live + [n for n, s in self.model.snapshots.items() if not s.state.terminal and not s.state.active]

    def _describe(self, names: list[str]) -> list[str]:
        return [f"{n}  ({LOOKS[self.model.snapshots[n].state].word})" for n in names]

    # ------------------------------------------------------------------ viewing a run of another process
    # The session is then a RemoteRun (control/remote.py): `live` while its engine runs, then the post-mortem view.
    @property
    def viewing(self) -> bool:
        """The run lives in another process (its engine) and this app only views it."""
        return getattr(self.session, "live", None) is not None

    @property
    def read_only(self) -> bool:
        """The post-mortem view: the run is over (or its engine died); nothing can be controlled."""
        return getattr(self.session, "live", True) is False

    def _role(self) -> str:
        """What the header says of this view besides the run: foreground, attached or post-mortem."""
        if not self.viewing:
            return ""
        session = self.session
        pid = f"engine pid {session.engine_pid}" if session.engine_pid else "engine"
        if self.read_only:
            return "post-mortem" + (f" · {session.lost}" if session.lost else "") + " · read-only"
        silent = " · not answering" if getattr(session, "not_answering", None) else ""
        return f"{'foreground' if session.foreground else 'attached'} · {pid}{silent}"

    def _control(self, control: Callable[[], object]) -> None:
        """Run a control on a worker thread; a refusal (or an engine that went away) is told, not raised."""
        try:
            control()
        except (RerunRefused, Refused, NotLive) as exc:
            try:
                self.call_from_thread(self.notify, str(exc), severity="warning")
            except RuntimeError:  # the app is closing
                pass

    def _offers(self, binding: Binding) -> bool:
        """The help, the palette and the footer list `d` only where it works, on a run of another process, and no
        control that only answers "read-only" in the post-mortem view."""
        if self.read_only:
            return binding.action not in READ_ONLY_REFUSES
        return binding.action != "detach" or self.viewing

    def _key_label(self, binding: Binding) -> str | None:
        """A key as the footer names it here (None: not offered); `r` in the post-mortem view starts a resumed run."""
        if not self._offers(binding):
            return None
        return "Resume" if binding.action == "rerun" and self.read_only else binding.description

    def action_detach(self) -> None:
        """`d`: close this view and leave the run running in its own process."""
        if not self.viewing:
            self.notify("this run lives in this process: it can't go on without it", timeout=3)
        elif self.read_only:
            self.exit()
        else:
            self.exit(DETACHED)

    def _ask_viewer_quit(self) -> None:
        """`q` on a live run of another process. Enter takes the safe answer, never the one that kills tasks: the
        terminal that started the run stays on it (stopping it is `s`); a viewer that attached later detaches."""
        if self.model.stopping:
            self.notify("stopping: waiting for every process to exit")
            return
        # Going back is Esc (any dialog's way out); `c` would read as cancelling tasks, which it is not.
        stop, detach, back = ("stop", "Stop the run", "s"), ("detach", "Detach", "d"), ("back", "Back", "Esc")
        unfinished = len(self._unfinished())
        question = (f"Close this view of run [b]{escape(self.session.run.run_id)}[/b]? It is not finished: "
                    f"{unfinished} task{'' if unfinished == 1 else 's'} to go.")
        note = ("Detach: the run goes on in the background (tuidag attach shows it again). "
                "Stop: every task is cancelled.")
        if self.session.foreground:
            self.push_screen(ChoiceScreen(question, [stop, detach, back], "back", note), self._viewer_quit_chosen)
        else:
            self.push_screen(ChoiceScreen(question, [detach, stop, back], "detach", note), self._viewer_quit_chosen)

    def _viewer_quit_chosen(self, answer: str | None) -> None:
        if answer == "detach":
            self.exit(DETACHED)
        elif answer == "stop" and self.run_active:
            self._stop(self.session.stop)

    @on(EngineGone)
    def _engine_gone(self) -> None:
        """The engine ended the run, or died: what the journal recorded is on screen; nothing can be controlled."""
        self._drain()
        self.header.role = self._role()
        self.header.refresh()
        self.footer.refresh()  # the controls that only answer "read-only" leave it
        if self.model.stopping:
            self.exit()
        elif self.session.lost:
            self.notify(f"{self.session.lost}: this is the run as its journal recorded it (read-only; r starts a "
                        f"new run resuming from it)", title="Engine gone", severity="error", timeout=24 * 3600)

    @on(EngineNews)
    def _engine_news(self, news: EngineNews) -> None:
        """The engine stopped answering (SIGSTOP) or answers again; or, dead, its tasks' leftovers were killed."""
        self.header.role = self._role()
        self.header.refresh()
        if news.kind == NOT_ANSWERING:
            self.notify(f"{news.detail}: showing what the journal recorded; this view goes on live when it answers",
                        title="Not answering", severity="warning", timeout=10, markup=False)
        elif news.kind == ANSWERING:
            self.notify("the engine answers again: this view is live", timeout=5)
        else:
            self.notify(f"the run's engine died; this view {news.detail}", title="Cleaned up", severity="warning",
                        timeout=24 * 3600, markup=False)

    def _offer_resume(self) -> None:
        """`r` in the post-mortem view: a new run of the same file that reuses what succeeded here."""
        source = self.session.dag.source
        if source is None or not source.is_file():
            self.notify(f"can't resume: the DAG file {source or '(unknown)'} is gone", severity="warning")
            return
        question = (f"Start a new run of [b]{escape(str(source))}[/b] resuming from "
                    f"[b]{escape(self.session.run.run_id)}[/b]?")  # markup, with what it names escaped
        snapshots = self.model.snapshots
        items = [f"{name}  ({'reused if unchanged' if snapshots[name].state is S.SUCCEEDED else 'runs again'})"
                 for name in self.session.dag.topological_order]
        self.push_screen(ConfirmScreen(question, items, "Tasks that succeeded here are reused unless their "
                                                        "definition changed; the others run again."),
                         lambda yes: self.exit(RESUME) if yes else None)


DETACHED = "detach"  # the app's result when the user left the run running
RESUME = "resume"    # ... when the user asked for a new run resuming from this one
READ_ONLY = "read-only: the run is over"
READ_ONLY_REFUSES = ("cancel_branch", "cancel_all", "pause")  # keys that only say READ_ONLY in the post-mortem view


def _these(names: list[str]) -> str:
    return "This task" if len(names) == 1 else f"These {len(names)} tasks"
