"""A folded matrix group's timeline row: its instances' segments in one row, a cell shared by several showing the
most telling (a failure, then an attempt still going on, then any other attempt, then a wait)."""

from __future__ import annotations

from tuidag.model.state import TaskState as S
from tuidag.model.timeline import Segment, SegmentKind
from tuidag.views.timeline_layout import group_segments, row_paints

RUN, WAIT = SegmentKind.RUNNING, SegmentKind.WAITING


def test_a_group_row_shows_a_failure_over_a_running_attempt_over_a_success_over_a_wait():
    instances = [
        [Segment("a", WAIT, 0, 2, 1), Segment("a", RUN, 2, 6, 1, S.FAILED)],  # fails over cells 2-5
        [Segment("b", RUN, 0, 4, 1, S.SUCCEEDED)],  # done over cells 0-3
        [Segment("c", WAIT, 0, 5, 1), Segment("c", RUN, 5, None, 1)],  # waits, then runs from 5 on
    ]
    paints = row_paints(group_segments(instances), S.RUNNING, 0.0, 1.0, 9, now=8.0)
    states = [(p.kind.value[0], p.state.value[:4]) if p else None for p in paints]
    assert states == [
        ("r", "SUCC"),  # b's success beats a's and c's waits
        ("r", "SUCC"),
        ("r", "FAIL"),  # a's failure beats b's success
        ("r", "FAIL"),
        ("r", "FAIL"),
        ("r", "FAIL"),  # and c's running attempt
        ("r", "RUNN"),  # c still running, until now
        ("r", "RUNN"),
        None,
    ]


def test_segments_that_look_alike_are_merged_where_they_overlap():
    waits = [[Segment(f"i{k}", WAIT, k * 0.005, 10, 1)] for k in range(1000)]  # a thousand instances queued
    done = [[Segment("a", RUN, 0, 2, 1, S.SUCCEEDED)], [Segment("b", RUN, 1, 3, 1, S.SUCCEEDED)]]
    apart = [[Segment("c", RUN, 5, 6, 1, S.SUCCEEDED)]]
    live = [[Segment("d", RUN, 4, None, 1)], [Segment("e", RUN, 7, 8, 1)]]
    merged = group_segments([*waits, *done, *apart, *live])
    assert [(s.kind, s.start, s.end, s.outcome) for s in merged] == [
        (WAIT, 0, 10, None),
        (RUN, 0, 3, S.SUCCEEDED),
        (RUN, 5, 6, S.SUCCEEDED),
        (RUN, 4, None, None),  # still going on: it covers e, which starts later
    ]
