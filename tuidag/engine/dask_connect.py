"""Connecting to a Dask scheduler given by its address: within a stated time, with a clear word for what was found
there instead, and with the same tuidag on the scheduler and every worker.

Dask's own `Client(address, timeout=...)` waited 607 s on an HTTP port (the dashboard's: it connects, then waits for a
greeting an HTTP server never sends), failed with a `MemoryError` on a service that sends first (it took the greeting
for a frame length), and took 10-19 s to give up on a closed port (it retries). So a plain TCP address is looked at
first: connect within the timeout, then read the greeting a Dask scheduler sends at once (its handshake, a few dozen
bytes naming `pickle-protocol`). Nothing within the timeout: an HTTP request tells an HTTP server from silence.
"""
from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit


class DaskUnreachable(Exception):
    """The Dask scheduler given can't be reached, or isn't one (the message says which and why)."""


def _shown(data: bytes) -> str:
    text = "".join(ch if ch.isprintable() else "." for ch in data[:40].decode("latin-1"))
    return repr(text)


def probe(address: str, timeout: float) -> None:
    """Raise DaskUnreachable unless a Dask scheduler answers at `address` within `timeout` seconds (plain TCP
    addresses only; others are left to Dask)."""
    scheme, _, rest = address.rpartition("://")
    if scheme not in ("", "tcp"):
        return
    parts = urlsplit(f"//{rest}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise DaskUnreachable(f"{address} is not a Dask scheduler address (tcp://HOST:PORT)") from None
    if not host or port is None:
        raise DaskUnreachable(f"{address} is not a Dask scheduler address (tcp://HOST:PORT)")
    where = f"the Dask scheduler at {address}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        raise DaskUnreachable(f"cannot reach {where}: no answer within {timeout:g} s (--dask-timeout)") from None
    except OSError as exc:
        raise DaskUnreachable(f"cannot reach {where}: {exc.strerror or exc}") from None
    with sock:
        sock.settimeout(timeout)
        try:
            greeting = sock.recv(512)
        except socket.timeout:
            greeting = None
        except OSError as exc:
            raise DaskUnreachable(f"cannot reach {where}: {exc.strerror or exc}") from None
    if greeting is None:
        found = "an HTTP server (the Dask dashboard's port? the scheduler's own is the one `dask scheduler` prints " \
                "as 'Scheduler at')" if _is_http(host, port, timeout) else "a service that said nothing"
        raise DaskUnreachable(f"{address} is not a Dask scheduler: {found} answered there, and no Dask greeting came "
                              f"within {timeout:g} s (--dask-timeout)")
    if b"pickle-protocol" not in greeting:
        what = f"a service that sent {_shown(greeting)}" if greeting else "a service that closed the connection"
        raise DaskUnreachable(f"{address} is not a Dask scheduler: {what}")


def _is_http(host: str, port: int, timeout: float) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(f"HEAD / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
            return sock.recv(16).startswith(b"HTTP/")
    except OSError:
        return False


def connect(address: str, timeout: float) -> Any:
    """A client of the scheduler at `address` whose scheduler and workers run this tuidag."""
    from distributed import Client

    probe(address, timeout)
    try:
        client = Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise DaskUnreachable(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        check_versions(client)
    except BaseException:
        client.close()
        raise
    return client


def check_versions(client: Any) -> None:
    """Raise DaskUnreachable naming each host whose tuidag differs from this one (a scheduler or worker with
    another version, or none, fails every task with a deserialisation error, or worse, runs other code)."""
    from ..version import __version__

    try:
        versions = client.get_versions(packages=["tuidag"])
    except Exception:
        return  # an older scheduler without the request: the first task will say what is wrong
    found = {f"the scheduler {client.scheduler.address}": _version(versions.get("scheduler"))}
    for worker, info in sorted((versions.get("workers") or {}).items()):
        found[f"worker {worker}"] = _version(info)
    wrong = [f"{where} has {version or 'no tuidag'}" for where, version in found.items() if version != __version__]
    if wrong:
        raise DaskUnreachable(f"this tuidag is {__version__}, but " + "; ".join(wrong) +
                              f": install tuidag {__version__} there")


def _version(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    version = (info.get("packages") or {}).get("tuidag")
    return str(version) if version else None
