"""A matrix in the real binary in a real 80x24 terminal (tmux): one group tile at start, its instances on `+`, one
tile again on `-`."""

from __future__ import annotations

import shutil

import pytest
from test_tmux import Tmux
from test_tmux_80x24 import SMALL

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

SWEEP = """\
name: sweep
tasks:
  prepare: {run: 'true'}
  train:
    depends_on: prepare
    matrix: {lr: [0.01, 0.1, 1], seed: [1, 2, 3, 4]}
    run: 'true'
  report: {run: 'true', depends_on: train}
"""


def test_a_matrix_folded_and_unfolded_at_80x24(tmp_path):
    tmux = Tmux(tmp_path, SWEEP, size=SMALL)
    try:
        screen = tmux.wait_for("12✔")  # the group's tile counts its instances done
        assert "train ×12" in screen and "train[" not in screen
        assert "prepare" in screen and "report" in screen
        tmux.keys("l")  # from prepare to the group's tile
        tmux.keys("+")
        screen = tmux.wait_for("seed=4")
        graph = "\n".join(screen.splitlines()[:14])  # above the log pane
        assert "train ×12" not in graph and "train[lr=1,seed=4]" in graph and "train[lr=0.1,seed=1]" in graph
        tmux.keys("-")
        screen = tmux.wait_for("train ×12")
        graph = "\n".join(screen.splitlines()[:14])  # above the log pane (which shows the instance's log)
        assert "seed=4" not in graph
    finally:
        tmux.kill()
