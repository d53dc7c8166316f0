"""One entry point for DAG files, whatever format they are in: read once, then hand the text to the right loader."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .collector import collector_paused
from .source import read_source
from .spec import DagSpec

if TYPE_CHECKING:
    from .errors import Note

__all__ = ["load_dag"]

#: A line that starts or ends a YAML document. Only files with one can hold several documents, so only those are
#: composed a first time to find out whether they are SkyPilot pipelines.
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?:[ \t\r]|$)", re.MULTILINE)


def load_dag(
    path: Path, notes: list[Note] | None = None, text: str | None = None, env: Sequence[tuple[str, str]] = ()
) -> DagSpec:
    """Load and validate the DAG in `path` (whose text is `text` when the caller read it already), with `env`
    (`--env KEY=VALUE` pairs) given to every task. Raises DagErrors (every problem, located) for unreadable or bad
    files. Notes (settings that have no effect here, each located) are appended to `notes` when it is given."""
    with collector_paused():  # loading is quadratic with the collector on (see collector.py)
        return _load(path, notes, read_source(path) if text is None else text, dict(env))


def _load(path: Path, notes: list[Note] | None, text: str, env: dict[str, str]) -> DagSpec:
    # PyYAML is a quarter of tuidag's imports: not for a cached DAG.
    from yaml.nodes import MappingNode

    from .yaml_loader import load_yaml
    from .yaml_nodes import check_depth, compose

    file = str(path)
    check_depth(text, file)  # before libyaml's composer recurses into the file (in C: too deep would crash)

    # Formats are told apart by content, not by file extension, since they all end in .yaml: a multi-document file
    # whose first document has no `tasks:`, or a single document with keys only SkyPilot tasks have, is SkyPilot
    # YAML; anything else is tuidag's own format.
    if _DOCUMENT_MARKER.search(text):
        from .skypilot_loader import load_skypilot, pipeline_documents  # loaded only for multi-document files

        documents = pipeline_documents(text, file)
        if documents is not None:
            return load_skypilot(path, documents, notes, env)
        return load_yaml(path, text, notes=notes).with_env(env)
    root = compose(text, file)
    if isinstance(root, MappingNode) and not any(key.value == "tasks" for key, _ in root.value):
        from .skypilot_loader import is_task_document, load_skypilot

        if is_task_document(root):
            return load_skypilot(path, [root], notes, env)
    return load_yaml(path, text, root, notes).with_env(env)
