"""`tuidag serve [RUN]`: the viewer of a run in a browser (textual-serve, the `web` extra).

Each browser tab runs `tuidag attach RUN` on the server's machine, so it is one more viewer of the run: the same
screen and keys as in a terminal. A viewer can cancel tasks and stop the run, so the server binds 127.0.0.1 unless
told otherwise, and every URL carries a random token (as Jupyter's do); a request without it gets 403 and opens
nothing (tuidag/web.py). Closing a tab or stopping the server never stops the run.

Above the commands (it finds a run as `attach` and `show` do) and below `cli`, which only registers it.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from .cli_common import UsageError, open_store, printable, state_dir_of
from .control_commands import find_run_to_view, live_runs
from .exit_codes import EXIT_OK
from .store.journal import read_header
from .store.runs import RunDir

DEFAULT_PORT = 8000
INSTALL_HINT = "`tuidag serve` needs textual-serve, in the `web` extra: pip install 'tuidag[web]'"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0-65535 (0: any free one), not {port}")
    return port


def add_parsers(sub: argparse._SubParsersAction, state: argparse.ArgumentParser) -> None:
    serve = sub.add_parser(
        "serve",
        parents=[state],
        help="serve a run's UI to a browser (every tab one more viewer; needs tuidag[web])",
    )
    serve.add_argument(
        "run_id",
        nargs="?",
        metavar="RUN",
        help="run id (or a unique prefix); default: the latest live run, else the latest run",
    )
    serve.add_argument("--file", type=Path, help="a DAG file: its runs, in the state dir next to it")
    serve.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free one)",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1: this machine only; anyone with the URL can stop the run)",
    )
    serve.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers reach the server at, behind a reverse proxy (e.g. https://example.com/tuidag)",
    )


def public_url_of(text: str) -> str:
    """`--public-url`, checked: an http(s) URL with a host and no query; without its trailing slash, since the
    page, websocket and file URLs are built by appending their paths to it."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise UsageError(
            f"--public-url: {printable(text)!r} is not an http(s) URL without a query (e.g. https://example.com/tuidag)"
        )
    return text.rstrip("/")


def find_run(args: argparse.Namespace) -> RunDir:
    """RUN, or the latest live run, or (when none is live) the latest run, shown post-mortem."""
    if not args.run_id:
        live = live_runs(open_store(state_dir_of(args, args.file)), args.file)
        if live:
            return live[-1]
    return find_run_to_view(args, live=False)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port`, bound before anything is printed: a port in use is a usage error."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"--host {printable(host)!r}: no such address ({exc})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT by the last serve
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = (
            "is in use (choose another with --port, or --port 0 for any free one)"
            if exc.errno == errno.EADDRINUSE
            else exc
        )
        raise UsageError(f"cannot listen on {printable(host)} port {port}: {reason}") from None
    return sock


def page_urls(sock: socket.socket, public_url: str | None, token: str) -> list[str]:
    if public_url:
        return [f"{public_url}/?token={token}"]
    address, port = sock.getsockname()[:2]
    ip = ipaddress.ip_address(address)
    hosts = [address]
    if ip.is_unspecified:  # every interface: the machine's name, and this machine's own address
        hosts = [socket.gethostname(), "127.0.0.1" if ip.version == 4 else "::1"]
    return [f"http://{f'[{h}]' if ':' in h else h}:{port}/?token={token}" for h in hosts]


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from . import web  # textual-serve, aiohttp: only here, and only with the extra
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    public_url = public_url_of(args.public_url) if args.public_url else None
    run = find_run(args)
    sock = listen(args.host, args.port)
    import secrets  # here, not above: with hmac and OpenSSL's hashes it was milliseconds of every command's start

    token = secrets.token_urlsafe(32)
    port = sock.getsockname()[1]
    header = read_header(run.journal)
    dag, live = printable(header.get("dag", "?")), run.owned()
    argv = [sys.executable, "-m", "tuidag", "attach", run.run_id, "--state-dir", str(run.path.parent.parent.resolve())]
    server = web.ViewerServer(
        argv,
        token=token,
        title=f"tuidag · {dag} · {printable(run.run_id)}",
        public_url=public_url,
        cookie=f"tuidag-serve-{port}",
    )

    def ready() -> None:
        what = "live run" if live else "finished run (post-mortem)"
        print(f"tuidag: serving the {what} {printable(run.run_id)} of {dag}; open in a browser:")
        for url in page_urls(sock, public_url, token):
            print(f"    {url}")
        print("every tab is one more viewer; Ctrl+C stops serving (never the run)", flush=True)
        if not ipaddress.ip_address(sock.getsockname()[0]).is_loopback:
            print(
                f"tuidag: warning: listening on {printable(args.host)}, not only this machine: anyone who has the URL "
                "can see the run and stop it",
                file=sys.stderr,
                flush=True,
            )

    web.serve(server, sock, ready)
    return EXIT_OK


COMMANDS = {"serve": cmd_serve}
