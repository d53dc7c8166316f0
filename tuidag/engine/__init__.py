"""The engine: scheduler, executors, process control and the events observers receive. Never imports textual.

Names are loaded on first use, so importing `tuidag.engine.events` (as the journal does) doesn't pull in the
scheduler, subprocess and psutil."""

from importlib import import_module

_EXPORTS = {
    "Event": "events",
    "RunEvent": "events",
    "TaskEvent": "events",
    "TaskSnapshot": "events",
    "Attempt": "executor",
    "AttemptResult": "executor",
    "Executor": "executor",
    "RunningAttempt": "executor",
    "LocalExecutor": "local",
    "RunSummary": "scheduler",
    "Scheduler": "scheduler",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tuidag.engine' has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
