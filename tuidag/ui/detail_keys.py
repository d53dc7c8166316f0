"""Part of `TuidagApp` (ui/app.py): `i` (and Enter on a task's tile or row) opens the selected task's detail
(ui/screens/task_detail.py); choosing a dependency or dependent there selects it everywhere and shows its detail."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .screens.task_detail import TaskDetailScreen

if TYPE_CHECKING:  # mixed into TuidagApp (ui/app.py)
    from .app_host import AppHost
else:
    AppHost = object


class DetailKeys(AppHost):
    def action_task_detail(self) -> None:
        """The selected task's detail; on a folded matrix group, that of the instance its log shows."""
        name = self.selected_task
        if name is not None and self.folding.is_group(name):
            name = self._instance_to_show(name)
        if name is not None and name in self.source.dag.tasks:
            self.open_detail(name)

    def open_detail(self, name: str) -> None:
        self.push_screen(TaskDetailScreen(self.source, name, self.model.clock), self._detail_closed)

    def _detail_closed(self, jump: str | None) -> None:
        if jump is not None:
            self.select_task(jump)
            self.open_detail(jump)
