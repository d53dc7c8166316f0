"""What the app's parts read of the app they are mixed into, for the type checker only.

`TuidagApp` (ui/app.py) is built from parts in modules of their own (the feed, the outlook worker, the keys and their
help, the log pane's keys, the controls, the roles), each a class mixed into it that uses the app's widgets, its state
and the other parts' methods. Each part derives from `AppHost` while type checking (from `object` when running), so what
it uses of the app is declared once, here, with its type: the attributes `TuidagApp.__init__` sets and, abstract, the
methods and properties defined in app.py or in another part (the checker refuses an app that lacks one of them).
Nothing imports this module at run time.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Iterable

from textual.app import App
from textual.widget import Widget

from ..control.run_source import RunSource, Usage
from ..engine.events import Event, TaskSnapshot
from ..model.forecast import ForecastShape
from ..views.combined_log import CombinedLog
from ..views.fuzzy import FuzzyFinder
from ..views.layout.folding import Folding
from ..views.layout.layout import GraphLayout
from ..views.run_outlook import Outlook
from ..views.task_filter import TaskFilter
from .app import SearchBar
from .run_model import RunModel, UsageSample
from .widgets.critical_panel import CriticalPathPanel
from .widgets.graph.canvas import DagCanvas
from .widgets.key_footer import KeyFooter
from .widgets.log.view import LogView
from .widgets.run_header import RunHeader
from .widgets.split_panes import SplitPanes
from .widgets.task_name_bar import TaskNameBar
from .widgets.task_table import TaskTable
from .widgets.timeline import TimelineView


class AppHost(App[str]):
    """The app as its parts see it (ui/app.py sets every attribute here in `TuidagApp.__init__`)."""

    source: RunSource
    model: RunModel
    exit_on_finish: bool
    run_started: bool

    # The widgets.
    header: RunHeader
    canvas: DagCanvas
    folding: Folding
    table: TaskTable
    timeline: TimelineView
    log_pane: LogView
    search_bar: SearchBar
    task_name_bar: TaskNameBar
    footer: KeyFooter
    panes: SplitPanes
    critical_panel: CriticalPathPanel

    # The event feed (ui/feed.py).
    _inbox: deque[Event | UsageSample]
    _header_dirty: bool
    _header_painted: float
    _usage_seen: Usage
    _first_failure_seen: bool
    _store_error_shown: bool
    _combined_on: bool
    _combined: CombinedLog | None
    _combined_pending: list[str]
    _prefix_colours: dict[str, int]

    # The log pane's keys (ui/log_keys.py).
    _focus_before_search: Widget
    _focus_before_task_name: Widget
    _graph_focused_before_max: bool
    _task_filter: TaskFilter

    # The DAG file's edits (ui/dag_reshape.py).
    _finder: FuzzyFinder | None
    _dag_error_shown: bool

    # The outlook (ui/outlook_worker.py).
    _shape: ForecastShape
    _expected: dict[str, float] | None
    _outlook: Outlook | None
    _outlook_due: bool
    _outlook_busy: bool
    _outlook_at: float
    _critical_on: bool

    # Defined in ui/app.py.
    @property
    @abstractmethod
    def graph(self) -> GraphLayout | None: ...

    @property
    @abstractmethod
    def selected_task(self) -> str | None: ...

    @property
    @abstractmethod
    def run_active(self) -> bool: ...

    @property
    @abstractmethod
    def reading_order(self) -> list[str]: ...

    @abstractmethod
    def _select_first_failure(self, snapshots: Iterable[TaskSnapshot]) -> None: ...

    @abstractmethod
    def _focus(self, widget: Widget) -> None: ...

    @abstractmethod
    def _user_acts(self) -> None: ...

    @abstractmethod
    def _instance_to_show(self, group: str) -> str: ...

    @abstractmethod
    def select_task(self, name: str, *, unfold: bool = True) -> None: ...

    # Defined by one part, used by another.
    @property
    @abstractmethod
    def read_only(self) -> bool: ...  # ui/roles.py

    @property
    @abstractmethod
    def combined(self) -> CombinedLog: ...  # ui/feed.py

    @abstractmethod
    def _drain(self) -> None: ...  # ui/feed.py

    @abstractmethod
    def _reshape(self) -> None: ...  # ui/dag_reshape.py

    @abstractmethod
    def _refresh_outlook(self) -> None: ...  # ui/outlook_worker.py

    @abstractmethod
    def _offer_resume(self) -> None: ...  # ui/roles.py

    @abstractmethod
    def _unfinished(self) -> list[str]: ...  # ui/controls.py

    @abstractmethod
    def _control(self, control: Callable[[], object]) -> None: ...  # ui/controls.py
