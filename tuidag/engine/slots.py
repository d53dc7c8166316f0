"""Numbered resource slots for the tasks that model/admission.py's rule lets have them.

Each kind has `capacity` slots numbered 0..capacity-1; a task is given the lowest free numbers (its
TUIDAG_SLOTS_<KIND>, and CUDA_VISIBLE_DEVICES for GPUs, so two tasks never share a device).

Who gets freed slots is that rule's answer; the forecast plays the same rule forward on counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model.admission import K, admit


class SlotPool:
    """Free slot numbers per kind. Not thread-safe: the scheduler calls it under its lock."""

    def __init__(self, capacities: Mapping[str, int]):
        self.capacity = dict(capacities)
        self._free = {kind: list(range(count)) for kind, count in capacities.items()}

    def in_use(self) -> dict[str, tuple[int, int]]:
        """kind -> (slots held, capacity)."""
        return {kind: (cap - len(self._free[kind]), cap) for kind, cap in self.capacity.items()}

    def take(self, request: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The lowest free numbers of each kind asked for (there must be enough)."""
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

    def admit(
        self, waiting: Iterable[tuple[K, Mapping[str, int]]]
    ) -> tuple[list[tuple[K, dict[str, tuple[int, ...]]]], dict[K, list[str]]]:
        """Give slots to the waiters (key, request), in order, that may have them by model/admission.py's rule.
        Returns the admitted (key, slots held) and, for the others, the kinds each waits for (short of, or reserved
        ahead)."""
        waiting = list(waiting)
        admitted, blocked = admit(waiting, {kind: len(free) for kind, free in self._free.items()})
        requests = dict(waiting)
        return [(key, self.take(requests[key])) for key in admitted], blocked
