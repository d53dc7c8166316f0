"""Every command that prints a string from the DAG file, the journal or a task (the DAG's name, a failure's reason
holding a path, a bad key) prints it inert: no escape sequence or control character reaches the terminal, and no
newline in it can start a line that poses as tuidag's own (`[deploy] --> SUCCEEDED`)."""

from __future__ import annotations

import pytest

from test_cli import tuidag, write

pytestmark = pytest.mark.cli

FORGERY = r"\n[deploy] --> SUCCEEDED\e]0;PWNED\a\e[2J"
DAG = rf"""
name: "evil{FORGERY}"
tasks:
  fine:
    run: echo fine
  lost:
    run: echo never
    workdir: "nowhere{FORGERY}"
  long:
    run: sleep 30
    depends_on: fine
"""


def assert_inert(proc, command: str) -> None:
    said = proc.stdout + proc.stderr
    assert "\x1b" not in said and "\x07" not in said, (command, said)
    assert not any(line.startswith("[deploy]") for line in said.splitlines()), (command, said)
    assert "Traceback" not in said, (command, said)


def test_no_print_path_lets_a_hostile_name_or_reason_reach_the_terminal_raw(tmp_path):
    dag = write(tmp_path / "dag.yaml", DAG)
    quick = write(tmp_path / "quick.yaml", DAG.replace("sleep 30", "true"))
    bad = write(tmp_path / "bad.yaml", rf'"key{FORGERY}": 1' + "\ntasks:\n  a: {run: echo}\n")
    commands = [
        ("validate", str(dag)),
        ("validate", str(bad)),
        ("run", "--no-tui", str(bad)),
        ("graph", str(dag)),
        ("graph", "--format", "dot", str(dag)),
        ("graph", "--format", "mermaid", str(dag)),
        ("run", "--no-tui", str(quick)),
        ("run", "--no-tui", "-q", str(quick)),
        ("runs",),
        ("runs", "--task", "lost"),
        ("report", "-o", "r.html"),
        ("run", "-d", str(dag)),
        ("pause",),
        ("resume",),
        ("cancel", "long"),
        ("stop",),
        ("runs",),
    ]
    seen = []
    for command in commands:
        proc = tuidag(*command, cwd=tmp_path)
        assert_inert(proc, " ".join(command))
        seen.append(proc.stdout + proc.stderr)
    # the strings were there to be printed, made visible: the checks above looked at real output
    assert "evil\ufffd[deploy] --> SUCCEEDED" in seen[0]
    assert "unknown key 'key\\n[deploy]" in seen[1] or "key\ufffd[deploy]" in seen[1]
    assert "evil\ufffd[deploy] --> SUCCEEDED" in seen[6]
    assert "could not start: workdir" in seen[6] and "nowhere\ufffd[deploy] --> SUCCEEDED" in seen[6]
