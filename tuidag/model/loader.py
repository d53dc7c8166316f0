"""One entry point for DAG files, whatever format they are in: read once, then hand the text to the right loader."""
from __future__ import annotations

from pathlib import Path

from .source import read_source
from .spec import DagSpec
from .yaml_loader import load_yaml


def load_dag(path: Path) -> DagSpec:
    """Load and validate the DAG in `path`. Raises DagErrors (every problem, located) for unreadable or bad files."""
    text = read_source(path)
    # Dispatch point: formats are told apart by content, not by file extension, since they all end in .yaml.
    # A SkyPilot pipeline loader (multi-document files) will be chosen here before falling back to tuidag's format.
    return load_yaml(path, text)
