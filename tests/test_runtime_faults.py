"""Runtime faults: hostile output must land in the log byte for byte, and hostile names never escape the run folder."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from slowness import patience
from test_cli import tuidag, write
from tuidag.store.runs import RunStore, log_file_name

HEADER = b"=== tuidag: "

WRITERS = {
    "invalid-utf8": "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe\\xc3( bad \\xed\\xa0\\x80 end\\n')",
    "binary": "import sys, random; r = random.Random(7); sys.stdout.buffer.write(bytes(r.randrange(256) "
    "for _ in range(200000)))",
    "five-mb-line": "import sys; sys.stdout.buffer.write(b'x' * (5 << 20))",
    "hundred-mb": "import sys; line = b'0123456789' * 10 + b'\\n'; chunk = line * 10000; "
    "[sys.stdout.buffer.write(chunk) for _ in range(100 * 1000 * 1000 // len(chunk))]",
    "cr-progress": "import sys; [sys.stdout.write(f'\\r{i}%') for i in range(101)]; print()",
}


def expected_bytes(code: str) -> bytes:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, check=True).stdout


def without_headers(data: bytes) -> bytes:
    return b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(HEADER))


@pytest.mark.parametrize("name", list(WRITERS))
def test_log_holds_exactly_what_the_task_wrote(tmp_path, name):
    code = WRITERS[name]
    dag = write(tmp_path / "dag.yaml", f'tasks:\n  t:\n    run: {sys.executable} -c "{code}"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "tuidag", "run", "--no-tui", str(dag)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=patience(120),
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = RunStore(tmp_path / ".tuidag").runs()
    data = run.log_path("t").read_bytes()
    want = expected_bytes(code)
    got = without_headers(data)
    assert len(got) == len(want) and hashlib.sha256(got).digest() == hashlib.sha256(want).digest()
    logs = subprocess.run(
        [sys.executable, "-m", "tuidag", "logs", "t"], cwd=tmp_path, capture_output=True, timeout=patience(60)
    )
    assert logs.returncode == 0 and logs.stdout == data


def test_headless_output_survives_invalid_utf8(tmp_path):
    dag = write(tmp_path / "dag.yaml", "tasks:\n  t:\n    run: printf 'caf\\351 ok\\n'\n")
    proc = tuidag("run", str(dag), cwd=tmp_path)
    assert proc.returncode == 0 and "[t] caf\ufffd ok" in proc.stdout


@pytest.mark.parametrize("hostile", ["../../etc/passwd", "/abs/path", "..", ".", "a/../../b", "\x00nul", "é", ""])
def test_log_file_names_never_escape(tmp_path, hostile):
    run_dir = tmp_path / "runs" / "r"
    logs = run_dir / "logs"
    name = log_file_name(hostile)
    assert "/" not in name and name not in (".log", "..log") and not name.startswith(".")
    assert (logs / name).resolve().parent == logs.resolve()


def test_distinct_hostile_names_get_distinct_files():
    names = ["a/b", "a_b", "a?b", "a*b"]
    assert len({log_file_name(n) for n in names}) == len(names)
