"""The Scrapy item pipeline: drops (or flags) items whose story was already seen.

Enable it with ``ADDONS = {"scrapy_simhash.Addon": 300}`` or
``ITEM_PIPELINES = {"scrapy_simhash.SimhashPipeline": 200}`` (before storage pipelines).
Each item's title and body go through the tiered rule of :class:`~scrapy_simhash.Deduplicator`
against one index shared by every spider of the project (``.scrapy/simhash/index.sqlite3`` unless
``SIMHASH_INDEX_URL`` says otherwise):

* title within ``SIMHASH_TITLE_MAX_DISTANCE`` bits of an earlier item → :class:`NearDuplicate`
  (a :class:`~scrapy.exceptions.DropItem`), counted in ``simhash/dropped/title``;
* else body within ``SIMHASH_BODY_MAX_DISTANCE`` bits → dropped, ``simhash/dropped/body`` — or, with
  ``SIMHASH_BODY_ACTION = "flag"``, passed on with the verdict in ``SIMHASH_FLAG_FIELD``
  (``simhash/flagged``);
* else the item is new: it is committed to the index before it is passed on.

Items without usable text (and items whose fields cannot be read) are passed on untouched and
counted (``simhash/skipped/no_text``, ``simhash/skipped/bad_input``); an item with a true
``SIMHASH_SKIP_FIELD`` (``simhash_skip``) is passed on unchecked (``simhash/skipped/opt_out``).

Fingerprinting (jieba, the costly part) runs on a worker thread so downloads keep flowing; the
check-and-add runs on a second, single thread, so two copies of one story in flight at once are
checked one after the other and cannot both pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Field, Item
from scrapy.exceptions import CloseSpider, DropItem, NotConfigured
from scrapy.settings import BaseSettings, Settings
from scrapy.utils.project import data_path
from twisted.internet.defer import Deferred

from . import defaults
from .dedup import Deduplicator, Verdict
from .index.base import IndexError_

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class NearDuplicate(DropItem):
    """Raised for an item whose story is already in the index; ``verdict`` says which and how close."""

    def __init__(self, verdict: Verdict, log_level: str | None = None) -> None:
        super().__init__(f"near-duplicate: {verdict.summary()}")
        self.verdict = verdict
        self.log_level = log_level  # read by Scrapy >= 2.13's LogFormatter


def default_index_url() -> str:
    """``sqlite:///<project>/.scrapy/simhash/index.sqlite3`` (``./.scrapy/…`` outside a project)."""
    directory = Path(data_path("simhash", createdir=True)).resolve()
    return f"sqlite:///{directory / defaults.INDEX_FILENAME}"


def effective_settings(settings: BaseSettings, spider: Spider | None) -> Settings:
    """Crawler settings with the per-spider overrides applied (``simhash_reset = "0"`` means False)."""
    merged = Settings(defaults.SETTINGS, priority="default")
    merged.setdict(settings.copy_to_dict(), priority="project")
    if spider is not None:
        for name in defaults.PER_SPIDER:
            value = getattr(spider, name.lower(), None)
            if value is not None:
                merged.set(name, value, priority="spider")
    return merged


def _field_names(settings: BaseSettings, name: str) -> list[str]:
    value = settings.get(name)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value or ()]


def _optional_float(settings: BaseSettings, name: str) -> float | None:
    value = settings.get(name)
    if value in (None, "", "0", 0, "none", "None"):
        return None
    return float(value)


def _first_field(adapter: ItemAdapter, names: Sequence[str]) -> Any:
    for name in names:
        value = adapter.get(name)
        if value not in (None, "", b"", [], ()):
            return value
    return None


class SimhashPipeline:
    """Item pipeline running the tiered simhash rule; see the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.dedup: Deduplicator | None = None
        self._fingerprint_pool: ThreadPoolExecutor | None = None
        self._index_pool: ThreadPoolExecutor | None = None
        self._flag_classes: dict[type, type] = {}
        self._warned_flag_field = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashPipeline:
        settings = effective_settings(crawler.settings, None)
        if not settings.getbool("SIMHASH_ENABLED"):
            raise NotConfigured("scrapy-simhash is disabled (SIMHASH_ENABLED is False)")
        return cls(crawler)

    # -- lifecycle ------------------------------------------------------------------------------

    def open_spider(self, spider: Spider | None = None) -> None:
        spider = spider or self.crawler.spider
        s = effective_settings(self.crawler.settings, spider)
        self.enabled = s.getbool("SIMHASH_ENABLED")
        if not self.enabled:
            logger.info("scrapy-simhash disabled for spider %s (simhash_enabled)", getattr(spider, "name", "?"))
            return
        self.title_fields = _field_names(s, "SIMHASH_TITLE_FIELD")
        self.body_fields = _field_names(s, "SIMHASH_BODY_FIELD")
        self.url_fields = _field_names(s, "SIMHASH_URL_FIELD")
        self.flag_field = s.get("SIMHASH_FLAG_FIELD")
        self.skip_field = s.get("SIMHASH_SKIP_FIELD")
        self.drop_log_level = str(s.get("SIMHASH_DROP_LOG_LEVEL")).upper()
        index_url = s.get("SIMHASH_INDEX_URL") or default_index_url()
        try:
            self.dedup = Deduplicator.open(
                index_url,
                namespace=s.get("SIMHASH_NAMESPACE"),
                bits=s.getint("SIMHASH_BITS"),
                title_max_distance=s.getint("SIMHASH_TITLE_MAX_DISTANCE"),
                body_max_distance=s.getint("SIMHASH_BODY_MAX_DISTANCE"),
                dynamic_threshold=s.getbool("SIMHASH_DYNAMIC_THRESHOLD"),
                reset=s.getbool("SIMHASH_RESET"),
                title_action=s.get("SIMHASH_TITLE_ACTION"),
                body_action=s.get("SIMHASH_BODY_ACTION"),
                ttl_days=_optional_float(s, "SIMHASH_TTL_DAYS"),
                top_k=s.getint("SIMHASH_TOP_K"),
                stop_words=s.get("SIMHASH_STOP_WORDS"),
                user_dict=s.get("SIMHASH_USER_DICT"),
                title_patterns=s.getlist("SIMHASH_TITLE_PATTERNS"),
                main_content=s.getbool("SIMHASH_MAIN_CONTENT"),
            )
        except (IndexError_, ValueError, TypeError, OSError) as exc:
            logger.error("scrapy-simhash cannot open its index %s: %s", index_url, exc)
            raise CloseSpider(f"simhash_index_error: {exc}") from exc
        expired = self.dedup.purge_expired()
        index = self.dedup.index
        initial = index.count()
        self.stats.set_value("simhash/initial", initial)
        self.stats.set_value("simhash/expired", expired)
        self.stats.set_value("simhash/index", index.location)
        d = self.dedup
        logger.info(
            "scrapy-simhash: index %s, namespace %r, %d entries%s; %d-bit fingerprints, title <= %d bits, "
            "body <= %d bits%s, top-k %d; actions: title %s, body %s",
            index.location, index.namespace, initial,
            f" ({expired} expired entries purged)" if expired else "",
            d.fingerprinter.bits, d.title_max_distance, d.body_max_distance,
            " (dynamic by length)" if d.dynamic_threshold else "",
            d.fingerprinter.features.top_k, d.actions["title"], d.actions["body"],
        )
        self._fingerprint_pool = ThreadPoolExecutor(1, thread_name_prefix="simhash-fingerprint")
        self._index_pool = ThreadPoolExecutor(1, thread_name_prefix="simhash-index")

    def close_spider(self, spider: Spider | None = None) -> None:
        for pool in (self._fingerprint_pool, self._index_pool):
            if pool is not None:
                pool.shutdown(wait=True)  # finishes the work in progress
        self._fingerprint_pool = self._index_pool = None
        if self.dedup is not None:
            self.stats.set_value("simhash/final", self.dedup.index.count())
            self.dedup.close()
            self.dedup = None

    # -- items ----------------------------------------------------------------------------------

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        if self.dedup is None:
            return item
        adapter = ItemAdapter(item)
        if self.skip_field and adapter.get(self.skip_field):
            self.stats.inc_value("simhash/skipped/opt_out")
            return item
        title = _first_field(adapter, self.title_fields)
        body = _first_field(adapter, self.body_fields)
        url = _first_field(adapter, self.url_fields)
        url = url if isinstance(url, str) else None
        try:
            fps = await _run_in(self._fingerprint_pool, self.dedup.fingerprint, title, body)
        except (TypeError, ValueError, UnicodeError, RecursionError) as exc:
            self.stats.inc_value("simhash/skipped/bad_input")
            logger.warning("scrapy-simhash skipped an item it cannot read (%s: %s); passed on unchecked",
                           type(exc).__name__, exc)
            return item
        verdict: Verdict = await _run_in(self._index_pool, self.dedup.decide, fps, url)
        if verdict.status == "skipped":
            self.stats.inc_value(f"simhash/skipped/{verdict.reason}")
            return item
        if verdict.status == "new":
            self.stats.inc_value("simhash/new")
            return item
        if verdict.status == "flagged":
            self.stats.inc_value("simhash/flagged")
            self.stats.inc_value(f"simhash/flagged/{verdict.tier}")
            return self._flag(item, verdict)
        self.stats.inc_value(f"simhash/dropped/{verdict.tier}")
        raise NearDuplicate(verdict, log_level=self.drop_log_level)

    def _flag(self, item: Any, verdict: Verdict) -> Any:
        """Put the verdict in the flag field; a ``scrapy.Item`` that does not declare the field is
        moved to a subclass that does, so exporters see it."""
        if isinstance(item, Item) and self.flag_field not in item.fields:
            cls = type(item)
            flagged = self._flag_classes.get(cls)
            if flagged is None:
                flagged = type(cls.__name__, (cls,), {self.flag_field: Field()})
                self._flag_classes[cls] = flagged
            item.__class__ = flagged
        adapter = ItemAdapter(item)
        try:
            adapter[self.flag_field] = verdict.as_dict()
        except (KeyError, AttributeError, TypeError):
            self.stats.inc_value("simhash/flag_field_missing")
            if not self._warned_flag_field:
                self._warned_flag_field = True
                logger.warning(
                    "scrapy-simhash cannot set field %r on %s items: declare it to see flags",
                    self.flag_field, type(item).__name__,
                )
        return item


async def _run_in(executor: ThreadPoolExecutor | None, func: Callable[..., Any], *args: Any) -> Any:
    """Run ``func`` on ``executor`` and wait for it without blocking the event loop, under the
    asyncio reactor (or Scrapy's reactorless mode) and under any other Twisted reactor."""
    assert executor is not None, "the pipeline is not open"
    future = executor.submit(func, *args)
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

        future.add_done_callback(lambda done: reactor.callFromThread(fire, done))  # type: ignore[attr-defined]
        return await deferred
    return await asyncio.wrap_future(future)
