"""``DedupSummary``: what scrapy-simhash did, printed when the crawl ends.

The :class:`~scrapy_simhash.Addon` adds it (``SIMHASH_SUMMARY = False`` turns it off); with
``ITEM_PIPELINES`` instead, add it yourself: ``EXTENSIONS = {"scrapy_simhash.DedupSummary": 500}``.
"""

from __future__ import annotations

from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from ..settings import SettingError, effective_settings, value
from .refusal import refuse_to_start
from .short import own_key


class DedupSummary:
    """When the crawl is over, print (to stdout, after Scrapy's own stats dump, so it is the last thing a
    user sees) items kept, dropped by each tier, flagged, skipped, index errors and the index location.

    The numbers are Scrapy's stats: ``item_scraped_count`` (items that passed every pipeline, i.e.
    went to the feed) and the ``simhash/*`` counters of the pipeline; the location is its
    ``simhash/index`` stat. Nothing is printed for a crawl the pipeline did not run in.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._text: str | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupSummary:
        try:
            on = value(effective_settings(crawler.settings, None), "SIMHASH_SUMMARY")
        except SettingError as exc:
            raise refuse_to_start(exc) from None
        if not on:
            raise NotConfigured("SIMHASH_SUMMARY is False")
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def summary(self, spider: Spider) -> str | None:
        """The summary text, or None when the pipeline did not open an index."""
        stats = self.crawler.stats.get_stats()

        def get(key: str, default: Any = None) -> Any:
            return stats.get(own_key(stats, key), default)

        def n(key: str) -> int:
            return int(get(key, 0) or 0)

        location = get("simhash/index")
        if location is None:
            return None

        rows = [
            ("kept (passed to the feed)", "item_scraped_count", True),
            ("dropped by the title tier", "simhash/dropped/title", True),
            ("dropped by the body tier", "simhash/dropped/body", True),
            ("dropped by the sentence tier", "simhash/dropped/sentence", True),
            ("flagged for review", "simhash/flagged", True),
            ("dropped by the author check", "simhash/dropped/author", False),
            ("dropped as spam", "simhash/dropped/spam", False),
            ("matched a spam pattern", "simhash/spam", False),
            ("skipped (no text)", "simhash/skipped/no_text", False),
            ("skipped (unreadable fields)", "simhash/skipped/bad_input", False),
            ("skipped (opted out)", "simhash/skipped/opt_out", False),
            ("index errors", "simhash/index_error", False),
        ]
        lines = [f"scrapy-simhash summary for spider {spider.name!r}:"]
        lines += [f"  {label + ':':<30}{n(key)}" for label, key, always in rows if always or n(key)]
        entries = get("simhash/final")
        lines.append(f"  index: {location}" + (f" ({entries} stories)" if entries is not None else ""))
        return "\n".join(lines)

    def spider_closed(self, spider: Spider, reason: Any = None) -> None:
        self._text = self.summary(spider)  # the stats are final here; the dump comes after

    def engine_stopped(self) -> None:
        if self._text:
            print(self._text, flush=True)
