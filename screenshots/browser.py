"""Make screenshots/browser.png: a detached run served by `tuidag serve`, its page opened in headless Chromium at
160x45 cells, a training task selected, drawn by the browser (the DevTools protocol's Page.captureScreenshot).

    python screenshots/browser.py        # needs chromium (apt-get install chromium) and tuidag[web]

Look at the PNG before committing it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser import Browser  # noqa: E402
from served import Served, open_tab, press, resize, screen, wait_for_text  # noqa: E402

DAG = """\
name: nightly-training
max_parallel: 4
tasks:
  fetch-data:
    run: echo "fetched 20000 rows"
  clean:
    run: echo "dropped 112 rows with missing labels"
    depends_on: [fetch-data]
  train-small:
    run: for i in $(seq 1 600); do echo "epoch $i  loss 0.$((900 - i * 7))"; sleep 0.5; done
    depends_on: [clean]
  train-large:
    run: for i in $(seq 1 600); do echo "epoch $i  loss 0.$((950 - i * 5))"; sleep 0.8; done
    depends_on: [clean]
  evaluate:
    run: echo evaluating
    depends_on: [train-small, train-large]
  publish:
    run: echo publishing
    depends_on: [evaluate]
  lint:
    run: echo "all checks passed"
  flaky-download:
    run: echo "connection reset by peer"; exit 1
"""


def until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the scene did not come")
        time.sleep(0.1)


def main() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "training.yaml").write_text(DAG)
        started = subprocess.run(
            [sys.executable, "-m", "tuidag", "run", "-d", "training.yaml", "--state-dir", "state"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        run_id = re.search(r"run (\S+) of", started.stdout).group(1)
        browser = Browser()
        served = Served(folder, "--state-dir", "state")
        try:
            open_tab(browser, served.url, size=(1460, 950))  # 160x45 cells of Roboto Mono at 16 px
            wait_for_text(browser, "attached")
            resize(browser, 160, 45)
            press(browser, ":")
            wait_for_text(browser, "Enter jumps")
            press(browser, "train-large\r")
            until(lambda: "epoch 9 " in screen(browser))
            time.sleep(0.3)  # the canvas paints on the next animation frame
            shot = browser.send("Page.captureScreenshot", {"format": "png"})
            (HERE / "browser.png").write_bytes(base64.b64decode(shot["data"]))
            print(HERE / "browser.png")
        finally:
            browser.close()
            served.stop()
            subprocess.run(
                [sys.executable, "-m", "tuidag", "stop", "--run", run_id, "--state-dir", "state"],
                cwd=folder,
                env=env,
                capture_output=True,
            )


if __name__ == "__main__":
    main()
