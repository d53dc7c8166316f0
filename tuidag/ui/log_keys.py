"""The log pane's keys: searching it (`/`, `n`, `N`), following and wrapping, its size (`m`, `+`, `-`), the
combined view of every task's output (`a`) with its filters (`b` branch, `T` names), copy mode (`v`; its own keys are
the pane's, widgets/log/copy_mode.py), and the selected task's log in the pager (`e`), the editor (`E`) or its path on
the clipboard (`Y`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import SuspendNotSupported

from ..views.task_filter import TaskFilter
from .external_viewer import DEFAULT_EDITOR, DEFAULT_PAGER, ViewerProblem, open_on_terminal, viewer_command

if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class LogKeys(AppHost):
    """Part of `TuidagApp` (ui/app.py): what the log pane's keys do."""

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

    def action_search_next(self) -> None:
        self._search_again(self.log_pane.search_next)

    def action_search_prev(self) -> None:
        self._search_again(self.log_pane.search_prev)

    def _search_again(self, step: Callable[[], bool]) -> None:
        if not self.log_pane.search_text:
            self.notify("nothing to repeat: search with / first")
        elif not step():
            self.notify(f"not found: {self.log_pane.search_text}", severity="warning")

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
            task = self.selected_task
            if self.folding.is_group(task):
                task = self._instance_to_show(task)
            self.log_pane.show_file(self.source.run.log_path(task), task)

    # ------------------------------------------------------------------- copying, the pager and the editor
    def action_copy_mode(self) -> None:
        """`v`: copy mode in the log pane (focused, so its keys work)."""
        if self.log_pane.enter_copy_mode():
            self._focus(self.log_pane)
        else:
            self.notify("nothing to copy: the log is empty")

    def action_open_pager(self) -> None:
        self._open_log_in("PAGER", DEFAULT_PAGER, copy=False)

    def action_open_editor(self) -> None:
        self._open_log_in("EDITOR", DEFAULT_EDITOR, copy=True)

    def action_copy_log_path(self) -> None:
        path = self._selected_log()
        if path is None:
            self.notify("no task selected")
            return
        self.copy_to_clipboard(str(path))
        self.notify(f"copied the log's path: {path}", timeout=3)

    def _selected_log(self) -> Path | None:
        """The selected task's log file (a folded group's: the log of the instance its tile shows), absolute: a path
        pasted elsewhere or given to a program must not depend on where tuidag was started."""
        task = self.selected_task
        if task is None:
            return None
        if self.folding.is_group(task):
            task = self._instance_to_show(task)
        return self.source.run.log_path(task).absolute()

    def _open_log_in(self, variable: str, default: str, *, copy: bool) -> None:
        """The selected task's log, as it is now, in `$variable`'s program, the app suspended until it exits."""
        path = self._selected_log()
        if path is None or not path.exists():
            self.notify("no log to open: no task selected" if path is None else "no log yet: the task has not started")
            return
        try:
            argv = viewer_command(variable, default)
        except ViewerProblem as exc:
            self.notify(str(exc), severity="error")
            return
        problem: OSError | None = None
        try:
            with self.suspend():
                try:  # nothing may leave this block by an exception: Textual would not resume the app
                    open_on_terminal(argv, path, copy=copy)
                except OSError as exc:
                    problem = exc
        except SuspendNotSupported:
            self.notify(
                f"${variable} cannot run here (this view cannot hand its terminal over, as in a browser): the log is "
                f"{path} (Y copies its path)",
                severity="warning",
                timeout=8,
            )
            return
        if problem is not None:
            self.notify(f"${variable}: {argv[0]} failed: {problem}", severity="error")

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

    def _combined_only(self, key: str) -> bool:
        if not self._combined_on:
            self.notify(f"{key} filters the combined view: press a to show it first")
        return self._combined_on

    def _set_task_filter(self, task_filter: TaskFilter) -> None:
        """Re-filter the lines the combined log holds (nothing is read again) and show them from the end."""
        self._task_filter = task_filter
        tasks = task_filter.tasks(self.source.dag)
        self.combined.show_only(tasks)
        self.log_pane.show_combined(self.combined, task_filter.describe())
        if tasks is not None and not tasks:
            self.notify(f"no task matches: {task_filter.describe()}", severity="warning")
