"""The scheduler and local executor against real subprocesses: states, policies, retries, timeouts, cancellation."""

from __future__ import annotations

import itertools
import threading

import psutil
import pytest

from dags import Recorder, alive, finish, make_dag, read_pids, start_run, wait_until
from slowness import patience
from tuidag.engine import LocalExecutor, Scheduler
from tuidag.engine.scheduler import RerunRefused, RunSummary
from tuidag.model.state import TaskState


def test_states_of_a_successful_chain(tmp_path):
    dag = make_dag({"a": "echo a", "b": {"run": "echo b", "depends_on": ["a"]}})
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "SUCCEEDED", "b": "SUCCEEDED"}
    assert rec.states("a") == ["QUEUED", "RUNNING", "SUCCEEDED"]
    assert rec.states("b") == ["QUEUED", "RUNNING", "SUCCEEDED"]
    # b was queued only after a succeeded
    seqs = {(e.task, e.new.value): e.seq for e in rec.task_events() if e.is_transition}
    assert seqs[("b", "QUEUED")] > seqs[("a", "SUCCEEDED")]
    snap = scheduler.snapshot()["a"]
    assert snap.exit_code == 0 and snap.attempt == 1 and snap.finished_at >= snap.started_at
    assert all(e.time > 0 for e in rec.task_events())


def test_output_goes_to_per_task_log_with_header(tmp_path):
    dag = make_dag({"a": "echo out; echo err >&2", "b": "printf 'no newline'"})
    scheduler, _ = start_run(dag, tmp_path)
    finish(scheduler)
    a_log = (tmp_path / "logs" / "a.log").read_text().splitlines()
    assert a_log[0].startswith("=== tuidag: a attempt 1 started")
    assert a_log[1:] == ["out", "err"]
    assert (tmp_path / "logs" / "b.log").read_text().endswith("no newline")


def test_environment_and_stdin(tmp_path):
    dag = make_dag(
        {
            "a": {
                "run": 'echo "$SHARED $OWN $TUIDAG_RUN_ID $TUIDAG_TASK $TUIDAG_ATTEMPT"; cat',
                "env": {"OWN": "mine", "SHARED": "task-wins"},
            }
        },
        env={"SHARED": "dag"},
    )
    scheduler, _ = start_run(dag, tmp_path)
    assert finish(scheduler, 10) == {"a": "SUCCEEDED"}  # `cat` reads /dev/null and ends at once
    assert (tmp_path / "logs" / "a.log").read_text().splitlines()[1] == f"task-wins mine {scheduler.run_id} a 1"


def test_failure_skips_downstream_and_independent_branch_continues(tmp_path):
    dag = make_dag(
        {
            "bad": "exit 3",
            "after_bad": {"run": "true", "depends_on": ["bad"]},
            "deep": {"run": "true", "depends_on": ["after_bad"]},
            "other": "sleep 0.2",
            "after_other": {"run": "true", "depends_on": ["other"]},
        }
    )
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {
        "bad": "FAILED",
        "after_bad": "SKIPPED",
        "deep": "SKIPPED",
        "other": "SUCCEEDED",
        "after_other": "SUCCEEDED",
    }
    snaps = scheduler.snapshot()
    assert snaps["bad"].exit_code == 3 and snaps["bad"].reason == "exit code 3"
    assert snaps["deep"].reason == "upstream 'bad' failed"
    assert "RUNNING" not in rec.states("deep")


def test_finish_running_policy_lets_running_finish_and_cancels_the_rest(tmp_path):
    marker = tmp_path / "slow-done"
    dag = make_dag(
        {
            "slow": f"sleep 0.5; touch {marker}",
            "bad": "exit 1",
            "after_bad": {"run": "true", "depends_on": ["bad"]},
            "after_slow": {"run": "true", "depends_on": ["slow"]},
        },
        on_failure="finish-running",
    )
    scheduler, rec = start_run(dag, tmp_path)
    states = finish(scheduler)
    assert states == {"slow": "SUCCEEDED", "bad": "FAILED", "after_bad": "SKIPPED", "after_slow": "CANCELLED"}
    assert marker.exists()
    assert "RUNNING" not in rec.states("after_slow")


def test_cancel_all_policy_kills_running_tasks(tmp_path):
    pids = tmp_path / "pids"
    dag = make_dag(
        {
            "slow": f"echo $$ > {pids}; sleep 30",
            "bad": "sleep 0.3; exit 1",
            "later": {"run": "true", "depends_on": ["slow"]},
        },
        on_failure="cancel-all",
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("slow", "RUNNING")
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    refs = read_pids(pids)
    assert finish(scheduler) == {"slow": "CANCELLED", "bad": "FAILED", "later": "CANCELLED"}
    assert not any(alive(*r) for r in refs)
    assert "bad" in scheduler.snapshot()["slow"].reason


def test_retries_then_success(tmp_path):
    counter = tmp_path / "count"
    cmd = f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; echo try $n; [ $n -ge 3 ]"
    dag = make_dag({"flaky": {"run": cmd, "retries": 2, "retry_delay": 0.05}})
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"flaky": "SUCCEEDED"}
    assert rec.states("flaky") == ["QUEUED", "RUNNING", "RETRYING", "RUNNING", "RETRYING", "RUNNING", "SUCCEEDED"]
    assert scheduler.snapshot()["flaky"].attempt == 3
    log = (tmp_path / "logs" / "flaky.log").read_text()
    assert [line.split()[4] for line in log.splitlines() if line.startswith("===")] == ["1", "2", "3"]
    assert "try 1\n" in log and "try 3\n" in log
    retry = next(e for e in rec.task_events("flaky") if e.new is TaskState.RETRYING)
    assert retry.snapshot.reason == "exit code 1"


def test_retries_exhausted_fail(tmp_path):
    dag = make_dag({"bad": {"run": "exit 2", "retries": 1}})
    scheduler, _rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"bad": "FAILED"}
    assert scheduler.snapshot()["bad"].attempt == 2


def test_timeout_kills_tree_and_fails_with_reason(tmp_path):
    pids = tmp_path / "pids"
    dag = make_dag({"slow": {"run": f"sleep 30 & echo $! > {pids}; echo $$ >> {pids}; wait", "timeout": 0.5}})
    scheduler, _rec = start_run(dag, tmp_path)
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    refs = read_pids(pids)
    assert finish(scheduler) == {"slow": "FAILED"}
    assert scheduler.snapshot()["slow"].reason == "timeout"
    assert not any(alive(*r) for r in refs)


def test_timeout_applies_retries(tmp_path):
    dag = make_dag({"slow": {"run": "sleep 30", "timeout": 0.2, "retries": 1}})
    scheduler, rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"slow": "FAILED"}
    assert rec.states("slow") == ["QUEUED", "RUNNING", "RETRYING", "RUNNING", "FAILED"]


def test_cancel_queued_task_never_starts(tmp_path):
    dag = make_dag({"busy": "sleep 30", "waiting": "echo never"}, max_parallel=1)
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("busy", "RUNNING")
    assert scheduler.snapshot()["waiting"].state is TaskState.QUEUED
    assert scheduler.cancel("waiting") == ["waiting"]
    assert scheduler.snapshot()["waiting"].state is TaskState.CANCELLED
    scheduler.cancel("busy")
    finish(scheduler)
    assert "RUNNING" not in rec.states("waiting")
    assert not (tmp_path / "logs" / "waiting.log").exists()


def test_cancel_pending_task(tmp_path):
    dag = make_dag({"first": "sleep 30", "second": {"run": "true", "depends_on": ["first"]}})
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("first", "RUNNING")
    assert scheduler.cancel("second") == ["second"]
    assert scheduler.snapshot()["first"].state is TaskState.RUNNING  # ancestors are untouched
    scheduler.cancel("first")
    assert finish(scheduler) == {"first": "CANCELLED", "second": "CANCELLED"}


def test_cancel_retrying_task(tmp_path):
    dag = make_dag({"flaky": {"run": "exit 1", "retries": 3, "retry_delay": 30}})
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("flaky", "RETRYING")
    scheduler.cancel("flaky")
    assert finish(scheduler, 5) == {"flaky": "CANCELLED"}
    assert scheduler.snapshot()["flaky"].attempt == 1


def test_cancel_running_branch_kills_whole_tree(tmp_path):
    """The tree has a setsid grandchild and a child that ignores SIGTERM; all of it dies, and only this branch."""
    pids = tmp_path / "pids"
    script = (
        f"echo $$ >> {pids}; "
        f"setsid sh -c 'echo $$ >> {pids}; sleep 60' & "
        f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; while :; do sleep 0.1; done' & "
        "wait"
    )
    dag = make_dag(
        {
            "root": "true",
            "target": {"run": script, "depends_on": ["root"]},
            "child": {"run": "true", "depends_on": ["target"]},
            "independent": "sleep 0.5",
        },
        kill_grace=0.5,
    )
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("target", "RUNNING")
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    refs = read_pids(pids)
    assert len(refs) == 3 and all(alive(*r) for r in refs)
    affected = scheduler.cancel("target")
    assert affected == ["target", "child"]
    assert scheduler.snapshot()["target"].state is TaskState.CANCELLING
    assert scheduler.snapshot()["child"].state is TaskState.CANCELLED  # pending: cancelled at once
    rec.wait_state("target", "CANCELLED")
    assert not any(alive(*r) for r in refs), "a process of the cancelled tree survived"
    assert finish(scheduler) == {
        "root": "SUCCEEDED",
        "target": "CANCELLED",
        "child": "CANCELLED",
        "independent": "SUCCEEDED",
    }
    assert rec.states("target")[-2:] == ["CANCELLING", "CANCELLED"]


def test_leader_exits_on_term_while_children_ignore_it(tmp_path):
    """SIGKILL escalation after kill_grace happens even though the group leader is already gone."""
    pids = tmp_path / "pids"
    script = f"for i in 1 2 3; do sh -c 'trap \"\" TERM; echo $$ >> {pids}; exec sleep 60' & done; wait"
    dag = make_dag({"t": script}, kill_grace=0.3)
    scheduler, rec = start_run(dag, tmp_path)
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    refs = read_pids(pids)
    scheduler.cancel("t")
    rec.wait_state("t", "CANCELLED")
    assert not any(alive(*r) for r in refs)


def test_cancel_all_from_another_thread(tmp_path):
    dag = make_dag({f"t{i}": "sleep 30" for i in range(3)} | {"after": {"run": "true", "depends_on": ["t0"]}})
    scheduler, rec = start_run(dag, tmp_path)
    for i in range(3):
        rec.wait_state(f"t{i}", "RUNNING")
    pids = [s.pid for s in scheduler.snapshot().values() if s.pid]
    threading.Thread(target=scheduler.cancel_all).start()
    assert set(finish(scheduler).values()) == {"CANCELLED"}
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_max_parallel_is_never_exceeded(tmp_path):
    dag = make_dag({f"t{i}": "sleep 0.05" for i in range(12)}, max_parallel=3)
    scheduler, rec = start_run(dag, tmp_path)
    finish(scheduler)
    active, peak = set(), 0
    for event in rec.task_events():
        (active.add if event.new.active else active.discard)(event.task)
        peak = max(peak, len(active))
    assert peak == 3


def test_missing_workdir_fails_the_task_with_a_reason(tmp_path):
    dag = make_dag({"a": {"run": "true", "workdir": tmp_path / "nope"}})
    scheduler, _rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "FAILED"}
    assert "does not exist" in scheduler.snapshot()["a"].reason


def test_command_not_found(tmp_path):
    dag = make_dag({"a": "no-such-command-xyz"})
    scheduler, _rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "FAILED"}
    assert scheduler.snapshot()["a"].reason == "exit code 127 (command not found)"


def test_task_killed_by_signal_reports_it(tmp_path):
    dag = make_dag({"a": "kill -9 $$"})
    scheduler, _rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "FAILED"}
    assert scheduler.snapshot()["a"].reason == "killed by SIGKILL"


def test_leftover_background_process_is_ended_with_the_task(tmp_path):
    pids = tmp_path / "pids"
    dag = make_dag({"a": f"sleep 60 & echo $! > {pids}"})
    scheduler, _rec = start_run(dag, tmp_path)
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    refs = read_pids(pids)
    assert finish(scheduler) == {"a": "SUCCEEDED"}
    assert not any(alive(*r) for r in refs)


def test_rerun_failed_task_and_its_skipped_descendants(tmp_path):
    flag = tmp_path / "ok"
    dag = make_dag({"a": f"test -e {flag}", "b": {"run": "true", "depends_on": ["a"]}, "c": "true"})
    scheduler, _rec = start_run(dag, tmp_path)
    scheduler.wait(patience(10))
    assert {n: s.state.value for n, s in scheduler.snapshot().items()} == {
        "a": "FAILED",
        "b": "SKIPPED",
        "c": "SUCCEEDED",
    }
    flag.touch()
    assert scheduler.rerun("a") == ["a", "b"]
    assert scheduler.rerun("c") == []  # succeeded tasks are not re-run
    assert finish(scheduler) == {"a": "SUCCEEDED", "b": "SUCCEEDED", "c": "SUCCEEDED"}
    assert scheduler.snapshot()["a"].attempt == 2


def test_pause_holds_new_work_and_resume_releases_it(tmp_path):
    go = tmp_path / "go"  # a ends only once paused: a run that finished first would refuse the pause
    dag = make_dag({"a": f"while [ ! -e {go} ]; do sleep 0.02; done", "b": {"run": "true", "depends_on": ["a"]}})
    scheduler, rec = start_run(dag, tmp_path)
    assert scheduler.pause()
    go.touch()
    rec.wait_state("a", "SUCCEEDED")
    rec.wait_state("b", "QUEUED")
    assert not scheduler.wait(0.3)  # b stays queued while paused
    assert scheduler.snapshot()["b"].state is TaskState.QUEUED
    scheduler.resume()
    assert finish(scheduler) == {"a": "SUCCEEDED", "b": "SUCCEEDED"}
    kinds = [e.kind for e in rec.events if not hasattr(e, "snapshot")]
    assert kinds == ["started", "paused", "resumed", "finished"]


def test_pause_also_holds_tasks_already_waiting_for_a_slot(tmp_path):
    """With one slot, b and c are queued for it while a runs; a pause then must keep them from starting."""
    go = tmp_path / "go"
    dag = make_dag({"a": f"while [ ! -e {go} ]; do sleep 0.02; done", "b": "true", "c": "true"}, max_parallel=1)
    scheduler, rec = start_run(dag, tmp_path)
    rec.wait_state("a", "RUNNING")
    scheduler.pause()
    go.touch()
    rec.wait_state("a", "SUCCEEDED")
    assert not scheduler.wait(0.3)
    assert {n: s.state for n, s in scheduler.snapshot().items() if n != "a"} == {
        "b": TaskState.QUEUED,
        "c": TaskState.QUEUED,
    }
    scheduler.resume()
    assert finish(scheduler) == {"a": "SUCCEEDED", "b": "SUCCEEDED", "c": "SUCCEEDED"}


def test_pause_is_refused_once_the_run_finished_and_a_rerun_then_runs(tmp_path):
    """A pause accepted on a finished run held the next re-run QUEUED forever while nothing said paused."""
    flag = tmp_path / "flag"
    dag = make_dag({"a": f"test -e {flag}"})
    scheduler, rec = start_run(dag, tmp_path)
    assert scheduler.wait(patience(10))
    assert scheduler.pause() is False and not scheduler.paused
    flag.touch()
    assert scheduler.rerun("a") == ["a"]
    assert finish(scheduler) == {"a": "SUCCEEDED"}
    assert "paused" not in [e.kind for e in rec.events if not hasattr(e, "snapshot")]


def test_a_run_that_ends_while_paused_ends_the_pause(tmp_path):
    """Paused, then everything cancelled: the run is over, so a re-run afterwards must start, not wait for `p`."""
    dag = make_dag({"a": "sleep 30", "b": {"run": "true", "depends_on": ["a"]}})
    scheduler, rec = start_run(dag, tmp_path, kill_grace=0.5)
    rec.wait_state("a", "RUNNING")
    assert scheduler.pause() is True
    scheduler.cancel_all()
    assert scheduler.wait(patience(10))
    assert not scheduler.paused

    def kinds() -> list[str]:
        return [e.kind for e in list(rec.events) if not hasattr(e, "snapshot")]

    rec.wait_for(lambda: "finished" in kinds())  # observers hear of it on their own thread, maybe after wait()
    assert kinds()[-2:] == ["resumed", "finished"]
    assert scheduler.rerun("a") == ["a", "b"]
    rec.wait_state("a", "RUNNING", timeout=10)  # not held
    scheduler.cancel_all()
    assert finish(scheduler)["a"] == "CANCELLED"


def test_observer_may_call_back_into_the_scheduler(tmp_path):
    dag = make_dag({"a": "sleep 30", "b": {"run": "sleep 30", "depends_on": ["a"]}})

    def cancel_b_when_a_runs(scheduler):
        def observer(event):
            if getattr(event, "task", None) == "a" and event.new is TaskState.RUNNING:
                scheduler.cancel("b")

        return observer

    scheduler, rec = start_run(dag, tmp_path, observers=[cancel_b_when_a_runs])
    rec.wait_state("b", "CANCELLED")
    assert scheduler.snapshot()["a"].state is TaskState.RUNNING
    scheduler.cancel("a")
    assert finish(scheduler) == {"a": "CANCELLED", "b": "CANCELLED"}


def test_events_are_delivered_in_sequence(tmp_path):
    dag = make_dag({f"t{i}": "true" for i in range(30)}, max_parallel=8)
    scheduler, rec = start_run(dag, tmp_path)
    finish(scheduler)
    seqs = [e.seq for e in rec.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_run_summary_counts_and_outcome(tmp_path):
    dag = make_dag({"a": "true", "b": "false"})
    scheduler, _ = start_run(dag, tmp_path)
    finish(scheduler)
    summary = RunSummary(scheduler.snapshot())
    assert not summary.ok and summary.outcome == "failed"
    assert summary.counts[TaskState.SUCCEEDED] == 1 and summary.counts[TaskState.FAILED] == 1


def test_daemon_left_by_a_successful_task_is_ended_with_the_run(tmp_path):
    pids = tmp_path / "pids"
    dag = make_dag(
        {
            "a": f"sh -c \"setsid sh -c 'echo \\$\\$ > {pids}; exec sleep 60' &\"; "
            f"until [ -s {pids} ]; do sleep 0.01; done"
        }
    )
    scheduler, _rec = start_run(dag, tmp_path)
    wait_until(lambda: pids.exists() and pids.read_text().strip())
    refs = read_pids(pids)
    assert finish(scheduler) == {"a": "SUCCEEDED"}  # finish() closes the scheduler, as the CLI does
    assert not any(alive(*r) for r in refs)


def test_rerun_refuses_when_a_dependency_is_a_dead_end(tmp_path):
    dag = make_dag({"a": "exit 1", "b": {"run": "true", "depends_on": ["a"]}})
    scheduler, _rec = start_run(dag, tmp_path)
    assert scheduler.wait(patience(10))
    with pytest.raises(RerunRefused, match="re-run 'a' first"):
        scheduler.rerun("b")
    scheduler.close()


def test_a_rerun_that_arrives_as_the_run_is_closed_is_refused(tmp_path):
    """A `rerun` control reaching the engine after its run ended re-queued the task on a closed journal and a pool
    that takes no more work ("state dir not writable (Bad file descriptor)")."""
    dag = make_dag({"a": "exit 1"})
    scheduler, _rec = start_run(dag, tmp_path)
    assert finish(scheduler) == {"a": "FAILED"}
    with pytest.raises(RerunRefused, match="the run has ended"):
        scheduler.rerun("a")
    assert scheduler.snapshot()["a"].state is TaskState.FAILED


def test_rerun_leaves_descendants_that_wait_on_another_dead_end(tmp_path):
    flag = tmp_path / "ok"
    dag = make_dag(
        {
            "a": f"test -e {flag}",
            "x": "exit 1",
            "both": {"run": "true", "depends_on": ["a", "x"]},
            "only_a": {"run": "true", "depends_on": ["a"]},
        }
    )
    scheduler, _rec = start_run(dag, tmp_path)
    assert scheduler.wait(patience(10))
    flag.touch()
    assert scheduler.rerun("a") == ["a", "only_a"]
    assert finish(scheduler) == {"a": "SUCCEEDED", "x": "FAILED", "both": "SKIPPED", "only_a": "SUCCEEDED"}


class _HeldLaunch(LocalExecutor):
    """A LocalExecutor whose launches wait for the test's go, so a cancel can arrive while one is in progress."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.go = threading.Event()

    def launch(self, attempt):
        self.entered.set()
        assert self.go.wait(patience(10))
        return super().launch(attempt)


def test_a_cancel_while_launching_still_reports_every_step_in_order(tmp_path):
    """RUNNING is held back until the leader's pid is known; a cancel in between must announce it first."""
    executor = _HeldLaunch()
    dag = make_dag({"a": "sleep 30"})
    scheduler = Scheduler(dag, executor, "test-held-launch", tmp_path, kill_grace=1.0)
    rec = Recorder()
    scheduler.subscribe(rec)
    scheduler.start()
    assert executor.entered.wait(patience(10))
    assert scheduler.cancel("a") == ["a"]
    executor.go.set()
    assert finish(scheduler) == {"a": "CANCELLED"}
    events = rec.task_events("a")
    assert [e.new.value for e in events if e.is_transition] == ["QUEUED", "RUNNING", "CANCELLING", "CANCELLED"]
    for before, after in itertools.pairwise(events):  # each event starts where the one before it ended
        assert after.old is before.new
    pid = scheduler.snapshot()["a"].pid
    assert pid is not None and not psutil.pid_exists(pid)


def test_ready_work_runs_in_the_order_it_became_ready(tmp_path):
    """A pool thread runs the task its attempt made ready itself only when no older one waits for a thread."""
    dag = make_dag({"a": "true", "b": "true", "c": "true", "a2": {"run": "true", "depends_on": ["a"]}}, max_parallel=1)
    scheduler, rec = start_run(dag, tmp_path)
    finish(scheduler)
    started = [e.task for e in rec.task_events() if e.is_transition and e.new is TaskState.RUNNING]
    assert started == ["a", "b", "c", "a2"]


def test_a_first_attempt_whose_log_exists_and_ends_mid_line_starts_its_header_on_a_new_line(tmp_path):
    """Only a log the attempt created is known to be empty: one already there (planted, or linked by a resumed run)
    is appended to on a line of its own, and its header's bytes are on record where they are."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.log").write_bytes(b"left here, no newline")
    dag = make_dag({"a": "echo out", "b": "echo fresh"})
    scheduler, _ = start_run(dag, tmp_path)
    finish(scheduler)
    data = (tmp_path / "logs" / "a.log").read_bytes()
    lines = data.decode().splitlines()
    assert lines[0] == "left here, no newline"
    assert lines[1].startswith("=== tuidag: a attempt 1 started") and lines[2:] == ["out"]
    start = scheduler.snapshot()["a"].log_start
    assert data[:start].endswith(b" ===\n") and data[start:] == b"out\n"
    fresh = (tmp_path / "logs" / "b.log").read_bytes()
    start = scheduler.snapshot()["b"].log_start
    assert fresh.startswith(b"=== tuidag: b attempt 1 started") and fresh[start:] == b"fresh\n"
