"""The state dir as an attack surface: a folder others can write to is refused and never changed; no file of the
store is written or shown through a planted symlink; a new run folder is never visible before its owner locked it."""

from __future__ import annotations

import errno
import fcntl
import json
import marshal
import os
import stat
from pathlib import Path

import pytest

from test_cli import tuidag
from tuidag.model.cache import read_entry, write_entry
from tuidag.store.reaper import reap_interrupted
from tuidag.store.runs import RunStore

pytestmark = pytest.mark.cli
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: another user's folder, owned by root's choice")
NOBODY = 65534


def dag_file(tmp_path: Path, text: str | None = None) -> Path:
    path = tmp_path / "dag.yaml"
    path.write_text(text or f"tasks:\n  a: {{run: touch {tmp_path}/started}}\n")
    return path


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# ---------------------------------------------------------------------------------------------------- ownership
@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o770])
@pytest.mark.parametrize("command", ["run", "runs", "logs"])
def test_a_state_dir_others_can_write_to_is_refused_and_left_as_it_is(tmp_path, mode, command):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    args = {"run": ["run", "--no-tui", str(dag_file(tmp_path))], "runs": ["runs"], "logs": ["logs", "a"]}[command]
    proc = tuidag(*args, "--state-dir", str(shared), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"tuidag: state dir {shared} is not safe to use: others can write to it (mode {mode:04o}); "
        "use a folder that only you can write to (--state-dir DIR)\n"
    )
    assert stat.S_IMODE(shared.stat().st_mode) == mode and tree(shared) == []
    assert not (tmp_path / "started").exists()


def test_a_dot_tuidag_symlink_to_a_shared_folder_is_refused_and_left_as_it_is(tmp_path):
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (tmp_path / ".tuidag").symlink_to(shared)
    proc = tuidag("run", "--no-tui", str(dag_file(tmp_path)), cwd=tmp_path)
    assert proc.returncode == 2 and "is not safe to use: others can write to it (mode 1777)" in proc.stderr
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777 and tree(shared) == []


def test_a_folder_of_ones_own_keeps_its_mode_and_a_new_one_is_private(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    os.chmod(mine, 0o755)
    assert tuidag("run", "--no-tui", str(dag_file(tmp_path)), "--state-dir", str(mine), cwd=tmp_path).returncode == 0
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755  # never chmodded: tuidag did not create it
    new = tmp_path / "new" / "state"
    assert tuidag("run", "--no-tui", str(dag_file(tmp_path)), "--state-dir", str(new), cwd=tmp_path).returncode == 0
    assert [stat.S_IMODE(p.stat().st_mode) for p in (new, new / "runs")] == [0o700] * 2


@as_root
def test_root_refuses_another_users_state_dir_and_writes_nothing_through_its_symlinks(tmp_path):
    """The reported attack: a user plants symlinks named like tuidag's files in a state dir of theirs, hoping root
    runs tuidag there and truncates a root-owned file."""
    secret = tmp_path / "secret"
    secret.write_text("root's data\n")
    os.chmod(secret, 0o600)
    theirs = tmp_path / "theirs"
    (theirs / "runs").mkdir(parents=True)
    for pid in range(os.getpid(), os.getpid() + 2000):
        (theirs / "runs" / f".probe-{pid}").symlink_to(secret)
    (theirs / "runs" / ".reap.lock").symlink_to(secret)
    for path in (theirs, theirs / "runs"):
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    for command in (["run", "--no-tui", str(dag_file(tmp_path))], ["runs"], ["logs", "a"]):
        proc = tuidag(*command, "--state-dir", str(theirs), cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(
            f"tuidag: state dir {theirs} is not safe to use: it belongs to nobody "
            f"(uid {NOBODY}), not to you (root (uid 0))"
        )
    assert secret.read_text() == "root's data\n" and not (tmp_path / "started").exists()


# ----------------------------------------------------------------------------------------------- planted symlinks
def test_a_symlink_planted_as_a_task_log_is_not_written_through(tmp_path):
    """An upstream task plants `logs/b.log` -> a file of the user's; b's output must not land there."""
    target = tmp_path / "target"
    target.write_text("untouched\n")
    state = tmp_path / "state"
    dag = dag_file(
        tmp_path,
        f"""\
tasks:
  a: {{run: 'ln -s {target} {state}/runs/$TUIDAG_RUN_ID/logs/b.log'}}
  b: {{run: echo into the log, depends_on: a}}
""",
    )
    proc = tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "[b] --> FAILED" in proc.stdout and os.strerror(errno.ELOOP) in proc.stdout
    assert target.read_text() == "untouched\n" and "untouched" not in proc.stdout  # nor shown as b's output


def test_symlinks_named_like_the_summarys_files_are_not_written_through(tmp_path):
    """A task swaps the room reserved for the summary for a symlink, and plants one where a temporary summary used
    to be written: the summary is still written, as a file of its own."""
    target = tmp_path / "target"
    target.write_text("untouched\n")
    state = tmp_path / "state"
    run_dir = f"{state}/runs/$TUIDAG_RUN_ID"
    dag = dag_file(
        tmp_path,
        f"""\
tasks:
  a:
    run: |
      rm -f {run_dir}/.summary.reserve
      for name in .summary.reserve .summary.json.tmp; do ln -s {target} {run_dir}/$name; done
""",
    )
    assert tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), cwd=tmp_path).returncode == 0
    (run,) = RunStore(state).runs()
    assert target.read_text() == "untouched\n"
    assert not run.summary.is_symlink() and json.loads(run.summary.read_text())["outcome"] == "succeeded"


def run_and_plant(tmp_path: Path, dag_text: str, code: int, planted: str = "symlink") -> tuple[Path, Path]:
    """Run `dag_text` (exit `code`) in a state dir, then replace task a's log with a symlink to a file saying "not a
    log", or with a FIFO. The DAG file and the state dir."""
    secret = tmp_path / "secret"
    secret.write_text("not a log\n")
    state = tmp_path / "state"
    dag = dag_file(tmp_path, dag_text)
    assert tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), cwd=tmp_path).returncode == code
    (run,) = RunStore(state).runs()
    run.log_path("a").unlink()
    if planted == "symlink":
        run.log_path("a").symlink_to(secret)
    else:
        os.mkfifo(run.log_path("a"))  # opening it to read would wait for a writer forever
    return dag, state


def test_resume_does_not_link_a_symlink_planted_as_an_old_log(tmp_path):
    dag, state = run_and_plant(tmp_path, "tasks:\n  a: {run: echo a}\n  b: {run: exit 1, depends_on: a}\n", 1)
    assert tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), "--resume", cwd=tmp_path).returncode == 1
    new = RunStore(state).runs()[-1]
    assert not new.log_path("a").is_symlink() and not new.log_path("a").exists()
    logs = tuidag("logs", "a", "--state-dir", str(state), cwd=tmp_path)
    assert "not a log" not in logs.stdout


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_logs_shows_nothing_through_a_link_or_fifo_planted_as_a_log(tmp_path, planted, follow):
    _, state = run_and_plant(tmp_path, "tasks:\n  a: {run: echo from a}\n", 0, planted)
    logs = tuidag("logs", "a", *(["-f"] if follow else []), "--state-dir", str(state), cwd=tmp_path)
    assert logs.returncode == 2 and "not a log" not in logs.stdout, logs
    assert logs.stderr.startswith("tuidag: ") and "not shown" in logs.stderr and "Traceback" not in logs.stderr


def test_resume_links_a_genuine_old_log(tmp_path):
    state = tmp_path / "state"
    dag = dag_file(tmp_path, "tasks:\n  a: {run: echo from a}\n  b: {run: exit 1, depends_on: a}\n")
    assert tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), cwd=tmp_path).returncode == 1
    assert tuidag("run", "--no-tui", str(dag), "--state-dir", str(state), "--resume", cwd=tmp_path).returncode == 1
    old, new = RunStore(state).runs()
    assert os.path.samefile(old.log_path("a"), new.log_path("a"))


def test_cache_entries_are_never_read_or_written_through_a_symlink(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"untouched")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    record = tmp_path / "record"
    record.write_bytes(marshal.dumps(("key", 0)))
    entry = cache / "x.dag"
    entry.symlink_to(record)
    assert read_entry(entry, "key") is None  # not read through the link
    (cache / f".x.dag.{os.getpid()}").symlink_to(target)  # the name a temporary entry had
    write_entry(entry, ("key", 1))
    assert target.read_bytes() == b"untouched" and record.read_bytes() == marshal.dumps(("key", 0))
    assert not entry.is_symlink() and read_entry(entry, "key") == ("key", 1)
    os.chmod(cache, 0o777)  # a cache folder others can write to is not used
    write_entry(cache / "y.dag", ("key", 2))
    assert not (cache / "y.dag").exists()


# ---------------------------------------------------------------------------------------------- creation race
def test_a_reaper_never_sees_a_new_run_folder_without_its_owner(tmp_path, monkeypatch):
    """Another command's reaper may run between any two steps of making a run folder (here: after every mkdir,
    open, lock and rename of it): it must never take the new run for an interrupted one and close it."""
    store = RunStore(tmp_path / "state")
    reports = []
    busy = []

    def reap_after(real):
        def step(*args, **kwargs):
            result = real(*args, **kwargs)
            if not busy:
                busy.append(1)
                try:
                    reports.extend(reap_interrupted(RunStore(tmp_path / "state"), grace=0.1))
                finally:
                    busy.clear()
            return result

        return step

    for module, name in ((os, "mkdir"), (os, "open"), (os, "rename"), (fcntl, "flock")):
        monkeypatch.setattr(module, name, reap_after(getattr(module, name)))
    run, journal = store.create_run("race", None, ["t"])
    monkeypatch.undo()
    journal.close()
    assert reports == [] and not run.summary.exists() and run.owned()
