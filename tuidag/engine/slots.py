"""Numbered resource slots and the rule that decides which waiting task gets them.

Each kind has `capacity` slots numbered 0..capacity-1; a task is given the lowest free numbers (its
TUIDAG_SLOTS_<KIND>, and CUDA_VISIBLE_DEVICES for GPUs, so two tasks never share a device).

Who gets freed slots (`admit`), over the tasks waiting for slots in the order they started waiting:
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

from typing import Hashable, Iterable, Mapping


class SlotPool:
    """Free slot numbers per kind. Not thread-safe: the scheduler calls it under its lock."""

    def __init__(self, capacities: Mapping[str, int]):
        self.capacity = dict(capacities)
        self._free = {kind: list(range(count)) for kind, count in capacities.items()}

    def in_use(self) -> dict[str, tuple[int, int]]:
        """kind -> (slots held, capacity)."""
        return {kind: (cap - len(self._free[kind]), cap) for kind, cap in self.capacity.items()}

    def fits(self, request: Mapping[str, int]) -> bool:
        return all(len(self._free[kind]) >= count for kind, count in request.items())

    def take(self, request: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The lowest free numbers of each kind asked for (call `fits` first)."""
        held = {}
        for kind, count in request.items():
            free = self._free[kind]
            held[kind] = tuple(free[:count])
            del free[:count]
        return held

    def give_back(self, held: Mapping[str, tuple[int, ...]]) -> None:
        for kind, indices in held.items():
            free = self._free[kind]
            free.extend(indices)
            free.sort()

    def admit(self, waiting: Iterable[tuple[Hashable, Mapping[str, int]]]
              ) -> tuple[list[tuple[Hashable, dict[str, tuple[int, ...]]]], dict[Hashable, list[str]]]:
        """Give slots to the waiters (key, request), in order, that may have them by the rule above. Returns the
        admitted (key, slots held) and, for the others, the kinds each waits for (short of, or reserved ahead)."""
        admitted = []
        blocked: dict[Hashable, list[str]] = {}
        reserved: set[str] = set()
        for key, request in waiting:
            behind = [kind for kind in request if kind in reserved]
            if not behind and self.fits(request):
                admitted.append((key, self.take(request)))
                continue
            short = [kind for kind, count in request.items() if len(self._free[kind]) < count]
            blocked[key] = list(dict.fromkeys(short + behind))
            reserved.update(request)
        return admitted, blocked
