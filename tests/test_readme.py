"""The README is where a new user starts, and the documentation site where they read on: the command list of
Getting started names every option, the README's short list names only commands and options that exist, both say
which Python is needed (#13: `--file` was missing from the list, and nothing said Python 3.11 or later), and the
README stays a page or two (#33: it had grown past 1,200 lines; its sections now live in docs/)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tuidag.cli import build_parser
from tuidag.model.loader import load_dag

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
GETTING_STARTED = (REPO / "docs" / "getting-started.md").read_text()
COMMANDS = GETTING_STARTED.split("## The commands", 1)[1].split("```")[1]
QUICKSTART = [
    "pip install -e . && tuidag run demos/pipeline.yaml",
    "pip install -e '.[test]' && python -m pytest -q -n 4",
]


def entries(listing: str) -> list[str]:
    """A command list's entries: a `tuidag ...` line with the lines below it, and an entry whose comment goes on
    into the next one (ending in `;` or an open parenthesis) together with that one."""
    found: list[str] = []
    for line in listing.strip("\n").splitlines():
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
    text = "\n".join(entry for entry in entries(COMMANDS) if re.search(rf"^tuidag (\S+ \| )*{name}\b", entry, re.M))
    assert text, f"no entry for {name}"
    for action in commands()[name]._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        assert any(re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) for option in action.option_strings), (
            name,
            action.option_strings,
        )


def test_the_readme_names_only_commands_and_options_that_exist():
    """Each line of the README's command list starts with a command tuidag has, and each option on it (its comment
    included) is an option of a command the line names (`attach | show`, or `graph` in `validate`'s comment)."""
    listing = README.split("## The main commands", 1)[1].split("```")[1]
    known = commands()
    for line in listing.strip("\n").splitlines():
        words = line.split()
        assert words[0] == "tuidag" and words[1] in known, f"no command of tuidag's at the start of {line!r}"
        named = {word for word in re.findall(r"[a-z]+", line) if word in known}
        for option in set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line)):
            assert any(option in action.option_strings for name in named for action in known[name]._actions), (
                f"{option} is no option of {sorted(named)} ({line!r})"
            )


def test_the_readme_and_getting_started_say_which_python_is_needed():
    required = re.search(r'requires-python = ">=(\d+\.\d+)"', (REPO / "pyproject.toml").read_text()).group(1)
    assert f"Python {required} or later" in README
    assert f"Python {required} or later" in GETTING_STARTED


def test_the_quickstart_lines_are_the_ones_ci_runs():
    """The README's two lines, verbatim in both the README and Getting started; `.ci/run` runs the second (split in
    two only to print what pip resolved in between)."""
    ci = (REPO / ".ci" / "run").read_text()
    for line in QUICKSTART:
        assert f"\n{line}\n" in README and f"\n{line}\n" in GETTING_STARTED
    install, test = QUICKSTART[1].split(" && ")
    assert f"\n{install} || exit 1\n" in ci and re.search(rf"\n(\S+=\S+ )*{re.escape(test)}\n", ci)


def test_the_readme_fits_in_two_screens():
    assert README.count("\n") <= 200, "the README is a page or two: move what it grew into docs/"


def test_the_readme_links_only_to_pages_and_files_that_exist():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if "://" not in t]
    assert any(t.startswith("docs/") for t in local)
    for target in local:
        assert (REPO / target).exists(), target


def test_the_readme_dag_example_is_a_valid_dag(tmp_path):
    example = README.split("## A DAG file", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "example.yaml"
    path.write_text(example)
    dag = load_dag(path)
    assert set(dag.tasks) == {"prepare", "train[lr=0.01]", "train[lr=0.1]", "report"}
    assert dag.tasks["report"].depends_on == ("train[lr=0.01]", "train[lr=0.1]")
    assert dag.tasks["train[lr=0.1]"].resources["gpu"].count == 1
