"""How long `tuidag cancel A B` takes on a big DAG: two running roots with N dependents each (60,002 tasks for
N=30,000), in a detached run.

With `--keep` a third root keeps running, so the run goes on after the cancel and the figure is the time until the
reply; without it the cancel ends the run, and the reply must still come (exit 0, not "ended before it answered").

    python benchmarks/cancel_bench.py               # N=30,000, the run ends with the cancel
    python benchmarks/cancel_bench.py --keep        # the run goes on: the time is the reply's alone
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def tuidag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuidag", *args], capture_output=True, text=True, cwd=REPO)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30_000, help="dependents of each root")
    parser.add_argument("--keep", action="store_true", help="a third root keeps the run going after the cancel")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        dag, state = Path(folder) / "big.yaml", Path(folder) / "state"
        lines = ["max_parallel: 4", "tasks:", "  A: {run: sleep 600}", "  B: {run: sleep 600}"]
        if args.keep:
            lines.append("  keep: {run: sleep 600}")
        for root in "AB":
            lines += [f"  {root.lower()}{i:05d}: {{run: 'true', depends_on: {root}}}" for i in range(args.n)]
        dag.write_text("\n".join(lines) + "\n")
        started = tuidag("run", "-d", "--state-dir", str(state), str(dag))
        assert started.returncode == 0, started.stderr
        deadline = time.monotonic() + 300
        while not list(state.glob("runs/*/logs/B.log")):
            assert time.monotonic() < deadline, "the run did not start A and B"
            time.sleep(0.2)
        time.sleep(1)
        began = time.perf_counter()
        cancel = tuidag("cancel", "--state-dir", str(state), "A", "B")
        took = time.perf_counter() - began
        print(
            f"tuidag cancel A B on {2 * args.n + 2 + args.keep:,} tasks: {took:.2f} s, exit {cancel.returncode}: "
            f"{(cancel.stdout + cancel.stderr).strip()[:200]}"
        )
        if args.keep:
            tuidag("stop", "--state-dir", str(state))


if __name__ == "__main__":
    main()
