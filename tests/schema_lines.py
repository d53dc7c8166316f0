"""A DAG file read as an editor with the JSON schema reads it, and the lines its mistakes are on, so the schema's
verdict can be set beside `tuidag validate`'s (tests/test_schema.py).

The file is read as JSON data, as the YAML language server reads it: timestamps stay strings (YAML 1.2 and JSON
have no dates), keys are strings, a duplicate key is the last one. A syntax error is the YAML parser's, located where
PyYAML says; a schema error is located where the loader would say it: a wrong value on its value's line, a key that
may not be there on that key's line, a missing key on the line of the key of the mapping that lacks it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from tuidag.model.dag_schema import dag_schema


class JsonLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's safe loader (YAML 1.1, the reading tuidag has: `yes` is true), without dates; libyaml's when there."""


JsonLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@cache
def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(dag_schema())


def json_data(value: Any) -> Any:
    """What JSON can hold: mapping keys as strings."""
    if isinstance(value, dict):
        return {str(key): json_data(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_data(item) for item in value]
    return value


def read(text: str) -> tuple[Node | None, Any]:
    """The node tree and the data of one document. Raises yaml.YAMLError."""
    loader = JsonLoader(text)
    try:
        node = loader.get_single_node()
        return node, json_data(loader.construct_document(node) if node is not None else None)
    finally:
        loader.dispose()


def schema_lines(text: str) -> set[int]:
    """The lines the YAML parser or the schema finds a mistake on in `text` (none: the schema takes it)."""
    try:
        root, data = read(text)
    except yaml.MarkedYAMLError as exc:
        assert exc.problem_mark is not None
        return {exc.problem_mark.line + 1}
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        return {text.count("\n", 0, exc.position) + 1}
    lines: set[int] = set()
    for error in validator().iter_errors(data):
        lines |= _lines(error, root)
    return lines


def _lines(error: jsonschema.ValidationError, root: Node | None) -> set[int]:
    path = list(error.absolute_path)
    key, node = _find(root, path)
    if "propertyNames" in error.relative_schema_path:  # a bad key: error.instance is its text
        return {_key_line(node, error.instance)}
    if error.validator == "additionalProperties":
        schema = error.schema
        assert isinstance(schema, dict) and isinstance(error.instance, dict)
        known = schema.get("properties", {})
        patterns = [jsonschema.Draft202012Validator({"pattern": p}) for p in schema.get("patternProperties", {})]
        extra = [k for k in error.instance if k not in known and not any(v.is_valid(k) for v in patterns)]
        return {_key_line(node, name) for name in extra}
    if error.validator in ("required", "dependentRequired") or (
        error.validator == "not" and error.validator_value == {}
    ):
        return {_line(key if key is not None else node)}
    return {_line(node)}


def _find(root: Node | None, path: list[Any]) -> tuple[Node | None, Node | None]:
    """(the key node, the value node) at `path`; no key node at the top."""
    key: Node | None = None
    node = root
    for part in path:
        if isinstance(node, MappingNode):
            key, node = [(k, v) for k, v in node.value if str(k.value) == str(part)][-1]
        else:
            assert isinstance(node, SequenceNode)
            key, node = None, node.value[part]
    return key, node


def _key_line(mapping: Node | None, name: str) -> int:
    assert isinstance(mapping, MappingNode)
    return _line([k for k, _ in mapping.value if str(k.value) == name][-1])


def _line(node: Node | None) -> int:
    return 1 if node is None else node.start_mark.line + 1
