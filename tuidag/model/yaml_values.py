"""The YAML front ends' converters: one for each kind of value a DAG file holds (text, counts, durations, paths,
environments, slot requests, inputs and outputs, a matrix, dependencies), each reporting a located error and returning
`_SKIP` for a value it can't take, so that one `validate` lists every mistake. `ValueReader` is the part of the
readers (yaml_loader.py, skypilot_task.py) that converts values; they add the keys of their formats."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .durations import DurationTooLong, parse_duration
from .errors import DagError, Location, Note, did_you_mean
from .matrix import KEY_RE, Matrix
from .resources import kind_problem
from .spec import MAX_COUNT, FailurePolicy, nul_problem
from .yaml_nodes import _BOOL, _FLOAT, _INT, _NULL, _describe, _location, _typed

#: What a converter returns after reporting an error: the field is left out, so the spec's default applies.
_SKIP: Any = object()
Converter = Callable[[Node, str], Any]


class ValueReader:
    """Converting the values of one composed document, collecting every error instead of stopping."""

    def __init__(self, file: str, notes: list[Note] | None = None):
        self.file = file
        self.errors: list[DagError] = []
        self.notes: list[Note] = notes if notes is not None else []

    def at(self, node: Node) -> Location:
        return _location(self.file, node.start_mark)

    def fail(self, node: Node, message: str) -> None:
        self.errors.append(DagError(message, self.at(node)))

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

    def choice(self, node: Node, what: str, choices: tuple[str, ...]) -> str:
        if isinstance(node, ScalarNode) and node.value in choices:
            return node.value
        hint = did_you_mean(node.value, list(choices)) if isinstance(node, ScalarNode) else ""
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
