"""The engine's slot pool and the forecast follow one admission rule: for any slot demands and capacities they let
the same tasks have their slots in the same order, so an ETA never assumes an order the scheduler would not take."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from tuidag.engine.slots import SlotPool
from tuidag.model.forecast import simulate

KINDS = ("gpu", "db", "licence")


@st.composite
def slot_demands(draw):
    """(order, capacities, requests, durations): independent tasks, each asking for some slots of the declared
    kinds (at most the capacity, as `model.resources.resolve` ensures) or none."""
    capacities = draw(st.dictionaries(st.sampled_from(KINDS), st.integers(1, 3), min_size=1))
    tasks = draw(
        st.lists(
            st.tuples(st.dictionaries(st.sampled_from(KINDS), st.integers(1, 3)), st.integers(1, 4)),
            min_size=1,
            max_size=12,
        )
    )
    order = [f"t{i}" for i in range(len(tasks))]
    requests = {
        name: asked
        for name, (wanted, _) in zip(order, tasks)
        if (asked := {kind: min(count, capacities[kind]) for kind, count in wanted.items() if kind in capacities})
    }
    durations = {name: float(seconds) for name, (_, seconds) in zip(order, tasks)}
    return order, capacities, requests, durations


def pool_start_order(order, capacities, requests, durations) -> list[tuple[str, float]]:
    """(task, start) in the order the engine's `SlotPool` lets the tasks start: all queued at 0 in `order`, no
    thread limit, and, as the scheduler does, slots given back one ending task at a time, each followed by an
    `admit` over the waiters in the order they started waiting. Ends at the same time go in the order of starts."""
    pool = SlotPool(capacities)
    started: list[tuple[str, float]] = []
    ends: list[tuple[float, int, str, dict]] = []
    waiting: list[tuple[str, dict[str, int]]] = []

    def admit(now: float) -> None:
        nonlocal waiting
        admitted, blocked = pool.admit(waiting)
        for name, held in admitted:
            started.append((name, now))
            heapq.heappush(ends, (now + durations[name], len(started), name, held))
        waiting = [item for item in waiting if item[0] in blocked]

    for name in order:
        if name in requests:
            waiting.append((name, requests[name]))
            admit(0.0)
        else:
            started.append((name, 0.0))
    while ends:
        end, _, _, held = heapq.heappop(ends)
        pool.give_back(held)
        admit(end)
    assert not waiting, "a waiter never got its slots"
    return started


@settings(max_examples=100, deadline=None)
@given(slot_demands())
def test_the_engines_slot_pool_and_the_forecast_admit_the_same_tasks_in_the_same_order(demands):
    order, capacities, requests, durations = demands
    forecast = simulate(
        {},
        order,
        now=0.0,
        finished={},
        running={},
        expected=durations,
        max_parallel=len(order),
        capacities=capacities,
        requests=requests,
    )
    assert [(name, start) for name, (start, _) in forecast.spans.items()] == pool_start_order(
        order, capacities, requests, durations
    )
