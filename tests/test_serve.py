"""`tuidag serve` end to end: a detached run (`tuidag run -d`), served as a user runs it, opened in a real headless
Chromium (Debian's `chromium`; .ci/run installs it). A tab shows the run's graph and its keys work as in a
terminal (`c` `y` cancels a task and its process tree is gone); a request without the token is refused and starts
no viewer; closing the tab or stopping the server leaves the run running and no viewer behind. Every task writes its
pids (the shell and a child) to a file, so the test can say which processes must still run and which must be gone.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import psutil
import pytest
from aiohttp import web

from browser import Browser, chromium
from dags import wait_until
from served import REPO, Served, open_tab, press, press_escape, resize, screen, wait_for_text
from slowness import patience

pytestmark = pytest.mark.xdist_group("serve")  # one worker: the module-scoped fixtures are made once

DAG = """\
name: served
tasks:
  slow:
    run: echo $$ >> slow.pids; sleep 60 & echo $! >> slow.pids; echo slow started; wait
  after:
    depends_on: slow
    run: "true"
  keeps:
    run: echo $$ >> keeps.pids; sleep 60 & echo $! >> keeps.pids; echo keeps going; wait
"""
browser_needed = pytest.mark.skipif(chromium() is None, reason="no chromium (apt-get install chromium)")


def tuidag(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuidag", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=patience(60),
    )


def pids(workdir: Path, task: str) -> list[psutil.Process]:
    path = workdir / f"{task}.pids"
    wait_until(lambda: path.exists() and len(path.read_text().split()) >= 2, timeout=15)
    return [psutil.Process(int(p)) for p in path.read_text().split()]


def gone(procs: list[psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A detached run of DAG: (workdir, run id, engine pid); it and its tasks are killed after."""
    workdir = tmp_path_factory.mktemp("served")
    (workdir / "dag.yaml").write_text(DAG)
    started = tuidag(workdir, "run", "-d", "dag.yaml", "--kill-grace", "0.5", "--state-dir", "state")
    assert started.returncode == 0, started.stderr
    run_id, pid = re.search(
        r"run (\S+) of served started in the background \(engine pid (\d+)\)", started.stdout
    ).groups()
    try:
        yield workdir, run_id, int(pid)
    finally:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
        tuidag(
            workdir, "runs", "--state-dir", "state"
        )  # reaps what the run left, as the next command does after a crash
        for task in ("slow", "keeps"):
            path = workdir / f"{task}.pids"
            for p in path.read_text().split() if path.exists() else ():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def status(url: str, cookie: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=patience(10)) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@browser_needed
def test_a_tab_is_a_viewer_whose_keys_cancel_a_task_and_closing_it_or_the_server_leaves_the_run(run, browser):
    workdir, run_id, engine = run
    slow, keeps = pids(workdir, "slow"), pids(workdir, "keeps")
    served = Served(workdir, "--state-dir", "state")
    try:
        assert f"live run {run_id} of served" in served.out and "127.0.0.1" in served.url
        open_tab(browser, served.url)
        wait_for_text(browser, f"attached · engine pid {engine}")
        press(browser, ":")  # the finder: select `slow` by name
        wait_for_text(browser, "Enter jumps")
        press(browser, "slow\r")
        wait_for_text(browser, "slow started")
        press(browser, "c")
        wait_for_text(browser, "everything downstream of it")
        press(browser, "y")
        wait_until(lambda: gone(slow), timeout=15)
        wait_until(lambda: "2 cancelled" in screen(browser), timeout=15)  # slow and after
        assert len(served.viewers()) == 1 and not gone(keeps)

        browser.close_page()  # the tab closed: its viewer quits, the run goes on
        wait_until(lambda: not served.viewers(), timeout=15)
        assert not gone(keeps) and psutil.pid_exists(engine)

        open_tab(browser, served.url)  # a tab open when the server stops
        wait_for_text(browser, "2 cancelled")
        viewers = served.viewers()
        assert viewers
    finally:
        code, err = served.stop(signal.SIGINT)  # Ctrl+C
    assert code == 0 and "Traceback" not in err
    assert gone(viewers) and not gone(keeps) and psutil.pid_exists(engine)


@browser_needed
@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_the_tab_shows_the_run_and_takes_keys_at_80x24_and_160x45(run, browser, size):
    workdir, _, engine = run
    served = Served(workdir, "--state-dir", "state")
    try:
        open_tab(browser, served.url)
        wait_for_text(browser, f"attached · engine pid {engine}")
        # The terminal is drawn in the font the server sent, and sized for it: it fits the window.
        faces = "[...document.fonts].filter(f => f.family.includes('Roboto Mono')).map(f => f.status)"
        wait_until(lambda: "loaded" in browser.evaluate(faces), timeout=15)
        fits = (
            "document.documentElement.scrollHeight <= innerHeight && document.documentElement.scrollWidth <= innerWidth"
        )
        assert browser.evaluate(fits), "the terminal, as the page sized it, is larger than the window"
        resize(browser, *size)

        def laid_out() -> bool:
            lines = screen(browser).split("\n")
            return len(lines) == size[1] and "Help" in lines[-1] and "keeps" in "\n".join(lines)

        wait_until(laid_out, timeout=15)
        # Nothing was asked of another host.
        asked = browser.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
        assert asked and all(url.startswith(served.base + "/") for url in asked), asked
        press(browser, "?")
        wait_for_text(browser, "tuidag keys")
        press_escape(browser)
        wait_until(lambda: "tuidag keys" not in screen(browser), timeout=15)
        assert browser.evaluate("[window.__terminal.cols, window.__terminal.rows]") == list(size)
    finally:
        browser.close_page()
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err


@browser_needed
def test_requests_without_the_token_are_refused_and_start_no_viewer(run, browser):
    workdir, _, _ = run
    served = Served(workdir, "--state-dir", "state")
    try:
        token = served.url.split("token=")[1]
        wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
        for path in ("/", "/ws", "/static/js/textual.js", "/download/x"):
            assert status(served.base + path) == 403, path
            assert status(f"{served.base}{path}?token={wrong}") == 403, path
        cookie = served.out and f"tuidag-serve-{served.base.rsplit(':', 1)[1]}"
        assert status(served.base + "/ws", cookie=f"{cookie}={wrong}") == 403
        assert status(served.base + "/static/js/textual.js", cookie=f"{cookie}={token}") == 200

        open_tab(browser, f"{served.base}/?token={wrong}")
        assert "403 Forbidden" in browser.evaluate("document.body.innerText")
        assert browser.evaluate("window.__terminal === undefined")
        assert served.viewers() == []
    finally:
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err


class Proxy:
    """A reverse proxy serving `target` under /tuidag/ (pages, files and websockets), as nginx would, on a loop in a
    thread of its own."""

    def __init__(self, target: str):
        self.target = target
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        assert started.wait(patience(10))
        self.url = f"http://127.0.0.1:{self.port}/tuidag"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._start())
        started.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/tuidag/{tail:.*}", self.forward)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        self.session = aiohttp.ClientSession()
        self.forwarded: list[str] = []

    async def forward(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        self.forwarded.append(path)
        url = self.target + path + (f"?{request.query_string}" if request.query_string else "")
        headers = {"Cookie": request.headers["Cookie"]} if "Cookie" in request.headers else {}
        if request.headers.get("Upgrade", "").lower() == "websocket":
            client = web.WebSocketResponse()
            await client.prepare(request)
            async with self.session.ws_connect(url, headers=headers) as upstream:

                async def pump(source, sink) -> None:
                    async for message in source:
                        if message.type == aiohttp.WSMsgType.TEXT:
                            await sink.send_str(message.data)
                        elif message.type == aiohttp.WSMsgType.BINARY:
                            await sink.send_bytes(message.data)
                    await sink.close()

                await asyncio.gather(pump(client, upstream), pump(upstream, client))
            return client
        async with self.session.get(url, headers=headers) as upstream:
            response = web.Response(status=upstream.status, body=await upstream.read())
            response.headers["Content-Type"] = upstream.headers.get("Content-Type", "text/plain")
            for cookie in upstream.headers.getall("Set-Cookie", []):
                response.headers.add("Set-Cookie", cookie)
            return response

    def close(self) -> None:
        async def stop() -> None:
            await self.session.close()
            await self.runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(patience(10))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(patience(10))


@browser_needed
def test_behind_a_reverse_proxy_the_page_reaches_its_files_and_websocket_through_the_public_url(run, browser):
    workdir, _, engine = run
    proxy = Proxy("http://127.0.0.1:0")  # the server's port is known once it listens: the target is set below
    try:
        served = Served(workdir, "--state-dir", "state", "--public-url", proxy.url + "/")
        try:
            assert served.url.startswith(proxy.url + "/?token=")
            proxy.target = served.direct
            open_tab(browser, served.url)
            wait_for_text(browser, f"attached · engine pid {engine}")
            assert {"/", "/static/js/textual.js", "/ws"} <= set(proxy.forwarded)
        finally:
            code, err = served.stop()
        assert code == 0 and "Traceback" not in err
    finally:
        proxy.close()


def test_listening_beyond_this_machine_warns_that_anyone_with_the_url_can_stop_the_run(run):
    workdir, _, _ = run
    served = Served(workdir, "--state-dir", "state", "--host", "0.0.0.0")
    code, err = served.stop()
    assert code == 0
    assert "anyone who has the URL can see the run and stop it" in err
    assert "127.0.0.1" in served.out and "token=" in served.out


def test_a_finished_run_is_served_post_mortem_and_its_name_is_never_markup_in_the_page(tmp_path):
    name = "<script>alert(1)</script>"
    (tmp_path / "dag.yaml").write_text(f"name: '{name}'\ntasks:\n  one:\n    run: 'true'\n")
    assert tuidag(tmp_path, "run", "dag.yaml", "--state-dir", "state").returncode == 0
    served = Served(tmp_path, "--state-dir", "state")
    try:
        with urllib.request.urlopen(served.url, timeout=patience(10)) as response:
            page = response.read().decode()
    finally:
        code, err = served.stop()
    assert "serving the finished run (post-mortem)" in served.out and code == 0, err
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and name not in page


def test_the_page_asks_no_other_host_for_anything_and_its_font_comes_from_the_server(tmp_path):
    """textual-serve's own page linked Google's stylesheet for its font: an offline browser waited for it, and every
    page load told Google where the viewer was. Every address the page names is this server's."""
    (tmp_path / "dag.yaml").write_text("tasks:\n  one:\n    run: 'true'\n")
    assert tuidag(tmp_path, "run", "dag.yaml", "--state-dir", "state").returncode == 0
    served = Served(tmp_path, "--state-dir", "state")
    try:
        with urllib.request.urlopen(served.url, timeout=patience(10)) as response:
            page = response.read().decode()
            cookie = response.headers["Set-Cookie"].split(";")[0]
        addresses = re.findall(r"""(?:src|href)=["']([^"']+)|url\(["']?([^"')]+)""", page)
        urls = [a or b for a, b in addresses if (a or b).startswith(("http:", "https:", "//"))]
        fonts = sorted({url for url in urls if url.endswith(".ttf")})  # upright (preloaded too) and italic
        assert len(fonts) == 2 and all(url.startswith(served.base + "/") for url in urls), urls
        assert "googleapis" not in page and "gstatic" not in page
        for font in fonts:  # as the browser asks for it: with the page's cookie, no token in the URL
            request = urllib.request.Request(font, headers={"Cookie": cookie})
            with urllib.request.urlopen(request, timeout=patience(10)) as response:
                assert response.read(4) == b"\x00\x01\x00\x00"  # a TrueType font
        assert status(fonts[0]) == 403  # and behind the token like every other file
    finally:
        code, err = served.stop()
    assert code == 0, err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--run-id-that-is-not"], "unrecognized arguments"),
        (["nosuchrun"], "no run 'nosuchrun'"),
        (["--public-url", "ftp://example.com"], "--public-url: 'ftp://example.com' is not an http(s) URL"),
        (["--public-url", "https://example.com/?a=1"], "is not an http(s) URL without a query"),
        (["--port", "70000"], "a port is 0-65535"),
        (["--host", "no-such-host.invalid"], "--host 'no-such-host.invalid': no such address"),
    ],
)
def test_bad_input_is_a_clear_error_with_exit_code_2(run, args, said):
    workdir, _, _ = run
    proc = tuidag(workdir, "serve", "--state-dir", "state", *args)
    assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_port_in_use_is_a_clear_error_with_exit_code_2(run):
    workdir, _, _ = run
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = tuidag(workdir, "serve", "--state-dir", "state", "--port", str(port))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"cannot listen on 127.0.0.1 port {port}: is in use" in proc.stderr


def test_without_the_web_extra_serve_says_how_to_install_it(run):
    """textual-serve missing (an import of it fails, as without the extra): the hint, exit 2, nothing served."""
    workdir, _, _ = run
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['textual_serve'] = None; from tuidag.cli import main; "
            "sys.exit(main(['serve', '--state-dir', 'state']))",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=patience(60),
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "pip install 'tuidag[web]'" in proc.stderr


STUBBORN_SERVER = """
import socket, sys
from tuidag import web

viewer = [sys.executable, "-c", '''
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "60"])
print("__GANGLION__", flush=True)
time.sleep(60)
''']
server = web.ViewerServer(viewer, token="t", title="stubborn", public_url=None, cookie="c", grace=0.5)
listening = socket.create_server(("127.0.0.1", 0))
web.serve(server, listening, lambda: print(listening.getsockname()[1], flush=True))
"""


def test_stopping_the_server_ends_a_viewer_that_ignores_quitting_and_what_it_started(tmp_path):
    """A viewer that neither quits when told nor ends on SIGTERM, with a child: both gone once the server stopped."""
    from websockets.sync.client import connect

    server = subprocess.Popen(
        [sys.executable, "-c", STUBBORN_SERVER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    viewer: list[psutil.Process] = []
    try:
        port = int(server.stdout.readline())
        with connect(f"ws://127.0.0.1:{port}/ws?token=t", open_timeout=patience(10)):

            def descendants() -> list[psutil.Process]:
                return psutil.Process(server.pid).children(recursive=True)

            wait_until(lambda: any(p.name() == "sleep" for p in descendants()), timeout=15)
            viewer = descendants()
            server.send_signal(signal.SIGTERM)
            assert server.wait(patience(15)) == 0
        assert gone(viewer)
    finally:
        server.kill()
        server.wait()
        for process in viewer:  # what the server did not end, if it failed to
            try:
                process.kill()
            except psutil.Error:
                pass


@browser_needed
def test_resuming_a_finished_run_from_a_tab_starts_it_detached_so_the_tab_and_the_server_never_stop_it(
    tmp_path, browser
):
    """`r` in a terminal's post-mortem view replaces the viewer with the new run; a tab is no terminal a run could
    belong to: the new run starts detached, and outlives the tab and the server."""
    (tmp_path / "dag.yaml").write_text(
        "name: again\ntasks:\n  flaky:\n    run: if [ -e ok ]; then echo $$ > flaky.pid; exec sleep 60; fi; exit 1\n"
    )
    assert tuidag(tmp_path, "run", "dag.yaml", "--state-dir", "state").returncode == 1
    (tmp_path / "ok").touch()
    served = Served(tmp_path, "--state-dir", "state")
    try:
        open_tab(browser, served.url)
        wait_for_text(browser, "r Resume")
        press(browser, "r")
        wait_for_text(browser, "resuming from")
        press(browser, "y")
        pid_file = tmp_path / "flaky.pid"
        wait_until(pid_file.exists, timeout=20)
        wait_until(lambda: pid_file.read_text().strip() != "", timeout=5)
        task = psutil.Process(int(pid_file.read_text()))
        wait_until(lambda: not served.viewers(), timeout=15)  # the tab's session ended
        browser.close_page()
    finally:
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err
    try:
        assert task.is_running() and task.status() != psutil.STATUS_ZOMBIE
        runs = tuidag(tmp_path, "runs", "--state-dir", "state").stdout
        assert "running (pid" in runs, runs
        assert tuidag(tmp_path, "stop", "--state-dir", "state").returncode == 0
        wait_until(lambda: gone([task]), timeout=15)
    finally:
        try:
            task.kill()
        except psutil.Error:
            pass


def test_a_websocket_from_a_page_of_another_origin_is_refused_even_with_the_cookie(run):
    """Sites ignore ports, so a page of another server on this machine gets the cookie sent with a websocket it
    opens to `tuidag serve`: its Origin gives it away, and it is refused before a viewer starts."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    workdir, _, _ = run
    served = Served(workdir, "--state-dir", "state")
    try:
        token = served.url.split("token=")[1]
        cookie = f"tuidag-serve-{served.base.rsplit(':', 1)[1]}={token}"
        socket_url = served.base.replace("http://", "ws://") + "/ws"
        with pytest.raises(InvalidStatus) as refused:
            connect(socket_url, origin="http://127.0.0.1:1", additional_headers={"Cookie": cookie})
        assert refused.value.response.status_code == 403
        assert served.viewers() == []
        with connect(socket_url, origin=served.base, additional_headers={"Cookie": cookie}):
            wait_until(lambda: served.viewers() != [], timeout=15)  # the page's own origin: a viewer
    finally:
        code, err = served.stop()
    assert code == 0 and "Traceback" not in err
