"""Setting up the cluster a run's attempts go to: a local one started here (`start_local`), or the scheduler given by
its address (`connect`), reached within a stated time, with a clear word for what was found there instead, and with
the same tuidag on the scheduler and every worker (`check_versions`); then the client made ready (`prepare`: the
guards installed, its messages sent sooner). Light to import: the CLI asks `dask_missing` before Dask is loaded.

Dask's own `Client(address, timeout=...)` waited 607 s on an HTTP port (the dashboard's: it connects, then waits for a
greeting an HTTP server never sends), failed with a `MemoryError` on a service that sends first (it took the greeting
for a frame length), and took 10-19 s to give up on a closed port (it retries). So a plain TCP address is looked at
first: connect within the timeout, then read the greeting a Dask scheduler sends at once (its handshake, a few dozen
bytes naming `pickle-protocol`). Nothing within the timeout: an HTTP request tells an HTTP server from silence.
A refused connection is tried again every 0.1 s until the timeout, as Dask's client does: a script that starts
`dask scheduler` and `tuidag run` together finds the scheduler once it listens (1-3 s after it starts, longer on a
busy machine), and a closed port is said to be closed when the timeout is up.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

INSTALL_HINT = "the Dask executor needs Dask: pip install 'tuidag[dask]' (or pip install 'dask[distributed]')"
LOCAL_THREADS_PER_WORKER = 8  # attempts a local-cluster worker runs at once (its threads mostly wait for processes)
CONNECT_TIMEOUT = 5.0  # seconds to reach a scheduler given by its address and hear it answer (--dask-timeout)
REFUSED_RETRY = 0.1  # seconds between tries of an address that refused: its scheduler may be starting


def dask_missing() -> bool:
    """Dask can't be imported here (not installed, or broken)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return True
    return False


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
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=max(0.1, deadline - time.monotonic()))
            break
        except TimeoutError:
            raise DaskUnreachable(f"cannot reach {where}: no answer within {timeout:g} s (--dask-timeout)") from None
        except ConnectionRefusedError as exc:
            if time.monotonic() + REFUSED_RETRY >= deadline:
                raise DaskUnreachable(
                    f"cannot reach {where}: {exc.strerror or exc} (tried for {timeout:g} s, --dask-timeout)"
                ) from None
            time.sleep(REFUSED_RETRY)
        except OSError as exc:
            raise DaskUnreachable(f"cannot reach {where}: {exc.strerror or exc}") from None
    with sock:
        sock.settimeout(timeout)
        try:
            greeting = sock.recv(512)
        except TimeoutError:
            greeting = None
        except OSError as exc:
            raise DaskUnreachable(f"cannot reach {where}: {exc.strerror or exc}") from None
    if greeting is None:
        found = (
            "an HTTP server (the Dask dashboard's port? the scheduler's own is the one `dask scheduler` prints "
            "as 'Scheduler at')"
            if _is_http(host, port, timeout)
            else "a service that said nothing"
        )
        raise DaskUnreachable(
            f"{address} is not a Dask scheduler: {found} answered there, and no Dask greeting came "
            f"within {timeout:g} s (--dask-timeout)"
        )
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
    from ...version import __version__

    try:
        versions = client.get_versions(packages=["tuidag"])
    except Exception:
        return  # an older scheduler without the request: the first task will say what is wrong
    found = {f"the scheduler {client.scheduler.address}": _version(versions.get("scheduler"))}
    for worker, info in sorted((versions.get("workers") or {}).items()):
        found[f"worker {worker}"] = _version(info)
    wrong = [f"{where} has {version or 'no tuidag'}" for where, version in found.items() if version != __version__]
    if wrong:
        raise DaskUnreachable(
            f"this tuidag is {__version__}, but " + "; ".join(wrong) + f": install tuidag {__version__} there"
        )


def _version(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    version = (info.get("packages") or {}).get("tuidag")
    return str(version) if version else None


def quiet_dask_logs() -> None:
    """Dask's own log lines would land in the middle of the UI; what matters reaches the tasks' reasons."""
    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def start_local(local_workers: int | None, processes: bool, resources: Mapping[str, int] | None) -> tuple[Any, Any]:
    """A `LocalCluster` for this run, and a client of it.

    What a local cluster for tuidag's tasks does without, as it costs CPU the tasks could use: the workers'
    statistical profiler (it samples every thread every 10 ms, for a dashboard nobody looks at here), work stealing
    (bookkeeping on every task's every transition, to move tasks between workers, when tuidag only submits what can
    run now), memory limits (a monitor polling every process 10 times a second: the tasks' own processes are not the
    worker's memory, and a worker holds no data), and frequent health ticks and system monitoring. On Linux, worker
    processes are forked from this one, which has Dask loaded already: a spawned one imports it again (0.6 s each,
    two at once on two cores took a second), a forked one starts in a few hundredths. (The fork happens here, before
    tuidag starts any thread of its own.)"""
    import dask
    from distributed import LocalCluster

    config = {"distributed.worker.multiprocessing-method": "fork"} if sys.platform == "linux" else {}
    with (
        dask.config.set(
            {
                **config,
                "distributed.scheduler.allowed-failures": 0,
                "distributed.worker.profile.enabled": False,
                "distributed.scheduler.work-stealing": False,
                "distributed.admin.tick.interval": "1s",
                "distributed.admin.system-monitor.interval": "5s",
            }
        ),
        _signals_ignored(),
    ):
        cluster = LocalCluster(
            n_workers=local_workers or os.cpu_count() or 1,
            processes=processes,
            threads_per_worker=LOCAL_THREADS_PER_WORKER,
            resources=dict(resources) if resources else None,
            memory_limit=0,
            dashboard_address=":0",  # its HTTP server starts even with None
            silence_logs=logging.CRITICAL,
        )
    client = _in_process_client(cluster)
    _scheduler_sends_sooner(cluster.scheduler)
    return cluster, client


def _in_process_client(cluster: Any) -> Any:
    """A client of the local cluster's scheduler, which runs in this process, through an in-process comm on the
    scheduler's own event loop: what they tell each other (every submission, every task's end, every event) is then
    handed over as it is, where TCP to themselves had each of them encode, write, read and decode it on the one
    event loop they share anyway. The workers, other processes, still use TCP."""
    from distributed import Client

    scheduler = cluster.scheduler
    cluster.sync(scheduler.listen, "inproc://")
    return Client(scheduler.listeners[-1].contact_address, loop=cluster.loop)


def _scheduler_sends_sooner(scheduler: Any) -> None:
    """The same as `_send_sooner` for a local cluster's scheduler (it runs in this process): its streams to the
    workers batch for 5 ms, to the client for 2 ms."""
    for comm in [*getattr(scheduler, "stream_comms", {}).values(), *getattr(scheduler, "client_comms", {}).values()]:
        if getattr(comm, "interval", 0) > 0.001:
            comm.interval = 0.001


@contextmanager
def _signals_ignored():
    """Start worker processes that ignore SIGINT and SIGTERM (the disposition survives their exec): Ctrl+C in a
    terminal reaches the whole process group, and a worker that died of it would leave its tasks' trees running.
    tuidag handles the signal itself: it cancels every task, then closes the cluster."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def prepare(client: Any) -> None:
    """Make a client ready for tuidag's attempts: the scheduler plugin that keeps Dask from running an attempt twice
    and the workers' guard of their hosts (`guard`; the cluster keeps them, for the workers that join later too, and
    ignores a second registration), and its messages sent sooner (`_send_sooner`)."""
    from .guard import AttemptsRunOnce, HostGuard

    client.register_plugin(AttemptsRunOnce())
    client.register_plugin(HostGuard())
    _send_sooner(client)


def _send_sooner(client: Any) -> None:
    """The client batches what it sends the scheduler for 10 ms (a fixed interval, not a setting): every submit
    of a chain of quick tasks waited for it. 1 ms, as a worker's own stream to its nanny uses."""
    comm = getattr(client, "scheduler_comm", None)
    if comm is not None and getattr(comm, "interval", 0) > 0.001:
        comm.interval = 0.001


def close_local(cluster: Any) -> None:
    """Close a cluster of `start_local`'s: SIGKILL its worker processes first (their nannies told not to restart
    them): every task tree is gone and a worker holds nothing else, while each one's orderly close took 0.3-0.5 s,
    longer than all of a small run. Dask's internals (`workers`, a nanny's process): anything unexpected leaves the
    orderly close to do it all."""
    try:
        for nanny in list(cluster.workers.values()):
            pid = nanny.process.process.pid
            nanny.auto_restart = False
            os.kill(pid, signal.SIGKILL)
    except (AttributeError, OSError, TypeError):
        pass
    cluster.close()
