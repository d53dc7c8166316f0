"""The viewer in a browser: textual-serve's page and websocket, behind a token.

textual-serve (aiohttp) starts a new process of its command for every websocket, that is for every browser tab, and
relays the tab's keys and the process's screen; it has no authentication of its own. Here the command is
`tuidag attach RUN` (on a finished run it browses the run, as `tuidag show` does), so every tab is one more viewer
of the same run, and every key works as in a terminal. What this module adds:

- A token: every request (the page, the websocket, the static files, downloads) must carry it, in the URL's
  `?token=` or in the cookie the page sets, or it gets 403 before any handler runs: nothing is opened, no viewer is
  started. It is compared in constant time. A websocket must also come from the page's own origin.
- URLs built from `--public-url` (a reverse proxy's address) when given, otherwise from the Host the browser asked
  for, so a server listening on every interface is reachable by whatever name the user typed.
- A page that asks nothing of any other host: textual-serve's page linked Google's stylesheet for its font (an
  offline browser waited for it, and every page load told Google the viewer's address); the same font ships with
  textual-serve's files, and the page loads it from this server.
- Viewers in a session of their own, so a Ctrl+C in the terminal of `tuidag serve` reaches only it; when it stops, each
  viewer is told to quit (as closing its tab does) and any still there after a grace period is killed, with what it
  started. A viewer never stops the run: closing a tab or stopping the server only closes viewers.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import re
import shlex
import signal
import socket
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
import psutil
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

#: How long viewers get to quit when `tuidag serve` stops, and then to end on SIGTERM, before they are killed. A
#: viewer told to quit only closes its control connection and its app.
QUIT_GRACE = 5.0
CROSS_ORIGIN = "403 Forbidden: a websocket opened by a page of another origin\n"
FORBIDDEN = (
    "403 Forbidden: this address needs the token `tuidag serve` printed (open the whole URL it printed, "
    "with ?token=...)\n"
)


class _Viewer(AppService):
    """One browser tab's viewer process, started without a shell and in a session of its own."""

    def __init__(self, argv: list[str], processes: set[asyncio.subprocess.Process], **kwargs: Any):
        super().__init__(shlex.join(argv), **kwargs)
        self._argv = argv
        self._processes = processes

    async def _open_app_process(self, width: int = 80, height: int = 24) -> asyncio.subprocess.Process:
        self._process = process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,
        )
        self._processes.add(process)
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        await super().stop()
        if self._process is not None:
            await self._process.wait()  # reaped: its exit seen, it leaves no zombie behind
            self._processes.discard(self._process)


#: textual-serve's link to Google's stylesheet of its font, and what stands in for it: the same font, from the files
#: textual-serve ships (served by its static route, behind the token like everything else). Preloaded, so the page's
#: load event, on which textual.js sizes its terminal from the font's cells, waits for it.
GOOGLE_FONTS = re.compile(r"<link\b[^>]*//fonts\.googleapis\.com/[^>]*>")
LOCAL_FONTS = """<link
      rel="preload"
      href="{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"
      as="font"
      type="font/ttf"
      crossorigin
    />
    <style>
      @font-face {
        font-family: "Roboto Mono";
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
        font-style: normal;
      }
      @font-face {
        font-family: "Roboto Mono";
        src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
        font-style: italic;
      }
    </style>"""


class OwnPage(jinja2.FileSystemLoader):
    """textual-serve's templates, its page with the font from this server instead of Google's."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        return GOOGLE_FONTS.sub(LOCAL_FONTS, source), filename, uptodate


class ViewerServer(Server):
    """textual-serve's server for one command, every request checked for the token."""

    def __init__(
        self, argv: list[str], *, token: str, title: str, public_url: str | None, cookie: str, grace: float = QUIT_GRACE
    ):
        super().__init__(shlex.join(argv), title=title, public_url=public_url)
        self.grace = grace
        self.argv = argv
        self.token = token.encode()
        self.cookie = cookie
        self.fixed_public_url = public_url
        self.sockets: set[web.WebSocketResponse] = set()
        self.processes: set[asyncio.subprocess.Process] = set()

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._check_token)
        aiohttp_jinja2.setup(app, loader=OwnPage(self.templates_path))
        return app

    @web.middleware
    async def _check_token(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        given = request.query.get("token")
        if given is None:
            given = request.cookies.get(self.cookie, "")
        if not hmac.compare_digest(given.encode(), self.token):
            return web.Response(status=403, text=FORBIDDEN, headers={"Cache-Control": "no-store"})
        if request.match_info.route.name == "websocket" and not self.same_origin(request):
            return web.Response(status=403, text=CROSS_ORIGIN, headers={"Cache-Control": "no-store"})
        return await handler(request)

    def same_origin(self, request: web.Request) -> bool:
        """Does the websocket come from the page's own origin (or from no page: no Origin header)? A browser sends
        the page's cookie along with a websocket another page opens when both are on the same site, and sites ignore
        ports: a page of another server on this machine could otherwise drive a viewer with the user's cookie."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        allowed = {f"{request.scheme}://{request.host}"}
        if self.fixed_public_url:
            public = urlsplit(self.fixed_public_url)
            allowed.add(f"{public.scheme}://{public.netloc}")
        return origin in allowed

    def base_url(self, request: web.Request) -> str:
        return self.fixed_public_url or f"{request.scheme}://{request.host}"

    async def handle_index(self, request: web.Request) -> web.Response:
        """textual-serve's page, its URLs built from `base_url`; it sets the cookie its websocket and files send."""
        base = self.base_url(request)
        socket_url = f"{base}{request.app.router['websocket'].url_for()}"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": ("wss:" if base.startswith("https") else "ws:") + socket_url.split(":", 1)[1],
            "config": {
                "static": {"url": f"{base}{request.app.router['static'].url_for(filename='/')}".rstrip("/") + "/"}
            },
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.set_cookie(
            self.cookie,
            self.token.decode(),
            httponly=True,
            samesite="Strict",
            path="/",
            secure=base.startswith("https"),
        )
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"  # the page's URL carries the token
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's websocket handler, with a viewer of ours (no shell, own session, reaped)."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        viewer: _Viewer | None = None
        self.sockets.add(websocket)
        try:
            await websocket.prepare(request)
            viewer = _Viewer(
                self.argv,
                self.processes,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=self.download_manager,
            )
            await viewer.start(width, height)
            await self._process_messages(websocket, viewer)
        except asyncio.CancelledError:
            await websocket.close()
        except (ConnectionError, RuntimeError, ValueError):
            pass  # a tab gone mid-message, or a message that is not textual-serve's: its viewer is closed below
        finally:
            self.sockets.discard(websocket)
            if viewer is not None:
                await viewer.stop()
        return websocket

    async def on_startup(self, app: web.Application) -> None:
        """Nothing printed: `tuidag serve` says where it serves before it starts (textual-serve prints a banner)."""

    async def on_shutdown(self, app: web.Application) -> None:
        """Close every tab's websocket: its handler then tells its viewer to quit."""
        for websocket in list(self.sockets):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"tuidag serve stopped")

    async def end_viewers(self) -> None:
        """The viewers still running once the server stopped: each session is sent SIGTERM, then SIGKILL after the
        grace period, so that nothing a viewer started outlives the server."""
        for signum in (signal.SIGTERM, signal.SIGKILL):
            left = [p for p in self.processes if p.returncode is None]
            if not left:
                return
            for process in left:
                _signal_session(process.pid, signum)
            try:
                await asyncio.wait_for(asyncio.gather(*(p.wait() for p in left)), self.grace)
            except TimeoutError:
                pass


def _signal_session(pid: int, signum: int) -> None:
    """The viewer's process group (its session: it was started in one of its own), and anything of its left in
    another group."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        children = []
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
    for child in children:
        try:
            child.send_signal(signum)
        except psutil.Error:
            pass


def serve(server: ViewerServer, listening: socket.socket, on_ready: Callable[[], None]) -> None:
    """Serve on `listening` until SIGINT, SIGTERM or SIGHUP; then close every tab and end every viewer."""
    asyncio.run(_serve(server, listening, on_ready))


async def _serve(server: ViewerServer, listening: socket.socket, on_ready: Callable[[], None]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(
        await server._make_app(), handle_signals=False, access_log=None, shutdown_timeout=server.grace
    )
    await runner.setup()
    try:
        await web.SockSite(runner, listening).start()
        on_ready()
        await stop.wait()
    finally:
        await runner.cleanup()
        await server.end_viewers()
