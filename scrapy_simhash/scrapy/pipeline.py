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
* else, with ``SIMHASH_SENTENCES_SHARED`` (50 by default, 0 turns it off), an earlier story's
  sentences found here → dropped (``simhash/dropped/sentence``) or flagged as the body tier says;
* else the item is new: it is committed to the index before it is passed on, with its story key in
  ``SIMHASH_STORY_FIELD`` (``simhash_story``: the same for the same text admitted again, to upsert on;
  docs/delivery.md).

Each drop is one log line at ``SIMHASH_DROP_LOG_LEVEL`` (this item's URL, tier, distance, original
URL; :class:`_ShortDropLine` keeps Scrapy from appending the whole item), and so is each flag.

Settings are checked when the crawler is built (:meth:`SimhashPipeline.from_crawler`): a bad value
raises :class:`~scrapy_simhash.settings.SettingError` and ``scrapy crawl`` exits with status 1
before any request; an unknown ``SIMHASH_*`` name, and field settings an item has none of, are
warnings.

Items without usable text (and items whose fields cannot be read, whatever reading them raises)
are passed on untouched and counted (``simhash/skipped/no_text``, ``simhash/skipped/bad_input``); an item with a true
``SIMHASH_SKIP_FIELD`` (``simhash_skip``) is passed on unchecked (``simhash/skipped/opt_out``).

Fingerprinting (jieba, the costly part) and the check-and-add run on ``SIMHASH_WORKERS`` processes
(:mod:`.workers`; by default the cores there are minus one), so the crawl process keeps its core for
downloads, parsing and the reactor, which alone drives their sockets. An item that finds a worker free
goes at once; the items that arrive while the workers are busy go in one call, are checked in one
transaction (one fsync for all) and come back together, each passed on only once committed; the
index serializes the workers' transactions, so two copies of one story in flight at once are checked one after the other
and cannot both pass. With ``SIMHASH_WORKERS = 0`` (and for values no worker can take) fingerprints
are made on a thread of the crawl process and checked on another, in the order they complete; the
items that queue up for that index thread while it commits go in its next transaction together (up
to :data:`INDEX_BATCH`, :mod:`.groupcommit`).

Bounded waits
-------------
At most ``SIMHASH_MAX_AWAITING`` items await their verdicts in the pipeline at once (:class:`.awaiting.Places`);
more wait for a place, in the order they came. Items of callbacks are held back by Scrapy itself (it
awaits each item's pipelines, ``CONCURRENT_ITEMS`` per response); items that ``start()`` yields are
not, and :class:`~.backpressure.StartBackpressure` (enabled by the add-on) takes the next one only
while the item pipelines hold fewer than ``SIMHASH_MAX_AWAITING``: a spider yielding items as fast
as it can holds no more in memory than that (docs/decisions/0411-items-awaiting.md). A worker that
leaves a call unanswered for ``SIMHASH_WORKER_TIMEOUT`` seconds (stopped, hung) is killed and replaced,
and the call's items are sent again; once the engine stops (Ctrl-C, ``SIGTERM``) a call gets a few
seconds at most (:mod:`.workers.fingerprints`, docs/decisions/0410-worker-timeout.md). A field that
is an iterator is read up to :data:`~scrapy_simhash.text.normalize.MAX_PARTS` parts (``None``
included) and :data:`~scrapy_simhash.text.normalize.MAX_READ_SECONDS`: beyond, it is unreadable,
passed on unchecked and counted (``simhash/skipped/bad_input``).

Watching a crawl
----------------
Each item's decision latency (entering the pipeline to its verdict) is timed, and the crawl's record
(start at open, end and counts at close) goes to the index's history of runs; at close the latency
quantiles, the dedup rate and the band of earlier runs are stats (:mod:`.runs`), before Scrapy's
``spider_closed``, for the Spidermon suite of :mod:`scrapy_simhash.monitoring` (docs/monitoring.md).

When the index fails
--------------------
An index that cannot be opened (missing directory rights, not ours, corrupt, truncated, built with
other parameters, read-only, a Redis that is unreachable or refused as unsafe) is opened, and refused,
while the crawler is built: one ERROR line, :class:`~.refusal.IndexCannotOpen` raised, no request
made, and ``scrapy crawl`` exits with status 1; the file is never modified. (A pipeline built by
hand, without ``from_crawler``, opens its index at ``open_spider`` and closes the spider with reason
``simhash_index_error: …`` instead.) A check-and-add that cannot be committed during the crawl (disk full,
another process holding the write lock past ``SIMHASH_BUSY_TIMEOUT`` seconds, I/O error) is retried
``SIMHASH_INDEX_RETRIES`` times, ``SIMHASH_INDEX_RETRY_DELAY`` seconds apart and doubling, by sleeping
on the index thread (never on the reactor; the items behind it wait, in order). Then it counts in
``simhash/index_error`` and ``SIMHASH_ON_INDEX_ERROR`` decides (an index holding values of the wrong
type, i.e. a tampered file, is handled the same way, without retries):

* ``"drop"`` (default): the item is dropped with :class:`IndexUnavailable` (a ``DropItem``). No
  item is ever passed on as new without being in the index, at the price of losing the item for
  this run if the index stays unusable (the next crawl sees it again).
* ``"pass"``: the item is passed on *unchecked*, with ``{"status": "unchecked", "reason": …}`` in
  ``SIMHASH_FLAG_FIELD`` and counted in ``simhash/unchecked``: nothing is lost, but a repost may
  get through and the item is not in the index.
* ``"close"``: the item is dropped as with ``"drop"`` and the spider is closed (finish reason
  ``simhash_index_error: …``), so an outage does not drop the rest of the crawl unchecked. The
  exit status stays 0: Scrapy gives every finish reason the same.

Bounds on hostile items
-----------------------
Fields that cannot be read as text (numbers, nested lists, dicts) are passed on unchecked and counted
(``simhash/skipped/bad_input``); nothing an item holds can crash the crawl. Text is cut at
:data:`~scrapy_simhash.text.normalize.MAX_INPUT_CHARS` characters (1,000,000; bytes at 4× that) before
it is parsed, so one item costs at most one cut-size body of work in a fingerprint worker
(docs/decisions/0016-input-cut.md). HTML is parsed by lxml's HTML parser: nesting deeper than
libxml2's limit (256 levels) is cut (the text below it is ignored, no recursion error), and DTD
entities are never expanded ("billion laughs" stays its own size; ``tests/test_fuzz.py``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sqlite3
import time
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.utils.defer import deferred_from_coro

from .._compiled import describe as describe_engine
from ..engine import Deduplicator, Verdict
from ..fingerprint.fingerprinter import Fingerprints, UnreadableField
from ..index import SimhashIndexError, sqlite_path
from ..index.owners import new_owner
from ..settings import SettingError, check_settings, effective_settings, engine_options, misspelled_settings, value
from ..workers.fingerprints import FingerprintPool, _settle
from ..workers.groupcommit import GroupCommit
from ..workers.process import decide_with_retries, fingerprinter_options, index_options
from .awaiting import Inbox, Places, wait
from .backpressure import max_awaiting
from .delivery import DeliveryTracker, Journal, item_stored
from .drops import SHORT_DROP_LINE, IndexUnavailable, NearDuplicate, SimhashDrop
from .fields import FieldWriter, first_field, flag_value, story_key
from .refusal import IndexCannotOpen, refuse_to_start
from .runs import RunRecorder
from .short import AuthorWindow, PrefixedStats, screen, spam_patterns

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings

logger = logging.getLogger(__name__)


#: Most items decided in one index transaction (those that queued up while the last one ran).
INDEX_BATCH = 100
#: Stats that are 0 unless something happens: set at open, so a stats dump shows them all.
ZERO_STATS = (
    "simhash/new", "simhash/dropped/title", "simhash/dropped/body", "simhash/dropped/sentence",
    "simhash/flagged", "simhash/flag_field_missing", "simhash/skipped/no_text", "simhash/skipped/bad_input",
    "simhash/skipped/opt_out", "simhash/index_retries", "simhash/index_error", "simhash/unchecked",
    "simhash/released", "simhash/workers_died", "simhash/characters/confirmed", "simhash/characters/found",
)


class SimhashPipeline:
    """Item pipeline running the tiered simhash rule; see the module docstring."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats: Any = crawler.stats  # (the short profile's: under simhash/short/)
        self.dedup: Deduplicator | None = None
        self._fingerprints: FingerprintPool | None = None
        self._index: GroupCommit[tuple[Any, str | None, str], Verdict] | None = None
        self._fields = FieldWriter()
        self._warned_fields: set[str] = set()
        self._closing = False
        self._engine_ran = False
        self._inbox: Inbox | None = None
        self._places = Places(1)  # sized at open
        #: What opening the index found: expired entries purged, entries released, the dead crawls'
        #: journals read, entries, whether the index's directory was created.
        self._opened: tuple[int, int, dict[str, set[int]], int, bool] = (0, 0, {}, 0, False)
        self._delivery = DeliveryTracker(self._key, flush=self._flush_fates)
        self._run: RunRecorder | None = None  # this crawl's latency and record in the index's history

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashPipeline:
        """Check every setting now, while the crawler is built: a bad one raises
        :class:`~scrapy_simhash.settings.SettingError`, which makes ``scrapy crawl`` exit non-zero
        (``NotConfigured`` would only leave the plugin out, silently)."""
        s = effective_settings(crawler.settings, getattr(crawler, "spider", None))
        for name, closest in misspelled_settings(crawler.settings).items():
            logger.warning("scrapy-simhash has no setting %s (ignored)%s", name,
                           f"; did you mean {closest}?" if closest else "")
        try:
            enabled = value(s, "SIMHASH_ENABLED")
            if enabled:
                check_settings(s)
                spam_patterns(value(s, "SIMHASH_SPAM_PATTERNS"))  # its file read and checked now too
        except SettingError as exc:
            raise refuse_to_start(exc) from None
        if not enabled:
            raise NotConfigured("scrapy-simhash is disabled (SIMHASH_ENABLED is False)")
        logging.getLogger("scrapy.core.scraper").addFilter(SHORT_DROP_LINE)  # once: filters are a set
        pipeline = cls(crawler)
        if getattr(crawler, "spider", None) is not None:  # Scrapy >= 2.13 builds the spider first
            try:
                pipeline._open_index(s)
            except IndexCannotOpen as exc:
                raise refuse_to_start(exc) from None
        crawler.signals.connect(pipeline._item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(pipeline._item_scraped, signal=item_stored)  # (StoredMark: sooner)
        crawler.signals.connect(pipeline._item_dropped, signal=signals.item_dropped)
        crawler.signals.connect(pipeline._item_error, signal=signals.item_error)
        return pipeline

    # -- lifecycle ------------------------------------------------------------------------------

    def open_spider(self, spider: Spider | None = None) -> None:
        spider = spider or self.crawler.spider
        s = effective_settings(self.crawler.settings, spider)
        self.enabled = value(s, "SIMHASH_ENABLED")
        if not self.enabled:
            logger.info("scrapy-simhash disabled for spider %s (simhash_enabled)", getattr(spider, "name", "?"))
            return
        try:  # checked in from_crawler, where the spider exists (Scrapy >= 2.13); not so a hand-built one
            check_settings(s)
        except SettingError as exc:
            logger.error("scrapy-simhash: bad setting: %s", exc)
            raise CloseSpider(f"simhash_bad_setting: {exc}") from exc
        if value(s, "SIMHASH_PROFILE") == "short":
            self.stats = PrefixedStats(self.crawler.stats)
        try:
            self.spam = spam_patterns(value(s, "SIMHASH_SPAM_PATTERNS"))
        except SettingError as exc:
            logger.error("scrapy-simhash: bad setting: %s", exc)
            raise CloseSpider(f"simhash_bad_setting: {exc}") from exc
        self.spam_action = value(s, "SIMHASH_SPAM_ACTION")
        self.author_field = value(s, "SIMHASH_AUTHOR_FIELD")
        self.authors = AuthorWindow(value(s, "SIMHASH_AUTHOR_WINDOW")) if self.author_field else None
        self.title_fields = value(s, "SIMHASH_TITLE_FIELD")
        self.body_fields = value(s, "SIMHASH_BODY_FIELD")
        self.url_fields = value(s, "SIMHASH_URL_FIELD")
        self.flag_field = value(s, "SIMHASH_FLAG_FIELD")
        self.story_field = value(s, "SIMHASH_STORY_FIELD")
        self.skip_field = value(s, "SIMHASH_SKIP_FIELD")
        self.drop_log_level = value(s, "SIMHASH_DROP_LOG_LEVEL")
        self.on_index_error = value(s, "SIMHASH_ON_INDEX_ERROR")
        self.index_retries = value(s, "SIMHASH_INDEX_RETRIES")
        self.index_retry_delay = value(s, "SIMHASH_INDEX_RETRY_DELAY")
        self._index_errors = 0
        if self.dedup is None:  # a pipeline built without from_crawler
            try:
                self._open_index(s)
            except IndexCannotOpen as exc:
                raise CloseSpider(str(exc)) from exc
        assert self.dedup is not None
        index_url = value(s, "SIMHASH_INDEX_URL")
        expired, recovered, read, initial, new_directory = self._opened
        path = sqlite_path(index_url)
        if new_directory and path is not None:
            logger.info("scrapy-simhash: created the directory %s for a new index (it did not exist)",
                        Path(path).parent.resolve())
        journals = Journal.directory(self.dedup.index.location, self.dedup.index.namespace)
        if self.dedup.owner is not None:
            self._delivery.journal = Journal(journals, self.dedup.owner)
        for key in ZERO_STATS:
            self.stats.set_value(key, 0)
        index = self.dedup.index
        self.stats.set_value("simhash/initial", initial)
        self.stats.set_value("simhash/expired", expired)
        self.stats.set_value("simhash/recovered", recovered)
        if recovered:
            logger.warning(
                "scrapy-simhash: released %d entries of a crawl that died before their items were recorded as "
                "stored (simhash/recovered): their stories are admitted again; an item its delivery journal "
                "missed is passed on again, with the same story key in %s", recovered,
                self.story_field or "SIMHASH_STORY_FIELD (turned off)")
        if any(read.values()):
            logger.info("scrapy-simhash: the delivery journal of a crawl that died lists %d items as stored: their "
                        "entries are kept", sum(map(len, read.values())))
        self.stats.set_value("simhash/index", index.location)
        d = self.dedup
        logger.info(
            "scrapy-simhash: index %s, namespace %r, %d entries%s; %d-bit fingerprints, title <= %d bits, "
            "body <= %d bits%s, top-k %d; actions: title %s, body %s; %s",
            index.location, index.namespace, initial,
            f" ({expired} expired entries purged)" if expired else "",
            d.fingerprinter.bits, d.title_max_distance, d.body_max_distance,
            " (dynamic by length)" if d.dynamic_threshold else "",
            d.fingerprinter.features.top_k, d.actions["title"], d.actions["body"], describe_engine(),
        )
        # What is alive now (Scrapy, Twisted, the engine and its tables) lives as long as the crawl: out
        # of the cyclic collector's reach, its full collections stay short. Else each one walks all
        # of it holding the GIL, and the reactor stands still meanwhile (tests/test_concurrency.py).
        gc.freeze()
        workers, options = value(s, "SIMHASH_WORKERS"), engine_options(s)
        self._fingerprints = FingerprintPool(
            workers, fingerprinter_options(options), self.dedup.fingerprint,
            index=index_options(index_url, options, self.dedup.owner, self.index_retries, self.index_retry_delay,
                                getattr(self.dedup.index, "identity", None)) if workers else None,
            check_here=self._check_here, fates=self._delivery,
            timeout=value(s, "SIMHASH_WORKER_TIMEOUT"), stopping=self._engine_stopping, on_loop=True)
        if self._fingerprints.decides:
            self._delivery.stop()  # the workers write the fates, with their calls: no flusher here
        self._index = GroupCommit(self._decide_with_retries, max_batch=INDEX_BATCH, name="simhash-index")
        self._places = Places(max_awaiting(s))
        self._run = RunRecorder.start(index, getattr(spider, "name", None), self.stats,
                                      value(s, "SIMHASH_MONITOR_RUNS"))

    def _open_index(self, s: Settings) -> None:
        """Open the index, purge what expired and release the entries of crawls that died; raises
        :class:`IndexCannotOpen` (logged in one line) when it cannot."""
        index_url = value(s, "SIMHASH_INDEX_URL")
        path = sqlite_path(index_url)
        new_directory = path is not None and not Path(path).parent.exists()
        try:
            self.dedup = Deduplicator.open(index_url, owner=new_owner(), **engine_options(s))
            expired = self.dedup.purge_expired()
            journals = Journal.directory(self.dedup.index.location, self.dedup.index.namespace)
            read: dict[str, set[int]] = {}  # the journals of dead crawls: what they stored last

            def delivered(owner: str) -> set[int]:
                read[owner] = Journal.read(journals, owner)
                return read[owner]

            recovered = self.dedup.index.recover(delivered)  # entries of crawls that died before delivering them
            for owner in read:
                Journal(journals, owner).remove()
            initial = self.dedup.index.count()
        except (SimhashIndexError, sqlite3.Error, ValueError, TypeError, OSError) as exc:
            logger.error("scrapy-simhash cannot open its index %s: %s", index_url, exc)
            if self.dedup is not None:
                self.dedup.close()
                self.dedup = None
            raise IndexCannotOpen(f"simhash_index_error: {exc}") from exc
        self._opened = (expired, recovered, read, initial, new_directory)

    def _engine_stopping(self) -> bool:
        """Has the engine, once seen running, stopped running (Ctrl-C, ``SIGTERM``, ``CloseSpider``)?
        Read by the worker pool's watchdog (a plain attribute read)."""
        running = bool(getattr(self.crawler.engine, "running", False))
        if running:
            self._engine_ran = True
        return self._engine_ran and not running

    def close_spider(self, spider: Spider | None = None) -> None:
        if self._fingerprints is not None:
            self._fingerprints.shutdown()  # finishes the work in progress, joins the workers
            self.stats.set_value("simhash/workers_died", self._fingerprints.died)
            self._count_released(self._fingerprints.released)
            if self._fingerprints.index_retries:
                self.stats.inc_value("simhash/index_retries", self._fingerprints.index_retries)
        if self._index is not None:
            self._index.shutdown()
        self._fingerprints = self._index = None
        if self.dedup is not None:
            self._delivery.stop()
            self._delivery.untold()
            try:
                self._apply_fates()
                if self._delivery.journal is not None:
                    self._delivery.journal.remove()  # every delivery is in the index now
            except (SimhashIndexError, sqlite3.Error) as exc:
                logger.error("scrapy-simhash: could not record what became of the last items (%s); the next "
                             "crawl releases their entries and may pass them on again", exc)
            self.stats.set_value("simhash/final", self.dedup.index.count())
            if self._run is not None:
                self._run.finish()
                self._run = None
            self.dedup.close()
            self.dedup = None

    # -- items ----------------------------------------------------------------------------------

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        if self.dedup is None:
            return item
        entered = time.perf_counter()
        try:
            adapter = ItemAdapter(item)
            if self.skip_field and adapter.get(self.skip_field):
                self.stats.inc_value("simhash/skipped/opt_out")
                return item
            fields = {part: first_field(adapter, names) for part, names in (
                ("title", self.title_fields), ("body", self.body_fields), ("url", self.url_fields))}
            if len(self._warned_fields) < 3 and None in (fields["title"][0], fields["body"][0], fields["url"][0]):
                self._warn_missing_fields(adapter)  # (a field with a value has its name among the item's)
        except Exception as exc:  # an item itemadapter cannot read, a field whose getter raises …
            return self._bad_input(item, None, None, exc)
        url = fields["url"][1] if isinstance(fields["url"][1], str) else None
        if self.spam is not None or self.authors is not None:  # before the index: what they drop is not added
            try:
                text = "" if fields["body"][1] is None else self.dedup.fingerprinter.clean_body(fields["body"][1])
            except Exception as exc:  # whatever reading the field raises, it is this field's fault
                return self._bad_input(item, fields["body"][0], url, exc)
            flag = screen(text, url, adapter.get(self.author_field) if self.author_field else None, self.spam,
                          self.spam_action, self.authors, self.stats, self.drop_log_level)
            if flag is not None:
                self._flag(item, flag)
        async with self._places:  # at most SIMHASH_MAX_AWAITING items awaiting their verdicts
            while True:
                try:
                    fps, verdict = await self._wait(self._check(fields["title"][1], fields["body"][1], url))
                except UnreadableField as exc:
                    return self._bad_input(item, fields[exc.part][0], url, exc)
                if not await self._original_released(verdict):
                    break
        if self._run is not None:
            self._run.decided(time.perf_counter() - entered)
        if fps.main_text:
            self.stats.inc_value("simhash/main_text")
        if isinstance(verdict, (SimhashIndexError, sqlite3.Error)):
            return self._index_failed(item, verdict)
        if isinstance(verdict, (TypeError, ValueError, OverflowError)):
            # The fingerprints are ours and valid, so this is the file: values of the wrong type in
            # a tampered or foreign index. Not retried; never a reason to pass the item on as new.
            return self._index_failed(item, verdict)
        if isinstance(verdict, BaseException):
            raise verdict
        if verdict.status == "error":  # this item alone (a value in the index that is not ours)
            return self._index_failed(item, SimhashIndexError(verdict.reason))
        if verdict.status == "skipped":
            self.stats.inc_value(f"simhash/skipped/{verdict.reason}")
            return item
        if verdict.status == "new":
            self.stats.inc_value("simhash/new")
            if verdict.entry_id is not None:
                self._delivery.track(item, verdict.entry_id)
            if self.story_field:
                self._fields.set(item, self.story_field, story_key(verdict), "story keys")
            return item
        if verdict.score is not None:  # a short body's match, decided by its characters
            found = verdict.distance is not None and verdict.distance > self.dedup.body_distance_for(fps.body_chars)
            self.stats.inc_value(f"simhash/characters/{'found' if found else 'confirmed'}")
        if verdict.status == "flagged":
            self.stats.inc_value("simhash/flagged")
            self.stats.inc_value(f"simhash/flagged/{verdict.tier}")
            logger.log(logging.getLevelName(self.drop_log_level), "Flagged: near-duplicate %s: %s",
                       url or "(no URL)", verdict.summary())
            return self._flag(item, verdict)
        self.stats.inc_value(f"simhash/dropped/{verdict.tier}")
        raise NearDuplicate(verdict, log_level=self.drop_log_level, url=url)

    async def _original_released(self, verdict: Verdict | BaseException) -> bool:
        """For a duplicate of an entry this crawl added and whose item has not reached storage yet:
        wait for that item's fate (at most :data:`.delivery.TWIN_WAIT` s); True when it was released
        (dropped downstream: check this copy again), False otherwise (a duplicate as decided)."""
        if isinstance(verdict, BaseException) or verdict.status != "duplicate" or verdict.original is None:
            return False
        waiter = self._delivery.waiter(verdict.original.id)
        return waiter is not None and await self._wait(waiter) == "release"

    def _check(self, title: Any, body: Any, url: str | None) -> Future[tuple[Fingerprints, Verdict | BaseException]]:
        """An item's fingerprints and its verdict (or the index's error) in one future; it raises
        what fingerprinting raised. Checked by a worker process when there are workers, else (and
        for what no worker can check) in this process (:meth:`_check_here`)."""
        assert self._fingerprints is not None, "the pipeline is not open"
        request_id = os.urandom(12).hex()
        if self._fingerprints.decides:
            return self._fingerprints.check(title, body, url, request_id)
        return self._check_here(title, body, url, request_id)

    def _check_here(self, title: Any, body: Any, url: str | None,
                    request_id: str) -> Future[tuple[Fingerprints, Verdict | BaseException]]:
        """:meth:`_check` in this process: fingerprinted on the pool's thread, checked on the index
        thread (the fingerprints go to the index queue directly, not through the reactor)."""
        assert self._fingerprints is not None and self._index is not None, "the pipeline is not open"
        index = self._index
        checked: Future[tuple[Fingerprints, Verdict | BaseException]] = Future()

        def decided(fps: Fingerprints, done: Future[Verdict]) -> None:
            if not done.cancelled():
                _settle(checked, (fps, done.exception() or done.result()))

        def fingerprinted(done: Future[Fingerprints]) -> None:
            if checked.cancelled() or done.cancelled():
                checked.cancel()
                return
            try:
                fps = done.result()
                verdict = index.submit((fps, url, request_id))
            except BaseException as exc:  # UnreadableField, or the index queue shut down
                _settle(checked, exc=exc)
                return
            verdict.add_done_callback(partial(decided, fps))
            checked.add_done_callback(lambda c: c.cancelled() and verdict.cancel())

        self._fingerprints.here(title, body).add_done_callback(fingerprinted)
        return checked

    def _wait(self, future: Future[Any]) -> Any:
        """An awaitable of another thread's future (:class:`.awaiting.Inbox`, else :func:`.awaiting.wait`)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a non-asyncio Twisted reactor drives this coroutine
            return wait(future)
        if self._inbox is None or self._inbox.loop is not loop:
            self._inbox = Inbox(loop)
        return self._inbox.wait(future)

    def _bad_input(self, item: Any, field: str | None, url: str | None, exc: Exception) -> Any:
        """Count and pass on unchecked an item whose fields cannot be read, saying which and where."""
        self.stats.inc_value("simhash/skipped/bad_input")
        where = f"field {field!r} of item {url or '(no URL)'}" if field else f"{type(item).__name__} item"
        logger.warning("scrapy-simhash cannot read the %s (%s); passed on unchecked", where, exc)
        return item

    def _warn_missing_fields(self, adapter: ItemAdapter) -> None:
        """Warn once per setting whose field names an item has none of (a typo skips every item)."""
        present = list(adapter.field_names())
        for part, names in (("TITLE", self.title_fields), ("BODY", self.body_fields), ("URL", self.url_fields)):
            if part not in self._warned_fields and not any(name in present for name in names):
                self._warned_fields.add(part)
                logger.warning("scrapy-simhash: a %s item has none of the fields SIMHASH_%s_FIELD names (%s); "
                               "its fields: %s", type(adapter.item).__name__, part, ", ".join(names),
                               ", ".join(map(str, present)) or "none")

    def _decide_with_retries(self, batch: list[tuple[Any, str | None, str]]) -> list[Verdict]:
        """The check-and-add of the items queued meanwhile (one transaction), retried on index errors
        with a doubling delay (:func:`.worker_process.decide_with_retries`, on the index thread)."""
        assert self.dedup is not None
        self._apply_fates(if_released=True)  # a copy dropped downstream meanwhile no longer blocks these items

        def retrying(exc: BaseException, attempt: int, delay: float) -> None:
            self.stats.inc_value("simhash/index_retries", len(batch))  # per item, as items see it
            logger.warning("scrapy-simhash: check-and-add failed (%s), retry %d of %d in %.2f s",
                           exc, attempt, self.index_retries, delay)

        return decide_with_retries(self.dedup, batch, self.index_retries, self.index_retry_delay, retrying)

    # -- delivery (scrapy_simhash.scrapy.delivery) --------------------------------------------------------

    def _key(self, item: Any) -> tuple[str, str] | None:
        try:
            adapter = ItemAdapter(item)
        except TypeError:  # not an item ItemAdapter knows
            return None
        url, title = first_field(adapter, self.url_fields), first_field(adapter, self.title_fields)
        return None if url is None and title is None else (str(url), str(title))

    def _item_scraped(self, item: Any, **kwargs: Any) -> None:
        self._delivery.fate(item, "deliver")

    def _item_dropped(self, item: Any, exception: BaseException | None = None, **kwargs: Any) -> None:
        if not isinstance(exception, SimhashDrop):  # our own drops carry no pending entry
            self._item_error(item)

    def _item_error(self, item: Any, **kwargs: Any) -> None:
        self._delivery.fate(item, "release")
        if self._fingerprints is not None:  # its copies may wait: to the index with a call now
            self._fingerprints.nudge()

    def _flush_fates(self) -> None:
        """The delivery flusher (without workers; they write the fates with their calls): record the
        fates that arrived (an error leaves them queued)."""
        try:
            self._apply_fates()
        except (SimhashIndexError, sqlite3.Error) as exc:
            logger.warning("scrapy-simhash: could not record what became of some items yet (%s); tried again "
                           "with the next ones", exc)

    def _apply_fates(self, if_released: bool = False) -> None:
        """Deliver or release the entries whose items' fates arrived (index thread, flusher, or at close)."""
        if self.dedup is None:
            return
        self._count_released(self._delivery.apply(self.dedup.index, if_released=if_released))

    def _count_released(self, released: int) -> None:
        if released:
            self.stats.inc_value("simhash/released", released)
            logger.info("scrapy-simhash: %d item(s) dropped after this pipeline: their entries were released, "
                        "the next copy of their story is admitted", released)

    def _index_failed(self, item: Any, exc: BaseException) -> Any:
        """Apply ``SIMHASH_ON_INDEX_ERROR`` to an item whose check-and-add could not be committed."""
        self.stats.inc_value("simhash/index_error")
        self._index_errors += 1
        reason = f"{type(exc).__name__}: {exc}"
        if self._index_errors == 1 or self._index_errors % 100 == 0:
            logger.error("scrapy-simhash: the index is unusable (%s; retries: up to %d); %d item(s) so far %s",
                         reason, self.index_retries, self._index_errors,
                         "passed on unchecked" if self.on_index_error == "pass" else "dropped")
        if self.on_index_error == "pass":
            self.stats.inc_value("simhash/unchecked")
            return self._flag(item, {"status": "unchecked", "reason": reason})
        if self.on_index_error == "close" and not self._closing:
            self._closing = True
            self._close_spider(f"simhash_index_error: {reason}")
        raise IndexUnavailable(
            f"simhash index unavailable, item dropped unchecked (SIMHASH_ON_INDEX_ERROR={self.on_index_error!r}): "
            f"{reason}"
        )

    def _close_spider(self, reason: str) -> None:
        """Ask the engine to close the spider (``SIMHASH_ON_INDEX_ERROR = "close"``), Scrapy 2.13 to 2.19."""
        engine = self.crawler.engine
        assert engine is not None
        if hasattr(engine, "close_spider_async"):  # Scrapy >= 2.14; close_spider() is deprecated there
            deferred_from_coro(engine.close_spider_async(reason=reason))
        else:
            assert self.crawler.spider is not None
            engine.close_spider(self.crawler.spider, reason)

    def _flag(self, item: Any, verdict: Verdict | dict[str, Any]) -> Any:
        """Put the verdict in the flag field (see :class:`~.fields.FieldWriter`)."""
        if not self._fields.set(item, self.flag_field, flag_value(verdict), "flags"):
            self.stats.inc_value("simhash/flag_field_missing")
        return item
