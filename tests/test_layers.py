"""The import contract of pyproject.toml's [tool.importlinter]: arrows point down the layers only (front ends ->
views -> control -> store -> engine -> model), every top-level module has its place in them, and nothing outside
tuidag.ui imports textual. Checked on the source by import-linter, imports inside functions included."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_imports_follow_the_layers_and_only_the_ui_imports_textual(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlinter.cli import lint_imports

    monkeypatch.setattr(sys, "path", list(sys.path))  # lint_imports puts the working directory in front
    monkeypatch.chdir(REPO)
    status = lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True, no_logo=True)
    assert status == 0, "a broken import contract: its imports are listed in the captured output above"
