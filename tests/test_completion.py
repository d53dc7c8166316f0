"""Shell completion: the script `tuidag completion bash` prints, sourced in a real bash and called as bash calls it on
TAB (COMP_WORDS, COMP_CWORD), with the real binary answering for task names and run ids; the zsh script is the same
function and table (run through zsh's bashcompinit), checked in zsh itself where zsh is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slowness import patience
from tuidag.cli import build_parser
from tuidag.completion import command_table, script, subcommands

REPO = Path(__file__).resolve().parents[1]
DAG = """\
name: pipe
tasks:
  prepare: {run: "true"}
  train: {run: "true", depends_on: [prepare]}
  report: {run: "true", depends_on: [train]}
"""


@pytest.fixture
def shell_dir(tmp_path):
    """A folder with a DAG file, and a `tuidag` on PATH that runs this tree's code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tuidag"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m tuidag "$@"\n')
    wrapper.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "pipe.yaml").write_text(DAG)
    return work


def tuidag(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(cwd.parent / "bin" / "tuidag"), *args], cwd=cwd, capture_output=True, text=True, timeout=patience(60)
    )


def complete(cwd: Path, *words: str, shell: str = "bash") -> list[str]:
    """What the shell offers for the last of `words` (the word being completed; "" for a new one)."""
    quoted = " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)
    program = (
        f'eval "$(tuidag completion {shell})"\n'
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        "_tuidag_complete\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    command = ["bash", "-c", program] if shell == "bash" else ["zsh", "-f", "-c", program]
    env = {**os.environ, "PATH": f"{cwd.parent / 'bin'}:{os.environ['PATH']}"}
    env.pop("TUIDAG_STATE_DIR", None)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=patience(60))
    assert done.returncode == 0 and not done.stderr, done.stderr
    return sorted(line for line in done.stdout.splitlines() if line)


def test_commands_and_the_top_level_options_complete(shell_dir):
    assert complete(shell_dir, "tuidag", "r") == ["report", "rerun", "resume", "run", "runs"]
    assert "completion" in complete(shell_dir, "tuidag", "")
    assert "__complete" not in complete(shell_dir, "tuidag", "")
    assert complete(shell_dir, "tuidag", "--v") == ["--version"]


def test_a_commands_options_and_an_options_choices_complete(shell_dir):
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "--no") == ["--no-cache", "--no-tui", "--notify"]
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "--notify", "") == ["end", "failure", "never"]
    assert complete(shell_dir, "tuidag", "attach", "--notify", "f") == ["failure"]
    assert complete(shell_dir, "tuidag", "graph", "pipe.yaml", "--format", "") == ["dot", "mermaid", "text"]
    assert complete(shell_dir, "tuidag", "completion", "") == ["bash", "zsh"]
    # bash cuts `--notify=f` at the =
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "--notify", "=", "f") == ["failure"]


def test_the_task_names_of_the_dag_file_on_the_line_complete(shell_dir):
    names = ["prepare", "report", "train"]
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "") == names
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "train", "-j", "2", "re") == ["report"]
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "--from", "t") == ["train"]
    assert complete(shell_dir, "tuidag", "plan", "pipe.yaml", "p") == ["prepare"]
    assert complete(shell_dir, "tuidag", "run", "--resume", "pipe.yaml", "") == names  # the file, not a run id
    assert complete(shell_dir, "tuidag", "logs", "--file", "pipe.yaml", "") == names
    assert complete(shell_dir, "tuidag", "logs", "--file=pipe.yaml", "tr") == ["train"]
    assert complete(shell_dir, "tuidag", "runs", "pipe.yaml", "--task", "") == names
    assert complete(shell_dir, "tuidag", "run", "pi") == ["pipe.yaml"]  # the file itself: a path


def test_run_ids_and_the_tasks_of_the_latest_run_complete(shell_dir):
    state = shell_dir / "kept"
    for _ in range(2):
        assert tuidag(shell_dir, "run", "pipe.yaml", "--state-dir", str(state)).returncode == 0
    ids = sorted(path.name for path in (state / "runs").iterdir() if not path.name.startswith("."))
    assert len(ids) == 2
    assert complete(shell_dir, "tuidag", "attach", "--state-dir", "kept", "") == ids
    assert complete(shell_dir, "tuidag", "report", "--state-dir=kept", "") == ids
    assert complete(shell_dir, "tuidag", "show", "--state-dir", "kept", ids[1][:-2]) == [ids[1]]
    assert complete(shell_dir, "tuidag", "cancel", "--state-dir", "kept", "--run", "") == ids
    assert complete(shell_dir, "tuidag", "logs", "--state-dir", "kept", "") == ["prepare", "report", "train"]
    assert complete(shell_dir, "tuidag", "attach", "") == []  # no run in this folder's .tuidag


def test_a_python_dag_is_never_imported_on_tab(shell_dir):
    (shell_dir / "etl.py").write_text(
        "import pathlib\npathlib.Path('imported').touch()\nfrom tuidag import Dag\ndag = Dag('etl')\n"
    )
    assert complete(shell_dir, "tuidag", "run", "etl.py", "") == []
    assert not (shell_dir / "imported").exists()


def test_a_tab_writes_nothing_and_says_nothing_on_a_broken_file(shell_dir):
    (shell_dir / "broken.yaml").write_text("tasks:\n  a: {run: [}\n")
    done = tuidag(shell_dir, "__complete", "tasks", "--file", "broken.yaml")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = tuidag(shell_dir, "__complete", "tasks", "--file", "pipe.yaml")
    assert done.stdout.split() == ["prepare", "train", "report"]
    assert not (shell_dir / ".tuidag").exists()  # no state dir, no cache entry made by a TAB


def test_task_names_come_from_the_model_a_run_kept(shell_dir):
    from tuidag.model.cache import cached_dag

    state = shell_dir / ".tuidag"
    assert cached_dag(shell_dir / "pipe.yaml", state / "cache") is None
    assert tuidag(shell_dir, "plan", "pipe.yaml").returncode == 0  # keeps the model, as a run does
    cwd = os.getcwd()
    os.chdir(shell_dir)  # the model is kept for the folder it was read from
    try:
        dag = cached_dag(Path("pipe.yaml"), state / "cache")
    finally:
        os.chdir(cwd)
    assert dag is not None and list(dag.tasks) == ["prepare", "train", "report"]


def test_the_script_covers_every_command_and_option_of_the_parser():
    parser = build_parser()
    text = script("bash", parser)
    for name, command in subcommands(parser).items():
        assert f"'{name}') _tuidag_opts=" in text
        for action in command._actions:
            for option in action.option_strings:
                assert option in text
    table = command_table(parser)
    assert table["run"][2] == ["file", "task*"] and table["attach"][2] == ["run"]
    assert table["run"][1]["--resume"] == "run?" and table["run"][1]["--state-dir"] == "dir"


def test_the_zsh_script_is_the_bash_script_with_bashcompinit():
    parser = build_parser()
    bash, zsh = script("bash", parser).splitlines(), script("zsh", parser).splitlines()
    assert bash[1:] == zsh[-len(bash) + 1 :]  # the same table and function, after zsh's own lines
    assert any("bashcompinit" in line for line in zsh[: len(zsh) - len(bash) + 1])


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_runs_the_same_completion(shell_dir):
    # zsh's bashcompinit leaves matching the word being completed to zsh itself: every candidate is given
    assert "run" in complete(shell_dir, "tuidag", "r", shell="zsh")
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "--notify", "", shell="zsh") == ["end", "failure", "never"]
    assert complete(shell_dir, "tuidag", "run", "pipe.yaml", "", shell="zsh") == ["prepare", "report", "train"]
    assert complete(shell_dir, "tuidag", "completion", "", shell="zsh") == ["bash", "zsh"]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_tab_in_an_interactive_shell_completes_a_task_name(shell_dir, shell):
    """The shell's own TAB, in a terminal: bash's readline, zsh's completion system (compinit, bashcompinit)."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    socket = f"tuidag-completion-{os.getpid()}-{shell}"
    path = f"{shell_dir.parent / 'bin'}:{os.environ['PATH']}"
    start = ["bash", "--norc", "--noprofile"] if shell == "bash" else ["zsh", "-f"]

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True).stdout

    tmux("new-session", "-d", "-x", "120", "-y", "20", "-c", str(shell_dir), "env", f"PATH={path}", *start)
    try:
        tmux("send-keys", "-t", "0", f'eval "$(tuidag completion {shell})"; echo loaded', "Enter")
        until(lambda: "\nloaded" in tmux("capture-pane", "-p", "-t", "0"), "the script loaded")
        tmux("send-keys", "-t", "0", "tuidag run pipe.yaml tr", "Tab")
        until(lambda: "tuidag run pipe.yaml train" in tmux("capture-pane", "-p", "-t", "0"), "train completed")
        tmux("send-keys", "-t", "0", "--", "--notify f")  # (a unique completion ends with a space)
        tmux("send-keys", "-t", "0", "Tab")
        until(lambda: "train --notify failure" in tmux("capture-pane", "-p", "-t", "0"), "failure completed")
    finally:
        tmux("kill-server")


def until(predicate, what: str, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {patience(timeout):.0f}s")
        time.sleep(0.05)
