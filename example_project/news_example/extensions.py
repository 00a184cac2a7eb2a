"""``DedupSummary``: prints what scrapy-simhash did, when the crawl ends."""

from __future__ import annotations

from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.utils.project import data_path


class DedupSummary:
    """When the crawl is over, print (to stdout, after Scrapy's own stats dump, so it is the last thing a
    user sees) items kept, dropped by each tier, flagged, and the index location.

    The numbers are Scrapy's stats: ``item_scraped_count`` (items that passed every pipeline, i.e.
    went to the feed) and the ``simhash/*`` counters of the plugin; the location is the plugin's
    ``simhash/index`` stat, else ``SIMHASH_INDEX_URL``, else the default ``.scrapy/simhash/``.
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DedupSummary:
        ext = cls(crawler)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def summary(self, spider: Spider) -> str:
        """The summary text (also handy in tests)."""
        stats = self.crawler.stats
        get = stats.get_value

        def n(key: str) -> int:
            return int(get(key, 0) or 0)

        location = (get("simhash/index") or self.crawler.settings.get("SIMHASH_INDEX_URL")
                    or f"{data_path('simhash')} (default)")
        lines = [
            f"scrapy-simhash summary for spider {spider.name!r}:",
            *(f"  {label + ':':<30}{n(key)}" for label, key in (
                ("kept (passed to the feed)", "item_scraped_count"),
                ("dropped by the title tier", "simhash/dropped/title"),
                ("dropped by the body tier", "simhash/dropped/body"),
                ("dropped by the sentence tier", "simhash/dropped/sentence"),
                ("flagged for review", "simhash/flagged"),
            )),
        ]
        if n("simhash/skipped/no_text"):
            lines.append(f"  {'skipped (no text):':<30}{n('simhash/skipped/no_text')}")
        entries = get("simhash/final")
        lines.append(f"  index: {location}" + (f" ({entries} stories)" if entries is not None else ""))
        return "\n".join(lines)

    def spider_closed(self, spider: Spider, reason: Any = None) -> None:
        self._text = self.summary(spider)  # the stats are final here; the dump comes after

    def engine_stopped(self) -> None:
        text = getattr(self, "_text", None)
        if text:
            print(text, flush=True)
