"""`tuidag report`: the facts of a stored run, the HTML drawn from them (escaped: names and logs are hostile), and
the command's choices of run and output. The HTML in a real browser: test_report_browser.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from dags import wait_until
from slowness import patience
from stored_runs import Plan, write_run
from tuidag.cli import main
from tuidag.store.runs import RunStore
from tuidag.views.report import render_html, render_json
from tuidag.views.report_facts import report_facts
from tuidag.views.report_svg import clock, tick_step

HOSTILE = "<img src=x onerror=alert(1)>"


def sample_run(state):
    """prep -> train (waits 1 s, fails once, retried) -> eval (fails) -> publish (skipped); HOSTILE after prep;
    cached reused from an earlier run."""
    plans = {
        "cached": Plan(0, []),
        "prep": Plan(0, [(0, 2)]),
        "train": Plan(2, [(3, 5), (6, 9)]),
        HOSTILE: Plan(2, [(2, 4)]),
        "eval": Plan(9, [(9, 10)], "FAILED"),
        "publish": Plan(10, [], "SKIPPED"),
    }
    deps = {"train": ["prep"], HOSTILE: ["prep"], "eval": ["train"], "publish": ["eval"]}
    log = "line1\n\x1b[31mred\x1b[0m\n</pre><script>alert(1)</script>\n"
    return write_run(
        state, "20260101-000000-000-abcd", plans, dag="nightly", deps=deps, logs={"eval": log}, reused=["cached"]
    )


def test_the_facts_of_a_run(tmp_path):
    facts = report_facts(sample_run(tmp_path), now=100)
    run = facts["run"]
    assert (run["dag"], run["outcome"], run["duration"]) == ("nightly", "failed", 10)
    assert run["counts"] == {"SUCCEEDED": 4, "FAILED": 1, "SKIPPED": 1}
    attempts = [(s["task"], s["attempt"], s["outcome"]) for s in facts["segments"] if s["kind"] == "running"]
    assert attempts == [
        ("prep", 1, "SUCCEEDED"),
        ("train", 1, "RETRYING"),
        ("train", 2, "SUCCEEDED"),
        (HOSTILE, 1, "SUCCEEDED"),
        ("eval", 1, "FAILED"),
    ]
    train = next(t for t in facts["tasks"] if t["name"] == "train")
    assert (train["attempts"], train["duration"], train["waited"]) == (2, 6, 2)  # 1 s for a thread, 1 s retry delay
    assert [(s["task"], s["duration"]) for s in facts["critical_path"]] == [("prep", 2), ("train", 6), ("eval", 1)]
    # Re-simulated from the start with these durations: halving train (6 s) saves 3 s, prep 1 s, eval 0.5 s.
    assert [(s["task"], s["saved"]) for s in facts["speedups"]] == [("train", 3), ("prep", 1), ("eval", 0.5)]
    (failure,) = facts["failures"]
    assert failure["task"] == "eval" and failure["log"] == ["line1", "red", "</pre><script>alert(1)</script>"]
    assert json.loads(render_json(facts)) == facts


def test_the_html_escapes_the_runs_text_and_has_a_bar_per_attempt(tmp_path):
    page = render_html(report_facts(sample_run(tmp_path), now=100))
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page and "\x1b" not in page
    assert len(re.findall(r'<rect class="attempt ', page)) == 5
    assert len(re.findall(r'<rect class="attempt [^"]*crit', page)) == 4  # prep, train twice, eval
    assert len(re.findall(r'<g class="node ', page)) == 6
    assert not re.search(r'(src|href)="(?!#)', page)  # nothing to fetch


def test_control_characters_and_lone_surrogates_in_names_cannot_break_the_file(tmp_path):
    name = "bad\x00\x07\ud800name"
    run = write_run(tmp_path, "20260101", {name: Plan(0, [(0, 1)], "FAILED")})
    out = tmp_path / "r.html"
    assert main(["report", "--state-dir", str(tmp_path), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "bad\ufffd\ufffd\ufffdname" in page and "\x00" not in page and "\x07" not in page
    assert run.run_id in page and "no log (its name cannot be a file name)" in page


def test_a_failed_tasks_log_is_shown_without_its_escapes_and_control_characters(tmp_path):
    log = "\x00\x1b]0;title\x07x\x1b[1mbold\n"
    write_run(tmp_path, "20260101", {"a": Plan(0, [(0, 1)], "FAILED")}, logs={"a": log})
    page = render_html(report_facts(RunStore(tmp_path).runs()[0], now=5))
    assert "<pre>\ufffdxbold</pre>" in page


@pytest.mark.parametrize(
    "span, step, label",
    [(0.9, 0.2, "0.4s"), (45, 10, "20s"), (600, 120, "4m"), (5400, 900, "30m"), (25000, 3600, "2h")],
)
def test_the_time_axis_steps_in_the_clocks_units(span, step, label):
    assert tick_step(span) == step
    assert clock(2 * step, fine=step < 1) == label


def test_report_writes_the_latest_run_by_default_next_to_the_user(tmp_path, capsys, monkeypatch):
    write_run(tmp_path, "20260101-01", {"a": Plan(0, [(0, 1)])})
    write_run(tmp_path, "20260102-01", {"b": Plan(0, [(0, 1)])})
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        "tuidag: report of run 20260102-01 (d) written to "
        "tuidag-report-20260102-01.html (only you can read it; --mode 644 lets "
        "others)\n"
    )
    assert "<title>d run 20260102-01" in (tmp_path / "tuidag-report-20260102-01.html").read_text()
    assert main(["report", "20260101", "--state-dir", str(tmp_path), "--format", "json", "-o", "-"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["format"] == 1 and [t["name"] for t in facts["tasks"]] == ["a"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["2026"], "run id '2026' is ambiguous"),
        (["1999"], "no run"),
        (["-o", "/nonexistent/dir/r.html"], "cannot write the report to /nonexistent/dir/r.html: No such file"),
    ],
)
def test_report_mistakes_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    write_run(tmp_path, "20260101-01", {"a": Plan(0, [(0, 1)])})
    write_run(tmp_path, "20260102-01", {"a": Plan(0, [(0, 1)])})
    assert main(["report", "--state-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_report_of_an_empty_state_dir_says_where_it_looked(tmp_path, capsys):
    assert main(["report", "--state-dir", str(tmp_path)]) == 2
    assert f"no runs in {tmp_path}" in capsys.readouterr().err


def test_a_report_of_a_run_still_going_draws_its_running_attempt_to_now(tmp_path):
    dag = tmp_path / "dag.yaml"
    gate = f"for i in $(seq {round(patience(30) / 0.05)}); do [ -e go ] && exit 0; sleep 0.05; done"
    dag.write_text(f"tasks:\n  gate:\n    run: '{gate}'\n  after:\n    run: 'true'\n    depends_on: [gate]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        store = RunStore(tmp_path / ".tuidag")
        wait_until(lambda: store.runs() and b'"to":"RUNNING"' in store.runs()[0].journal.read_bytes())
        facts = report_facts(store.runs()[0])
        assert facts["run"]["outcome"] == "running"
        (attempt,) = [s for s in facts["segments"] if s["kind"] == "running"]
        assert attempt["task"] == "gate" and attempt["end"] is None
        assert [t["state"] for t in facts["tasks"]] == ["RUNNING", "PENDING"]
        page = render_html(facts)
        assert len(re.findall(r'<rect class="attempt s-RUNNING', page)) == 1
    finally:
        (tmp_path / "go").touch()
        assert proc.wait(patience(30)) == 0
