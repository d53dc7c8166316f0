"""Matrix groups on the graph: each folded group is one node standing for all its instances.

A sweep of a thousand instances is one tile until the user unfolds it (`+`, Enter), so the graph reads as the
pipeline the user wrote. Folding is a change of graph, not of drawing: a folded group's instances are replaced by
one node named as the group, the edges to and from any of them become edges to and from it, and the result is laid
out (and cached) like any DAG. A thousand folded instances lay out as one node: the layout of the graph a user sees
first no longer grows with the size of the sweep.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence


class Folding:
    """Which groups are folded, and the graph they make. `deps` is the whole DAG (name -> dependencies, in a
    topological order) and `groups` each group's instances; every group starts folded."""

    def __init__(self, deps: Mapping[str, Sequence[str]], groups: Mapping[str, Sequence[str]]):
        self._deps = deps
        self.groups = {name: tuple(instances) for name, instances in groups.items() if instances}
        self.group_of = {i: name for name, instances in self.groups.items() for i in instances}
        self.folded: set[str] = set(self.groups)
        self._made: dict[frozenset[str], dict[str, list[str]]] = {}

    @property
    def key(self) -> frozenset[str]:
        return frozenset(self.folded)

    def tile_of(self, name: str) -> str:
        """The node `name` is drawn as: its group while that is folded, else itself (a group's name stays itself)."""
        group = self.group_of.get(name)
        return group if group is not None and group in self.folded else name

    def is_group(self, name: str) -> bool:
        return name in self.groups

    def instances(self, name: str) -> tuple[str, ...]:
        """The tasks a node stands for: a group's instances, or the task itself."""
        return self.groups.get(name, (name,))

    def fold(self, group: str) -> bool:
        """Fold `group` (False if it already was, or is no group)."""
        if group not in self.groups or group in self.folded:
            return False
        self.folded.add(group)
        return True

    def unfold(self, group: str) -> bool:
        if group not in self.folded:
            return False
        self.folded.discard(group)
        return True

    def deps(self) -> dict[str, list[str]]:
        """The graph as drawn now: name -> dependencies, in a topological order (kept as the DAG's where it can be:
        a folded group comes where its first instance could), made once per set of folded groups."""
        key = self.key
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = self._make()
        return made

    def _make(self) -> dict[str, list[str]]:
        tile_of = self.tile_of
        position: dict[str, int] = {}
        deps: dict[str, dict[str, None]] = {}
        for i, (name, parents) in enumerate(self._deps.items()):
            node = tile_of(name)
            position.setdefault(node, i)
            into = deps.setdefault(node, {})
            for d in parents:
                dn = tile_of(d)
                if dn != node:
                    into[dn] = None
        # Kahn's order, earliest first by where each node first appears: the DAG's own order when nothing is folded.
        waiting = {node: len(ds) for node, ds in deps.items()}
        children: dict[str, list[str]] = {node: [] for node in deps}
        for node, ds in deps.items():
            for d in ds:
                children[d].append(node)
        ready = [(position[n], n) for n, k in waiting.items() if k == 0]
        heapq.heapify(ready)
        order: dict[str, list[str]] = {}
        while ready:
            _, node = heapq.heappop(ready)
            order[node] = list(deps[node])
            for c in children[node]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    heapq.heappush(ready, (position[c], c))
        return order

    def expand(self, names: Sequence[str]) -> list[str]:
        """`names` (nodes as drawn) with each group replaced by its instances: the tasks they stand for, in order."""
        out: list[str] = []
        for name in names:
            out.extend(self.groups.get(name, (name,)))
        return out

    def collapse(self, names: Sequence[str]) -> list[str]:
        """`names` (tasks, in some order) with the instances of each folded group replaced by the group, where its
        first instance is: a list's rows as the graph's tiles are folded."""
        if not self.folded:
            return list(names)
        out: list[str] = []
        seen: set[str] = set()
        tile_of = self.tile_of
        for name in names:
            node = tile_of(name)
            if node == name:
                out.append(name)
            elif node not in seen:
                seen.add(node)
                out.append(node)
        return out
