"""The ETA simulation, the critical path and the speedups, on hand-made DAGs whose answers are worked out by hand."""

from __future__ import annotations

import pytest

from tuidag.model.forecast import critical_path, shape_of, simulate, speedups, task_spans
from tuidag.model.state import TaskState as S
from tuidag.model.timeline import TimelineRecorder
from tuidag.store.run_dag import dag_from_header


def sim(
    deps,
    order,
    expected,
    *,
    now=0.0,
    finished=None,
    running=None,
    max_parallel=8,
    capacities=None,
    requests=None,
    blocked=frozenset(),
):
    return simulate(
        deps,
        order,
        now=now,
        finished=finished or {},
        running=running or {},
        expected=expected,
        max_parallel=max_parallel,
        capacities=capacities or {},
        requests=requests or {},
        blocked=blocked,
    )


DIAMOND = {"b": ["a"], "c": ["a"], "d": ["b", "c"]}


def test_chain_ends_after_the_sum_and_is_its_own_critical_path():
    f = sim({"b": ["a"], "c": ["b"]}, "abc", {"a": 2, "b": 3, "c": 1})
    assert f.end == 6 and f.unknown == ()
    assert f.spans == {"a": (0, 2), "b": (2, 5), "c": (5, 6)}
    assert critical_path({"b": ["a"], "c": ["b"]}, f.spans) == ["a", "b", "c"]


def test_diamond_waits_for_its_longest_branch():
    f = sim(DIAMOND, "abcd", {"a": 1, "b": 5, "c": 2, "d": 1})
    assert f.end == 7 and f.spans["d"] == (6, 7)
    assert critical_path(DIAMOND, f.spans) == ["a", "b", "d"]


def test_max_parallel_one_runs_in_order_not_in_parallel():
    f = sim({}, "xyz", {"x": 1, "y": 2, "z": 3}, max_parallel=1)
    assert f.spans == {"x": (0, 1), "y": (1, 3), "z": (3, 6)} and f.end == 6


def test_max_parallel_two_fills_the_freed_thread_first_come_first_served():
    f = sim({}, "wxyz", {"w": 4, "x": 1, "y": 1, "z": 1}, max_parallel=2)
    assert f.spans == {"w": (0, 4), "x": (0, 1), "y": (1, 2), "z": (2, 3)} and f.end == 4


def test_one_gpu_serialises_its_users_but_not_the_others():
    f = sim({}, "abc", {"a": 2, "b": 3, "c": 1}, capacities={"gpu": 1}, requests={"a": {"gpu": 1}, "b": {"gpu": 1}})
    assert f.spans == {"a": (0, 2), "b": (2, 5), "c": (0, 1)} and f.end == 5


def test_a_large_request_reserves_its_kind_so_a_later_small_one_does_not_pass_it():
    # gpu capacity 2: a takes one; b needs two and waits, reserving gpu; c (one gpu) may not take the free one.
    f = sim(
        {},
        "abc",
        {"a": 4, "b": 1, "c": 1},
        capacities={"gpu": 2},
        requests={"a": {"gpu": 1}, "b": {"gpu": 2}, "c": {"gpu": 1}},
    )
    assert f.spans == {"a": (0, 4), "b": (4, 5), "c": (5, 6)} and f.end == 6


def test_a_task_admitted_to_slots_holds_them_while_it_waits_for_a_thread():
    # max_parallel 1: a runs; b gets the db slot at once but waits for the thread; c, also wanting db, waits for b.
    f = sim(
        {},
        "abcd",
        {"a": 3, "b": 1, "c": 1, "d": 1},
        max_parallel=1,
        capacities={"db": 1},
        requests={"b": {"db": 1}, "c": {"db": 1}},
    )
    assert f.spans == {"a": (0, 3), "b": (3, 4), "d": (4, 5), "c": (5, 6)}


def test_running_tasks_end_when_expected_or_any_moment_when_late():
    deps = {"b": ["a"]}
    f = sim(deps, "abc", {"a": 3, "b": 2, "c": 10}, now=10, running={"a": 5, "c": 8})
    assert f.spans == {"a": (5, 10), "b": (10, 12), "c": (8, 18)} and f.end == 18


def test_running_tasks_hold_their_threads_and_slots():
    f = sim(
        {},
        "abc",
        {"a": 5, "b": 1, "c": 1},
        now=2,
        running={"a": 0},
        max_parallel=2,
        capacities={"gpu": 1},
        requests={"a": {"gpu": 1}, "b": {"gpu": 1}},
    )
    assert f.spans["b"] == (5, 6) and f.spans["c"] == (2, 3)


def test_finished_tasks_keep_their_spans_and_release_their_children_in_the_order_they_ended():
    deps = {"c": ["b"], "d": ["a"]}
    f = sim(deps, "abcd", {"c": 1, "d": 1}, now=10, finished={"a": (0, 9), "b": (0, 2)}, max_parallel=1)
    assert f.spans == {"a": (0, 9), "b": (0, 2), "c": (10, 11), "d": (11, 12)} and f.end == 12


def test_blocked_tasks_and_their_downstream_never_run():
    deps = {"b": ["a"], "c": ["b"], "e": ["d"]}
    f = sim(deps, "abcde", {"c": 100, "e": 1, "d": 1}, now=5, finished={"a": (0, 1)}, blocked={"b"})
    assert set(f.spans) == {"a", "d", "e"} and f.end == 7


def test_a_failed_task_keeps_its_span_and_nothing_below_it_runs():
    deps = {"b": ["a"], "c": ["b"]}
    f = sim(deps, "abcd", {"b": 9, "c": 9, "d": 2}, now=3, finished={"a": (0, 3)}, blocked={"a"})
    assert f.spans == {"a": (0, 3), "d": (3, 5)} and f.end == 5


def test_an_unknown_duration_gives_no_end_but_a_lower_bound():
    f = sim(DIAMOND, "abcd", {"a": 1, "b": 5, "d": 1})
    assert f.end is None and f.unknown == ("c",) and f.earliest_end == 7


def test_nothing_left_ends_when_the_last_task_ended():
    f = sim({"b": ["a"]}, "ab", {}, now=50, finished={"a": (0, 3), "b": (3, 8)})
    assert f.end == 8 and critical_path({"b": ["a"]}, f.spans) == ["a", "b"]


def test_a_request_beyond_the_capacity_is_capped_instead_of_waiting_forever():
    f = sim({}, "a", {"a": 2}, capacities={"gpu": 1}, requests={"a": {"gpu": 4, "tpu": 1}})
    assert f.end == 2


def test_critical_path_of_actual_spans_follows_the_dependency_each_task_waited_for():
    deps = {"c": ["a", "b"], "d": ["c"], "e": ["a"]}
    spans = {"a": (0, 4), "b": (0, 6), "c": (6, 9), "d": (9, 12), "e": (4, 10)}
    assert critical_path(deps, spans) == ["b", "c", "d"]
    assert critical_path(deps, {}) == []


def test_a_task_held_for_a_slot_follows_the_task_that_freed_it():
    # Both trainings need the one GPU: large waited for small, so small is on the path though no edge links them.
    deps = {"small": ["feat"], "large": ["feat"], "eval": ["large"], "lint": []}
    f = sim(
        deps,
        ["feat", "small", "large", "eval", "lint"],
        {"feat": 1, "small": 2, "large": 3, "eval": 1, "lint": 5},
        capacities={"gpu": 1},
        requests={"small": {"gpu": 1}, "large": {"gpu": 1}},
    )
    assert f.spans["large"] == (3, 6) and f.end == 7
    assert critical_path(deps, f.spans) == ["feat", "small", "large", "eval"]


def test_a_late_start_with_nothing_ending_before_it_follows_its_dependency():
    # b started 5 s after a ended and nothing ended in between (a pause): a is still what it waited for.
    assert critical_path({"b": ["a"]}, {"a": (0, 1), "b": (6, 7), "c": (0, 0.5)}) == ["a", "b"]
    # Within the tolerance, a start right after a dependency's end is the dependency's doing.
    assert critical_path({"b": ["a"]}, {"a": (0, 1), "x": (0, 1.01), "b": (1.02, 2)}) == ["a", "b"]


def test_speedups_rank_the_tasks_whose_halving_shortens_the_run_most():
    expected = {"a": 1, "b": 5, "c": 4, "d": 1}
    # Halving b (5 -> 2.5) leaves c (4) on the path: 7 -> 6; a or d save 0.5; c is not on the path.
    assert speedups(DIAMOND, "abcd", now=0, finished={}, running={}, expected=expected, max_parallel=4) == [
        ("b", 1.0),
        ("a", 0.5),
        ("d", 0.5),
    ]


def test_speedups_count_the_thread_a_task_waited_for():
    # max_parallel 1: the run is the sum; halving any task saves half of it, the longest first.
    got = speedups({}, "xyz", now=0, finished={}, running={}, expected={"x": 2, "y": 6, "z": 4}, max_parallel=1)
    assert got == [("y", 3.0), ("z", 2.0), ("x", 1.0)]
    assert speedups({}, "xy", now=0, finished={}, running={}, expected={"x": 2}, max_parallel=1) == []


def test_speedups_skip_finished_tasks():
    got = speedups(
        {"b": ["a"]}, "ab", now=5, finished={"a": (0, 5)}, running={}, expected={"a": 5, "b": 2}, max_parallel=1
    )
    assert got == [("b", 1.0)]


def test_shape_of_a_stored_dag_feeds_the_simulation():
    header = {
        "dag": "d",
        "tasks": ["a", "b", "c"],
        "deps": {"c": ["a", "b"]},
        "capacities": {"gpu": 1},
        "requests": {"a": {"gpu": 1}, "b": {"gpu": 1}},
        "max_parallel": 3,
    }
    shape = shape_of(dag_from_header(header))
    f = simulate(**shape._asdict(), now=0, finished={}, running={}, expected={"a": 1, "b": 2, "c": 1})
    assert f.spans == {"a": (0, 1), "b": (1, 3), "c": (3, 4)}


def test_task_spans_cover_retries_and_leave_out_the_first_wait():
    rec = TimelineRecorder()
    for old, new, t, attempt in [
        (None, S.QUEUED, 0, 0),
        (S.QUEUED, S.RUNNING, 2, 1),
        (S.RUNNING, S.RETRYING, 4, 1),
        (S.RETRYING, S.RUNNING, 5, 2),
        (S.RUNNING, S.SUCCEEDED, 9, 2),
    ]:
        rec.record("a", old, new, t, attempt)
    rec.record("b", None, S.QUEUED, 0, 0)
    rec.record("c", None, S.QUEUED, 0, 0)
    rec.record("c", S.QUEUED, S.RUNNING, 1, 1)
    assert task_spans(rec.segments, now=20) == {"a": (2, 9), "c": (1, 20)}


def test_simulating_a_dag_of_thousands_keeps_every_task():
    n = 5000
    deps = {f"t{i}": [f"t{i // 2}"] for i in range(1, n)}
    order = [f"t{i}" for i in range(n)]
    f = sim(
        deps,
        order,
        {name: 1.0 for name in order},
        max_parallel=4,
        capacities={"gpu": 2},
        requests={name: {"gpu": 1} for name in order[::3]},
    )
    assert f.end is not None and len(f.spans) == n


def test_speedups_below_the_threshold_are_neither_named_nor_simulated(monkeypatch):
    import tuidag.model.forecast as forecast

    calls = []
    real = forecast.simulate
    monkeypatch.setattr(forecast, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    deps = {"b": ["a"], "c": ["b"]}
    got = speedups(
        deps,
        "abc",
        now=0,
        finished={},
        running={},
        expected={"a": 0.01, "b": 4, "c": 0.02},
        max_parallel=1,
        min_saved=0.5,
    )
    assert [name for name, _ in got] == ["b"] and got[0][1] == pytest.approx(2.0)
    assert len(calls) == 2  # the forecast, then b only


def test_a_run_of_quick_tasks_is_not_simulated_at_all_for_speedups(monkeypatch):
    """No task is long enough to save `min_saved` when halved: the answer is empty without even the base forecast
    (a 1,000-task run of quick commands spent ~10 ms of its end on it)."""
    import tuidag.model.forecast as forecast

    calls = []
    real = forecast.simulate
    monkeypatch.setattr(forecast, "simulate", lambda *a, **k: calls.append(1) or real(*a, **k))
    expected = {f"t{i}": 0.01 for i in range(100)}
    deps = {f"t{i}": [f"t{i - 1}"] for i in range(1, 100)}
    assert (
        speedups(
            deps, list(expected), now=0, finished={}, running={}, expected=expected, max_parallel=8, min_saved=0.05
        )
        == []
    )
    assert calls == []
