"""The terminal UI of a run: header, graph canvas, log pane, footer (ui/viewer.py opens it on a run's engine).

The app reads its run through a `RunSource` (control/run_source.py). Its parts live in modules of their own, mixed
into `TuidagApp`: the event feed (ui/feed.py: the engine's events reach the UI through one inbox drained in
batches), the outlook worker (ui/outlook_worker.py: ETA and critical path on a thread), the keys and their help
(ui/bindings.py), the log pane's keys (ui/log_keys.py), the controls (ui/controls.py: cancel, re-run, pause, on
worker threads) and the roles (ui/roles.py: foreground, attached, post-mortem; quitting and signals); what they use
of the app is declared for the type checker in ui/app_host.py. Here: the widgets, the selection every view shares,
the list, the timeline, finding and jumping.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.widgets import Input

from ..control.run_source import RunSource, Usage
from ..engine import output_routing
from ..engine.events import Event, TaskSnapshot
from ..model.collector import collector_paused, freeze_survivors
from ..model.counts import counted
from ..model.forecast import shape_of
from ..model.state import TaskState
from ..store.journal import read_journal
from ..views.combined_log import CombinedLog
from ..views.fuzzy import FuzzyFinder
from ..views.headless import TASK_COLOURS
from ..views.layout.build import dag_deps, layout_deps
from ..views.layout.folding import Folding
from ..views.layout.layout import GraphLayout
from ..views.layout.style import LayoutStyle
from ..views.run_outlook import Outlook
from ..views.task_filter import TaskFilter
from .bindings import FOOTER_PRIORITY, RUN_BINDINGS, KeyHelp
from .controls import RunControls
from .dag_reshape import DagReshape
from .detail_keys import DetailKeys
from .feed import RunFeed
from .log_keys import LogKeys
from .messages import TaskSelected
from .outlook_worker import OutlookWorker
from .roles import Roles
from .run_model import RunModel, StateFilter, UsageSample
from .screens.finder import FinderScreen
from .widgets.critical_panel import CriticalPathPanel
from .widgets.graph.canvas import DagCanvas
from .widgets.key_footer import KeyFooter
from .widgets.log.view import LogView
from .widgets.run_header import RunHeader
from .widgets.split_panes import SplitPanes
from .widgets.task_name_bar import TaskNameBar
from .widgets.task_table import TaskTable
from .widgets.timeline import TimelineView

S = TaskState
DRAIN_INTERVAL = 1 / 20
TICK_INTERVAL = 1.0
GC_YOUNG_THRESHOLD = 2_500  # allocations between two collections of the youngest generation (Python default: 700)
USER_HOLD = 5.0  # seconds after the user acted on the selection during which the app does not move it


class SearchBar(Input):
    """The `/` prompt: Enter searches the log pane, Esc gives up (`on_close`)."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, on_close: Callable[[], None], *, placeholder: str, id: str) -> None:
        super().__init__(placeholder=placeholder, id=id)
        self._on_close = on_close

    def action_close(self) -> None:
        self._on_close()


class TuidagApp(RunFeed, DagReshape, OutlookWorker, KeyHelp, Roles, LogKeys, RunControls, DetailKeys, App[str]):
    """The run screen, on a `RunSource` (a `RemoteRun` for every shipped view); `start=False` never takes the run
    as started (no history, no controls) so a test can feed synthetic events through `engine_event`, and `clock`
    freezes time for deterministic snapshots."""

    CSS_PATH = "app.tcss"
    TITLE = "tuidag"
    AUTO_FOCUS = "#graph"  # not the first focusable widget (the hidden search bar): the footer is built for the graph
    BINDINGS = RUN_BINDINGS

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Textual's notice, with markup off unless asked for: messages hold task and DAG names, paths, searches."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def __init__(
        self,
        source: RunSource,
        *,
        exit_on_finish: bool = False,
        start: bool = True,
        clock: Callable[[], float] = time.time,
        signals: Iterable[int] = (),
        driver_class: type[Driver] | None = None,
        early_signals: list[int] | None = None,
    ):
        """`early_signals`: where the caller's own handlers note `signals` until the app installs its handlers (a
        signal in between is acted on when the app starts, not lost)."""
        super().__init__(driver_class=driver_class)
        self._early_signals = early_signals if early_signals is not None else []
        # Textual puts these in place of sys.stdout/sys.stderr while it runs: behind a router, what a Python task
        # running in this process prints reaches its log from the first write on, not only once another task starts
        # (a viewer of `tuidag run` runs no task; a program that serves its engine in its own process, as the tests
        # and benchmarks do, does).
        self._capture_stdout = output_routing.routed(self._capture_stdout)
        self._capture_stderr = output_routing.routed(self._capture_stderr)
        self.source = source
        self.exit_on_finish = exit_on_finish
        self._start = start
        self._signals = tuple(signals)
        self.run_started = False
        self._gc_threshold: tuple[int, ...] | None = None  # the collector's thresholds before the run started
        self._inbox: deque[Event | UsageSample] = deque()
        self._header_dirty = False
        self._header_painted = 0.0
        self._usage_seen: Usage = source.usage()  # the source's sample last passed to the model
        if self._usage_seen:
            self._inbox.append(UsageSample(dict(self._usage_seen)))
        self._combined_on = False
        self._combined: CombinedLog | None = None  # built when first looked at
        self._combined_pending: list[str] = []  # tasks started since the combined log was last looked at
        self._store_error_shown = False
        self._finder: FuzzyFinder | None = None  # built on the first `:`
        self._dag_error_shown = False  # the DAG file's errors were said (--watch): say when it loads again
        self._reading_order: tuple[GraphLayout | None, list[str]] = (None, [])  # of which layout, for ] [ } {
        self._user_moved = False  # the user moved the selection (the app's own moves don't count)
        self._user_acted_at = -USER_HOLD  # when the user last acted on the selection (c, r, a confirmation)
        self._moving_for_user = False  # the app is moving the selection itself (to the first failure)
        self._first_failure_seen = False
        dag = source.dag
        with collector_paused():
            self._unsubscribe = source.subscribe(self.engine_event)  # before the snapshot: nothing is missed
            self.model = RunModel(source.snapshot(), source.started, clock)
            self.model.paused = source.paused  # paused before this view came: the event is behind it
            self.model.watching = source.watching  # as is the start of watch mode
            if source.finished:  # it ended before the app subscribed (the post-mortem view, a quick run): the run's
                self.model.finished_at = source.ended_at  # clock stopped at its end, and no "finished" event will come
            self.model.seed_timeline(read_journal(source.run.journal))  # what happened before the app subscribed
            self.model.reshaped = False  # the source's DAG is the run's as it is now: the app starts with it
            self._prefix_colours = {
                name: TASK_COLOURS[i % len(TASK_COLOURS)] for i, name in enumerate(dag.topological_order)
            }
        # The widgets are kept here, not queried: timers may still fire while the screen is being torn down.
        self.header = RunHeader(dag.name, source.run.run_id, self.model, capacities=dag.resources, id="header")
        self.header.role = self._role()
        self.folding = Folding(dag_deps(dag), {name: group.instances for name, group in dag.groups.items()})
        self.canvas = DagCanvas(self.folding, self._layout, self.model, on_select=self._selection_moved, id="graph")
        self.canvas.title_prefix = f"{dag.name} · {counted(self.model.total, 'task')}"
        # Mounted on the first `L` (most runs never look at it); its selection moves the graph's, which shows the log.
        # Its default order is the graph's reading order, set when it is shown (the layout comes with the screen).
        self.table = TaskTable(
            dag.name,
            dag.topological_order,
            self.model,
            on_select=self.canvas.select,
            folding=self.folding,
            on_fold=self._fold_from_list,
            id="list",
        )
        self.canvas.on_refold = self._refolded
        # Mounted on the first `t`, like the list; its selection moves the graph's too.
        self.timeline = TimelineView(
            dag.name,
            self.model,
            lambda: self.reading_order,
            self._timeline_density,
            on_select=self.canvas.select,
            folding=self.folding,
            on_fold=self._fold_from_list,
            id="timeline",
        )
        self.log_pane = LogView(id="log")
        # Mounted on the first `/`: an Input costs the start-up a few ms of styles and timers, and most runs never
        # search.
        self.search_bar = SearchBar(
            self.close_search, placeholder="search the log: Enter searches, Esc closes", id="search"
        )
        self._focus_before_search: Widget = self.canvas  # the graph, the list, the timeline or the log pane
        self.footer = KeyFooter(priority=FOOTER_PRIORITY, label=self._key_label)
        self.panes = SplitPanes(id="panes")
        self._graph_focused_before_max = False
        self._task_filter = TaskFilter()
        self.task_name_bar = TaskNameBar(
            self.close_task_name_bar,
            placeholder="show the tasks whose names contain: Enter filters (empty: all), Esc closes",
            id="task-name",
        )
        self._focus_before_task_name: Widget = self.canvas  # the graph or the log pane
        # The forecast (ETA, critical path): expected durations are read from the store once the run started; the
        # outlook is worked out on a thread after task transitions, at most once a tick.
        self._shape = shape_of(dag, source.max_parallel)
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

    def _layout(self, deps: Mapping[str, Sequence[str]], style: LayoutStyle) -> GraphLayout:
        """Lay the graph out for the canvas (the DAG, its folded groups one node each), read back from the state
        dir's cache when it was laid out so before."""
        with collector_paused():  # the layout of a big DAG is tens of thousands of objects, all kept
            return layout_deps(deps, style, cache_dir=self.source.store.state_dir / "cache")

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
        if self.source.interrupted_by and not self.read_only:  # (the record of an interrupted run stays open)
            # The run was stopped by a signal before the app was built (its engine said so): show it
            # stopping and exit when it has (without this the app stayed open, its run over, its terminal gone).
            self.model.stopping = True
        elif self._early_signals:
            # A signal came after the caller reached the run but before the handlers above (a terminal closed while
            # the viewer opened): act on it now, as it would have been.
            self.call_later(self._on_signal, self._early_signals[-1])
        self.canvas.focus()
        self._select_first_failure(self.model.snapshots.values())  # tasks that failed before the app subscribed
        self._say_earlier_dag_errors()
        if self.model.finished and not self.read_only:
            self.call_later(self._on_finished)  # as if the end came now: the path, and --exit-on-finish
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
        # After the first frame: reading earlier runs' journals takes tenths of a second of a thread's time (the
        # interpreter's, shared with the screen) when the state dir holds runs of thousands of tasks.
        self.call_after_refresh(self._load_expected)

    def on_unmount(self) -> None:
        gc.unfreeze()
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
        self._unsubscribe()
        loop = asyncio.get_running_loop()
        for signum in self._signals:
            loop.remove_signal_handler(signum)

    @property
    def run_active(self) -> bool:
        """Tasks may still be running or start: quitting must stop them first."""
        return self.run_started and not self.source.finished

    # ------------------------------------------------------------------------------------------------ selection
    @property
    def selected_task(self) -> str | None:
        """The one selection every view shares (the graph's, the list's, the finder's): the task keys act on."""
        return self.table.selected if self.table.active else self.canvas.selected

    def select_task(self, name: str, *, unfold: bool = True) -> None:
        """Select `name` in every view, bring it into view and show its log. An instance of a folded group: the
        group unfolded, so the instance shows (`unfold=False`: the group's tile selected, the instance's log shown)."""
        group = self.folding.group_of.get(name)
        if unfold and group is not None and group in self.folding.folded:
            self.canvas.unfold(group, name)
        self.canvas.select(name)
        self.table.select(name)
        self.timeline.select(name)

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
                self.select_task(first.name, unfold=False)  # a sweep's graph stays as the user left it
            finally:
                self._moving_for_user = False

    def _show_log_of(self, task: str) -> None:
        """The selection moved (called by the canvas right away, so both repaint in one frame)."""
        if self.folding.is_group(task):  # a folded group's tile: the log of its instance most worth reading
            task = self._instance_to_show(task)
        if not self._combined_on:
            self.log_pane.show_file(self.source.run.log_path(task), task)

    def _shown_task(self) -> str | None:
        """The graph's selection as a task: a folded group's instance most worth reading."""
        selected = self.canvas.selected
        return self._instance_to_show(selected) if selected and self.folding.is_group(selected) else selected

    def _fold_from_list(self, group: str, unfold: bool) -> None:
        """`+` / `-` in the list or the timeline: the graph folds as they do (one folding for every view)."""
        if unfold:
            self.canvas.unfold(group)
        else:
            self.canvas.fold(group)

    def _refolded(self) -> None:
        """A group was folded or unfolded: the list and the timeline show it so, with the graph's selection."""
        if self.table.active:
            self.table.selected = self.canvas.selected
            self.table.set_order(self.reading_order)
            self.table.rebuild()
        if self.timeline.active:
            self.timeline.selected = self.canvas.selected
            self.timeline.relist()

    def _instance_to_show(self, group: str) -> str:
        """A group's first failed instance, else its first running one, else its first."""
        instances = self.folding.groups[group]
        snapshots = self.model.snapshots
        for states in ((S.FAILED,), (S.RUNNING, S.CANCELLING, S.RETRYING)):
            found = next((i for i in instances if snapshots[i].state in states), None)
            if found is not None:
                return found
        return instances[0]

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
            await self.panes.mount(self.table, after=self.canvas)
        self.panes.add_class("-list")
        self.table.set_order(self.reading_order)
        self.table.show(self._shown_task(), width)
        self._focus(self.table)

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.close_search()
        query = event.value
        if query and not self.log_pane.search(query):
            self.notify(f"not found: {query}", severity="warning")

    @on(Input.Submitted, "#task-name")
    def _task_name_submitted(self, event: Input.Submitted) -> None:
        self.close_task_name_bar()
        self._set_task_filter(self._task_filter.with_name(event.value))

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
            order = (
                self.folding.expand([name for column in self.graph.columns for name in column]) if self.graph else []
            )
            self._reading_order = (self.graph, order)
        return order

    def _jump(self, group: StateFilter, step: int) -> None:
        """Select the next (`step` 1) or previous (-1) task in one of `group`'s states, after the selection in
        reading order, wrapping around."""
        selected = self.selected_task
        if selected is None:
            return
        order, snapshots, states = self.reading_order, self.model.snapshots, group.states
        here = order.index(self.folding.instances(selected)[0])
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
            await self.panes.mount(self.timeline, after=self.canvas)
        self.panes.add_class("-timeline")
        self.timeline.show(self._shown_task())
        self._focus(self.timeline)

    def _hide_timeline(self) -> None:
        if self.timeline.active:
            self.timeline.hide()
            self.panes.remove_class("-timeline")

    # -------------------------------------------------------------------------------------------------- helpers
    def _focus(self, widget: Widget) -> None:
        """Focus `widget` before the next key is handled. `Widget.focus()` defers the move to the app's message
        queue, behind keys already typed: `t` then `z` at once zoomed the graph the timeline had just replaced."""
        widget.screen.set_focus(widget)
