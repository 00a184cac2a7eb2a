"""Futures of other threads (the workers, the index thread) awaited in the reactor's coroutines.

Kept apart from the pipeline: how a thread's answer reaches the reactor is one concern, the same
under the asyncio reactor (one wake-up of the loop for all answers that arrived meanwhile) and
under any other Twisted reactor (``callFromThread``). So is how the reactor's coroutines wait for a
place among a bounded number (:class:`Places`: the items awaiting a verdict).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future
from functools import partial
from typing import Any

from twisted.internet.defer import Deferred


class Inbox:
    """Futures of other threads settled into an asyncio loop's, all that completed meanwhile in one
    wake-up of the loop (a batch of the index answers its items in one turn of the reactor)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._thread = threading.get_ident()  # made on the loop's thread
        self._lock = threading.Lock()
        self._done: list[tuple[asyncio.Future[Any], Future[Any]]] = []

    def wait(self, future: Future[Any]) -> asyncio.Future[Any]:
        waiter = self.loop.create_future()
        waiter.add_done_callback(lambda w: w.cancelled() and future.cancel())
        future.add_done_callback(partial(self._arrived, waiter))
        return waiter

    def _arrived(self, waiter: asyncio.Future[Any], future: Future[Any]) -> None:
        if threading.get_ident() == self._thread:  # settled on the loop (the workers' answers): no wake-up
            self._settle_one(waiter, future)
            return
        with self._lock:
            self._done.append((waiter, future))
            first = len(self._done) == 1
        if first:
            self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self._lock:
            done, self._done = self._done, []
        for waiter, future in done:
            self._settle_one(waiter, future)

    @staticmethod
    def _settle_one(waiter: asyncio.Future[Any], future: Future[Any]) -> None:
        if waiter.cancelled():
            return
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


class Places:
    """At most ``size`` holders at a time (``async with places:``), the others waiting in the order
    they came; used on the reactor's thread only, under the asyncio reactor or any other. ``most``:
    the most holders there ever were."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.held = 0
        self.most = 0
        self._waiting: deque[asyncio.Future[None] | Deferred[None]] = deque()
        self._handed: set[int] = set()  # waiters (id) given a place they have not taken up yet

    async def __aenter__(self) -> None:
        if self.held < self.size and not self._waiting:
            self.held += 1
            self.most = max(self.most, self.held)
            return
        waiter: asyncio.Future[None] | Deferred[None]
        try:
            waiter = asyncio.get_running_loop().create_future()
        except RuntimeError:  # a non-asyncio Twisted reactor drives this coroutine
            waiter = Deferred()
        self._waiting.append(waiter)
        try:
            await waiter  # its place is handed over by the holder that leaves (__aexit__)
        except BaseException:
            if id(waiter) in self._handed:  # cancelled once its place was handed over: pass it on
                self._handed.discard(id(waiter))
                self._leave()
            elif waiter in self._waiting:  # (else _leave already passed it over)
                self._waiting.remove(waiter)
            raise
        self._handed.discard(id(waiter))

    async def __aexit__(self, *exc: object) -> None:
        self._leave()

    def _leave(self) -> None:
        """A holder leaves: its place goes to the first waiter still waiting, else it is free."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if waiter.called if isinstance(waiter, Deferred) else waiter.done():
                continue  # cancelled meanwhile
            self._handed.add(id(waiter))
            if isinstance(waiter, Deferred):
                waiter.callback(None)
            else:
                waiter.set_result(None)
            return
        self.held -= 1
