"""Numbers and strings in a DAG file that once crashed tuidag: each is a located error (exit 2, no traceback, nothing
left in the state dir), or, for a month-long timeout, simply works."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from test_cli import tuidag
from tuidag.model.source import MAX_SOURCE_BYTES

REPO = Path(__file__).resolve().parent.parent


def test_a_month_long_timeout_lets_the_task_run(tmp_path):
    """720h is 2.6e9 ms, over the 2**31 - 1 ms poll() takes: the task failed at once as an internal error."""
    dag = tmp_path / "train.yaml"
    dag.write_text("tasks:\n  train:\n    run: sleep 0.2 && echo trained\n    timeout: 720h\n")
    proc = tuidag("run", "--no-tui", "--state-dir", str(tmp_path / "state"), str(dag), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[train] trained" in proc.stdout


HUGE = {
    "a timeout of 401 digits": (
        "tasks:\n  a:\n    run: echo\n    timeout: 1" + "0" * 400 + "\n",
        "4:14: task 'a': timeout is too long: at most 8760h (a year) is allowed",
    ),
    "a timeout over a year": (
        "tasks:\n  a:\n    run: echo\n    timeout: 9000h\n",
        "4:14: task 'a': timeout is too long: at most 8760h (a year) is allowed",
    ),
    "max_parallel of 5,000 hex digits": (
        "max_parallel: 0x" + "f" * 5000 + "\ntasks:\n  a: {run: echo}\n",
        "1:15: max_parallel is too large: at most 1,000,000 is allowed",
    ),
    "a capacity of 5,000 hex digits": (
        "resources: {gpu: 0x" + "f" * 5000 + "}\ntasks:\n  a: {run: echo}\n",
        "1:18: resources: 'gpu' is too large: at most 1,000,000 is allowed",
    ),
    "retries of 5,000 hex digits": (
        "tasks:\n  a: {run: echo, retries: 0x" + "f" * 5000 + "}\n",
        "2:27: task 'a': retries is too large: at most 1,000,000 is allowed",
    ),
    "a lone surrogate in the name": (
        'name: "etl\\ud800"\ntasks:\n  a: {run: echo}\n',
        "1:7: this value contains a lone surrogate (\\ud800 at character 4)",
    ),
    "a lone surrogate in a command": (
        'tasks:\n  a: {run: "echo \\udc80"}\n',
        "2:12: this value contains a lone surrogate (\\udc80 at character 6)",
    ),
    "a SkyPilot delay of 5,000 digits": (
        "name: p\nexecution: parallel\ntermination_delay: 9" + "9" * 5000 + "\n---\nname: a\nrun: echo\n",
        "3:20: termination_delay is too long: at most 8760h (a year) is allowed",
    ),
}


@pytest.mark.parametrize("text, message", HUGE.values(), ids=HUGE.keys())
def test_huge_numbers_and_lone_surrogates_are_located_errors_in_validate_and_run(tmp_path, text, message):
    dag = tmp_path / "dag.yaml"
    dag.write_text(text)
    state = tmp_path / "state"
    for command in (["validate"], ["run", "--no-tui", "--state-dir", str(state)]):
        proc = tuidag(*command, str(dag), cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"{dag}:{message}"), proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert not state.exists() or not any((state / "runs").glob("*")), "a run folder was left"


def test_the_python_front_end_refuses_lone_surrogates_and_huge_counts(tmp_path):
    path = tmp_path / "api.py"
    path.write_text(
        textwrap.dedent("""\
        from tuidag import Dag
        dag = Dag("etl\\ud800", max_parallel=16 ** 5000)
        dag.shell("a", "echo \\ud800", retries=10 ** 4000, timeout=10 ** 400)
    """)
    )
    proc = tuidag("validate", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    f = str(path)
    assert proc.stderr.splitlines() == [
        f"{f}:2:1: max_parallel must be an integer from 1 to 1,000,000, got (a number of about 6021 digits)",
        f"{f}:2:1: Dag name contains a lone surrogate (\\ud800 at character 4), which is not a character: write the "
        f"character itself or its \\U escape",
        f"{f}:3:1: task 'a': retries must be an integer from 0 to 1,000,000, got (a number of about 4001 digits)",
        f"{f}:3:1: task 'a': timeout is too long: at most 8760h (a year) is allowed, got (a number of about 401 "
        f"digits)",
        f"{f}:3:1: task 'a': run contains a lone surrogate (\\ud800 at character 6), which is not a character: write "
        f"the character itself or its \\U escape",
    ]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_before_it_is_read(tmp_path, device):
    """/dev/zero was read until memory ran out, /dev/urandom for ever."""
    for command in (["validate"], ["run", "--no-tui", "--state-dir", str(tmp_path / "state")]):
        proc = tuidag(*command, device, cwd=tmp_path, timeout=30)
        assert proc.returncode == 2
        assert (
            proc.stderr == f"{device}:1:1: cannot read file: it is a character device: a DAG file must be a "
            f"regular file\n"
        )


@pytest.mark.parametrize("name", ["dag.yaml", "dag.py"])
def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path, name):
    os.mkfifo(tmp_path / name)
    proc = tuidag("validate", name, cwd=tmp_path, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr == f"{name}:1:1: cannot read file: it is a pipe: a DAG file must be a regular file\n"


@pytest.mark.parametrize("name", ["dag.yaml", "dag.py"])
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, name):
    with open(tmp_path / name, "wb") as f:
        f.truncate(MAX_SOURCE_BYTES + 1)  # sparse: nothing is written
    for command in (["validate"], ["run", "--no-tui", "--state-dir", str(tmp_path / "state")]):
        proc = tuidag(*command, name, cwd=tmp_path)
        assert proc.returncode == 2
        assert (
            proc.stderr == f"{name}:1:1: cannot read file: it is {MAX_SOURCE_BYTES + 1:,} bytes: a DAG file may be "
            f"at most 32 MiB\n"
        )
