"""The HTML report of a run with a matrix task has a table of its instances by value, with each one's outcome and
duration (the values come from the journal's header: a report reads the run, never the DAG file, which may have
changed since)."""

from __future__ import annotations

import re
from pathlib import Path

from tuidag.cli import main
from tuidag.store.runs import RunStore
from tuidag.views.report import render_html
from tuidag.views.report_facts import report_facts

SWEEP = """name: sweep
tasks:
  train:
    matrix: {lr: [0.01, 0.1], seed: [1, 2]}
    run: '[ "${{ matrix.seed }}" != 2 ] || exit 3'
"""


def test_the_report_has_a_table_of_a_sweeps_instances_by_value_with_outcome_and_duration(tmp_path: Path, capsys):
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    state = tmp_path / "state"
    assert main(["run", str(tmp_path / "sweep.yaml"), "--state-dir", str(state)]) != 0  # two instances fail
    (run,) = RunStore(state).runs()
    facts = report_facts(run)
    (group,) = facts["groups"]
    assert group["name"] == "train" and group["keys"] == ["lr", "seed"]
    by_values = {(i["values"]["lr"], i["values"]["seed"]): i["state"] for i in group["instances"]}
    assert by_values == {
        ("0.01", "1"): "SUCCEEDED",
        ("0.01", "2"): "FAILED",
        ("0.1", "1"): "SUCCEEDED",
        ("0.1", "2"): "FAILED",
    }
    html = render_html(facts)
    section = html[html.index("<h2>Sweeps</h2>") : html.index("<h2>Tasks</h2>")]
    assert "<h3>train: 2 of 4 done</h3>" in section
    assert "<th>lr</th><th>seed</th><th>outcome</th><th>duration</th>" in section
    rows = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td><td class=\"s-(\w+)\">", section)
    assert rows == [
        ("0.01", "1", "SUCCEEDED"),
        ("0.01", "2", "FAILED"),
        ("0.1", "1", "SUCCEEDED"),
        ("0.1", "2", "FAILED"),
    ]
    assert all(i["duration"] is not None for i in group["instances"])
