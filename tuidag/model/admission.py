"""Which tasks waiting for resource slots get them now: one rule, followed by the engine's scheduler
(engine/slots.py, on numbered slots) and played forward by the forecast (forecast.py, on counts), so the ETA
cannot assume an order the scheduler would not take.

Over the tasks waiting for slots, in the order they started waiting:
- A task asking for no slots never waits here: it goes straight to the `max_parallel` queue, so a task waiting for a
  GPU never holds up a CPU-only task behind it (no head-of-line blocking). Likewise a waiter that asks only for kinds
  nobody ahead of it is waiting for starts as soon as its slots are free.
- A waiter that cannot have its slots now keeps its place: every kind it asks for is reserved for it, and no later
  waiter may take slots of those kinds until it has started. Without that, a task asking for 2 GPUs could wait
  forever behind a stream of 1-GPU tasks, each taking a GPU the moment one frees up (starvation of large requests).
  The reservation covers the kinds the waiter is not short of too (if it waits for a GPU, a later task may not take
  the database slot it will also need, or it would then wait for that).
Durations are unknown, so no later task is let past a reservation on the guess that it would finish in time
("backfilling"): slots of a reserved kind may stay idle until the waiter ahead can start.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def admit(
    waiting: Iterable[tuple[K, Mapping[str, int]]], free: Mapping[str, int], *, stop_early: bool = False
) -> tuple[list[K], dict[K, list[str]]]:
    """The waiters `(key, request)` (kind -> slots, each kind one of `free`'s) that get their slots now by the rule
    above, in order, given the free slots of each kind; and, for each of the others, the kinds it waits for (those
    it is short of, then those reserved by a waiter ahead of it). Nothing is taken: the caller takes the admitted
    waiters' slots, in order.

    `stop_early`: stop looking once every kind is used up or reserved, since no waiter further back could start;
    the waiters not looked at are in neither answer. The forecast, which needs no reasons, admits after every task
    that ends: on a queue of thousands waiting for one GPU this keeps each call short."""
    left = dict(free)
    admitted: list[K] = []
    blocked: dict[K, list[str]] = {}
    reserved: set[str] = set()
    for key, request in waiting:  # loops rather than all(...): the forecast calls this for every task that ends
        if stop_early:
            for kind, count in left.items():
                if count and kind not in reserved:
                    break
            else:
                break  # every kind used up or reserved
        if reserved.isdisjoint(request):
            for kind, count in request.items():
                if left[kind] < count:
                    break
            else:
                for kind, count in request.items():
                    left[kind] -= count
                admitted.append(key)
                continue
        behind = [kind for kind in request if kind in reserved]
        short = [kind for kind, count in request.items() if left[kind] < count]
        blocked[key] = list(dict.fromkeys(short + behind))
        reserved.update(request)
    return admitted, blocked
