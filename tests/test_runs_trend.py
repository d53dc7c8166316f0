"""`tuidag runs`: a duration trend per DAG, and `--task NAME` for one task across runs."""

from __future__ import annotations

import json

from stored_runs import Plan, write_run
from tuidag.cli import main
from tuidag.views.sparkline import sparkline


def runs(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["runs", *args])
    return code, capsys.readouterr().out.splitlines()


def test_sparkline_scales_lowest_to_highest():
    assert sparkline([1, 2, 3, 8]) == "▁▂▃█"
    assert sparkline([5, 5]) == "▄▄" and sparkline([]) == ""


def test_each_dag_with_two_finished_runs_gets_a_trend(tmp_path, capsys):
    for i, seconds in enumerate([10, 20, 80]):
        write_run(tmp_path, f"2026{i:04d}", {"a": Plan(0, [(0, seconds)])}, dag="build")
    write_run(tmp_path, "20260100", {"x": Plan(0, [(0, 1)])}, dag="lonely")  # one run: no trend yet
    write_run(tmp_path, "20260101", {"a": Plan(0, [(0, 5)])}, dag="build", summary=False)  # died: left out
    code, lines = runs(capsys, "--state-dir", str(tmp_path))
    assert code == 0 and len(lines) == 1 + 5 + 3
    assert lines[-3:] == [
        "",
        "duration trend per DAG, oldest to newest (the last 20 complete runs):",
        "build  ▁▂█  latest 1m20s  median 20.0s  range 10.0s-1m20s",
    ]


def test_a_cancelled_run_is_listed_as_cancelled_and_stays_out_of_the_trends(tmp_path, capsys):
    """A run stopped after 0.3 s says nothing of how long the DAG takes (it made the range 0.3s-1m10s)."""
    for i, seconds in enumerate([40, 70]):
        write_run(tmp_path, f"2026{i:04d}", {"a": Plan(0, [(0, seconds)])}, dag="build")
    write_run(tmp_path, "20260002", {"a": Plan(0, [(0, 0.3)], "CANCELLED")}, dag="build")
    write_run(
        tmp_path, "20260003", {"a": Plan(0, [(0, 0.2)]), "b": Plan(0.2, [(0.2, 0.3)], "CANCELLED")}, dag="build"
    )  # one task succeeded, the other was cancelled: no failure, not complete either
    _code, lines = runs(capsys, "--state-dir", str(tmp_path))
    assert [line.split()[-1] for line in lines[1:5]] == ["succeeded", "succeeded", "cancelled", "cancelled"]
    assert lines[-1] == "build  ▁█  latest 1m10s  median 55.0s  range 40.0s-1m10s"
    _code, lines = runs(capsys, "--state-dir", str(tmp_path), "--task", "a")
    assert lines[-1] == "its last 2 successes, oldest to newest: ▁█  range 40.0s-1m10s"


def test_a_single_run_per_dag_prints_the_table_only(tmp_path, capsys):
    write_run(tmp_path, "20260001", {"a": Plan(0, [(0, 1)])})
    assert len(runs(capsys, "--state-dir", str(tmp_path))[1]) == 2


def test_task_lists_its_state_duration_and_attempts_in_each_run(tmp_path, capsys):
    write_run(tmp_path, "20260001", {"a": Plan(0, [(0, 3)]), "b": Plan(0, [(3, 4)])})
    write_run(tmp_path, "20260002", {"a": Plan(0, [(0, 2), (3, 9)], "FAILED"), "b": Plan(9, [], "SKIPPED")})
    write_run(tmp_path, "20260003", {"c": Plan(0, [(0, 1)])}, dag="other")  # has no task a
    write_run(tmp_path, "20260004", {"a": Plan(0, [(0, 5)])})
    write_run(tmp_path, "20260005", {"a": Plan(0, [])}, reused=["a"])
    code, lines = runs(capsys, "--state-dir", str(tmp_path), "--task", "a")
    assert code == 0
    table = [line.split() for line in lines[1:5]]
    assert [(row[0], row[-3], row[-2], row[-1]) for row in table[:3]] == [
        ("20260001", "SUCCEEDED", "3.0s", "1"),
        ("20260002", "FAILED", "9.0s", "2"),
        ("20260004", "SUCCEEDED", "5.0s", "1"),
    ]
    assert table[3][0] == "20260005" and "(reused)" in lines[4] and table[3][-2:] == ["-", "0"]
    assert lines[-1] == "its last 2 successes, oldest to newest: ▁█  range 3.0s-5.0s"


def test_a_task_name_that_needs_escaping_is_found_and_printed_safely(tmp_path, capsys):
    name = 'we"ird\u00e9\x1b'
    write_run(tmp_path, "20260001", {name: Plan(0, [(0, 2)])})
    code, lines = runs(capsys, "--state-dir", str(tmp_path), "--task", name)
    assert code == 0 and lines[1].split()[-3:] == ["SUCCEEDED", "2.0s", "1"]
    assert "\x1b" not in "".join(lines)


def test_an_unknown_task_suggests_a_near_name(tmp_path, capsys):
    write_run(tmp_path, "20260001", {"train": Plan(0, [(0, 2)])})
    assert main(["runs", "--state-dir", str(tmp_path), "--task", "trian"]) == 2
    assert "has a task 'trian' (did you mean 'train'?)" in capsys.readouterr().err


def test_a_task_line_with_a_bad_field_is_skipped(tmp_path, capsys):
    run = write_run(tmp_path, "20260001", {"a": Plan(0, [(0, 2)])})
    with run.journal.open("a") as f:
        f.write(json.dumps({"type": "task", "task": "a", "to": "BOGUS"}) + "\n")
    assert runs(capsys, "--state-dir", str(tmp_path), "--task", "a")[1][1].split()[-3:] == ["SUCCEEDED", "2.0s", "1"]
