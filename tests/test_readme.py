"""The README is where a new user starts: its command list names every option, and it says which Python is needed
(#13: `--file` was missing from the list, and nothing said Python 3.11 or later)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tuidag.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
COMMANDS = README.split("## Commands", 1)[1].split("```")[1]


def entries() -> list[str]:
    """The command list's entries: a `tuidag ...` line with the lines below it, and an entry whose comment goes on
    into the next one (ending in `;` or an open parenthesis) together with that one."""
    found: list[str] = []
    for line in COMMANDS.strip("\n").splitlines():
        comment = found[-1].rsplit("#", 1)[-1] if found else ""
        unfinished = comment.rstrip().endswith(";") or comment.count("(") > comment.count(")")
        if line.startswith("tuidag ") and not (found and unfinished):
            found.append(line)
        else:
            found[-1] += "\n" + line
    return found


def commands() -> dict[str, argparse.ArgumentParser]:
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_command_list_names_the_command_and_each_of_its_options(name):
    text = "\n".join(entry for entry in entries() if re.search(rf"^tuidag (\S+ \| )*{name}\b", entry, re.M))
    assert text, f"no entry for {name}"
    for action in commands()[name]._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        assert any(re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) for option in action.option_strings), (
            name,
            action.option_strings,
        )


def test_the_readme_says_which_python_is_needed():
    required = re.search(r'requires-python = ">=(\d+\.\d+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert f"Python {required} or later" in README
