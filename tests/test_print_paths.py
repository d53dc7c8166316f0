"""Every print path of the commands, read from their source: a string from a DAG file, the journal or a task (a name,
a reason, a source path, a task list) put into printed text goes through the terminal sanitiser (`terminal_line`,
`terminal_lines`, or the table's `printable`). test_hostile_strings.py runs the commands on hostile input; this
finds the print paths a new command adds without it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TUIDAG = Path(__file__).resolve().parent.parent / "tuidag"
MODULES = [
    "cli.py",
    "cli_common.py",
    "control_commands.py",
    "history_commands.py",
    "ui/viewer.py",
    "views/graph_text.py",
    "views/headless.py",
]
#: What a printed value is when it comes from the DAG file, the journal or a task.
FROM_OUTSIDE = {"name", "reason", "source", "dag", "detail", "message"}
SANITISERS = {"terminal_line", "terminal_lines", "printable", "_listed", "_tasks"}
PRINTERS = {"print", "write", "_say", "_write", "UsageError"}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _raw_outside_values(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _called(call) not in PRINTERS:
            continue
        for text in (n for arg in call.args for n in ast.walk(arg) if isinstance(n, ast.JoinedStr)):
            for part in text.values:
                if not isinstance(part, ast.FormattedValue):
                    continue
                value = part.value
                if (isinstance(value, ast.Call) and _called(value) in SANITISERS) or part.conversion == ord("r"):
                    continue  # sanitised, or shown as its repr (every control character escaped)
                if _what(value) & FROM_OUTSIDE:
                    found.append((value.lineno, ast.unparse(value)))
    return found


def _what(value: ast.expr) -> set[str]:
    """What a formatted value is named: `dag.name` -> name, `facts["dag"]` -> dag, `a or b` -> both."""
    if isinstance(value, ast.Attribute):
        return {value.attr}
    if isinstance(value, ast.Name):
        return {value.id}
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
        return {str(value.slice.value)}
    if isinstance(value, ast.BoolOp):
        return set().union(*map(_what, value.values))
    if isinstance(value, ast.IfExp):
        return _what(value.body) | _what(value.orelse)
    return set()


@pytest.mark.parametrize("module", MODULES)
def test_no_print_path_puts_a_string_from_outside_into_text_unsanitised(module):
    source = (TUIDAG / module).read_text()
    assert _raw_outside_values(ast.parse(source)) == []


def test_the_check_finds_a_raw_name():
    """The check itself can fail: the way the DAG's name reached the terminal before."""
    tree = ast.parse('print(f"tuidag: run {run_id} of {dag.name} started")\nprint(f"{terminal_line(dag.name)}")')
    assert _raw_outside_values(tree) == [(1, "dag.name")]
