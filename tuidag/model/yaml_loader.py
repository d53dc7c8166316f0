"""The YAML front end: one document of DAG settings plus a `tasks` mapping, turned into a DagSpec.

It reads the composed node tree instead of loaded Python objects for two reasons: every error needs the line and
column of the key or value at fault, and duplicate keys, which a plain load quietly resolves to the last one, must
be reported. Problems are collected rather than raised one by one, so a single `validate` shows all of them.
Composing the tree safely, and the located syntax errors, are yaml_nodes.py's; converting each kind of value is
yaml_values.py's; the keys of the format are dag_keys.py's table; this module has which converter each takes.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .dag_keys import NOT_FOR_SERVICES, ROOT_KEYS, TASK_KEYS
from .errors import DagError, DagErrors, Location, Note, did_you_mean
from .matrix import Matrix, expand
from .resources import Request
from .service_yaml import Converters, read_service
from .source import read_source
from .spec import NOTIFY_CHOICES, DagSpec, TaskSpec
from .validate import graph_errors, io_errors
from .yaml_nodes import _NULL, _describe, compose
from .yaml_values import _SKIP, Converter, ValueReader


def load_yaml(
    path: Path, text: str | None = None, root: Node | None = None, notes: list[Note] | None = None
) -> DagSpec:
    """Load a YAML DAG file (read from `path` unless `text` is given; composed already when `root` is given). Raises
    DagErrors listing every problem found; remarks that are not errors are appended to `notes` when given."""
    if text is None:
        text = read_source(path)
    reader = _Reader(str(path), notes)
    dag = reader.dag(compose(text, reader.file) if root is None else root, path)
    if reader.errors:  # requests can't be checked against capacities that are themselves wrong
        raise DagErrors(reader.errors, partial=None if reader.capacities_wrong else dag)
    assert dag is not None  # every path that yields no spec reports an error
    return dag


class _Reader(ValueReader):
    """Walks one composed document, converting each value and collecting every error instead of stopping."""

    def __init__(self, file: str, notes: list[Note] | None = None):
        super().__init__(file, notes)
        self.matrices: dict[str, Matrix] = {}
        self.field_at: dict[str, dict[str, Location]] = {}  # task -> where its fields are written
        self.broken: set[str] = set()  # tasks whose matrix could not be read
        self.capacities_wrong = False  # an error inside the top-level `resources` (then requests go unchecked)

    # The document.
    def dag(self, root: Node | None, path: Path) -> DagSpec | None:
        if root is None or root.tag == _NULL:
            empty = "the file is empty: a DAG file needs a 'tasks' mapping"
            self.errors.append(DagError(empty, Location(self.file, 1, 1)))
            return None
        if not isinstance(root, MappingNode):
            self.fail(root, f"the top level must be a mapping of settings and 'tasks', got {_describe(root)}")
            return None
        folder = path.resolve().parent
        fields = self.mapping(root, "key")
        tasks_field = fields.pop("tasks", None)  # read last: task workdirs are relative to the DAG's workdir
        settings = self.settings(fields, self.root_converters(folder), ROOT_KEYS, prefix="")
        if "resources" in fields:
            start, end = fields["resources"][1].start_mark, fields["resources"][1].end_mark
            self.capacities_wrong = any(
                err.location
                and (start.line + 1, start.column + 1)
                <= (err.location.line, err.location.col)
                <= (end.line + 1, end.column + 1)
                for err in self.errors
            )
        if "resources" in settings:  # capacities
            settings["resources"] = {kind: count for kind, (count, _) in settings["resources"].items()}
        settings.setdefault("name", path.stem)
        settings.setdefault("workdir", folder)
        if tasks_field is None:
            self.fail(root, "missing 'tasks': a DAG file needs at least one task")
        tasks = self.tasks(tasks_field[1], settings["workdir"]) if tasks_field else {}
        expanded = expand(tasks, self.matrices, self.errors, self.notes, self.field_at, frozenset(self.broken))
        self.errors.extend(graph_errors(expanded.tasks))
        self.errors.extend(io_errors(expanded.tasks, settings["workdir"], folder))
        if expanded.capacities:
            settings["resources"] = {**settings.get("resources", {}), **expanded.capacities}
        return DagSpec(tasks=expanded.tasks, source=path.resolve(), groups=expanded.groups, **settings)

    def tasks(self, node: Node, workdir: Path) -> dict[str, TaskSpec]:
        if isinstance(node, SequenceNode):
            self.fail(
                node,
                "tasks must be a mapping of task names to tasks, not a list: write 'NAME:' keys instead of '- ' items",
            )
            return {}
        if node.tag == _NULL or (isinstance(node, MappingNode) and not node.value):
            self.fail(node, "tasks is empty: a DAG file needs at least one task")
            return {}
        if not isinstance(node, MappingNode):
            self.fail(node, f"tasks must be a mapping of task names to tasks, got {_describe(node)}")
            return {}
        return {name: self.task(name, key, value, workdir) for name, (key, value) in self.mapping(node, "task").items()}

    def task(self, name: str, key: Node, node: Node, workdir: Path) -> TaskSpec:
        """A TaskSpec even for a broken task, so dependencies on it don't also read as unknown."""
        location = self.at(key)
        if not isinstance(node, MappingNode):
            self.fail(node, f"task '{name}' must be a mapping with a 'run' command, got {_describe(node)}")
            return TaskSpec(name=name, location=location)
        fields = self.mapping(node, "key")
        if "run" not in fields:
            self.fail(key, f"task '{name}' has no 'run' command")
        service = read_service(
            self.file, fields, name, self.errors, Converters(self.duration, self.integer, self.text, _SKIP)
        )
        if service is not None:
            for field in NOT_FOR_SERVICES:
                if field in fields:
                    instead = {"outputs": "it never ends, so it makes none", "timeout": "use ready_timeout"}
                    why = instead.get(field, "use restart: on-failure")
                    self.fail(fields[field][0], f"task '{name}': a service can't have '{field}' ({why})")
                    del fields[field]
        settings = self.settings(fields, self.task_converters(workdir), TASK_KEYS, prefix=f"task '{name}': ")
        for field in ("inputs", "outputs"):  # (path, location) pairs
            if field in settings:
                entries = settings.pop(field)
                settings[field] = tuple(path for path, _ in entries)
                settings[field[:-1] + "_locations"] = tuple(where for _, where in entries)
        self.field_at[name] = {
            field: self.at(fields[field][1])
            for field in ("run", "env", "workdir", "name", "resources")
            if field in fields
        }
        matrix = settings.pop("matrix", None)
        group_limit, template = settings.pop("max_parallel", None), settings.pop("name", None)
        if matrix is not None:
            self.matrices[name] = matrix._replace(
                max_parallel=group_limit,
                name=template,
                name_at=self.at(fields["name"][1]) if template else None,
            )
        elif "matrix" in fields:
            self.broken.add(name)  # its matrix has errors: its placeholders are not checked as a plain task's
        else:
            for field in ("max_parallel", "name"):
                if field in fields:
                    self.fail(
                        fields[field][0], f"task '{name}': '{field}' is for a task with a matrix, and it has none"
                    )
        if "resources" in settings:  # requests, located where each is written
            settings["resources"] = {
                kind: Request(count, where) for kind, (count, where) in settings["resources"].items()
            }
        deps = settings.pop("depends_on", [])
        return TaskSpec(
            name=name,
            service=service,
            depends_on=tuple(dep for dep, _ in deps),
            location=location,
            dep_locations=tuple(where for _, where in deps),
            **settings,
        )

    # The keys of the format (dag_keys.py's table) and the converter of each; `tasks` and a service's keys are read
    # on their own (tasks(), service_yaml.py).
    def root_converters(self, folder: Path) -> dict[str, Converter]:
        return {
            "name": partial(self.text, expected="a string"),
            "max_parallel": partial(self.integer, minimum=1),
            "on_failure": self.policy,
            "kill_grace": self.duration,
            "env": self.env,
            "workdir": partial(self.directory, base=folder),
            "resources": partial(self.slots, minimum=0),
            "executor": self.executor,
            "dask_address": partial(self.text, expected="an address like tcp://HOST:8786"),
            "on_end": partial(self.text, expected="a shell command"),
            "on_run_failure": partial(self.text, expected="a shell command"),
            "notify": partial(self.choice, choices=NOTIFY_CHOICES),
        }

    def task_converters(self, workdir: Path) -> dict[str, Converter]:
        return {
            "run": partial(self.text, expected="a shell command string"),
            "depends_on": self.dependencies,
            "env": self.env,
            "workdir": partial(self.directory, base=workdir),
            "retries": partial(self.integer, minimum=0),
            "retry_delay": self.duration,
            "timeout": partial(self.duration, positive=True),
            "resources": partial(self.slots, minimum=1),
            "inputs": partial(self.paths, expected="a path or glob, or a list of them"),
            "outputs": partial(self.paths, expected="a path, or a list of paths"),
            "cache": self.flag,
            "env_inputs": self.variable_names,
            "interruptible": self.flag,
            "matrix": self.matrix,
            "max_parallel": partial(self.integer, minimum=1),
            "name": partial(self.text, expected="a name template like train-${{ matrix.lr }}"),
        }

    # Mappings and their keys.
    def settings(
        self,
        fields: dict[str, tuple[Node, Node]],
        converters: dict[str, Converter],
        known: tuple[str, ...],
        prefix: str,
    ) -> dict[str, Any]:
        """The converted value of every field that converts cleanly, keyed like the spec's arguments."""
        values: dict[str, Any] = {}
        for key, (key_node, value_node) in fields.items():
            if key not in known:
                self.fail(key_node, f"{prefix}unknown key '{key}'{_unknown_key_hint(key, value_node, known)}")
                continue
            value = converters[key](value_node, prefix + key)
            if value is not _SKIP:
                values[key] = value
        return values

    # Value converters: (node, what) -> value, or _SKIP after reporting why not. `what` names the field in messages.


def _unknown_key_hint(key: str, value: Node, known: tuple[str, ...]) -> str:
    """A close spelling, or, at the top level, the common slip of writing a task outside `tasks:`."""
    hint = did_you_mean(key, known)
    looks_like_task = isinstance(value, MappingNode) and any(
        isinstance(k, ScalarNode) and k.value == "run" for k, _ in value.value
    )
    if not hint and "tasks" in known and looks_like_task:
        hint = " (tasks go under 'tasks:')"
    return hint
