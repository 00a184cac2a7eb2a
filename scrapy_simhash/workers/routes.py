"""One worker process of the pipeline and the crawl process's end of its socket.

Messages (:mod:`.messages`) are framed as :class:`multiprocessing.connection.Connection` frames
them, so the worker reads and writes with ``recv_bytes``/``send_bytes`` (:func:`~.process.serve`)
while the crawl process reads and writes the socket without blocking, from its event loop
(:class:`~.fingerprints.FingerprintPool`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import struct
import time
from collections import deque
from concurrent.futures import Future
from typing import Any

from .pool import without_main
from .process import serve

logger = logging.getLogger(__name__)

#: Bytes read from a worker's socket at a time.
READ_SIZE = 1 << 18

#: An item waiting for a worker: its future, what goes to the worker (title, body; with the index: url
#: and request id too), how many workers died under it, and its place in the order of submission
#: (items sent again go in that order: the index answers them in the order it committed them).
Job = tuple[Future[Any], tuple[Any, ...], int, int]


def frame(payload: bytes) -> bytes:
    """``payload`` framed as :class:`multiprocessing.connection.Connection` frames it (what the
    worker's ``recv_bytes`` reads)."""
    size = len(payload)
    return (struct.pack("!i", size) if size <= 0x7FFFFFFF else struct.pack("!iQ", -1, size)) + payload


def unframe(received: bytearray) -> list[bytes]:
    """The whole frames at the start of ``received``, taken out of it."""
    frames = []
    while len(received) >= 4:
        (size,), start = struct.unpack_from("!i", received), 4
        if size == -1:
            if len(received) < 12:
                break
            (size,), start = struct.unpack_from("!Q", received, 4), 12
        if len(received) < start + size:
            break
        frames.append(bytes(received[start:start + size]))
        del received[:start + size]
    return frames


class Route:
    """One worker process and the crawl process's end of its socket (non-blocking)."""

    def __init__(self, options: dict[str, Any], index: dict[str, Any] | None) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(target=serve, args=(child, options, index), name="simhash-worker")
        with without_main():
            self.process.start()
        child.close()
        self.fd = self.conn.fileno()
        os.set_blocking(self.fd, False)
        self.pid = self.process.pid
        self.made_at = time.monotonic()
        self.ready_at: float | None = None
        #: calls sent, unanswered (answers come in this order): their items, when sent, the fates they carry
        self.calls: deque[tuple[list[Job], float, tuple[list[int], list[int]]]] = deque()
        self.received = bytearray()
        self.unsent = bytearray()
        self.dead = False
        self.stalled = False
        self.failure: str | None = None  # why its start failed, as the worker said

    def send(self, payload: bytes) -> bool:
        """Write one message; what the socket does not take now waits in ``unsent`` (:meth:`flush`).
        False if the worker's end is closed (it died)."""
        data = frame(payload)
        if self.unsent:
            self.unsent += data
            return True
        try:
            written = os.write(self.fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            return False
        if written < len(data):
            self.unsent += memoryview(data)[written:]
        return True

    def flush(self) -> bool:
        """Write what waits in ``unsent``, as much as the socket takes; False if the worker's end is closed."""
        try:
            written = os.write(self.fd, self.unsent)
        except BlockingIOError:
            return True
        except OSError:
            return False
        del self.unsent[:written]
        return True

    def receive(self) -> list[bytes] | None:
        """The whole messages that arrived; None once the worker's end is closed (it died)."""
        while True:
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                return None
            self.received += data
            if len(data) < READ_SIZE:
                break
        return unframe(self.received)

    def close(self, kill: bool = False) -> None:
        """Close the socket (a worker waiting for a call then exits); ``kill``: ``SIGKILL`` it too."""
        self.conn.close()
        if kill and self.process.is_alive():
            self.process.kill()

    def join(self, timeout: float) -> None:
        """Wait ``timeout`` seconds at most for the process to end, then kill it."""
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def kill_routes(routes: list[Route]) -> None:
    """At the interpreter's exit, before :mod:`multiprocessing` joins its children: kill the workers
    of a pool that was never shut down (a crawl stopped by force; they ignore ``SIGTERM``, and the
    join would wait for ever for one that is stuck)."""
    alive = [route for route in routes if route.process.is_alive()]
    for route in alive:
        route.process.kill()
    if alive:
        logger.warning("scrapy-simhash: the crawl ended without closing its pipeline: %d fingerprint worker(s) "
                       "killed", len(alive))
