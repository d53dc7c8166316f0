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

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yaml import SafeLoader, YAMLError
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.reader import ReaderError

from .errors import DagError, DagErrors, Location, Note
from .skypilot_header import GROUP_NAME, Header, HeaderReader
from .skypilot_task import IGNORED_TASK_KEYS, TASK_KEYS
from .spec import DEFAULT_SHELL, RUN_ID_PLACEHOLDER, DagSpec, TaskSpec
from .validate import graph_errors
from .yaml_nodes import (
    _NULL,
    CSafeLoader,
    _describe,
    _offset_location,
    _syntax_error,
    check_tree_depth,
    recursion_error,
)
from .yaml_values import _SKIP

#: Keys of tuidag's own format that SkyPilot does not have: a single document with one is tuidag's.
_OWN_FORMAT_KEYS = ("tasks", "env", "max_parallel", "on_failure", "kill_grace")
#: What a one-node SkyPilot cluster tells its tasks; the task's own envs win.
SKYPILOT_ENV = {"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NUM_NODES": "1", "SKYPILOT_NODE_IPS": "127.0.0.1"}
#: SkyPilot's job group names and job names (dag_utils.py).
#: SkyPilot's durations (TIME_PATTERN_SECONDS): whole numbers of seconds, or with one of these units.


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
class _Task:
    name: str | None  # None until the pipeline names it
    where: Node  # the node its name and errors point at
    settings: dict[str, Any]
    gpus: int


class _PipelineReader(HeaderReader):
    def __init__(self, file: str, notes: list[Note], env: Mapping[str, str]):
        super().__init__(file, notes, env)
        self.shell = shutil.which("bash") or DEFAULT_SHELL
        self.task_nodes: dict[str, Node] = {}  # task name -> the node that names it (where a chain's edges point)

    def pipeline(self, documents: list[Node], path: Path) -> DagSpec:
        folder = path.resolve().parent
        first = documents[0]
        first_keys = self.mapping(first, "key") if isinstance(first, MappingNode) else {}
        header = Header()
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

    def name_tasks(self, tasks: list[_Task], header: Header, stem: str) -> str:
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
                elif not GROUP_NAME.fullmatch(task.name):
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
