"""Hostile process trees for the no-orphans suite. Every process of a tree appends its pid to $PIDS, so a test knows
exactly which processes to check, by pid and create time, once tuidag says the task is over."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tree:
    name: str
    script: str  # shell, with {pids} standing for the pid file
    processes: int  # how many pids it records once fully started
    escapes: bool = False  # leaves the group and session and drops the tags: only a cgroup ends it with its attempt

    def command(self, pids: Path) -> str:
        return self.script.format(pids=shlex.quote(str(pids)))


def _child(body: str) -> str:
    """`sh -c '<body>'` with its own pid recorded first."""
    return "sh -c 'echo $$ >> {pids}; " + body + "'"


TREES = [
    Tree("sleep", "echo $$ >> {pids}; exec sleep 60", 1),
    Tree("pipeline", _child("exec sleep 100") + " | " + _child("exec cat") + " & echo $$ >> {pids}; wait", 3),
    Tree("ignores-term", "trap '' TERM; echo $$ >> {pids}; while :; do sleep 0.05; done", 1),
    Tree(
        "daemonises",
        "sh -c \"setsid sh -c 'echo \\$\\$ >> {pids}; exec sleep 60' &\"; echo $$ >> {pids}; exec sleep 60",
        2,
    ),
    Tree(
        "fifty-children", "for i in $(seq 50); do " + _child("exec sleep 60") + " & done; echo $$ >> {pids}; wait", 51
    ),
    Tree(
        "untagged-daemon",
        "(setsid env -i sh -c 'echo $$ >> {pids}; exec sleep 60' &); echo $$ >> {pids}; exec sleep 60",
        2,
        escapes=True,
    ),
    Tree(
        "leader-dies-children-ignore",
        "for i in 1 2 3; do sh -c 'trap \"\" TERM; echo $$ >> {pids}; exec sleep 60' & done; echo $$ >> {pids}; wait",
        4,
    ),
]
TREE_IDS = [t.name for t in TREES]
