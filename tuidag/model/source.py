"""Reading DAG files: the one place where OS and encoding failures become located errors, shared by every loader."""
from __future__ import annotations

from pathlib import Path

from .errors import DagError, DagErrors, Location


def read_source(path: Path) -> str:
    """The file's text, or DagErrors pointing at the file itself, so a bad path reads like any other DAG error."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    except OSError as exc:
        problem = exc.strerror or str(exc)
    raise DagErrors([DagError(f"cannot read file: {problem}", Location(str(path), 1, 1))])
