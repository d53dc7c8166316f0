"""The malformed-DAG corpus: every file in bad_dags/ states, in `# expect:` lines, the exact errors it must produce.

FILE in an expectation stands for the path as it was passed, so the same corpus checks the loader and the CLI.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuidag.model.errors import DagErrors
from tuidag.model.loader import load_dag

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "bad_dags"
CASES = sorted(CORPUS.glob("*.yaml"))
EXPECT = "# expect: "


def expected_lines(path: Path, shown_as: str) -> list[str]:
    # bytes, decoded leniently: some files are broken on purpose below their header (not_utf8.yaml)
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [line[len(EXPECT):].replace("FILE", shown_as) for line in text.splitlines() if line.startswith(EXPECT)]


def test_corpus_is_complete():
    assert len(CASES) >= 30
    assert [p.name for p in CASES if not expected_lines(p, "FILE")] == []


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_loader_reports_exactly_the_expected_errors(path: Path):
    with pytest.raises(DagErrors) as caught:
        load_dag(path)
    assert [str(err) for err in caught.value.errors] == expected_lines(path, str(path))


@pytest.mark.cli
@pytest.mark.skipif(not (REPO / "tuidag" / "cli.py").exists(), reason="the CLI is not written yet")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_validate_command_prints_the_errors_and_exits_2(path: Path):
    relative = str(path.relative_to(REPO))  # as a user would type it, from the project folder
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "tuidag", "validate", relative], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == expected_lines(path, relative)
    assert proc.stdout == ""
