"""YAML text to one document's node tree, safely, with located errors; and what reading a node needs (its resolved
value, how messages show it). Both formats' readers (yaml_loader.py, skypilot_loader.py) start here.

Safely: a file nested deeper than MAX_DEPTH is refused before a composer recurses into it (PyYAML's in Python,
libyaml's in C, which would crash), and every value is checked to be text that can be written anywhere. Located:
a syntax error, a second document or an unacceptable character is a `FILE:LINE:COL` error, with a hint for the most
common mistake.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml import SafeLoader, YAMLError
from yaml.constructor import SafeConstructor
from yaml.error import Mark, MarkedYAMLError
from yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from .errors import DagError, DagErrors, Location
from .spec import surrogate_problem

_NULL, _BOOL, _INT, _FLOAT, _STR = (f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "str"))

CSafeLoader: type[yaml.CSafeLoader] | None  # None: PyYAML built without libyaml
if yaml.__with_libyaml__:

    class _TagCachingLoader(yaml.CSafeLoader):
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

    CSafeLoader = _TagCachingLoader
else:
    CSafeLoader = None


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
    return DagErrors(
        [DagError(f"nesting too deep: more than {MAX_DEPTH} levels of lists and mappings", _location(file, mark))]
    )


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


def _check_text(node: Node, file: str) -> None:
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
            raise DagErrors(
                [DagError("found a second YAML document: a DAG file holds exactly one", _location(file, second))]
            )
        return root
    finally:
        loader.dispose()


def _syntax_error(exc: MarkedYAMLError, file: str) -> DagError:
    """PyYAML's problem at its mark, with the construct it was reading when that started on an earlier line."""
    problem_mark, context_mark = exc.problem_mark, exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context}"
    if exc.problem and exc.context:
        if context_mark and problem_mark and context_mark.line != problem_mark.line:
            message += f" ({exc.context} started on line {context_mark.line + 1})"
        else:
            message += f" ({exc.context})"
    mark = problem_mark or context_mark
    if exc.problem == "mapping values are not allowed here" and problem_mark is not None:
        message += _colon_hint(problem_mark)
    elif exc.problem and exc.problem.endswith("but got '{'") and "flow" in (exc.context or ""):
        # `inputs: [in-${{ matrix.seed }}.txt]`: in a [...] or {...} a `{` starts a mapping, unquoted
        message += ': quote a value holding ${{ matrix.KEY }} inside [...] or {...} ("in-${{ matrix.seed }}.txt")'
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
    block = (
        f"write it as a block ({key}: | with the value on the lines below, indented)"
        if key
        else "write it as a block (| with the value on the lines below, indented)"
    )
    return f": quote a value holding ': ' ('...' or \"...\") or {block}"


_KEY_ON_LINE = re.compile(r"[ \t]*(?:-[ \t]+)?([A-Za-z0-9_.-]+):[ \t]")


def _location(file: str, mark: Mark) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


def _offset_location(file: str, text: str, offset: int) -> Location:
    line_start = text.rfind("\n", 0, offset) + 1
    return Location(file, text.count("\n", 0, offset) + 1, offset - line_start + 1)


def _typed(node: Node, *tags: str) -> Any:
    """The Python value of a scalar resolved (or explicitly tagged) as one of `tags`; None if it isn't one,
    including an explicit tag that doesn't fit, like `!!int abc`."""
    if not isinstance(node, ScalarNode) or node.tag not in tags:
        return None
    try:
        return SafeConstructor().construct_object(node)
    except (ValueError, LookupError, YAMLError):
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
