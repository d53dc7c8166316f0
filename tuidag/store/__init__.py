"""The run store: state dir, run folders, journals, per-task logs and history. Never imports textual."""

from .journal import JournalWriter, Replay, TaskRecord, read_journal, replay
from .runs import RunDir, RunStore, StateDirError, default_state_dir, log_file_name, write_summary

__all__ = [
    "JournalWriter",
    "Replay",
    "RunDir",
    "RunStore",
    "StateDirError",
    "TaskRecord",
    "default_state_dir",
    "log_file_name",
    "read_journal",
    "replay",
    "write_summary",
]
