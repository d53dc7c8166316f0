"""The YAML front end: one document of DAG settings plus a `tasks` mapping, turned into a DagSpec.

It reads the composed node tree instead of loaded Python objects for two reasons: every error needs the line and
column of the key or value at fault, and duplicate keys, which a plain load quietly resolves to the last one, must
be reported. Problems are collected rather than raised one by one, so a single `validate` shows all of them.
"""
from __future__ import annotations

import os
import re
from functools import partial
from pathlib import Path
from typing import Any, Callable

from yaml import SafeLoader, YAMLError

try:
    from yaml import CSafeLoader as _LibyamlLoader
except ImportError:  # PyYAML built without libyaml
    _LibyamlLoader = None
from yaml.constructor import SafeConstructor
from yaml.error import Mark, MarkedYAMLError
from yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from .durations import DurationTooLong, parse_duration
from .errors import DagError, DagErrors, Location, did_you_mean
from .resources import Request, kind_problem
from .source import read_source
from .spec import MAX_COUNT, DagSpec, FailurePolicy, TaskSpec, nul_problem, surrogate_problem
from .validate import graph_errors

ROOT_KEYS = ("name", "max_parallel", "on_failure", "kill_grace", "env", "workdir", "resources", "executor",
             "dask_address", "tasks")
TASK_KEYS = ("run", "depends_on", "env", "workdir", "retries", "retry_delay", "timeout", "resources")

_NULL, _BOOL, _INT, _FLOAT, _STR = (f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "str"))

if _LibyamlLoader is not None:
    class CSafeLoader(_LibyamlLoader):
        """libyaml's loader, remembering the tag of each scalar it resolved. Resolving runs a few regular expressions
        in Python for every scalar, and a DAG file says `run`, `depends_on` and the same task names thousands of
        times: a third of composing a big file went there."""

        def __init__(self, stream: str):
            super().__init__(stream)
            self._tags: dict[tuple, str] = {}

        def resolve(self, kind: type, value: Any, implicit: Any) -> str:
            key = (kind, value, implicit)
            tag = self._tags.get(key)
            if tag is None:
                tag = self._tags[key] = super().resolve(kind, value, implicit)
            return tag
else:
    CSafeLoader = None
#: What a converter returns after reporting an error: the field is left out, so the spec's default applies.
_SKIP: Any = object()
Converter = Callable[[Node, str], Any]


def load_yaml(path: Path, text: str | None = None, root: Node | None = None) -> DagSpec:
    """Load a YAML DAG file (read from `path` unless `text` is given; composed already when `root` is given). Raises
    DagErrors listing every problem found."""
    if text is None:
        text = read_source(path)
    reader = _Reader(str(path))
    dag = reader.dag(compose(text, reader.file) if root is None else root, path)
    if reader.errors:  # requests can't be checked against capacities that are themselves wrong
        raise DagErrors(reader.errors, partial=None if reader.capacities_wrong else dag)
    assert dag is not None  # every path that yields no spec reports an error
    return dag


#: The deepest nesting of lists and mappings a DAG file may have: a DAG needs half a dozen levels. PyYAML's composer
#: recurses twice per level (Python's recursion limit stops it near 450 levels) and libyaml's recurses in C (its stack
#: overflows near 25,000), so depth is checked before composing where it could be dangerous, and after. The check
#: counts levels itself rather than relying on libyaml's own limit, which only libyaml 0.2.6 (in PyYAML 6.0.4's
#: wheels) has, at 1,000 flow levels by default.
MAX_DEPTH = 100
#: Files whose nesting can't exceed this (by `_depth_bound`) are composed by libyaml without looking first.
_SAFE_TO_COMPOSE = 5000
#: What can come before the first token of a block collection on its line: indentation, compact `- `/`? `/`: `
#: indicators and node properties (`&anchor`, `!tag`).
_LINE_PREFIX = re.compile(r"^(?:[ \t?:-]|[&!][^ \t\n]*)*", re.MULTILINE)


def _depth_bound(text: str) -> int:
    """An upper bound on the file's nesting, cheap enough for every load. Flow collections need an opening bracket
    each. A block collection nested in another starts at a greater column, or at the same one for a sequence that
    is a mapping's value, so block levels are at most twice the columns where one can start."""
    flow = text.count("[") + text.count("{")
    return flow + 2 * (max(map(len, _LINE_PREFIX.findall(text)), default=0) + 2)


def _too_deep(file: str, mark: Mark) -> DagErrors:
    return DagErrors([DagError(f"nesting too deep: more than {MAX_DEPTH} levels of lists and mappings",
                               _location(file, mark))])


def check_depth(text: str, file: str, always: bool = False) -> None:
    """Refuse a file nested too deeply to compose safely, before anything composes it. The parser's event stream is
    flat (no recursion), so this pass is safe on any input, but it costs a fifth of composing: it runs only when
    `_depth_bound` can't rule deep nesting out. A syntax error ends it quietly: composing reports that.

    libyaml 0.2.6 refuses a flow collection 1,000 levels deep, and its scanner reads up to 1,024 characters ahead,
    so on `[[[[…` it stops with that error before handing over the level past MAX_DEPTH: whenever libyaml stops on
    an error, PyYAML's own parser (no nesting limit, no recursion either) scans the file again."""
    if not always and _depth_bound(text) <= _SAFE_TO_COMPOSE:
        return
    if CSafeLoader is None or not _scan_depth(CSafeLoader, text, file):
        _scan_depth(SafeLoader, text, file)


def _scan_depth(loader_class: type, text: str, file: str) -> bool:
    """Raise if the file's events nest deeper than MAX_DEPTH; False if the parser stopped on an error before."""
    loader = loader_class(text)
    check, get = loader.check_event, loader.get_event
    depth = 0
    try:
        while check():
            event = get()
            kind = event.__class__
            if kind is MappingStartEvent or kind is SequenceStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(file, event.start_mark)
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                depth -= 1
    except YAMLError:
        return False
    finally:
        loader.dispose()
    return True


def check_tree_depth(root: Node | None, file: str) -> None:
    """Refuse a composed document nested deeper than MAX_DEPTH (iteratively: nothing recurses into it). Aliases
    make the tree a graph that can be exponentially larger than the file (a "billion laughs"), so a node is walked
    again only when reached deeper than before: at most MAX_DEPTH times. On the way, every key and value is checked
    to be text that can be written anywhere (a "\\ud800" escape makes a lone surrogate, which can't)."""
    if root is None:
        return
    deepest: dict[int, int] = {}
    stack = [(root, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        kind = node.__class__
        if kind is ScalarNode:
            if not node.value.isascii():
                _check_text(node, file)
            continue
        if deepest.get(id(node), 0) >= depth:
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(file, node.start_mark)
        deepest[id(node)] = depth
        if kind is MappingNode:
            for key, value in node.value:
                push((key, depth + 1))
                push((value, depth + 1))
        else:
            for item in node.value:
                push((item, depth + 1))


def _check_text(node: ScalarNode, file: str) -> None:
    problem = surrogate_problem("this value", node.value)
    if problem:
        raise DagErrors([DagError(problem, _location(file, node.start_mark))])


def recursion_error(loader: Any, text: str, file: str) -> DagErrors:
    """The located error for PyYAML's composer running out of stack (a file nested a few hundred levels, which
    `check_depth` let through unlooked): where the event stream gets too deep, else where the loader stopped."""
    try:
        check_depth(text, file, always=True)
    except DagErrors as exc:
        return exc
    mark = loader.get_mark() if hasattr(loader, "get_mark") else None
    return _too_deep(file, mark) if mark else DagErrors([DagError("nesting too deep", Location(file, 1, 1))])


def compose(text: str, file: str) -> Node | None:
    """The node tree of the file's only document (None when it has none). Broken YAML stops loading right here,
    since nothing after a syntax error can be trusted."""
    try:
        root = _single_document(text, file)
        check_tree_depth(root, file)
        return root
    except MarkedYAMLError as exc:
        raise DagErrors([_syntax_error(exc, file)]) from None
    except ReaderError as exc:
        problem = f"invalid YAML: unacceptable character #x{exc.character:04x}: {exc.reason}"
        raise DagErrors([DagError(problem, _offset_location(file, text, exc.position))]) from None


def _single_document(text: str, file: str) -> Node | None:
    """A second document is an error rather than ignored: such a file is not in tuidag's format.

    libyaml composes ten times faster (it matters for DAGs of thousands of tasks); on a syntax error the pure-Python
    parser runs again, because its messages are the ones users and the tests read."""
    if CSafeLoader is not None:
        try:
            return _compose_with(CSafeLoader, text, file)
        except (YAMLError, DagErrors):
            pass
    return _compose_with(SafeLoader, text, file)


def _compose_with(loader_class: type, text: str, file: str) -> Node | None:
    loader = loader_class(text)
    try:
        try:
            root = loader.get_node() if loader.check_node() else None
        except RecursionError:
            raise recursion_error(loader, text, file) from None
        if loader.check_node():
            second = loader.peek_event().start_mark
            raise DagErrors([DagError("found a second YAML document: a DAG file holds exactly one",
                                      _location(file, second))])
        return root
    finally:
        loader.dispose()


def _syntax_error(exc: MarkedYAMLError, file: str) -> DagError:
    """PyYAML's problem at its mark, with the construct it was reading when that started on an earlier line."""
    problem_mark, context_mark = exc.problem_mark, exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context}"
    if exc.problem and exc.context:
        started = context_mark and problem_mark and context_mark.line != problem_mark.line
        message += f" ({exc.context}" + (f" started on line {context_mark.line + 1})" if started else ")")
    mark = problem_mark or context_mark
    if exc.problem == "mapping values are not allowed here" and problem_mark is not None:
        message += _colon_hint(problem_mark)
    return DagError(message, _location(file, mark) if mark else Location(file, 1, 1))


def _colon_hint(mark: Mark) -> str:
    """What to do about the most common YAML mistake: a plain value with `: ` in it (`run: python3 -c "while True:
    pass"`) reads as a second key. The key is taken from the line the mark is on (the pure loader's marks carry the
    text), so the advice names it."""
    buffer = getattr(mark, "buffer", None)
    key = None
    if isinstance(buffer, str):
        start = buffer.rfind("\n", 0, mark.pointer) + 1
        found = _KEY_ON_LINE.match(buffer, start, mark.pointer)
        key = found.group(1) if found else None
    block = f"write it as a block ({key}: | with the value on the lines below, indented)" if key \
        else "write it as a block (| with the value on the lines below, indented)"
    return f": quote a value holding ': ' ('...' or \"...\") or {block}"


_KEY_ON_LINE = re.compile(r"[ \t]*(?:-[ \t]+)?([A-Za-z0-9_.-]+):[ \t]")


def _location(file: str, mark: Mark) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


def _offset_location(file: str, text: str, offset: int) -> Location:
    line_start = text.rfind("\n", 0, offset) + 1
    return Location(file, text.count("\n", 0, offset) + 1, offset - line_start + 1)


class _Reader:
    """Walks one composed document, converting each value and collecting every error instead of stopping."""

    def __init__(self, file: str):
        self.file = file
        self.errors: list[DagError] = []
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
            self.capacities_wrong = any(err.location and (start.line + 1, start.column + 1) <= (
                err.location.line, err.location.col) <= (end.line + 1, end.column + 1) for err in self.errors)
        if "resources" in settings:  # capacities
            settings["resources"] = {kind: count for kind, (count, _) in settings["resources"].items()}
        settings.setdefault("name", path.stem)
        settings.setdefault("workdir", folder)
        if tasks_field is None:
            self.fail(root, "missing 'tasks': a DAG file needs at least one task")
        tasks = self.tasks(tasks_field[1], settings["workdir"]) if tasks_field else {}
        self.errors.extend(graph_errors(tasks))
        return DagSpec(tasks=tasks, source=path.resolve(), **settings)

    def tasks(self, node: Node, workdir: Path) -> dict[str, TaskSpec]:
        if isinstance(node, SequenceNode):
            self.fail(node, "tasks must be a mapping of task names to tasks, not a list: "
                            "write 'NAME:' keys instead of '- ' items")
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
        }
        settings = self.settings(fields, converters, TASK_KEYS, prefix=f"task '{name}': ")
        if "resources" in settings:  # requests, located where each is written
            settings["resources"] = {kind: Request(count, where) for kind, (count, where) in
                                     settings["resources"].items()}
        deps = settings.pop("depends_on", [])
        return TaskSpec(name=name, depends_on=tuple(dep for dep, _ in deps), location=location,
                        dep_locations=tuple(where for _, where in deps), **settings)

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

    def settings(self, fields: dict[str, tuple[Node, Node]], converters: dict[str, Converter],
                 known: tuple[str, ...], prefix: str) -> dict[str, Any]:
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
        text = self.text(node, what, "a directory path")
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
                self.fail(value, f"{what} value for '{name}' must be a string, number or boolean, "
                                 f"got {_describe(value)}")
        return env

    def slots(self, node: Node, what: str, minimum: int) -> dict[str, tuple[int, Location]]:
        """Slot kind -> (count, where the kind is written): capacities at the top level, requests in a task."""
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a mapping of resource names to counts, e.g. {{gpu: 1}}, "
                            f"got {_describe(node)}")
            return _SKIP
        slots: dict[str, tuple[int, Location]] = {}
        for kind, (key, value) in self.mapping(node, "resource").items():
            problem = kind_problem(kind)
            if problem:
                self.fail(key, f"{what}: {problem}")
                continue
            count = self.integer(value, f"{what}: '{kind}'", minimum)
            if count is not _SKIP:
                slots[kind] = (count, self.at(key))
        return slots

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
        isinstance(k, ScalarNode) and k.value == "run" for k, _ in value.value)
    if not hint and "tasks" in known and looks_like_task:
        hint = " (tasks go under 'tasks:')"
    return hint


def _typed(node: Node, *tags: str) -> Any:
    """The Python value of a scalar resolved (or explicitly tagged) as one of `tags`; None if it isn't one,
    including an explicit tag that doesn't fit, like `!!int abc`."""
    if not isinstance(node, ScalarNode) or node.tag not in tags:
        return None
    try:
        return SafeConstructor().construct_object(node)
    except (ValueError, LookupError, YAMLError):
        return None


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


def _describe(node: Node) -> str:
    """A node as messages show it: strings quoted, other scalars as written, collections by kind."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if node.tag == _NULL:
        return "null"
    text = repr(node.value) if node.tag == _STR else node.value
    return text if len(text) <= 60 else f"{text[:40]}... ({len(node.value)} characters)"
