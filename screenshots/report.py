"""Make screenshots/report.png: run a small training pipeline for real (a GPU slot two trainings share, a flaky
task retried, an evaluation that fails), write its `tuidag report`, and have headless Chromium draw it.

    python screenshots/report.py        # needs chromium (apt-get install chromium)

Look at the PNG before committing it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

DAG = """\
name: nightly-training
max_parallel: 3
resources:
  gpu: 1
tasks:
  fetch-data:
    run: echo fetching; sleep 0.6
  fetch-labels:
    run: echo labels; sleep 0.3
  clean:
    run: echo cleaning; sleep 0.5
    depends_on: [fetch-data]
  featurize:
    run: sleep 0.8
    depends_on: [clean, fetch-labels]
  train-small:
    run: sleep 0.9
    depends_on: [featurize]
    resources: {gpu: 1}
  train-large:
    run: sleep 1.4
    depends_on: [featurize]
    resources: {gpu: 1}
  flaky-eval:
    run: 'if [ -e .ok ]; then sleep 0.4; else touch .ok; echo "connection reset"; sleep 0.3; exit 1; fi'
    depends_on: [train-small]
    retries: 1
    retry_delay: 0.3
  eval-large:
    run: |
      echo "evaluating the large model"
      echo "Traceback (most recent call last):"
      echo "  File \\"eval.py\\", line 42, in <module>"
      echo "ValueError: accuracy 0.41 < 0.5"
      sleep 0.3; exit 2
    depends_on: [train-large]
  lint:
    run: sleep 0.4
  publish:
    run: echo publish
    depends_on: [flaky-eval, eval-large]
  docs:
    run: sleep 0.7
    depends_on: [lint]
"""


def main() -> None:
    browser = shutil.which("chromium") or sys.exit("chromium is needed: apt-get install chromium")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "training.yaml").write_text(DAG)
        subprocess.run(
            [sys.executable, "-m", "tuidag", "run", "--no-tui", "-q", "training.yaml"],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
        )  # exit 1: eval-large fails, as it should
        report = folder / "report.html"
        subprocess.run([sys.executable, "-m", "tuidag", "report", "-o", str(report)], cwd=folder, env=env, check=True)
        subprocess.run(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                "--window-size=1280,1560",
                f"--screenshot={HERE / 'report.png'}",
                report.as_uri(),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
        )
    print(f"wrote {HERE / 'report.png'}")


if __name__ == "__main__":
    main()
