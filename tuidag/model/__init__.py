"""The DAG model: specs, states, located errors and the loaders that produce them. Imports nothing else of tuidag."""

from .errors import DagError, DagErrors, Location
from .spec import DEFAULT_KILL_GRACE, DagSpec, FailurePolicy, TaskSpec
from .state import TERMINAL, TaskState

__all__ = [
    "DEFAULT_KILL_GRACE",
    "TERMINAL",
    "DagError",
    "DagErrors",
    "DagSpec",
    "FailurePolicy",
    "Location",
    "TaskSpec",
    "TaskState",
]
