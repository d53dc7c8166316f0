"""`tuidag run --resume` of Python DAGs: a reused task's return value reaches its dependents (in threads, in
isolate=True children, on Dask, and in the run the post-mortem's `r` starts), a callable whose code changed runs
again, and the note says why tasks are not reused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slowness import patience
from test_cli import tuidag
from tuidag.store.journal import read_journal, replay
from tuidag.store.runs import RunStore

ETL = """\
import os
from tuidag import Dag

dag = Dag("etl")

def mark(ctx, what):
    with open(os.path.join(ctx.workdir, what), "a") as f:
        f.write("x")

@dag.task({options})
def produce(ctx):
    mark(ctx, "produced")
    return {{"total": 3}}

@dag.task(depends_on=[produce]{more})
def consume(ctx):
    if not os.path.exists(os.path.join(ctx.workdir, "consume-fixed")):
        raise RuntimeError("not yet")
    mark(ctx, "consumed")
    return ctx.results["produce"]["total"] * 2

@dag.task(depends_on=[produce, consume]{more})
def report(ctx):
    if not os.path.exists(os.path.join(ctx.workdir, "report-fixed")):
        raise RuntimeError("not yet")
    print("report:", ctx.results["produce"]["total"], ctx.results["consume"])
"""


def etl(tmp_path: Path, options: str = "") -> Path:
    path = tmp_path / "etl.py"
    path.write_text(ETL.format(options=options, more=", " + options if options else ""))
    return path


def log_of(tmp_path: Path, task: str) -> str:
    return RunStore(tmp_path / ".tuidag").runs()[-1].log_path(task).read_text()


@pytest.mark.parametrize("how", ["thread", "isolate", "dask"])
def test_a_reused_task_s_return_value_reaches_its_dependents_run_after_run(tmp_path, how):
    """produce returns {"total": 3}; consume fails, is fixed, and the resumed run must hand it produce's value
    (it got None); a second resume, from that run, reuses produce and consume and must hand report both values."""
    source = etl(tmp_path, "isolate=True" if how == "isolate" else "")
    extra = ["--executor", "dask-local:1"] if how == "dask" else []
    assert tuidag("run", str(source), "--no-tui", *extra, cwd=tmp_path).returncode == 1
    (tmp_path / "consume-fixed").touch()
    second = tuidag("run", str(source), "--no-tui", "--resume", *extra, cwd=tmp_path)
    assert second.returncode == 1, second.stdout + second.stderr  # report fails: not fixed yet
    assert "reusing 1 of 3 tasks (produce)" in second.stderr
    (tmp_path / "report-fixed").touch()
    third = tuidag("run", str(source), "--no-tui", "--resume", *extra, cwd=tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "reusing 2 of 3 tasks (produce, consume)" in third.stderr
    assert "report: 3 6" in log_of(tmp_path, "report")
    assert (tmp_path / "produced").read_text() == "x" and (tmp_path / "consumed").read_text() == "x"
    last = replay(RunStore(tmp_path / ".tuidag").runs()[-1].journal).tasks
    assert (last["produce"].reused, last["produce"].value) == (True, {"total": 3})
    assert (last["consume"].reused, last["consume"].value) == (True, 6)


@pytest.mark.parametrize("started_as", ["tuidag run etl.py", "python etl.py"])
def test_the_run_the_post_mortem_r_starts_hands_on_reused_values(tmp_path, monkeypatch, started_as):
    """`r` replaces the viewer with `tuidag run SOURCE --resume RUN_ID --state-dir DIR`: that run gets the values,
    also when the first run was `python etl.py` (its functions were `__main__`'s there, `etl`'s in `tuidag run`)."""
    from tuidag.control.remote import RemoteRun
    from tuidag.ui import viewer

    source = etl(tmp_path)
    if started_as == "python etl.py":
        source.write_text(source.read_text() + '\nif __name__ == "__main__":\n    dag.main()\n')
        env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
        first = subprocess.run(
            [sys.executable, str(source), "--no-tui"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=patience(120),
        )
    else:
        first = tuidag("run", str(source), "--no-tui", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    (tmp_path / "consume-fixed").touch()
    (tmp_path / "report-fixed").touch()
    store = RunStore(tmp_path / ".tuidag")
    (run,) = store.runs()
    started = []
    monkeypatch.setattr(viewer.os, "execv", lambda path, argv: started.append(argv))
    viewer._resume(run, store, RemoteRun.stored(run, store))
    (argv,) = started
    assert argv[1:4] == ["-m", "tuidag", "run"] and "--resume" in argv
    proc = tuidag(*argv[3:], "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reusing 1 of 3 tasks (produce)" in proc.stderr
    assert "report: 3 6" in log_of(tmp_path, "report")


def test_the_run_the_post_mortem_r_starts_repeats_the_options_that_shaped_the_first(tmp_path, monkeypatch):
    """A run started with `--env MODE=fast -j 2 --kill-grace 2s`: the post-mortem's `r` repeats them. Without them
    the resumed run would reuse nothing (`--env MODE changed every task's definition`)."""
    from tuidag.control.remote import RemoteRun
    from tuidag.ui import viewer

    source = etl(tmp_path)
    first = tuidag("run", str(source), "--no-tui", "--env", "MODE=fast", "-j", "2", "--kill-grace", "2s", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    (tmp_path / "consume-fixed").touch()
    (tmp_path / "report-fixed").touch()
    store = RunStore(tmp_path / ".tuidag")
    (run,) = store.runs()
    started = []
    monkeypatch.setattr(viewer.os, "execv", lambda path, argv: started.append(argv))
    viewer._resume(run, store, RemoteRun.stored(run, store))
    (argv,) = started
    options = argv[argv.index(str(source)) + 1 : argv.index("--resume")]
    assert options == ["--env", "MODE=fast", "-j", "2", "--kill-grace", "2.0s"]
    proc = tuidag(*argv[3:], "--no-tui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reusing 1 of 3 tasks (produce)" in proc.stderr


def test_a_value_json_cannot_hold_exactly_is_not_reused_and_the_note_says_so(tmp_path):
    """A tuple would come back as a list: handing that to consume would not be what produce returned."""
    source = etl(tmp_path)
    source.write_text(source.read_text().replace('return {"total": 3}', 'return {"total": 3, "pair": (1, 2)}'))
    assert tuidag("run", str(source), "--no-tui", cwd=tmp_path).returncode == 1
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    (produced,) = [r for r in read_journal(run.journal) if r.get("task") == "produce" and r["to"] == "SUCCEEDED"]
    assert "value" not in produced and produced["value_repr"] == "{'total': 3, 'pair': (1, 2)}"
    (tmp_path / "consume-fixed").touch()
    proc = tuidag("run", str(source), "--no-tui", "--resume", cwd=tmp_path)
    assert (
        "reusing 0 of 3 tasks: return value not kept (not plain JSON): produce; failed there: consume; "
        "skipped there: report" in proc.stderr
    ), proc.stderr
    assert (tmp_path / "produced").read_text() == "xx"


def fingerprint_of(tmp_path: Path, source: str, name: str = "task") -> str:
    """The fingerprint `--resume` compares, of `name` in a fresh interpreter (as a later run computes it: hash
    randomisation, other addresses)."""
    path = tmp_path / "fp_dag.py"
    path.write_text(textwrap.dedent(source))
    code = f"import sys; from tuidag.api import load_python; print(load_python(sys.argv[1]).fingerprints[{name!r}])"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}  # a new hash seed each time
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


BASE = """
    import functools
    from tuidag import Dag

    dag = Dag("fp")
    LIMIT = 10
    NAMES = {"a", "b", "c"}
    TABLE = [[i, i * 2] for i in range(500)]

    def helper(x):
        return x + 1

    class Scale:
        factor = 2

        def apply(self, x):
            return x * self.factor

    def make(offset):
        def inner(ctx):
            return offset + helper(LIMIT)
        return inner

    @dag.task()
    def task(ctx, flag=True, *, mode="fast"):
        total = sum(helper(i) for i in range(LIMIT) if str(i) not in NAMES) + TABLE[-1][1]
        return Scale().apply(total) if flag and mode == "fast" else total
"""

#: Each edit changes what `task` does; the fingerprint must change with it.
EDITS = {
    "its body": ("return Scale().apply(total)", "return Scale().apply(total) + 1"),
    "a constant in it": ("str(i) not in NAMES", "str(i) not in NAMES or i == 3"),
    "code nested in it": ("helper(i) for i in range(LIMIT)", "helper(i) * 2 for i in range(LIMIT)"),
    "a default": ("flag=True", "flag=False"),
    "a keyword-only default": ('mode="fast"', 'mode="slow"'),
    "a global constant it reads": ("LIMIT = 10", "LIMIT = 11"),
    "a global set it reads": ('NAMES = {"a", "b", "c"}', 'NAMES = {"a", "b", "d"}'),
    "a helper function it calls": ("return x + 1", "return x + 2"),
    "a method of a class it uses": ("return x * self.factor", "return x * self.factor - 1"),
    "a class attribute": ("factor = 2", "factor = 3"),
    "a row of a global table": ("[i, i * 2] for i in range(500)", "[i, i * 2 + (i == 300)] for i in range(500)"),
}


def test_a_callable_s_fingerprint_is_the_same_in_every_fresh_interpreter(tmp_path):
    """Sets iterate in hash order, which changes with every interpreter: the fingerprint must not."""
    prints = {fingerprint_of(tmp_path, BASE) for _ in range(4)}
    assert len(prints) == 1


def test_moving_a_callable_or_editing_a_comment_keeps_its_fingerprint(tmp_path):
    moved = BASE.replace('    dag = Dag("fp")\n', '    dag = Dag("fp")\n\n    # a comment\n\n\n')
    assert fingerprint_of(tmp_path, moved) == fingerprint_of(tmp_path, BASE)


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_callable_s_fingerprint_changes_when_what_it_runs_changes(tmp_path, edit):
    old, new = EDITS[edit]
    assert BASE.count(old) == 1
    assert fingerprint_of(tmp_path, BASE.replace(old, new)) != fingerprint_of(tmp_path, BASE)


@pytest.mark.parametrize(
    "edit",
    [
        ("make(1)", "make(2)"),
        ("helper(LIMIT)", "helper(LIMIT) + 1"),
        ("functools.partial(scaled, 2)", "functools.partial(scaled, 3)"),
    ],
)
def test_closures_and_partials_count_what_they_hold(tmp_path, edit):
    source = (
        BASE
        + """
    def scaled(k, ctx):
        return k
    dag.task(name="closure")(make(1))
    dag.task(name="partial")(functools.partial(scaled, 2))
    """
    )
    name = "partial" if "partial" in edit[0] else "closure"
    assert fingerprint_of(tmp_path, source.replace(*edit), name) != fingerprint_of(tmp_path, source, name)


def test_a_resumed_run_runs_a_callable_whose_code_changed_and_says_so(tmp_path):
    source = etl(tmp_path)
    assert tuidag("run", str(source), "--no-tui", cwd=tmp_path).returncode == 1
    (tmp_path / "consume-fixed").touch()
    (tmp_path / "report-fixed").touch()
    source.write_text(source.read_text().replace('return {"total": 3}', 'return {"total": 4}'))
    proc = tuidag("run", str(source), "--no-tui", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reusing 0 of 3 tasks: changed: produce; failed there: consume; skipped there: report" in proc.stderr
    assert "report: 4 8" in log_of(tmp_path, "report")


def test_a_resume_that_reuses_nothing_names_the_variable_that_changed_every_task(tmp_path):
    source = tmp_path / "dag.yaml"
    source.write_text("tasks:\n" + "".join(f"  t{i}:\n    run: echo $MODE\n" for i in range(7)))
    assert tuidag("run", str(source), "--env", "MODE=fast", cwd=tmp_path).returncode == 0
    proc = tuidag("run", str(source), "--env", "MODE=slow", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "reusing 0 of 7 tasks: --env MODE changed every task's definition\n" in proc.stderr
    again = tuidag("run", str(source), "--env", "MODE=slow", "--resume", cwd=tmp_path)
    assert "reusing 7 of 7 tasks (t0, t1, t2, t3, t4, t5, t6)\n" in again.stderr
    source.write_text("env: {MODE: slow, LEVEL: '2'}\n" + source.read_text())  # the file's own env, no --env now
    third = tuidag("run", str(source), "--resume", cwd=tmp_path)
    assert "reusing 0 of 7 tasks: env LEVEL changed every task's definition\n" in third.stderr


def test_the_note_names_the_tasks_that_changed_and_those_after_them(tmp_path):
    source = tmp_path / "dag.yaml"
    dag = "tasks:\n  a:\n    run: echo a\n  b:\n    run: echo {b}\n  c:\n    depends_on: b\n    run: echo c\n"
    source.write_text(dag.format(b="one"))
    tuidag("run", str(source), cwd=tmp_path)
    source.write_text(dag.format(b="two") + "  d:\n    run: echo d\n")
    proc = tuidag("run", str(source), "--resume", cwd=tmp_path)
    assert "reusing 1 of 4 tasks (a): changed: b; not in that run: d; after a task that runs again: c\n" in proc.stderr


def test_a_dag_file_edited_within_the_same_second_keeping_its_size_is_read_as_it_is_now(tmp_path):
    """Python takes a cached .pyc whose recorded mtime (whole seconds) and size match the source: an edit in the
    same second that keeps the size (`LIMIT = 10` -> `LIMIT = 11`) ran the old code. tuidag reads a DAG file from
    its source, and writes no __pycache__ beside it. Bytecode caching is on here, as on a user's machine."""
    path = tmp_path / "fp_dag.py"
    source = textwrap.dedent(BASE)
    code = "import sys; from tuidag.api import load_python; print(load_python(sys.argv[1]).fingerprints['task'])"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def fingerprint() -> str:
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=tmp_path, env=env
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    path.write_text(source)
    stamp = path.stat().st_mtime_ns
    before = fingerprint()
    edited = source.replace("LIMIT = 10", "LIMIT = 11")
    assert len(edited) == len(source)
    path.write_text(edited)
    os.utime(path, ns=(stamp, stamp))  # the same second as the first version
    assert fingerprint() != before
    assert not (tmp_path / "__pycache__").exists()
