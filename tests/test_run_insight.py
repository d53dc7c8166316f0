"""The critical path and speedups of a finished run, as the headless summary prints them."""

from __future__ import annotations

import re
import subprocess
import sys

from slowness import patience
from tuidag.model.forecast import ForecastShape
from tuidag.views.run_insight import path_text, run_insight, summary_lines

DIAMOND = ForecastShape({"b": ["a"], "c": ["a"], "d": ["b", "c"]}, "abcd", 4, {}, {})


def test_a_finished_diamond_names_its_long_branch_and_what_halving_saves():
    spans = {"a": (0, 1), "b": (1, 6), "c": (1, 5), "d": (6, 7)}
    insight = run_insight(DIAMOND, spans, started=0)
    assert insight.path == ["a", "b", "d"]
    assert insight.faster == [("b", 1.0), ("a", 0.5), ("d", 0.5)]
    assert summary_lines(insight) == (
        "critical path (3 tasks, 7.0s): a 1.0s -> b 5.0s -> d 1.0s\n"
        "halved, these would shorten the run most: b (-1.0s), a (-0.5s), d (-0.5s)\n"
    )


def test_reused_and_never_run_tasks_are_not_on_the_path_nor_sped_up():
    # a was reused from an earlier run; c failed so d never ran. Halving b (3 -> 1.5) leaves c's 2 s.
    spans = {"b": (0, 3), "c": (0, 2)}
    insight = run_insight(DIAMOND, spans, started=0, reused={"a"})
    assert insight.path == ["b"] and insight.faster == [("b", 1.0)]


def test_a_long_path_is_shown_by_its_ends_and_a_count_of_the_middle():
    n = 100
    shape = ForecastShape({f"t{i}": [f"t{i - 1}"] for i in range(1, n)}, [f"t{i}" for i in range(n)], 1, {}, {})
    spans = {f"t{i}": (i, i + 1) for i in range(n)}
    insight = run_insight(shape, spans, started=0)
    assert len(insight.path) == n
    assert path_text(insight) == (
        "t0 1.0s -> t1 1.0s -> t2 1.0s -> t3 1.0s -> (92 more, 1m32s) -> t96 1.0s -> t97 1.0s -> t98 1.0s -> t99 1.0s"
    )


def test_when_no_single_halving_helps_the_summary_says_so():
    # Two equal tasks side by side: halving either alone leaves the other as long.
    shape = ForecastShape({}, "xy", 2, {}, {})
    insight = run_insight(shape, {"x": (0, 4), "y": (0, 4)}, started=0)
    assert insight.faster == []
    assert summary_lines(insight).endswith("no single task made twice as fast would shorten the run noticeably\n")


def test_the_headless_summary_ends_with_the_path_then_the_verdict(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text(
        "tasks:\n  a:\n    run: 'true'\n  slow:\n    run: sleep 0.4\n    depends_on: [a]\n"
        "  quick:\n    run: 'true'\n    depends_on: [a]\n  end:\n    run: 'true'\n"
        "    depends_on: [slow, quick]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", str(dag)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.rstrip("\n").splitlines()[-3:]
    # slow's 0.4 s may measure longer on a loaded machine: the path and who comes first are what is checked
    assert re.fullmatch(r"critical path \(3 tasks, [\d.]+s\): a [\d.]+s -> slow 0\.[4-9]s -> end [\d.]+s", last[0])
    assert re.match(r"halved, these would shorten the run most: slow \(-0\.[2-4]s\)", last[1])
    assert last[2].startswith("4 tasks: 4 succeeded")
