"""The log pane's keys: searching it (`/`, `n`, `N`), following and wrapping, its size (`m`, `+`, `-`), and the
combined view of every task's output (`a`) with its filters (`b` branch, `T` names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..views.task_filter import TaskFilter

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
