"""Speed of `tuidag serve`, measured in a real headless Chromium (Debian's `chromium`) on a live detached run.

1. first frame: `tuidag serve` started (the process spawned) -> the URL printed -> the page loaded -> its websocket
   open (textual-serve spawns the tab's viewer) -> the viewer's first bytes in the page -> the first frame of the
   viewer in the page (its graph: a task's tile in the terminal's buffer). Each repeat is a new server and a new tab,
   so each pays Python's start, textual-serve's import, the viewer's process start and its connection to the run, as
   a user opening the URL does.
2. key press: `j` (or `k`, from the lower task) sent to the page (CDP Input.dispatchKeyEvent) -> the repaint
   showing the other task selected (the log pane's title names it) in the terminal's buffer: the key goes through
   the browser, the websocket, textual-serve and the viewer's stdin, the frame back the same way. 20 presses at a
   human's pace per repeat.

Times are read by polling the page's buffer from here over the DevTools pipe (a poll costs ~1-3 ms); the canvas is
painted on the next animation frame after that (at most 16.7 ms later).

    python benchmarks/serve_bench.py              # 5 repeats, medians
    python benchmarks/serve_bench.py --repeats 9
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser import Browser  # noqa: E402
from served import CATCH_TERMINAL, Served, open_tab, press, screen  # noqa: E402

#: When the page's websocket opened (textual-serve starts the tab's viewer then) and its first frame bytes came, in
#: the page's clock (the machine's: time.time() here).
WATCH_SOCKET = """
const Native = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new Native(...args);
  socket.addEventListener('open', () => { window.__opened = Date.now(); });
  socket.addEventListener('message', (event) => {
    if (typeof event.data !== 'string' && window.__firstBytes === undefined) window.__firstBytes = Date.now();
  });
  return socket;
};
"""

DAG = """\
name: bench
tasks:
  alpha:
    run: echo alpha; sleep 600
  beta:
    run: echo beta; sleep 600
"""


def until(predicate, timeout: float = 30.0, poll: float = 0.002) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("not reached")
        time.sleep(poll)
    return time.monotonic()


def selected(browser: Browser) -> str | None:
    """The task whose log the log pane shows (its title: `╭─ NAME · PATH`)."""
    found = re.search(r"╭─ (alpha|beta) · ", screen(browser))
    return found.group(1) if found else None


def first_frame(workdir: Path, browser: Browser) -> tuple[float, ...]:
    started, wall = time.monotonic(), time.time()
    served = Served(workdir, "--state-dir", "state")
    try:
        printed = time.monotonic()
        browser.open(served.url, init_script=CATCH_TERMINAL + WATCH_SOCKET, size=(1400, 900))
        loaded = time.monotonic()
        drawn = until(lambda: "┏━ alpha" in screen(browser) or "┏━ beta" in screen(browser))
        opened, first_bytes = (
            browser.evaluate(f"window.{name}") / 1000 - wall for name in ("__opened", "__firstBytes")
        )
        return printed - started, loaded - started, opened, first_bytes, drawn - started
    finally:
        browser.close_page()
        served.stop()


def key_presses(workdir: Path, browser: Browser, presses: int) -> list[float]:
    served = Served(workdir, "--state-dir", "state")
    times = []
    try:
        open_tab(browser, served.url)
        until(lambda: selected(browser) is not None)
        for _ in range(presses):
            before = selected(browser)
            sent = time.monotonic()
            press(browser, "j" if before == "alpha" else "k")
            try:
                shown = until(lambda before=before: selected(browser) not in (before, None))
            except TimeoutError:
                raise TimeoutError(f"the key did not move the selection from {before}:\n{screen(browser)}") from None
            times.append(shown - sent)
            time.sleep(0.2)
    finally:
        browser.close_page()
        served.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--presses", type=int, default=20)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="tuidag-serve-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "dag.yaml").write_text(DAG)
        started = subprocess.run(
            [sys.executable, "-m", "tuidag", "run", "-d", "dag.yaml", "--state-dir", "state"],
            cwd=workdir,
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        run_id = re.search(r"run (\S+) of bench", started.stdout).group(1)
        browser = Browser()
        try:
            frames = [first_frame(workdir, browser) for _ in range(args.repeats)]
            keys = [t for _ in range(args.repeats) for t in key_presses(workdir, browser, args.presses)]
        finally:
            browser.close()
            subprocess.run(
                [sys.executable, "-m", "tuidag", "stop", "--run", run_id, "--state-dir", "state"],
                cwd=workdir,
                capture_output=True,
                env=env,
            )
    ms = 1000
    print(f"first frame, {args.repeats} servers (median [min-max] ms from `tuidag serve` spawned):")
    steps = ("URL printed", "page loaded", "websocket open (viewer spawned)", "the viewer's first bytes", "graph drawn")
    for i, what in enumerate(steps):
        values = [f[i] * ms for f in frames]
        print(f"  {what:34} {statistics.median(values):7.0f}  [{min(values):.0f}-{max(values):.0f}]")
    keys_ms = sorted(k * ms for k in keys)
    print(
        f"key press `j`/`k` -> repaint, {len(keys)} presses: median {statistics.median(keys_ms):.1f} ms, "
        f"p90 {keys_ms[int(len(keys_ms) * 0.9)]:.1f} ms, max {keys_ms[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
