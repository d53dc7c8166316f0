"""The SkyPilot front end: SkyPilot YAML (a managed-job pipeline, a job group or a single task) run locally as it is.

    name: pipeline                     # the header (optional): the pipeline's name, and its edges if not a chain
    downstream:                        # task -> the tasks that depend on it ...
      data-processing: [infer_A, infer_B]
      infer_A: [eval]
      infer_B: [eval]
    # edges: [{source: data-processing, target: infer_A, data: {...}}, ...]   # ... or this shape; data is ignored
    # execution: parallel              # ... or a job group: every task at once (primary_tasks, termination_delay)
    ---
    name: data-processing              # every further document is a task
    setup: pip install -r requirements.txt
    run: python process.py
    envs: {SPLIT: train}
    workdir: .                         # relative to the folder tuidag runs in, as for `sky`
    resources: {accelerators: A100:1}  # cloud-only keys: checked, then a note says they are ignored

The file is read as SkyPilot reads it (sky/utils/dag_utils.py; the DAG branch's `load_dag_from_yaml` for the edges):
- without edges (no `downstream`/`edges`, or empty ones) the tasks form a chain in document order; a first document
  that holds task keys is a task, not a header; a file of one document with task keys is a one-task pipeline;
- unnamed tasks are called `<pipeline>-0`, `<pipeline>-1`, ...; a single task takes the header's name; a name used
  twice in a chain is made unique (`step`, `step-2`), with a note; an edge given twice is one edge, with a note;
- `execution: parallel` makes a job group: every task starts at once, and once the `primary_tasks` (all, by default)
  have ended the others are stopped after their `termination_delay`;
- each task document is read by skypilot_task.py (values, variables, workdir, resources).
`setup` runs before `run` and a failing setup fails the task with reason "setup failed"; a task without `run`
succeeds once its setup has. Commands run with bash, as on a SkyPilot node (with sh where there is no bash), in
`workdir` (default: the pipeline file's folder), with the variables of a one-node cluster (`runtime_env`).

The file is read from the composed node tree with the YAML front end's reader, so errors have the same located
`FILE:LINE:COL: message` form; keys SkyPilot itself does not know are errors, keys it knows but that only mean
something on a cloud produce one `Note` each.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yaml import SafeLoader, YAMLError
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from .durations import MAX_DURATION, DurationTooLong
from .errors import DagError, DagErrors, Location, Note, did_you_mean
from .skypilot_task import IGNORED_TASK_KEYS, TASK_KEYS, TaskReader
from .spec import DEFAULT_SHELL, RUN_ID_PLACEHOLDER, DagSpec, JobGroup, TaskSpec
from .validate import graph_errors
from .yaml_loader import _SKIP
from .yaml_nodes import (
    _INT,
    _NULL,
    _STR,
    CSafeLoader,
    _describe,
    _offset_location,
    _syntax_error,
    _typed,
    check_tree_depth,
    recursion_error,
)

CHAIN_HEADER_KEYS = ("name", "downstream", "edges", "execution")
JOB_GROUP_HEADER_KEYS = ("name", "execution", "primary_tasks", "termination_delay", "inter_connection", "placement")
HEADER_KEYS = CHAIN_HEADER_KEYS + JOB_GROUP_HEADER_KEYS[2:]
EDGE_KEYS = ("source", "target", "data")
#: Keys of tuidag's own format that SkyPilot does not have: a single document with one is tuidag's.
_OWN_FORMAT_KEYS = ("tasks", "env", "max_parallel", "on_failure", "kill_grace")
#: What a one-node SkyPilot cluster tells its tasks; the task's own envs win.
SKYPILOT_ENV = {"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NUM_NODES": "1", "SKYPILOT_NODE_IPS": "127.0.0.1"}
#: SkyPilot's job group names and job names (dag_utils.py).
_GROUP_NAME = re.compile(r"[A-Za-z0-9_-]+")
#: SkyPilot's durations (TIME_PATTERN_SECONDS): whole numbers of seconds, or with one of these units.
_DURATION = re.compile(r"([0-9]+)([smhdwSMHDW]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def pipeline_documents(text: str, file: str) -> list[Node] | None:
    """The file's documents if it is SkyPilot YAML by content (more than one document, and the first is a mapping
    without `tasks:`; or one document that is a SkyPilot task, see `is_task_document`), else None: the file is for
    tuidag's own loader, which also reports syntax errors in a first document. A syntax error further down a
    pipeline is raised here, located."""
    loaders = (CSafeLoader, SafeLoader) if CSafeLoader is not None else (SafeLoader,)
    for loader_class in loaders:
        loader = loader_class(text)
        documents: list[Node] = []
        try:
            while loader.check_node():
                node = loader.get_node()
                assert node is not None  # check_node() said one follows
                documents.append(node)
                check_tree_depth(documents[-1], file)
                if len(documents) == 1 and not _may_start_pipeline(documents[0]):
                    return None
        except RecursionError:
            raise recursion_error(loader, text, file) from None
        except YAMLError as exc:
            if loader_class is not SafeLoader:
                continue  # libyaml is only the fast path: PyYAML's messages are the ones users read
            if not documents:
                return None
            if isinstance(exc, MarkedYAMLError):
                raise DagErrors([_syntax_error(exc, file)]) from None
            if isinstance(exc, ReaderError):
                problem = f"invalid YAML: unacceptable character #x{exc.character:04x}: {exc.reason}"
                raise DagErrors([DagError(problem, _offset_location(file, text, exc.position))]) from None
            raise
        finally:
            loader.dispose()
        if len(documents) == 1 and not is_task_document(documents[0]):
            return None
        return documents or None
    return None


def _may_start_pipeline(node: Node) -> bool:
    return isinstance(node, MappingNode) and not any(
        isinstance(key, ScalarNode) and key.value == "tasks" for key, _ in node.value
    )


def is_task_document(node: Node | None) -> bool:
    """Whether a file's only document is a SkyPilot task (decided by its keys, whatever the file is called): a
    mapping with a key only SkyPilot tasks have (`run`, `setup`, `envs`, `resources`, ...) and none only tuidag's
    own format has (`tasks`, `env`, `max_parallel`, ...), which then reports what is wrong in its own terms."""
    if not isinstance(node, MappingNode):
        return False
    keys = {key.value for key, _ in node.value if isinstance(key, ScalarNode)}
    skypilot_only = (set(TASK_KEYS) | set(IGNORED_TASK_KEYS)) - {"name", "workdir"}
    return bool(keys & skypilot_only) and not keys & set(_OWN_FORMAT_KEYS)


def load_skypilot(
    path: Path, documents: list[Node], notes: list[Note] | None = None, env: Mapping[str, str] | None = None
) -> DagSpec:
    """The DagSpec of SkyPilot YAML's composed documents (see `pipeline_documents`), with `env` (`--env`) given to
    every task. Raises DagErrors listing every problem; appends a Note per ignored key to `notes`."""
    reader = _PipelineReader(str(path), notes if notes is not None else [], env or {})
    dag = reader.pipeline(documents, path)
    if reader.errors:
        raise DagErrors(reader.errors, partial=dag)
    return dag


def runtime_env(
    dag_name: str, tasks: list[str], gpus: Mapping[str, int], job_group: bool = False
) -> dict[str, tuple[dict, dict]]:
    """Task -> (variables, variables with the run's id) a SkyPilot node gives a task besides SKYPILOT_ENV: the
    task's accelerators per node, the cluster, a job group's name, and the managed job's task ids
    (`sky-managed-<run>_<task>-<index>`, unique per task and run, listed one per line in file order in
    SKYPILOT_TASK_IDS as SkyPilot lists them)."""
    cluster = json.dumps({"cluster_name": dag_name, "cloud": "local", "region": None, "zone": None})
    group = {"SKYPILOT_JOBGROUP_NAME": dag_name} if job_group else {}
    ids = [
        f"sky-managed-{RUN_ID_PLACEHOLDER}_{dag_name if len(tasks) == 1 else f'{dag_name}_{task}'}-{index}"
        for index, task in enumerate(tasks)
    ]
    return {
        task: (
            {"SKYPILOT_NUM_GPUS_PER_NODE": str(gpus.get(task, 0)), "SKYPILOT_CLUSTER_INFO": cluster, **group},
            {"SKYPILOT_TASK_ID": task_id, "SKYPILOT_TASK_IDS": "\n".join(ids)},
        )
        for task, task_id in zip(tasks, ids)
    }


@dataclass
class _Edge:
    source: str
    target: str
    source_node: Node
    target_node: Node
    where: Node  # the node an edge error (duplicate, cycle) points at
    source_what: str = "downstream"  # how messages name each end
    target_what: str = "downstream"


@dataclass
class _Task:
    name: str | None  # None until the pipeline names it
    where: Node  # the node its name and errors point at
    settings: dict[str, Any]
    gpus: int


@dataclass
class _Header:
    name: str | None = None
    edges: list[_Edge] | None = None
    group: bool = False
    primary: Node | None = None
    delay: Node | None = None
    name_node: Node | None = None


class _PipelineReader(TaskReader):
    def __init__(self, file: str, notes: list[Note], env: Mapping[str, str]):
        super().__init__(file, notes, env)
        self.shell = shutil.which("bash") or DEFAULT_SHELL
        self.task_nodes: dict[str, Node] = {}  # task name -> the node that names it (where a chain's edges point)

    def pipeline(self, documents: list[Node], path: Path) -> DagSpec:
        folder = path.resolve().parent
        first = documents[0]
        first_keys = self.mapping(first, "key") if isinstance(first, MappingNode) else {}
        header = _Header()
        task_keys = set(TASK_KEYS[1:]) | set(IGNORED_TASK_KEYS)
        if isinstance(first, MappingNode) and not task_keys & set(first_keys):
            header = self.header(first_keys)
            documents = documents[1:]
        tasks = [
            task
            for node in documents
            if (task := self.task_document(node, first_keys if node is first else None)) is not None
        ]
        if not tasks:
            if not self.errors:
                self.fail(first, "the pipeline has no tasks: each task is a YAML document after the header")
            return DagSpec(name=header.name or path.stem, tasks={})
        name = self.name_tasks(tasks, header, path.stem)
        named: dict[str, _Task] = {}
        for task in tasks:
            assert task.name is not None  # name_tasks names every task it keeps
            named[task.name] = task
        deps: dict[str, list[tuple[str, Location]]]
        if header.group:
            deps = {task_name: [] for task_name in named}
            job_group = self.job_group(header, list(named))
        else:
            deps = self.dependencies_of(list(named), header.edges)
            job_group = None
        env = runtime_env(name, list(named), {task_name: task.gpus for task_name, task in named.items()}, header.group)
        specs = {}
        for task_name, task in named.items():
            fixed, per_run = env[task_name]
            settings = dict(task.settings)
            own = settings.pop("env")
            per_run = {key: value for key, value in per_run.items() if key not in own}
            specs[task_name] = TaskSpec(
                name=task_name,
                location=self.at(task.where),
                depends_on=tuple(dep for dep, _ in deps[task_name]),
                dep_locations=tuple(loc for _, loc in deps[task_name]),
                shell=self.shell,
                env={**fixed, **own},
                run_env=per_run,
                **settings,
            )
        self.errors.extend(graph_errors(specs))
        return DagSpec(
            name=name,
            tasks=specs,
            env=dict(SKYPILOT_ENV),
            workdir=folder,
            source=path.resolve(),
            max_parallel=len(specs) if job_group else None,
            job_group=job_group,
        )

    # The header.
    def header(self, fields: dict[str, tuple[Node, Node]]) -> _Header:
        header = _Header()
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
            elif not _GROUP_NAME.fullmatch(header.name):
                assert header.name_node is not None  # set with the name
                self.fail(
                    header.name_node, f"job group name {header.name!r} may only contain letters, digits, '-' and '_'"
                )
        return header

    def downstream(self, node: Node) -> list[_Edge]:
        if node.tag == _NULL:
            return []
        if not isinstance(node, MappingNode):
            self.fail(
                node,
                f"downstream must be a mapping of task names to the tasks that depend on them, got {_describe(node)}",
            )
            return []
        edges: list[_Edge] = []
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
                edges.append(_Edge(source, entry.value, key, entry, entry, "downstream", f"downstream of '{source}'"))
        return edges

    def edge_list(self, node: Node) -> list[_Edge]:
        if node.tag == _NULL:
            return []
        if not isinstance(node, SequenceNode):
            self.fail(node, f"edges must be a list of {{source: TASK, target: TASK}} mappings, got {_describe(node)}")
            return []
        edges: list[_Edge] = []
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
                    _Edge(
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

    def dependencies_of(self, names: list[str], edges: list[_Edge] | None) -> dict[str, list[tuple[str, Location]]]:
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
    def task_document(self, node: Node, fields: dict[str, tuple[Node, Node]] | None) -> _Task | None:
        if node.tag == _NULL:
            return None  # an empty document, e.g. after a trailing '---'
        if not isinstance(node, MappingNode):
            self.fail(node, f"a task document must be a mapping of task settings, got {_describe(node)}")
            return None
        if fields is None:
            fields = self.mapping(node, "key")
        where: Node = node
        name = None
        if "name" in fields:
            where, value = fields["name"]
            text = self.string(value, "task name")
            if text is not None and text is not _SKIP:
                name, where = text, value
        for key in ("downstream", "edges"):
            if key in fields:
                self.fail(
                    fields[key][0],
                    f"task '{name}': '{key}' belongs in the pipeline header: a first document "
                    f"with only 'name' and the edges, before the tasks",
                )
        settings, gpus = self.task_settings(fields, f"task '{name}': " if name else "task: ")
        return _Task(name, where, settings, gpus)

    def name_tasks(self, tasks: list[_Task], header: _Header, stem: str) -> str:
        """Name the pipeline and its unnamed tasks as SkyPilot does (`maybe_infer_and_fill_dag_and_task_names`) and
        return the pipeline's name. In a chain a name given twice is made unique; elsewhere it is an error, since
        edges and primary tasks refer to tasks by name."""
        name = header.name
        if len(tasks) == 1:
            if name is not None:
                tasks[0].name = name
            elif tasks[0].name is not None:
                name = tasks[0].name
        name = name or stem
        if len(tasks) == 1 and tasks[0].name is None:
            tasks[0].name = name
        if header.group:
            for index, task in enumerate(tasks, start=1):
                if task.name is None:
                    self.fail(task.where, f"task {index} of the job group has no 'name': job group tasks need one")
                elif not _GROUP_NAME.fullmatch(task.name):
                    self.fail(task.where, f"job name {task.name!r} may only contain letters, digits, '-' and '_'")
            tasks[:] = [task for task in tasks if task.name is not None]
        for index, task in enumerate(tasks):
            if task.name is None:
                task.name = f"{name}-{index}"
        taken = {task.name for task in tasks}
        seen: dict[str, Node] = {}
        for task in tasks:
            task_name = task.name
            assert task_name is not None  # each task was named just above
            if task_name in seen:
                line = seen[task_name].start_mark.line + 1
                if header.group or header.edges is not None:
                    self.fail(task.where, f"duplicate task '{task_name}' (first defined on line {line})")
                    task.name = None
                    continue
                number = 2
                while f"{task_name}-{number}" in taken:
                    number += 1
                unique = f"{task_name}-{number}"
                self.note(
                    task.where,
                    f"task name '{task_name}' is used twice (first on line {line}): this task is called '{unique}'",
                )
                taken.add(unique)
                task.name = task_name = unique
            seen[task_name] = task.where
            self.task_nodes[task_name] = task.where
        tasks[:] = [task for task in tasks if task.name is not None]
        return name

    # Job groups.
    def job_group(self, header: _Header, names: list[str]) -> JobGroup:
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
