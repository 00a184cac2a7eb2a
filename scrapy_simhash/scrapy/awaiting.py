"""Futures of other threads (the workers, the index thread) awaited in the reactor's coroutines.

Kept apart from the pipeline: how a thread's answer reaches the reactor is one concern, the same
under the asyncio reactor (one wake-up of the loop for all answers that arrived meanwhile) and
under any other Twisted reactor (``callFromThread``).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from functools import partial
from typing import Any

from twisted.internet.defer import Deferred


class Inbox:
    """Futures of other threads settled into an asyncio loop's, all that completed meanwhile in one
    wake-up of the loop (a batch of the index answers its items in one turn of the reactor)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._lock = threading.Lock()
        self._done: list[tuple[asyncio.Future[Any], Future[Any]]] = []

    def wait(self, future: Future[Any]) -> asyncio.Future[Any]:
        waiter = self.loop.create_future()
        waiter.add_done_callback(lambda w: w.cancelled() and future.cancel())
        future.add_done_callback(partial(self._arrived, waiter))
        return waiter

    def _arrived(self, waiter: asyncio.Future[Any], future: Future[Any]) -> None:
        with self._lock:
            self._done.append((waiter, future))
            first = len(self._done) == 1
        if first:
            self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self._lock:
            done, self._done = self._done, []
        for waiter, future in done:
            if waiter.cancelled():
                continue
            if future.cancelled():
                waiter.cancel()
            elif (exc := future.exception()) is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(future.result())


async def wait(future: Future[Any]) -> Any:
    """Wait for a future of another thread, under the asyncio reactor (or Scrapy's reactorless
    mode) and under any other Twisted reactor."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a non-asyncio Twisted reactor drives this coroutine
        from twisted.internet import reactor

        deferred: Deferred[Any] = Deferred()

        def fire(done: Future[Any]) -> None:
            exc = done.exception()
            if exc is None:
                deferred.callback(done.result())
            else:
                deferred.errback(exc)

        future.add_done_callback(lambda done: reactor.callFromThread(fire, done))
        return await deferred
    return await asyncio.wrap_future(future)
