"""The SkyPilot front end: a managed-job pipeline file (multi-document YAML) run locally as it is.

    name: pipeline                     # the header (optional): the pipeline's name, and its edges if not a chain
    downstream:                        # task -> the tasks that depend on it ...
      data-processing: [infer_A, infer_B]
      infer_A: [eval]
      infer_B: [eval]
    # edges: [{source: data-processing, target: infer_A, data: {...}}, ...]   # ... or this shape; data is ignored
    ---
    name: data-processing              # every further document is a task
    setup: pip install -r requirements.txt
    run: python process.py
    envs: {SPLIT: train}
    workdir: .
    resources: {accelerators: A100:1}  # cloud-only keys: accepted, a note says they are ignored

Without `downstream` or `edges` the tasks form a chain in document order. A first document that holds task keys is
a task, not a header (SkyPilot reads it that way too). `setup` runs before `run` and a failing setup fails the task
with reason "setup failed"; a task without `run` succeeds once its setup has. Commands run with bash, as on a
SkyPilot node (with sh where there is no bash), in `workdir` (default: the pipeline file's folder). Each task also
gets SKYPILOT_NODE_RANK=0, SKYPILOT_NUM_NODES=1 and SKYPILOT_NODE_IPS=127.0.0.1, as on a one-node cluster.

The file is read from the composed node tree with the YAML front end's reader, so errors have the same located
`FILE:LINE:COL: message` form; keys SkyPilot itself does not know are errors, keys it knows but that only mean
something on a cloud produce one `Note` each.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yaml import SafeLoader, YAMLError
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from .errors import DagError, DagErrors, Location, Note, did_you_mean
from .spec import DEFAULT_SHELL, DagSpec, TaskSpec, nul_problem
from .validate import graph_errors
from .yaml_loader import (_BOOL, _NULL, _SKIP, CSafeLoader, _describe, _offset_location, _Reader, _syntax_error,
                          _typed, check_tree_depth, recursion_error)

HEADER_KEYS = ("name", "downstream", "edges")
#: Task keys that mean something locally.
TASK_KEYS = ("name", "setup", "run", "envs", "secrets", "workdir")
#: Task keys SkyPilot knows that only matter on a cloud: accepted, with a note.
IGNORED_TASK_KEYS = (
    "resources", "num_nodes", "file_mounts", "file_mounts_mapping", "storage_mounts", "service", "pool",
    "event_callback", "inputs", "outputs", "config", "volumes", "volume_mounts", "managed_secrets",
    "api_server_access", "experimental", "_metadata",
)
EDGE_KEYS = ("source", "target", "data")
#: What a one-node SkyPilot cluster tells its tasks; the task's own envs win.
SKYPILOT_ENV = {"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NUM_NODES": "1", "SKYPILOT_NODE_IPS": "127.0.0.1"}
_ENV_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def pipeline_documents(text: str, file: str) -> list[Node] | None:
    """The file's documents if it is a SkyPilot pipeline by content (more than one document, and the first is a
    mapping without `tasks:`), else None: the file is for tuidag's own loader, which also reports syntax errors in
    a first document. A syntax error further down a pipeline is raised here, located."""
    loaders = (CSafeLoader, SafeLoader) if CSafeLoader is not None else (SafeLoader,)
    for loader_class in loaders:
        loader = loader_class(text)
        documents: list[Node] = []
        try:
            while loader.check_node():
                documents.append(loader.get_node())
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
        return documents if len(documents) > 1 else None
    return None


def _may_start_pipeline(node: Node) -> bool:
    return isinstance(node, MappingNode) and not any(
        isinstance(key, ScalarNode) and key.value == "tasks" for key, _ in node.value)


def load_skypilot(path: Path, documents: list[Node], notes: list[Note] | None = None) -> DagSpec:
    """The DagSpec of a pipeline's composed documents (see `pipeline_documents`). Raises DagErrors listing every
    problem; appends a Note per ignored key to `notes`."""
    reader = _PipelineReader(str(path), notes if notes is not None else [])
    dag = reader.pipeline(documents, path)
    if reader.errors:
        raise DagErrors(reader.errors)
    return dag


@dataclass
class _Edge:
    source: str
    target: str
    source_node: Node
    target_node: Node
    where: Node  # the node an edge error (duplicate, cycle) points at
    source_what: str = "downstream"  # how messages name each end
    target_what: str = "downstream"


class _PipelineReader(_Reader):
    def __init__(self, file: str, notes: list[Note]):
        super().__init__(file)
        self.notes = notes
        self.shell = shutil.which("bash") or DEFAULT_SHELL
        self.task_nodes: dict[str, Node] = {}  # task name -> the node that names it (where its errors point)

    def note(self, node: Node, message: str) -> None:
        self.notes.append(Note(message, self.at(node)))

    def pipeline(self, documents: list[Node], path: Path) -> DagSpec:
        folder = path.resolve().parent
        first = documents[0]
        header_keys = self.mapping(first, "key") if isinstance(first, MappingNode) else {}
        is_header = not any(key in TASK_KEYS[1:] or key in IGNORED_TASK_KEYS for key in header_keys)
        name: str | None = None
        edges: list[_Edge] | None = None
        if is_header:
            name, edges = self.header(header_keys)
            documents = documents[1:]
        tasks: dict[str, dict[str, Any]] = {}
        where: dict[str, Node] = {}
        for index, node in enumerate(documents, start=1):
            task = self.task(node, index, folder, fields=None if is_header or index > 1 else header_keys)
            if task is None:
                continue
            task_name, key, fields = task
            if task_name in where:
                first_line = where[task_name].start_mark.line + 1
                self.fail(key, f"duplicate task '{task_name}' (first defined on line {first_line})")
                continue
            where[task_name] = key
            tasks[task_name] = fields
        if not tasks and not self.errors:
            self.fail(first, "the pipeline has no tasks: each task is a YAML document after the header")
        deps = self.dependencies_of(tasks, edges)
        specs = {task_name: TaskSpec(name=task_name, location=self.at(where[task_name]),
                                     depends_on=tuple(dep for dep, _ in deps[task_name]),
                                     dep_locations=tuple(loc for _, loc in deps[task_name]),
                                     shell=self.shell, **fields)
                 for task_name, fields in tasks.items()}
        self.errors.extend(graph_errors(specs))
        return DagSpec(name=name or path.stem, tasks=specs, env=dict(SKYPILOT_ENV), workdir=folder,
                       source=path.resolve())

    # The header.
    def header(self, fields: dict[str, tuple[Node, Node]]) -> tuple[str | None, list[_Edge] | None]:
        name: str | None = None
        edges: list[_Edge] | None = None
        shape: Node | None = None  # the key of `downstream` or `edges`, whichever came first
        for key, (key_node, value) in fields.items():
            if key == "name":
                text = self.text(value, "name", "a string")
                name = None if text is _SKIP else text
            elif key in ("downstream", "edges"):
                if shape is not None:
                    self.fail(key_node, f"'{key}' and '{shape.value}' both give the edges: use one of them")
                    continue
                shape = key_node
                edges = self.downstream(value) if key == "downstream" else self.edge_list(value)
            else:
                self.fail(key_node, f"unknown key '{key}' in the pipeline header{did_you_mean(key, HEADER_KEYS)}")
        return name, edges

    def downstream(self, node: Node) -> list[_Edge]:
        if node.tag == _NULL:
            return []
        if not isinstance(node, MappingNode):
            self.fail(node, f"downstream must be a mapping of task names to the tasks that depend on them, "
                            f"got {_describe(node)}")
            return []
        edges: list[_Edge] = []
        for source, (key, value) in self.mapping(node, "task").items():
            if value.tag == _NULL:
                continue
            entries = value.value if isinstance(value, SequenceNode) else [value]
            if isinstance(value, MappingNode):
                self.fail(value, f"downstream of '{source}' must be a task name or a list of task names, "
                                 f"got {_describe(value)}")
                continue
            for entry in entries:
                if not isinstance(entry, ScalarNode) or entry.tag == _NULL or not entry.value:
                    self.fail(entry, f"downstream of '{source}' entries must be task names, got {_describe(entry)}")
                    continue
                edges.append(_Edge(source, entry.value, key, entry, entry, "downstream",
                                   f"downstream of '{source}'"))
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
                edges.append(_Edge(ends["source"].value, ends["target"].value, ends["source"], ends["target"], item,
                                   "edge source", "edge target"))
        return edges

    def dependencies_of(self, tasks: dict[str, dict[str, Any]],
                        edges: list[_Edge] | None) -> dict[str, list[tuple[str, Location]]]:
        """task -> [(dependency, where the edge is written)], from the edges, or a chain in document order."""
        deps: dict[str, list[tuple[str, Location]]] = {task: [] for task in tasks}
        names = list(tasks)
        if edges is None:
            for before, after in zip(names, names[1:]):
                deps[after].append((before, self.at(self.task_nodes[after])))
            return deps
        first_seen: dict[tuple[str, str], Node] = {}
        for edge in edges:
            known = True
            for end, node, what in ((edge.source, edge.source_node, edge.source_what),
                                    (edge.target, edge.target_node, edge.target_what)):
                if end not in tasks:
                    self.fail(node, f"{what}: unknown task '{end}'{did_you_mean(end, names)}")
                    known = False
            if not known:
                continue
            pair = (edge.source, edge.target)
            if pair in first_seen:
                line = first_seen[pair].start_mark.line + 1
                self.fail(edge.where, f"edge {edge.source} -> {edge.target} is given twice (first on line {line})")
                continue
            first_seen[pair] = edge.where
            deps[edge.target].append((edge.source, self.at(edge.where)))
        return deps

    # A task document.
    def task(self, node: Node, index: int, folder: Path,
             fields: dict[str, tuple[Node, Node]] | None) -> tuple[str, Node, dict[str, Any]] | None:
        if node.tag == _NULL:
            return None  # an empty document, e.g. after a trailing '---'
        if not isinstance(node, MappingNode):
            self.fail(node, f"a task document must be a mapping of task settings, got {_describe(node)}")
            return None
        if fields is None:
            fields = self.mapping(node, "key")
        key_node: Node = node
        task_name = f"task-{index}"
        if "name" in fields:
            key_node, value = fields["name"]
            text = self.text(value, "task name", "a string")
            if text is not _SKIP:
                task_name, key_node = text, value
        self.task_nodes.setdefault(task_name, key_node)
        prefix = f"task '{task_name}': "
        settings: dict[str, Any] = {}
        env: dict[str, str] = {}
        for key, (knode, value) in fields.items():
            what = prefix + key
            if key == "name":
                continue
            if key in ("setup", "run"):
                command = self.command(value, what)
                if command is not None:
                    settings[key] = command
            elif key == "envs":
                env.update(self.variables(value, what))
            elif key == "secrets":
                if isinstance(value, SequenceNode):
                    self.note(knode, "'secrets' as a list of managed secret names is ignored when running locally "
                                     "(variables come from the environment tuidag runs in)")
                else:
                    env.update(self.variables(value, what))
            elif key == "workdir":
                if isinstance(value, MappingNode):
                    self.note(knode, "'workdir' from a git repository is ignored when running locally: the task "
                                     "runs in the pipeline file's folder")
                else:
                    workdir = self.directory(value, what, base=folder)
                    if workdir is not _SKIP:
                        settings["workdir"] = workdir
            elif key in ("downstream", "edges"):
                self.fail(knode, f"{prefix}'{key}' belongs in the pipeline header: a first document with only "
                                 f"'name' and the edges, before the tasks")
            elif key in IGNORED_TASK_KEYS:
                self.note(knode, f"'{key}' is ignored when running locally")
            else:
                known = TASK_KEYS + IGNORED_TASK_KEYS
                self.fail(knode, f"{prefix}unknown key '{key}'{did_you_mean(key, known)}")
        settings["env"] = env
        return task_name, key_node, settings

    def command(self, node: Node, what: str) -> str | None:
        """A shell command, run with bash like on a SkyPilot node; null or empty means there is none."""
        if node.tag == _NULL or (isinstance(node, ScalarNode) and not node.value.strip()):
            return None
        if not isinstance(node, ScalarNode):
            self.fail(node, f"{what} must be a shell command string, got {_describe(node)}")
            return None
        if "\0" in node.value:
            self.fail(node, nul_problem(what))
            return None
        return node.value

    def variables(self, node: Node, what: str) -> dict[str, str]:
        """envs/secrets: names as SkyPilot allows them; a null value means "whatever the environment has"."""
        if node.tag == _NULL:
            return {}
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a mapping of variable names to values, got {_describe(node)}")
            return {}
        env: dict[str, str] = {}
        for name, (key, value) in self.mapping(node, "variable").items():
            if not name or name[0].isdigit() or not set(name) <= _ENV_NAME_CHARS:
                self.fail(key, f"{what}: variable name {name!r} may only contain letters, digits and '_', "
                               f"and may not start with a digit")
                continue
            flag = _typed(value, _BOOL)
            if flag is not None:
                env[name] = "true" if flag else "false"
            elif value.tag == _NULL:
                continue
            elif isinstance(value, ScalarNode) and "\0" in value.value:
                self.fail(value, nul_problem(f"{what} value for '{name}'"))
            elif isinstance(value, ScalarNode):
                env[name] = value.value
            else:
                self.fail(value, f"{what} value for '{name}' must be a string, number or boolean, "
                                 f"got {_describe(value)}")
        return env
