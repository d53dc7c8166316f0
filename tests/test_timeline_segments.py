"""Segments of a task's time: the account the timeline view, the report and the critical path share."""

from tuidag.model.state import TaskState as S
from tuidag.model.timeline import SegmentKind, TimelineRecorder


def test_retry_and_rerun_make_one_running_segment_per_attempt_with_waits_between():
    rec = TimelineRecorder()
    for old, new, t, attempt in [
        (S.PENDING, S.QUEUED, 0.0, 0),
        (S.QUEUED, S.RUNNING, 1.0, 1),
        (S.RUNNING, S.RETRYING, 3.0, 1),
        (S.RETRYING, S.RUNNING, 4.0, 2),
        (S.RUNNING, S.FAILED, 6.0, 2),
        (S.FAILED, S.PENDING, 10.0, 2),
        (S.PENDING, S.QUEUED, 10.0, 2),
        (S.QUEUED, S.RUNNING, 10.5, 3),
        (S.RUNNING, S.CANCELLING, 11.0, 3),
        (S.CANCELLING, S.CANCELLED, 12.0, 3),
    ]:
        rec.record("a", old, new, t, attempt)
    segs = rec.segments["a"]
    assert [(s.kind, s.start, s.end, s.attempt, s.outcome) for s in segs] == [
        (SegmentKind.WAITING, 0.0, 1.0, 1, None),
        (SegmentKind.RUNNING, 1.0, 3.0, 1, S.RETRYING),
        (SegmentKind.WAITING, 3.0, 4.0, 2, None),
        (SegmentKind.RUNNING, 4.0, 6.0, 2, S.FAILED),
        (SegmentKind.WAITING, 10.0, 10.5, 3, None),
        (SegmentKind.RUNNING, 10.5, 12.0, 3, S.CANCELLED),
    ]
    assert [s.attempt for s in rec.attempts("a")] == [1, 2, 3]
    assert rec.span() == (0.0, 12.0)


def test_a_running_task_has_an_open_segment_and_journal_records_fold_the_same_way():
    rec = TimelineRecorder()
    rec.feed_journal(
        [
            {"type": "run", "event": "created"},
            {"type": "task", "t": 5.0, "task": "b", "from": None, "to": "QUEUED", "attempt": 0},
            {"type": "task", "t": 6.0, "task": "b", "from": "QUEUED", "to": "RUNNING", "attempt": 1},
            {"type": "task", "t": "bad", "task": "b", "from": "RUNNING", "to": "FAILED"},
        ]
    )
    assert [(s.kind, s.end) for s in rec.segments["b"]] == [(SegmentKind.WAITING, 6.0), (SegmentKind.RUNNING, None)]
    assert rec.span() == (5.0, None)
    assert rec.segments["b"][-1].duration(now=9.0) == 3.0
