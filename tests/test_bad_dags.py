"""The malformed-DAG corpus: every file in bad_dags/ states, in `# expect:` lines, the exact errors it must produce.

FILE in an expectation stands for the path as it was passed, so the same corpus checks the loader and the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from slowness import patience
from tuidag.model.errors import DagErrors
from tuidag.model.loader import load_dag

pytestmark = pytest.mark.xdist_group("bad_dags")  # one worker: the module-scoped fixtures are made once

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "bad_dags"
CASES = sorted(CORPUS.glob("*.yaml"))
EXPECT = "# expect: "


def expected_lines(path: Path, shown_as: str) -> list[str]:
    # bytes, decoded leniently: some files are broken on purpose below their header (not_utf8.yaml)
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [line[len(EXPECT) :].replace("FILE", shown_as) for line in text.splitlines() if line.startswith(EXPECT)]


def test_corpus_is_complete():
    assert len(CASES) >= 30
    assert [p.name for p in CASES if not expected_lines(p, "FILE")] == []


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_loader_reports_exactly_the_expected_errors(path: Path):
    with pytest.raises(DagErrors) as caught:
        load_dag(path)
    assert [str(err) for err in caught.value.errors] == expected_lines(path, str(path))


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory) -> dict[Path, tuple[subprocess.CompletedProcess, Path]]:
    """`tuidag run` on every corpus file, several at once (each is a separate process): the slow part of this
    module runs in a few seconds instead of a minute."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    base = tmp_path_factory.mktemp("states")

    def run(path: Path) -> tuple[subprocess.CompletedProcess, Path]:
        state = base / path.stem
        relative = str(path.relative_to(REPO))  # as a user would type it, from the project folder
        proc = subprocess.run(
            [sys.executable, "-m", "tuidag", "run", "--no-tui", "--state-dir", str(state), relative],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=patience(60),
        )
        return proc, state

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(CASES, pool.map(run, CASES)))


@pytest.mark.cli
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_run_command_prints_the_errors_exits_2_and_starts_nothing(path: Path, cli_results):
    proc, state = cli_results[path]
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == expected_lines(path, str(path.relative_to(REPO)))
    assert proc.stdout == ""
    assert not state.exists()  # no run folder, no journal: nothing started
