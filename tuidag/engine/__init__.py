"""The engine: scheduler, executors, process control and the events observers receive. Never imports textual."""
from .events import Event, RunEvent, TaskEvent, TaskSnapshot
from .executor import Attempt, AttemptResult, Executor, RunningAttempt
from .local import LocalExecutor
from .scheduler import RunSummary, Scheduler

__all__ = [
    "Attempt", "AttemptResult", "Event", "Executor", "LocalExecutor", "RunEvent", "RunSummary", "RunningAttempt",
    "Scheduler", "TaskEvent", "TaskSnapshot",
]
