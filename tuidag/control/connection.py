"""One connection to the engine's control server, and the rules for keeping connections: which one makes room when
every place is taken, which ones are closed for saying nothing, how a closed one is told why, and the engine's
rate-limited log of what clients did."""

from __future__ import annotations

import socket
import sys
import time

from ..engine.events import Event
from . import protocol

LOG_BURST = 20  # lines the engine's log takes about clients per `LOG_WINDOW` seconds; then one summary
LOG_WINDOW = 10.0


class Connection:
    __slots__ = (
        "after",
        "asked",
        "closing",
        "gone",
        "inbuf",
        "outbuf",
        "pending",
        "pid",
        "sent",
        "since",
        "sock",
        "viewer",
        "waiting",
    )

    def __init__(self, sock: socket.socket, pid: int):
        self.sock = sock
        self.pid = pid
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.viewer = False  # subscribed to events
        self.waiting: list[Event] | None = None  # events that arrived while its snapshot was being taken
        self.after = 0  # the number of the last event its snapshot holds: older ones, delivered late, are not news
        self.closing = False  # close once `outbuf` is sent
        self.since = time.monotonic()  # when it last sent something (or connected)
        self.asked = False  # it sent a whole request
        self.pending = 0  # its controls waiting for the control thread
        self.sent = 0  # bytes sent to it so far
        self.gone = False  # dropped


def idlest(connections: list[Connection]) -> Connection | None:
    """The connection to close to make room: not a viewer, nothing waiting for it, silent the longest."""
    idle = [c for c in connections if not c.viewer and not c.pending and not c.outbuf]
    return min(idle, key=lambda c: c.since) if idle else None


def silent(connections: list[Connection], patience: float) -> list[Connection]:
    """Connections that sent no whole request within `patience` seconds of connecting."""
    now = time.monotonic()
    return [c for c in connections if not c.asked and not c.closing and now - c.since > patience]


def bye(sock: socket.socket, reason: str) -> None:
    """Tell a connection about to be closed why (best effort: it may not be reading)."""
    try:
        sock.send(protocol.encode({"type": "bye", "reason": reason}))
    except OSError:
        pass


class EngineLog:
    """Lines in the engine's log (the run folder's engine.log when detached), at most LOG_BURST per window: a
    client sending garbage must not fill the disk. What concerns the channel itself (`always`) is never held back."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._dropped = 0

    def __call__(self, text: str, always: bool = False) -> None:
        now = time.monotonic()
        self._times = [t for t in self._times if now - t < LOG_WINDOW]
        if len(self._times) >= LOG_BURST and not always:
            self._dropped += 1
            return
        self._times.append(now)
        dropped, self._dropped = self._dropped, 0
        try:
            sys.stderr.write(
                f"tuidag: control: {text}" + (f" ({dropped} more such lines not shown)" if dropped else "") + "\n"
            )
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
