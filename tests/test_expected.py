"""Expected durations learned from the state dir: same definition first, then same name, never a guess."""

from __future__ import annotations

import subprocess
import sys

from slowness import patience
from stored_runs import Plan, write_run
from tuidag.store.expected import Expected, expected_durations, expected_for_run, seconds
from tuidag.store.journal import read_header
from tuidag.store.runs import RunStore


def runs_of(state, durations: list[float], *, task="a", fp="f1", dag="d", source=None, start=0):
    """One run per duration, oldest first, each with `task` succeeding in one attempt of that duration."""
    for i, d in enumerate(durations):
        write_run(
            state,
            f"2026{start + i:04d}",
            {task: Plan(0, [(100.0, 100.0 + d)])},
            dag=dag,
            source=source,
            fingerprints={task: fp},
        )


def test_median_of_the_last_five_with_the_same_definition(tmp_path):
    runs_of(tmp_path, [100, 1, 2, 3, 50, 60])  # the oldest (100) is not among the last five
    got = expected_durations(RunStore(tmp_path), "d", "", {"a": "f1"})
    assert got == {"a": Expected(3, 5, True)}
    assert seconds(got) == {"a": 3}


def test_a_changed_definition_wins_over_more_runs_of_the_old_one(tmp_path):
    runs_of(tmp_path, [10, 10, 10], fp="old")
    runs_of(tmp_path, [4], fp="new", start=10)
    assert expected_durations(RunStore(tmp_path), "d", "", {"a": "new"}) == {"a": Expected(4, 1, True)}


def test_falls_back_to_the_name_when_no_run_had_this_definition(tmp_path):
    runs_of(tmp_path, [6, 8], fp="old")
    assert expected_durations(RunStore(tmp_path), "d", "", {"a": "new"}) == {"a": Expected(7, 2, False)}


def test_no_history_is_left_out_not_guessed(tmp_path):
    runs_of(tmp_path, [6])
    assert expected_durations(RunStore(tmp_path), "d", "", {"b": "x"}) == {}
    assert expected_durations(RunStore(tmp_path / "empty"), "d", "", {"a": "f1"}) == {}


def test_other_dags_failures_and_reused_results_do_not_count(tmp_path):
    runs_of(tmp_path, [99], dag="other")
    write_run(tmp_path, "20260005", {"a": Plan(0, [(0, 55)], "FAILED")}, fingerprints={"a": "f1"})
    write_run(tmp_path, "20260006", {"a": Plan(0, [])}, fingerprints={"a": "f1"}, reused=["a"])
    write_run(tmp_path, "20260007", {"a": Plan(0, [(0, 40), (41, 43)])}, fingerprints={"a": "f1"})  # a retry
    runs_of(tmp_path, [5], start=8)
    # The retried run counts its successful attempt only (2 s), not its first one or the delay.
    assert expected_durations(RunStore(tmp_path), "d", "", {"a": "f1"}) == {"a": Expected(3.5, 2, True)}


def test_only_complete_runs_count_not_cancelled_or_unfinished_ones(tmp_path):
    runs_of(tmp_path, [10, 20])
    write_run(
        tmp_path, "20260005", {"a": Plan(0, [(0, 0.3)]), "b": Plan(0, [(0, 1)], "CANCELLED")}, fingerprints={"a": "f1"}
    )  # cancelled soon after a's quick success: not how long a takes
    write_run(tmp_path, "20260006", {"a": Plan(0, [(0, 0.4)])}, fingerprints={"a": "f1"}, summary=False)  # running
    assert expected_durations(RunStore(tmp_path), "d", "", {"a": "f1"}) == {"a": Expected(15, 2, True)}


def test_runs_of_the_same_file_are_told_by_their_source_and_the_run_itself_is_excluded(tmp_path):
    runs_of(tmp_path, [10], source="/x/dag.yaml")
    runs_of(tmp_path, [30], source="/y/dag.yaml", start=1)
    runs_of(tmp_path, [20], source="/x/dag.yaml", start=2)
    store = RunStore(tmp_path)
    header = read_header(store.runs()[-1].journal)
    assert expected_for_run(store, header) == {"a": Expected(15, 2, True)}
    assert expected_for_run(store, header, exclude=store.runs()[-1].run_id) == {"a": Expected(10, 1, True)}


def test_a_journal_that_grew_is_read_again(tmp_path):
    runs_of(tmp_path, [10])
    store = RunStore(tmp_path)
    assert expected_durations(store, "d", "", {"a": "f1"})["a"].seconds == 10
    runs_of(tmp_path, [20], start=1)
    assert expected_durations(store, "d", "", {"a": "f1"})["a"].seconds == 15


def test_a_real_run_is_learned_from(tmp_path):
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n  a:\n    run: sleep 0.3\n  b:\n    run: 'true'\n    depends_on: [a]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", "--quiet", str(dag)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=patience(60),
    )
    assert proc.returncode == 0, proc.stderr
    store = RunStore(tmp_path / ".tuidag")
    got = expected_for_run(store, read_header(store.runs()[-1].journal))
    assert set(got) == {"a", "b"} and all(e.same_definition and e.samples == 1 for e in got.values())
    assert 0.3 <= got["a"].seconds < 3 and got["b"].seconds < got["a"].seconds


def test_a_state_dir_of_many_big_runs_reads_each_journal_of_the_dag_once(tmp_path, monkeypatch):
    """How fast it is, is benchmarked (benchmarks/report_bench.py); here, what makes it fast: other DAGs' runs are
    told apart by their summaries, and a journal is parsed once while it is unchanged."""
    import tuidag.store.expected as expected

    tasks = [f"t{i}" for i in range(5000)]
    prints = {name: "p" for name in tasks}
    plans = {name: Plan(0, [(i, i + 1.5)]) for i, name in enumerate(tasks)}
    for i in range(8):
        write_run(tmp_path, f"2026{i:04d}", plans, fingerprints=prints)
    for i in range(200):  # other DAGs' small runs share the state dir
        write_run(tmp_path, f"2025{i:04d}", {"x": Plan(0, [(0, 1)])}, dag=f"other{i}")
    parsed: list[str] = []
    real_open = expected.open_stored
    monkeypatch.setattr(expected, "open_stored", lambda path: parsed.append(str(path)) or real_open(path))
    store = RunStore(tmp_path)
    first = expected_durations(store, "d", "", prints)
    read = len(parsed)
    assert 0 < read <= 8 and all("/runs/2026" in path for path in parsed)  # only this DAG's journals
    again = expected_durations(store, "d", "", prints)
    assert len(parsed) == read  # nothing read again
    assert first == again and len(first) == 5000 and first["t9"] == Expected(1.5, 5, True)
