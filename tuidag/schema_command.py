"""`tuidag schema`: print the JSON schema of tuidag's YAML DAG format, for editors and validators.

It prints the file shipped in the package (tuidag/schema.json, generated from model/dag_keys.py by
docs/gen_dag_file.py and checked against it by tests/test_schema.py), so printing it needs neither PyYAML nor the
generator. An editor can point at that file too: `# yaml-language-server: $schema=PATH` as a DAG file's first line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from .exit_codes import EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    sub.add_parser(
        "schema",
        help="print the JSON schema of the YAML DAG format (for an editor: '# yaml-language-server: $schema=FILE')",
    )


def cmd_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(Path(__file__).with_name("schema.json").read_text(encoding="utf-8"))
    return EXIT_OK


COMMANDS: Mapping[str, object] = {"schema": cmd_schema}
