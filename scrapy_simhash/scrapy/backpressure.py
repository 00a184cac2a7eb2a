"""Items yielded by ``start()`` taken from the spider only while the item pipelines have room.

Scrapy sends an item of a callback through the item pipelines before it takes the next one from the
callback (up to ``CONCURRENT_ITEMS`` at a time), so a pipeline that awaits holds the callback back.
Items of ``start()`` are sent on without waiting, and the engine takes the next one at once: with a
pipeline that awaits its verdicts (this plugin's workers and index), a ``start()`` that yields
faster than they come piles items up in memory without bound. :class:`StartBackpressure` (a spider
middleware; the add-on enables it) takes the next item or request from ``start()`` only while the
item pipelines hold fewer than ``SIMHASH_MAX_AWAITING`` items (Scrapy's own count of the items in
them), so the crawl holds that many at most, whatever the spider's pace.

It says that ``start()`` has ended only once the item pipelines are empty: Scrapy before 2.14 counts
the items of ``start()`` in the pipelines nowhere in its idleness test, and closes the spider while
they still await their verdicts (they are lost to the storage pipelines after this one).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from twisted.internet.defer import CancelledError, Deferred

from ..settings import effective_settings, value

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

#: Seconds between two looks at the item pipelines' count while they are full.
POLL = 0.005
#: ``SIMHASH_MAX_AWAITING = None``: this many items per worker process, and at least :data:`LEAST`
#: (enough to keep every worker busy: calls out and one queued each). See
#: docs/decisions/0411-items-awaiting.md.
PER_WORKER, LEAST = 64, 256


def max_awaiting(settings: BaseSettings) -> int:
    """The most items awaiting a verdict for these (effective) settings."""
    most = value(settings, "SIMHASH_MAX_AWAITING")
    return most if most is not None else max(LEAST, PER_WORKER * value(settings, "SIMHASH_WORKERS"))


async def _pause(seconds: float) -> None:
    """Sleep on the reactor, under the asyncio reactor or any other."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a non-asyncio Twisted reactor drives this coroutine
        from twisted.internet import reactor

        slept: Deferred[None] = Deferred()
        call = cast(Any, reactor).callLater(seconds, slept.callback, None)
        try:
            await slept
        except CancelledError:  # the engine stops reading start(): raised as asyncio's, which the engine
            call.cancel()  # takes as its own stop; Twisted's would be logged as an error of start()
            raise asyncio.CancelledError from None
        return
    await asyncio.sleep(seconds)


class StartBackpressure:
    """Spider middleware: ``start()``'s next item or request waits while the item pipelines hold
    ``SIMHASH_MAX_AWAITING`` items, and its end until they hold none (for spiders the plugin is
    enabled for)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartBackpressure:
        return cls(crawler)

    def _held(self) -> int:
        """Items in the item pipelines now (the scraper's count; 0 when there is no engine)."""
        slot = getattr(getattr(self.crawler.engine, "scraper", None), "slot", None)
        return int(getattr(slot, "itemproc_size", 0))

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        s = effective_settings(self.crawler.settings, self.crawler.spider)
        if not value(s, "SIMHASH_ENABLED"):
            async for item_or_request in start:
                yield item_or_request
            return
        most = max_awaiting(s)
        while True:
            while self._held() >= most:
                await _pause(POLL)
            try:
                item_or_request = await start.__anext__()
            except StopAsyncIteration:
                break
            yield item_or_request
        while self._held():  # the end of start() once its items are out of the pipelines
            await _pause(POLL)
