"""The journal's hand-formatted task lines say exactly what the generic JSON encoding of the record says."""

from __future__ import annotations

import json

from hypothesis import given

from journal_events import task_events
from tuidag.engine.events import RunEvent, TaskEvent, TaskSnapshot
from tuidag.model.state import TaskState
from tuidag.store.journal import JournalWriter, read_journal, replay, task_line

_FIELDS = ("attempt", "reason", "exit_code", "started_at", "finished_at", "pid", "create_time", "reused")


def generic_record(event: TaskEvent) -> dict:
    """The record as a plain dict, the way any JSON encoder would be given it."""
    snap = event.snapshot
    record = {
        "type": "task",
        "seq": event.seq,
        "t": event.time,
        "task": snap.name,
        "from": event.old.value if event.old else None,
        "to": snap.state.value,
    }
    for name in _FIELDS:
        value = getattr(snap, name)
        if value is not None and value is not False:
            record[name] = value
    if snap.value is not None and snap.state is TaskState.SUCCEEDED:
        try:  # kept only when JSON gives it back exactly (what --resume hands to dependents)
            decoded = json.loads(json.dumps(snap.value, allow_nan=False))
        except (TypeError, ValueError):
            decoded = None
        if decoded is not None and decoded == snap.value:
            record["value"] = decoded
        else:
            record["value_repr"] = repr(snap.value)[:200]
    return record


@given(task_events())
def test_task_line_matches_the_generic_encoding(event):
    line = task_line(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == generic_record(event)


def test_written_events_replay_to_the_last_state(tmp_path):
    path = tmp_path / "journal.jsonl"
    writer = JournalWriter(path, {"tasks": ["a"]})
    snap = TaskSnapshot("a", TaskState.RUNNING, attempt=1, started_at=10.5, pid=4242, create_time=9.25)
    writer.record([TaskEvent(1, 10.5, TaskState.QUEUED, snap)])
    writer.record(
        [
            RunEvent(2, 10.7, "paused"),
            TaskEvent(
                3,
                11.0,
                TaskState.RUNNING,
                snap.evolve(state=TaskState.FAILED, exit_code=3, reason='exit code 3 "quoted"\n', finished_at=11.0),
            ),
        ]
    )
    writer.close()
    assert [r.get("seq") for r in read_journal(path)] == [None, 1, 2, 3]
    task = replay(path).tasks["a"]
    assert (task.state, task.exit_code, task.reason, task.pids) == (
        TaskState.FAILED,
        3,
        'exit code 3 "quoted"\n',
        [(4242, 9.25)],
    )
