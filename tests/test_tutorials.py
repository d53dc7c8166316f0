"""Each tutorial of the documentation site (docs/tutorials/), followed as a new user follows it: every command the page
tells the user to run (each line of its ```sh blocks, in order) runs for real in bash, in a copy of the repository's
demos/, and what the page says the command does is checked. stdout is a pipe, so `tuidag run` runs headless, as
it does with `--no-tui`. A test that runs a command the page does not have next, or leaves one of the page's commands
unrun, fails: the page and its test move together."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dags import wait_until
from dask_cluster import free_port
from slowness import patience

pytestmark = pytest.mark.cli
REPO = Path(__file__).resolve().parent.parent
TUTORIALS = REPO / "docs" / "tutorials"


def page_commands(text: str) -> list[str]:
    return [line for block in re.findall(r"```sh\n(.*?)```", text, re.S) for line in block.splitlines() if line.strip()]


class Tutorial:
    """A tutorial page followed in `tmp_path`: `checkout/demos` is a copy of the repository's demos (the tutorials run
    from the checkout's root), `home` is $HOME, and `tuidag`, `python` and `dask` on PATH are this tree's."""

    def __init__(self, page: str, tmp_path: Path):
        self.page = page
        self.text = (TUTORIALS / page).read_text()
        self.todo = page_commands(self.text)
        self.root = tmp_path / "checkout"
        shutil.copytree(REPO / "demos", self.root / "demos", ignore=shutil.ignore_patterns(".tuidag", "out"))
        self.home = tmp_path / "home"
        self.home.mkdir()
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        venv = Path(sys.executable).parent
        for name, target in [("tuidag", f'"{sys.executable}" -m tuidag'), ("python", f'"{sys.executable}"')]:
            (bin_dir / name).write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        (bin_dir / "dask").write_text(f'#!/bin/sh\nexec "{venv / "dask"}" "$@"\n')
        for shim in bin_dir.iterdir():
            shim.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items() if k != "TUIDAG_STATE_DIR"}
        self.env.update(
            NO_COLOR="1",
            HOME=str(self.home),
            PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        )
        self.cwd = self.root
        self.background: list[subprocess.Popen] = []
        self.logs = tmp_path / "background"
        self.logs.mkdir()

    def _take(self, command: str) -> None:
        assert self.todo, f"{self.page} has no more commands to run, and the test runs {command!r}"
        assert self.todo[0] == command, f"{self.page}'s next command is {self.todo[0]!r}, the test's {command!r}"
        self.todo.pop(0)

    def run(self, command: str, code: int = 0, *, line: str | None = None) -> str:
        """The page's next command, run to its end (`line`: as run here, when it must differ, e.g. a free port);
        its stdout and stderr together."""
        self._take(command)
        line = line or command
        if line.startswith("cd "):  # the shell's own: it changes where the next commands run
            target = line[3:].strip()
            self.cwd = self.cwd / (str(self.home) + target[1:] if target.startswith("~") else target)
            return ""
        proc = subprocess.run(
            ["bash", "-c", line],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=patience(120),
            stdin=subprocess.DEVNULL,
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == code, f"{command!r} exited {proc.returncode}, not {code}:\n{output[-3000:]}"
        return output

    def start(self, command: str, *, line: str | None = None) -> tuple[subprocess.Popen, Path]:
        """The page's next command, one that goes on (a server, a watching run), started in a session of its own;
        the process and the file its output goes to."""
        self._take(command)
        out = self.logs / f"{len(self.background)}.log"
        with open(out, "wb") as sink:
            proc = subprocess.Popen(
                ["bash", "-c", f"exec {line or command}"],
                cwd=self.cwd,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.background.append(proc)
        return proc, out

    def shows(self, output: str, *lines: str) -> None:
        """Each line is in the page (as what the command prints) and in what the command printed."""
        for text in lines:
            assert text in self.text, f"{self.page} does not show {text!r}"
            assert text in output, f"the command did not print {text!r}:\n{output[-3000:]}"

    def pip(self, command: str) -> None:
        """A `pip install -e '.[EXTRA]'` line: the extra exists and what it brings is installed here (the tests run
        in an environment with every extra), so nothing is installed."""
        self._take(command)
        (extra,) = re.findall(r"\.\[(\w+)\]", command)
        assert f"\n{extra} = [" in (REPO / "pyproject.toml").read_text(), f"pyproject.toml has no extra {extra!r}"

    def done(self) -> None:
        assert not self.todo, f"{self.page}'s commands the test did not run: {self.todo}"

    def close(self) -> None:
        """Ends what `start` started that is still running (a server), with every process of its session."""
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def tutorial(tmp_path):
    made: list[Tutorial] = []

    def follow(page: str) -> Tutorial:
        made.append(Tutorial(page, tmp_path))
        return made[-1]

    yield follow
    for each in made:
        each.close()


def wait_for(path: Path, pattern: str, after: str = "", timeout: float = 30) -> str:
    """What a background command printed, once `pattern` (a regular expression) is in it after `after`."""

    def printed() -> str:
        text = path.read_text()
        return text.partition(after)[2] if after else text

    wait_until(lambda: re.search(pattern, printed()) is not None, timeout=timeout)
    return path.read_text()


def test_the_ml_sweep_tutorial(tutorial):
    t = tutorial("ml-sweep.md")
    out = t.run("tuidag validate demos/ml_gpu.yaml")
    t.shows(out, "demos/ml_gpu.yaml: ok: ml-gpu, 8 tasks, 10 edges (matrix train: 4 instances; eval: 2 instances)")
    out = t.run("tuidag graph demos/ml_gpu.yaml")
    assert "eval[model=small]  <- train[model=small,lr=0.001], train[model=small,lr=0.01]" in out
    out = t.run("tuidag run demos/ml_gpu.yaml")
    t.shows(
        out,
        "[train[model=large,lr=0.001]] --> RUNNING [slots gpu:0,1]",
        "[train[model=large,lr=0.001]] training the large model with lr 0.001 on GPUs 0,1",
    )
    assert "train: 4 of 4 done" in out and "8 tasks: 8 succeeded" in out
    # Two GPUs: the small trainings side by side, then each large one alone; the critical path runs through three.
    path = re.search(r"critical path \(6 tasks, .*", out).group()
    assert path.count("train[") == 3 and "train[model=large,lr=0.001]" in path and "train[model=large,lr=0.01]" in path
    out = t.run("tuidag logs 'train[model=large,lr=0.01]' --file demos/ml_gpu.yaml")
    t.shows(out, "training the large model with lr 0.01 on GPUs 0,1", "epoch 3/3: loss 0.20")
    out = t.run("tuidag run demos/ml_gpu.yaml --resources gpu=4")
    assert re.search(r"RUNNING \[slots gpu:[0-9,]*[23]", out)  # a training on the third or fourth GPU
    out = t.run("tuidag run demos/ml_gpu.yaml --resources gpu=1    # exit code 2: nothing starts", code=2)
    t.shows(
        out,
        "--resources gpu=1 is less than the 2 'gpu' slots task 'train[model=large,lr=0.001]' asks for "
        "(demos/ml_gpu.yaml:20:17)",
    )
    assert "RUNNING" not in out
    out = t.run("tuidag runs demos/ml_gpu.yaml")
    assert len(re.findall(r"succeeded=8 +succeeded", out)) == 2 and "ml-gpu  " in out.split("duration trend")[1]
    t.run("tuidag report --file demos/ml_gpu.yaml -o ml-report.html")
    report = (t.root / "ml-report.html").read_text()
    assert "Sweeps" in report and "train[model=large,lr=0.01]" in report
    t.done()


def test_the_python_pipeline_tutorial(tutorial):
    t = tutorial("python-pipeline.md")
    t.shows(t.run("tuidag validate demos/etl.py"), "demos/etl.py: ok: etl, 4 tasks, 3 edges")
    assert "4 tasks: 4 succeeded" in t.run("tuidag run demos/etl.py")
    assert "4 tasks: 4 succeeded" in t.run("python demos/etl.py --no-tui")
    out = t.run("tuidag logs transform --file demos/etl.py")
    t.shows(out, "shard 0: 1200", "shard 3: 1275", "INFO __main__: transformed 100 rows into 4 shards")
    out = t.run("tuidag run demos/etl.py transform")
    assert "2 tasks not targets" in out and "2 tasks: 2 succeeded" in out
    out = t.run("tuidag run demos/etl.py --resume")
    t.shows(out, "reusing 2 of 4 tasks (extract, transform): not a target there: score, load")
    assert "[score]     --> RUNNING" in out and "4 tasks: " in out and "failed" not in out
    out = t.run("tuidag show --task score --file demos/etl.py")
    t.shows(out, "score · succeeded", "calls        etl.score", "return value 1237.5", "needed by    load")
    t.done()


def test_the_skypilot_tutorial(tutorial):
    t = tutorial("skypilot.md")
    out = t.run("tuidag validate demos/skypilot_pipeline.yaml")
    t.shows(
        out,
        "demos/skypilot_pipeline.yaml: ok: skypilot-pipeline, 4 tasks, 4 edges",
        "demos/skypilot_pipeline.yaml:23:1: note: 'resources' is ignored when running locally",
        "demos/skypilot_pipeline.yaml:48:1: note: 'file_mounts' is ignored when running locally",
    )
    out = t.run("tuidag run demos/skypilot_pipeline.yaml")
    assert "wrote 100 rows on node 0 of 1" in out and "4 tasks: 4 succeeded" in out
    out = t.run("tuidag run demos/skypilot_pipeline.yaml --resources A100=1,L4=1")
    assert "demos/skypilot_pipeline.yaml:23:1: note" not in out and "35:1: note: 'resources'" not in out
    assert re.search(r"\[infer-A\] +--> RUNNING \[slots A100:0\]", out) and "4 tasks: 4 succeeded" in out
    out = t.run("tuidag run demos/skypilot_job.yaml --num-jobs 4")
    t.shows(out, "[shard-eval[rank=0]] job 0 of 4 on reviews", "[shard-eval[rank=0]]   shard 4/8: ok")
    assert "shard-eval: 4 of 4 done" in out and "shard 7/8: ok" in out
    out = t.run("tuidag run demos/skypilot_job.yaml --num-jobs 4 --env DATASET=products")
    assert "job 3 of 4 on products" in out and "shard-eval: 4 of 4 done" in out
    t.done()


def test_the_build_and_watch_tutorial(tutorial):
    t = tutorial("build-watch.md")
    t.run("cp -r demos/build ~/tuidag-site")
    t.run("cd ~/tuidag-site")
    site = t.home / "tuidag-site"
    assert "no earlier success with this definition" in t.run("tuidag run build.yaml")
    assert (site / "out" / "check.txt").read_text() == "2\n"
    t.shows(t.run("tuidag run build.yaml"), "4 tasks: 4 up to date")
    t.run('echo "Run a DAG in the terminal, or headless in CI." >> pages/usage.md')
    out = t.run("tuidag plan build.yaml")
    t.shows(
        out,
        "render-usage: run: input pages/usage.md changed",
        "index: run: its dependency render-usage will run",
        "check: run: its dependency index will run",
        "4 tasks: 1 up to date, 3 run",
    )
    out = t.run("tuidag run build.yaml")
    t.shows(out, "4 tasks: 2 up to date, 2 succeeded")
    assert "[check]        --> up to date" in out
    t.run("rm -r out")
    out = t.run("tuidag run build.yaml")
    t.shows(out, "[check]        --> up to date: output out/check.txt is missing: restored from the cache")
    assert "4 tasks: 4 up to date" in out and (site / "out" / "index.html").exists()
    assert "4 tasks: 4 succeeded" in t.run("tuidag run build.yaml --force")
    assert "content: " in t.run("tuidag cache build.yaml")
    watching, out = t.start("tuidag run build.yaml --watch")
    wait_for(out, r"tuidag: watching ")
    t.run('echo "It runs what an edit touches." >> pages/intro.md')
    gen = "tuidag: gen 2: pages/intro.md changed -> render-intro, index, check"
    t.shows(wait_for(out, r"\[index\] +--> SUCCEEDED", after=gen), gen)
    ended = "; 4 tasks: 2 succeeded, 2 up to date · watching for changes"
    t.shows(wait_for(out, re.escape(ended), after=gen), ended)
    assert "<p>It runs what an edit touches.</p>" in (site / "out" / "intro.html").read_text()
    t.run("tuidag stop --file build.yaml")
    assert watching.wait(timeout=patience(30)) == 0
    assert "[check]        --> up to date" in out.read_text().partition(gen)[2]
    t.done()


def test_the_dask_tutorial(tutorial):
    t = tutorial("dask.md")
    t.pip("pip install -e '.[dask]'")
    out = t.run("tuidag run demos/ml_gpu.yaml --executor dask-local:2")
    assert "8 tasks: 8 succeeded" in out and "[slots gpu:0,1]" in out
    port = free_port()  # the page's 8786 may be taken on a machine that runs tests side by side
    address = f"tcp://127.0.0.1:{port}"
    command = "dask scheduler --port 8786"
    t.start(command, line=f"dask scheduler --port {port} --dashboard-address :0")
    command = 'dask worker tcp://127.0.0.1:8786 --nthreads 2 --resources "gpu=2" --name gpu-box'
    _, worker = t.start(command, line=command.replace("8786", str(port)) + " --dashboard-address :0")
    wait_for(worker, r"Registered to", timeout=60)
    command = "tuidag run demos/ml_gpu.yaml --executor dask --dask-address tcp://127.0.0.1:8786"
    out = t.run(command, line=command.replace("8786", str(port)))
    t.shows(out, "max_parallel 2: the Dask cluster's worker threads")
    assert "8 tasks: 8 succeeded" in out and "[slots gpu:0,1]" in out
    out = t.run("tuidag runs demos/ml_gpu.yaml")
    assert "EXECUTOR" in out and "dask-local:2" in out and f"dask {address}" in out
    t.run("tuidag report --file demos/ml_gpu.yaml -o dask-report.html")
    assert "gpu-box" in (t.root / "dask-report.html").read_text()
    t.done()


def test_every_tutorial_page_is_followed_by_a_test_here():
    followed = set(re.findall(r'tutorial\("([\w-]+\.md)"\)', Path(__file__).read_text()))
    assert followed == {page.name for page in TUTORIALS.glob("*.md")}
