"""Messages between the run screen's widgets and the app (rare, user-driven events only: never one per log line)."""
from __future__ import annotations

from textual.message import Message


class TaskSelected(Message):
    """The graph's selection moved to another task: the log pane follows it."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task
