"""Property-based: random DAGs, random failures, random cancellations from another thread, real subprocesses."""

from __future__ import annotations

import random
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dags import finish, make_dag, start_run
from tuidag.model.state import TaskState, can_move

S = TaskState


@st.composite
def random_dags(draw, max_tasks: int = 10):
    n = draw(st.integers(1, max_tasks))
    tasks = {}
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), unique=True, max_size=3)) if i else []
        code = draw(st.sampled_from([0, 0, 0, 1]))
        ms = draw(st.integers(0, 30))
        tasks[f"t{i}"] = {
            "run": f"sleep 0.{ms:03d}; exit {code}",
            "depends_on": [f"t{d}" for d in deps],
            "retries": draw(st.sampled_from([0, 0, 1])),
        }
    policy = draw(st.sampled_from(["skip-downstream", "finish-running", "cancel-all"]))
    cancels = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 60)), max_size=3))
    return tasks, policy, draw(st.integers(1, 4)), cancels


def check_invariants(dag, events, max_parallel):
    state = {name: S.PENDING for name in dag.tasks}
    started: set[str] = set()
    active: set[str] = set()
    cancelled_before_start: set[str] = set()
    for event in events:
        if not event.is_transition:
            continue
        name, new = event.task, event.new
        assert can_move(state[name], new), f"illegal {name}: {state[name]} -> {new}"
        if new is S.RUNNING:
            for dep in dag.tasks[name].depends_on:
                assert state[dep] is S.SUCCEEDED, f"{name} started before {dep} succeeded ({state[dep]})"
            started.add(name)
        if new is S.CANCELLED and state[name] in (S.PENDING, S.QUEUED):
            cancelled_before_start.add(name)
        state[name] = new
        (active.add if new.active else active.discard)(name)
        assert len(active) <= max_parallel
    assert all(s.terminal for s in state.values()), state
    for name, s in state.items():
        if s is S.SKIPPED or name in cancelled_before_start:
            assert name not in started, f"{name} is {s} but it started"
    return state


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_dags())
def test_random_dags_keep_the_invariants(tmp_path_factory, case):
    tasks, policy, max_parallel, cancels = case
    tmp_path = tmp_path_factory.mktemp("run")
    dag = make_dag(tasks, on_failure=policy, max_parallel=max_parallel, kill_grace=0.5)
    scheduler, rec = start_run(dag, tmp_path)
    stop = threading.Event()

    def canceller():
        rng = random.Random(len(cancels))
        for index, delay_ms in cancels:
            if stop.wait(delay_ms / 1000):
                return
            if rng.random() < 0.2:
                scheduler.cancel_all()
            else:
                scheduler.cancel(f"t{index}")

    thread = threading.Thread(target=canceller)
    thread.start()
    final = finish(scheduler)
    stop.set()
    thread.join()
    replayed = check_invariants(dag, rec.task_events(), max_parallel)
    assert {n: s.value for n, s in replayed.items()} == final
