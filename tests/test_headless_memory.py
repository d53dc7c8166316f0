"""Headless output holds a bounded amount of a task's output whatever the task prints (#14.16: 200 MB of lines once
took tuidag to 0.9 GB, one 200 MB line to 0.6 GB). The peak RSS (VmHWM) of a real `tuidag run --no-tui` whose output
is drained from a pipe is compared with that of a run printing one line; `benchmarks/log_bench.py` measures the same
at 200 MB and more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.cli

MB = 1 << 20
SIZE = 64 * MB  # more than the growth allowed, so output held whole (or twice, as it once was) cannot pass
ALLOWED_GROWTH = 50 * MB  # the target


def peak_rss(folder: Path, command: str) -> tuple[int, int]:
    """Peak RSS of a headless run of one task running `command`, and how many bytes it printed."""
    folder.mkdir()
    (folder / "dag.yaml").write_text(json.dumps({"tasks": {"writer": {"run": command}}}))
    env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"} | {"NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "dag.yaml"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    printed = 0

    def drain() -> None:
        nonlocal printed
        while data := proc.stdout.read1(MB):
            printed += len(data)

    reader = threading.Thread(target=drain)
    reader.start()
    peak = 0
    status = f"/proc/{proc.pid}/status"
    while proc.poll() is None:  # VmHWM only grows: a poll now and then finds the peak
        try:
            with open(status) as f:
                peak = max(peak, int(f.read().split("VmHWM:")[1].split()[0]) * 1024)
        except (OSError, IndexError):
            pass
        reader.join(0.02)
    reader.join()
    assert proc.returncode == 0, command
    return peak, printed


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(f"yes \"$(printf '%099d' 0)\" | head -c {SIZE}", id="64 MB of 100-byte lines"),
        pytest.param(f"head -c {SIZE} /dev/zero | tr '\\0' x; echo", id="one 64 MB line"),
    ],
)
def test_rss_growth_stays_under_50_mb_whatever_the_task_prints(tmp_path, command):
    baseline, _ = peak_rss(tmp_path / "baseline", "echo hello")
    peak, printed = peak_rss(tmp_path / "flood", command)
    assert printed > MB  # the output was printed (a long line cut to its first MiB), not dropped
    assert peak - baseline < ALLOWED_GROWTH, f"RSS grew {(peak - baseline) / MB:.0f} MB"
