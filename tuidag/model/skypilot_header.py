"""A SkyPilot pipeline's header, read as SkyPilot reads it: its name, its edges (`downstream:` or `edges:`), and a job
group's `execution: parallel`, `primary_tasks` and `termination_delay`; the edges checked against the tasks' names.
`HeaderReader` is the part of the pipeline reader (skypilot_loader.py) that reads it."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .durations import MAX_DURATION, DurationTooLong
from .errors import Location, did_you_mean
from .skypilot_task import TaskReader
from .spec import JobGroup
from .yaml_nodes import _INT, _NULL, _STR, _describe, _typed
from .yaml_values import _SKIP

CHAIN_HEADER_KEYS = ("name", "downstream", "edges", "execution")
JOB_GROUP_HEADER_KEYS = ("name", "execution", "primary_tasks", "termination_delay", "inter_connection", "placement")
HEADER_KEYS = CHAIN_HEADER_KEYS + JOB_GROUP_HEADER_KEYS[2:]
EDGE_KEYS = ("source", "target", "data")

GROUP_NAME = re.compile(r"[A-Za-z0-9_-]+")
_DURATION = re.compile(r"([0-9]+)([smhdwSMHDW]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class Edge:
    source: str
    target: str
    source_node: Node
    target_node: Node
    where: Node  # the node an edge error (duplicate, cycle) points at
    source_what: str = "downstream"  # how messages name each end
    target_what: str = "downstream"


@dataclass
class Header:
    name: str | None = None
    edges: list[Edge] | None = None
    group: bool = False
    primary: Node | None = None
    delay: Node | None = None
    name_node: Node | None = None


class HeaderReader(TaskReader):
    """The pipeline reader's part that reads the header and its edges."""

    task_nodes: dict[str, Node]  # task name -> the node that names it (set by the pipeline reader)

    def header(self, fields: dict[str, tuple[Node, Node]]) -> Header:
        header = Header()
        execution = fields.get("execution")
        if execution is not None:
            value = execution[1]
            if isinstance(value, ScalarNode) and value.value == "parallel":
                header.group = True
            elif not (isinstance(value, ScalarNode) and value.value == "serial"):
                self.fail(
                    value,
                    f"execution must be 'serial' (a pipeline) or 'parallel' (a job group), got {_describe(value)}",
                )
        shape: Node | None = None  # the key of `downstream` or `edges`, whichever came first
        for key, (key_node, value) in fields.items():
            if key == "name":
                text = self.string(value, "name")
                header.name = None if text is _SKIP else text
                header.name_node = value
            elif key == "execution":
                continue
            elif key in ("downstream", "edges") and header.group:
                self.note(
                    key_node, f"'{key}' is ignored in a job group (execution: parallel): its tasks all run at once"
                )
            elif key in ("downstream", "edges"):
                if shape is not None:
                    self.fail(key_node, f"'{key}' and '{shape.value}' both give the edges: use one of them")
                    continue
                shape = key_node
                edges = self.downstream(value) if key == "downstream" else self.edge_list(value)
                header.edges = edges or None  # empty edges: a chain, as SkyPilot reads them (`if downstream:`)
            elif key in JOB_GROUP_HEADER_KEYS and header.group:
                if key == "primary_tasks":
                    header.primary = value
                elif key == "termination_delay":
                    header.delay = value
                elif key == "inter_connection" and _typed(value, "tag:yaml.org,2002:bool") is None:
                    self.fail(value, f"inter_connection must be true or false, got {_describe(value)}")
                else:
                    self.note(key_node, f"'{key}' is ignored when running locally")
            elif key in JOB_GROUP_HEADER_KEYS:
                self.fail(key_node, f"'{key}' is for job groups: add 'execution: parallel' to the header")
            elif header.group:
                self.note(
                    key_node,
                    f"unknown key '{key}' in the job group header is ignored{did_you_mean(key, JOB_GROUP_HEADER_KEYS)}",
                )
            else:
                self.fail(key_node, f"unknown key '{key}' in the pipeline header{did_you_mean(key, HEADER_KEYS)}")
        if header.group:
            if header.name is None:
                self.fail(
                    header.name_node or next(iter(fields.values()))[0],
                    "a job group (execution: parallel) needs a 'name' in its header",
                )
            elif not GROUP_NAME.fullmatch(header.name):
                assert header.name_node is not None  # set with the name
                self.fail(
                    header.name_node, f"job group name {header.name!r} may only contain letters, digits, '-' and '_'"
                )
        return header

    def downstream(self, node: Node) -> list[Edge]:
        if node.tag == _NULL:
            return []
        if not isinstance(node, MappingNode):
            self.fail(
                node,
                f"downstream must be a mapping of task names to the tasks that depend on them, got {_describe(node)}",
            )
            return []
        edges: list[Edge] = []
        for source, (key, value) in self.mapping(node, "task").items():
            if value.tag == _NULL:
                continue
            entries = value.value if isinstance(value, SequenceNode) else [value]
            if isinstance(value, MappingNode):
                self.fail(
                    value,
                    f"downstream of '{source}' must be a task name or a list of task names, got {_describe(value)}",
                )
                continue
            for entry in entries:
                if not isinstance(entry, ScalarNode) or entry.tag == _NULL or not entry.value:
                    self.fail(entry, f"downstream of '{source}' entries must be task names, got {_describe(entry)}")
                    continue
                edges.append(Edge(source, entry.value, key, entry, entry, "downstream", f"downstream of '{source}'"))
        return edges

    def edge_list(self, node: Node) -> list[Edge]:
        if node.tag == _NULL:
            return []
        if not isinstance(node, SequenceNode):
            self.fail(node, f"edges must be a list of {{source: TASK, target: TASK}} mappings, got {_describe(node)}")
            return []
        edges: list[Edge] = []
        for item in node.value:
            if not isinstance(item, MappingNode):
                self.fail(item, f"an edge must be a mapping with 'source' and 'target', got {_describe(item)}")
                continue
            fields = self.mapping(item, "key")
            ends: dict[str, Node] = {}
            for key, (key_node, value) in fields.items():
                if key not in EDGE_KEYS:
                    self.fail(key_node, f"edge: unknown key '{key}'{did_you_mean(key, EDGE_KEYS)}")
                elif key != "data":  # data is for SkyPilot's own use; accepted whatever it holds
                    if isinstance(value, ScalarNode) and value.tag != _NULL and value.value:
                        ends[key] = value
                    else:
                        self.fail(value, f"edge {key} must be a task name, got {_describe(value)}")
            missing = [end for end in ("source", "target") if end not in fields]
            if missing:
                self.fail(item, f"edge has no {' or '.join(repr(m) for m in missing)}")
            elif len(ends) == 2:
                edges.append(
                    Edge(
                        ends["source"].value,
                        ends["target"].value,
                        ends["source"],
                        ends["target"],
                        item,
                        "edge source",
                        "edge target",
                    )
                )
        return edges

    def dependencies_of(self, names: list[str], edges: list[Edge] | None) -> dict[str, list[tuple[str, Location]]]:
        """task -> [(dependency, where the edge is written)], from the edges, or a chain in document order."""
        deps: dict[str, list[tuple[str, Location]]] = {task: [] for task in names}
        if edges is None:
            for before, after in itertools.pairwise(names):
                deps[after].append((before, self.at(self.task_nodes[after])))
            return deps
        first_seen: dict[tuple[str, str], Node] = {}
        for edge in edges:
            known = True
            for end, node, what in (
                (edge.source, edge.source_node, edge.source_what),
                (edge.target, edge.target_node, edge.target_what),
            ):
                if end not in deps:
                    self.fail(node, f"{what}: unknown task '{end}'{did_you_mean(end, names)}")
                    known = False
            if not known:
                continue
            pair = (edge.source, edge.target)
            if pair in first_seen:
                line = first_seen[pair].start_mark.line + 1
                self.note(
                    edge.where,
                    f"edge {edge.source} -> {edge.target} is given twice (first on line {line}): it is one edge",
                )
                continue
            first_seen[pair] = edge.where
            deps[edge.target].append((edge.source, self.at(edge.where)))
        return deps

    # Tasks.

    def job_group(self, header: Header, names: list[str]) -> JobGroup:
        primary = list(names)
        node = header.primary
        if node is not None and node.tag != _NULL:
            if not isinstance(node, SequenceNode):
                self.fail(node, f"primary_tasks must be a list of task names, got {_describe(node)}")
            elif node.value:  # an empty list: every task is primary
                primary = []
                for entry in node.value:
                    if not (isinstance(entry, ScalarNode) and entry.tag == _STR):
                        self.fail(entry, f"primary_tasks entries must be task names, got {_describe(entry)}")
                    elif entry.value not in names:
                        self.fail(
                            entry, f"primary_tasks: unknown task '{entry.value}'{did_you_mean(entry.value, names)}"
                        )
                    else:
                        primary.append(entry.value)
        delays: dict[str, float] = {}
        node = header.delay
        if node is not None and node.tag != _NULL:
            if isinstance(node, MappingNode):
                default = 0.0
                for key, (key_node, value) in self.mapping(node, "task").items():
                    seconds = self.sky_duration(value, f"termination_delay[{key!r}]")
                    if key == "default":
                        default = seconds
                    elif key not in names:
                        self.fail(
                            key_node,
                            f"termination_delay: unknown task '{key}' (or 'default'){did_you_mean(key, names)}",
                        )
                    else:
                        delays[key] = seconds
                delays = {name: delays.get(name, default) for name in names if name not in primary}
            else:
                seconds = self.sky_duration(node, "termination_delay")
                delays = {name: seconds for name in names if name not in primary}
        return JobGroup(tuple(primary), {name: delay for name, delay in delays.items() if delay})

    def sky_duration(self, node: Node, what: str) -> float:
        """SkyPilot's duration: a whole number of seconds, or one with a unit (s, m, h, d, w)."""
        match = _DURATION.fullmatch(node.value) if isinstance(node, ScalarNode) and node.tag in (_STR, _INT) else None
        if match is None:
            self.fail(node, f"{what} must be a duration like 30, 30s, 5m or 1h, got {_describe(node)}")
            return 0.0
        digits = match.group(1).lstrip("0")
        seconds = float(int(digits or "0") * _UNIT_SECONDS[match.group(2).lower()]) if len(digits) < 16 else math.inf
        if seconds > MAX_DURATION:
            self.fail(node, f"{what} is too long: {DurationTooLong.LIMIT}, got {_describe(node)}")
            return 0.0
        return seconds
