"""The real `tuidag` command in a subprocess, as a user runs it: this tree's code, no colour, no TUIDAG_STATE_DIR of
the caller's, no terminal on stdin; run to its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slowness import patience

REPO = Path(__file__).resolve().parent.parent


def command_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment `tuidag` gets: the caller's, without TUIDAG_STATE_DIR, with NO_COLOR and this tree first on
    PYTHONPATH; `env` adds variables."""
    full = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
    full.update({"NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))})
    full.update(env or {})
    return full


def tuidag(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuidag", *args],
        cwd=cwd,
        env=command_env(env),
        capture_output=True,
        text=True,
        timeout=patience(timeout),
        stdin=subprocess.DEVNULL,
    )
