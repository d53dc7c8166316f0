"""Messages between the run screen's widgets, the engine and the app (rare events only: never one per log line)."""

from __future__ import annotations

from textual.message import Message


class TaskSelected(Message):
    """The graph's selection moved to another task: the log pane follows it."""

    def __init__(self, task: str) -> None:
        super().__init__()
        self.task = task


class RunFinished(Message):
    """Posted from an engine thread when the run's last task ended, so the app shows it without waiting for a tick."""


class EngineGone(Message):
    """Posted from a viewer's reader thread when the engine of the run it views ended or died."""


class EngineNews(Message):
    """Posted from a viewer's reader thread when its engine stops answering, answers again, or (dead) had its tasks'
    leftovers killed by the viewer: `kind` is the run event's, `detail` what to tell."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__()
        self.kind = kind
        self.detail = detail


class DagNews(Message):
    """Posted from an engine thread when, under --watch, the DAG file was reloaded (`kind` "dag", `detail` what
    changed) or could not be (`dag-error`, `detail` its located errors)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__()
        self.kind = kind
        self.detail = detail
