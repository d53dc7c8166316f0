"""The YAML front end: one document of DAG settings plus a `tasks` mapping, turned into a DagSpec.

It reads the composed node tree instead of loaded Python objects for two reasons: every error needs the line and
column of the key or value at fault, and duplicate keys, which a plain load quietly resolves to the last one, must
be reported. Problems are collected rather than raised one by one, so a single `validate` shows all of them.
Composing the tree safely, and the located syntax errors, are yaml_nodes.py's; this module has the keys of the format
and a converter for each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .durations import DurationTooLong, parse_duration
from .errors import DagError, DagErrors, Location, Note, did_you_mean
from .matrix import KEY_RE, Matrix, expand
from .resources import Request, kind_problem
from .source import read_source
from .spec import MAX_COUNT, DagSpec, FailurePolicy, TaskSpec, nul_problem
from .validate import graph_errors, io_errors
from .yaml_nodes import _BOOL, _FLOAT, _INT, _NULL, _describe, _location, _typed, compose

ROOT_KEYS = (
    "name",
    "max_parallel",
    "on_failure",
    "kill_grace",
    "env",
    "workdir",
    "resources",
    "executor",
    "dask_address",
    "tasks",
)
TASK_KEYS = (
    "run",
    "depends_on",
    "env",
    "workdir",
    "retries",
    "retry_delay",
    "timeout",
    "resources",
    "inputs",
    "outputs",
    "cache",
    "env_inputs",
    "interruptible",
    "matrix",
    "max_parallel",
    "name",
)

#: What a converter returns after reporting an error: the field is left out, so the spec's default applies.
_SKIP: Any = object()
Converter = Callable[[Node, str], Any]


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


class _Reader:
    """Walks one composed document, converting each value and collecting every error instead of stopping."""

    def __init__(self, file: str, notes: list[Note] | None = None):
        self.file = file
        self.errors: list[DagError] = []
        self.notes: list[Note] = notes if notes is not None else []
        self.matrices: dict[str, Matrix] = {}
        self.field_at: dict[str, dict[str, Location]] = {}  # task -> where its fields are written
        self.broken: set[str] = set()  # tasks whose matrix could not be read
        self.capacities_wrong = False  # an error inside the top-level `resources` (then requests go unchecked)

    def at(self, node: Node) -> Location:
        return _location(self.file, node.start_mark)

    def fail(self, node: Node, message: str) -> None:
        self.errors.append(DagError(message, self.at(node)))

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
        converters: dict[str, Converter] = {
            "name": partial(self.text, expected="a string"),
            "max_parallel": partial(self.integer, minimum=1),
            "on_failure": self.policy,
            "kill_grace": self.duration,
            "env": self.env,
            "workdir": partial(self.directory, base=folder),
            "resources": partial(self.slots, minimum=0),
            "executor": self.executor,
            "dask_address": partial(self.text, expected="an address like tcp://HOST:8786"),
        }
        settings = self.settings(fields, converters, ROOT_KEYS, prefix="")
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
        converters: dict[str, Converter] = {
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
        settings = self.settings(fields, converters, TASK_KEYS, prefix=f"task '{name}': ")
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
            depends_on=tuple(dep for dep, _ in deps),
            location=location,
            dep_locations=tuple(where for _, where in deps),
            **settings,
        )

    # Mappings and their keys.
    def mapping(self, node: MappingNode, noun: str) -> dict[str, tuple[Node, Node]]:
        """Key text -> (key node, value node), in file order. A duplicate key is reported and dropped, so it
        causes no follow-on errors; keys are taken as written, so `1:` is the name '1'."""
        pairs: dict[str, tuple[Node, Node]] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                self.fail(key, f"{noun} names must be strings, got {_describe(key)}")
            elif key.value in pairs:
                first = pairs[key.value][0].start_mark.line + 1
                self.fail(key, f"duplicate {noun} '{key.value}' (first defined on line {first})")
            else:
                pairs[key.value] = (key, value)
        return pairs

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
            if key not in converters:
                self.fail(key_node, f"{prefix}unknown key '{key}'{_unknown_key_hint(key, value_node, known)}")
                continue
            value = converters[key](value_node, prefix + key)
            if value is not _SKIP:
                values[key] = value
        return values

    # Value converters: (node, what) -> value, or _SKIP after reporting why not. `what` names the field in messages.
    def text(self, node: Node, what: str, expected: str) -> str:
        """Any scalar as written: `run: true` is the shell's `true`, not a boolean."""
        if not isinstance(node, ScalarNode):
            self.fail(node, f"{what} must be {expected}, got {_describe(node)}")
            return _SKIP
        if node.tag == _NULL or not node.value.strip():
            self.fail(node, f"{what} is empty")
            return _SKIP
        if "\0" in node.value:
            self.fail(node, nul_problem(what))
            return _SKIP
        return node.value

    def integer(self, node: Node, what: str, minimum: int) -> int:
        value = _typed(node, _INT)  # YAML booleans have their own tag, so `true` is not 1 here
        if value is None or value < minimum:
            bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            self.fail(node, f"{what} must be {bound}, got {_describe(node)}")
            return _SKIP
        if value > MAX_COUNT:
            self.fail(node, f"{what} is too large: at most {MAX_COUNT:,} is allowed, got {_describe(node)}")
            return _SKIP
        return value

    def duration(self, node: Node, what: str, positive: bool = False) -> float:
        try:
            seconds = _seconds(node)
        except DurationTooLong:
            self.fail(node, f"{what} is too long: {DurationTooLong.LIMIT}, got {_describe(node)}")
            return _SKIP
        if seconds is None:
            self.fail(node, f"{what} must be a duration like 500ms, 5s, 2m or 1h, got {_describe(node)}")
            return _SKIP
        if positive and seconds == 0:
            self.fail(node, f"{what} must be longer than 0, got {_describe(node)}")
            return _SKIP
        return seconds

    def policy(self, node: Node, what: str) -> FailurePolicy:
        choices = [policy.value for policy in FailurePolicy]
        if isinstance(node, ScalarNode) and node.value in choices:
            return FailurePolicy(node.value)
        hint = did_you_mean(node.value, choices) if isinstance(node, ScalarNode) else ""
        self.fail(node, f"{what} must be one of {', '.join(choices)}, got {_describe(node)}{hint}")
        return _SKIP

    def executor(self, node: Node, what: str) -> str:
        """`local`, `dask` or `dask-local[:N]`, as written (see executor_choice)."""
        from .executor_choice import executor_problem

        text = self.text(node, what, "local, dask or dask-local[:N]")
        problem = None if text is _SKIP else executor_problem(text)
        if problem:
            self.fail(node, f"{what}: {problem}")
            return _SKIP
        return text

    def directory(self, node: Node, what: str, base: Path) -> Path:
        """An absolute path; a relative one is taken from `base`, as users write paths relative to the file.
        Normalised as written (symlinks are followed when a task starts in it, not when the file is read), so the
        model depends on the file alone and a link retargeted between runs takes effect."""
        # Any: the text, or _SKIP (typed Any so every converter can return it), which a `str` would make mypy narrow
        # to `str` too, as if a skipped directory were text.
        text: Any = self.text(node, what, "a directory path")
        return _SKIP if text is _SKIP else Path(os.path.normpath(base / Path(text).expanduser()))

    def env(self, node: Node, what: str) -> dict[str, str]:
        """Variables as strings: text and numbers as written (so 1.10 stays "1.10"), booleans as true/false."""
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a mapping of variable names to values, got {_describe(node)}")
            return _SKIP
        env: dict[str, str] = {}
        for name, (key, value) in self.mapping(node, "env variable").items():
            if not name or "=" in name or "\0" in name:
                self.fail(key, f"{what}: variable name {name!r} must be non-empty and may not contain '=' or NUL")
            flag = _typed(value, _BOOL)
            if flag is not None:
                env[name] = "true" if flag else "false"
            elif isinstance(value, ScalarNode) and "\0" in value.value:
                self.fail(value, nul_problem(f"{what} value for '{name}'"))
            elif isinstance(value, ScalarNode) and value.tag != _NULL:
                env[name] = value.value
            else:
                self.fail(
                    value, f"{what} value for '{name}' must be a string, number or boolean, got {_describe(value)}"
                )
        return env

    def slots(self, node: Node, what: str, minimum: int) -> dict[str, tuple[int | str, Location]]:
        """Slot kind -> (count, where the kind is written): capacities at the top level, requests in a task."""
        if not isinstance(node, MappingNode):
            self.fail(
                node, f"{what} must be a mapping of resource names to counts, e.g. {{gpu: 1}}, got {_describe(node)}"
            )
            return _SKIP
        slots: dict[str, tuple[int | str, Location]] = {}
        for kind, (key, value) in self.mapping(node, "resource").items():
            problem = kind_problem(kind)
            if problem:
                self.fail(key, f"{what}: {problem}")
                continue
            if minimum and isinstance(value, ScalarNode) and "${{" in value.value:
                count = value.value  # a request from a matrix's values (matrix.py fills and checks it)
            else:
                count = self.integer(value, f"{what}: '{kind}'", minimum)
            if count is not _SKIP:
                slots[kind] = (count, self.at(key))
        return slots

    def paths(self, node: Node, what: str, expected: str) -> list[tuple[str, Location]]:
        """(path, location) pairs: one path or a list of them, each located so a bad one can be pointed at."""
        if isinstance(node, MappingNode) or node.tag == _NULL:
            self.fail(node, f"{what} must be {expected}, got {_describe(node)}")
            return _SKIP
        entries = node.value if isinstance(node, SequenceNode) else [node]
        paths: dict[str, tuple[str, Location]] = {}
        for entry in entries:
            text = self.text(entry, f"{what} entry", "a path")
            if text is _SKIP:
                continue
            if os.path.isabs(text) and what.endswith("outputs"):
                self.fail(entry, f"{what} entry '{text}' must be relative to the task's workdir")
            elif text in paths:
                self.fail(entry, f"{what} lists '{text}' twice")
            else:
                paths[text] = (text, self.at(entry))
        return list(paths.values())

    def flag(self, node: Node, what: str) -> bool:
        value = _typed(node, _BOOL)
        if value is None:
            self.fail(node, f"{what} must be true or false, got {_describe(node)}")
            return _SKIP
        return value

    def variable_names(self, node: Node, what: str) -> tuple[str, ...]:
        """Names of OS environment variables: one name or a list of them."""
        if isinstance(node, MappingNode) or node.tag == _NULL:
            self.fail(node, f"{what} must be a variable name or a list of them, got {_describe(node)}")
            return _SKIP
        names: list[str] = []
        for entry in node.value if isinstance(node, SequenceNode) else [node]:
            text = self.text(entry, f"{what} entry", "a variable name")
            if text is _SKIP:
                continue
            if "=" in text or not text.strip():
                self.fail(entry, f"{what}: variable name {text!r} may not contain '='")
            elif text not in names:
                names.append(text)
        return tuple(names)

    def matrix(self, node: Node, what: str) -> Matrix:
        """Keys to lists of values, and optional `include`/`exclude` lists of combinations (see matrix.py)."""
        if not isinstance(node, MappingNode) or not node.value:
            self.fail(node, f"{what} must be a mapping of keys to lists of values, got {_describe(node)}")
            return _SKIP
        before = len(self.errors)
        axes: list[tuple[str, tuple[str, ...]]] = []
        lists: dict[str, tuple[tuple[dict[str, str], ...], tuple[Location, ...]]] = {}
        for key, (key_node, value) in self.mapping(node, "matrix key").items():
            if key in ("include", "exclude"):
                lists[key] = self.combinations(value, f"{what} {key}")
            elif not KEY_RE.fullmatch(key):
                self.fail(key_node, f"{what}: key {key!r} may only contain letters, digits, '_' and '-' (not first)")
            elif not isinstance(value, SequenceNode):
                self.fail(value, f"{what}: '{key}' must be a list of values, got {_describe(value)}")
            elif not value.value:
                self.fail(value, f"{what}: '{key}' is an empty list: give it at least one value")
            else:
                seen: dict[str, Node] = {}
                for entry in value.value:
                    text = self.matrix_value(entry, f"{what}: '{key}'")
                    if text is _SKIP:
                        continue
                    if text in seen:
                        first = seen[text].start_mark.line + 1
                        self.fail(entry, f"{what}: '{key}' lists {text!r} twice (first on line {first})")
                    seen[text] = entry
                axes.append((key, tuple(seen)))
        if len(self.errors) > before:
            return _SKIP
        include, include_at = lists.get("include", ((), ()))
        exclude, exclude_at = lists.get("exclude", ((), ()))
        if not axes and not include:
            self.fail(node, f"{what} has no keys: give it at least one key with a list of values, or an include")
            return _SKIP
        return Matrix(
            tuple(axes), include, exclude, location=self.at(node), include_at=include_at, exclude_at=exclude_at
        )

    def matrix_value(self, node: Node, what: str) -> str:
        """A value as text, as written (1.10 stays "1.10"); booleans as true/false."""
        flag = _typed(node, _BOOL)
        if flag is not None:
            return "true" if flag else "false"
        if not isinstance(node, ScalarNode) or node.tag == _NULL:
            self.fail(node, f"{what} values must be strings, numbers or booleans, got {_describe(node)}")
            return _SKIP
        if "\0" in node.value:
            self.fail(node, nul_problem(what))
            return _SKIP
        return node.value

    def combinations(self, node: Node, what: str) -> tuple[tuple[dict[str, str], ...], tuple[Location, ...]]:
        """`include` or `exclude`: a list of mappings of keys to single values."""
        if not isinstance(node, SequenceNode):
            self.fail(node, f"{what} must be a list of mappings like {{lr: 0.1, seed: 1}}, got {_describe(node)}")
            return (), ()
        entries, where = [], []
        for entry in node.value:
            if not isinstance(entry, MappingNode) or not entry.value:
                self.fail(entry, f"{what} entries must be mappings like {{lr: 0.1, seed: 1}}, got {_describe(entry)}")
                continue
            combo: dict[str, str] = {}
            for key, (key_node, value) in self.mapping(entry, "matrix key").items():
                if not KEY_RE.fullmatch(key):
                    self.fail(
                        key_node, f"{what}: key {key!r} may only contain letters, digits, '_' and '-' (not first)"
                    )
                    continue
                text = self.matrix_value(value, f"{what}: '{key}'")
                if text is not _SKIP:
                    combo[key] = text
            entries.append(combo)
            where.append(self.at(entry))
        return tuple(entries), tuple(where)

    def dependencies(self, node: Node, what: str) -> list[tuple[str, Location]]:
        """(name, location) pairs: one name or a list of names, each located so graph errors can point at it."""
        if isinstance(node, MappingNode) or node.tag == _NULL:
            self.fail(node, f"{what} must be a task name or a list of task names, got {_describe(node)}")
            return _SKIP
        entries = node.value if isinstance(node, SequenceNode) else [node]
        seen: dict[str, Node] = {}
        for entry in entries:
            if not isinstance(entry, ScalarNode) or entry.tag == _NULL or not entry.value:
                self.fail(entry, f"{what} entries must be task names, got {_describe(entry)}")
            elif entry.value in seen:
                first = seen[entry.value].start_mark.line + 1
                self.fail(entry, f"{what} lists '{entry.value}' twice (first on line {first})")
            else:
                seen[entry.value] = entry
        return [(name, self.at(entry)) for name, entry in seen.items()]


def _unknown_key_hint(key: str, value: Node, known: tuple[str, ...]) -> str:
    """A close spelling, or, at the top level, the common slip of writing a task outside `tasks:`."""
    hint = did_you_mean(key, known)
    looks_like_task = isinstance(value, MappingNode) and any(
        isinstance(k, ScalarNode) and k.value == "run" for k, _ in value.value
    )
    if not hint and "tasks" in known and looks_like_task:
        hint = " (tasks go under 'tasks:')"
    return hint


def _seconds(node: Node) -> float | None:
    """A number is seconds; anything else scalar is parsed as written ('5s', and 'true' fails rather than being 1).
    Raises DurationTooLong for one over a year."""
    if not isinstance(node, ScalarNode):
        return None
    value = _typed(node, _INT, _FLOAT)
    try:
        return parse_duration(node.value if value is None else value)
    except DurationTooLong:
        raise
    except ValueError:
        return None
