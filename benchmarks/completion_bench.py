"""Shell completion: how long a TAB on a task name takes in a DAG of TASKS tasks, medians of --repeats.

Each try is what bash does on TAB after `tuidag run big.yaml t000`: the sourced script's `_tuidag_complete`, which
starts `tuidag __complete tasks --file big.yaml` (a new Python process: its start and imports are in the figure) and
filters its answer. Three cases: (a) no run kept the file's model yet (the YAML is read and checked), (b) after
`tuidag plan` kept it in the state dir (it is read back), (c) an option (`--no<TAB>`: the shell alone, no process).

    python benchmarks/completion_bench.py                # 1,000 tasks, 9 repeats
    python benchmarks/completion_bench.py --tasks 10000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TIMED = r"""
source <(tuidag completion bash)
COMP_WORDS=({words}); COMP_CWORD={cword}
start=$EPOCHREALTIME
_tuidag_complete
end=$EPOCHREALTIME
echo "${{#COMPREPLY[@]}} $start $end"
"""


def dag_text(tasks: int) -> str:
    lines = ["name: big", "tasks:"]
    for i in range(tasks):
        after = f", depends_on: [t{i - 1:05d}]" if i % 10 else ""
        lines.append(f"  t{i:05d}: {{run: 'true'{after}}}")
    return "\n".join(lines) + "\n"


def tab(folder: Path, words: list[str], env: dict[str, str]) -> tuple[int, float]:
    """(candidates, seconds) of one TAB on the last of `words`."""
    program = TIMED.format(words=" ".join(f"'{w}'" for w in words), cword=len(words) - 1)
    out = subprocess.run(["bash", "-c", program], cwd=folder, env=env, capture_output=True, text=True, check=True)
    count, start, end = out.stdout.split()
    return int(count), float(end) - float(start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bin_dir = folder / "bin"
        bin_dir.mkdir()
        wrapper = bin_dir / "tuidag"
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m tuidag "$@"\n')
        wrapper.chmod(0o755)
        (folder / "big.yaml").write_text(dag_text(args.tasks))
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        env.pop("TUIDAG_STATE_DIR", None)
        task_words = ["tuidag", "run", "big.yaml", "t000"]  # t00000 to t00099
        print(f"{args.tasks:,} tasks, medians of {args.repeats} (load average {os.getloadavg()[0]:.1f})")
        cases = [("(a) task names, no model kept", task_words), ("(b) task names, model kept", task_words)]
        for label, words in cases:
            if label.startswith("(b)"):
                subprocess.run([str(wrapper), "plan", "big.yaml"], cwd=folder, env=env, capture_output=True, check=True)
            times = []
            count = 0
            for _ in range(args.repeats):
                count, seconds = tab(folder, words, env)
                times.append(seconds)
                if label.startswith("(a)"):  # no model is kept by a TAB, but make sure
                    assert not (folder / ".tuidag").exists()
            print(f"{label:34} {statistics.median(times) * 1000:7.1f} ms  ({count:,} candidates)")
        times = [tab(folder, ["tuidag", "run", "big.yaml", "--no"], env)[1] for _ in range(args.repeats)]
        print(f"{'(c) an option, the shell alone':34} {statistics.median(times) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
