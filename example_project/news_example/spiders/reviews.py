"""The ``reviews`` spider: a product page → one item per review, deduplicated in the short mode.

Reviews, comments and replies are short single texts: no title, one text field and an author. The
plugin's short mode is meant for them (set in :attr:`ReviewsSpider.custom_settings`): it compares
the texts character by character once their fingerprints come close, strips the symbols spammers
insert, and keeps their fingerprints apart from the articles of the ``news`` spider in the same
project.

Without arguments it serves the bundled site (``example_project/site/``) on 127.0.0.1, like the
``news`` spider, and reads ``shop/product.html``. Point it at your own product pages with
``-a start_url=URL`` (several separated by commas) and the ``REVIEW_SELECTORS`` setting.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from news_example.items import ReviewItem
from news_example.spiders.news import SITE_DIR, LocalSite

logger = logging.getLogger(__name__)

#: The product page of the bundled site.
PRODUCT_PAGE = "shop/product.html"

#: CSS selectors of the bundled page: one element per review, and inside it the text, author and date.
SELECTORS: dict[str, str] = {
    "review": "li.review",
    "text": "p.review-text ::text",
    "author": "span.author::text",
    "posted": "time::attr(datetime)",
}


class ReviewsSpider(scrapy.Spider):
    """Crawl product pages: every review becomes a :class:`~news_example.items.ReviewItem`.

    Arguments (``-a name=value``): ``start_url`` (product page URLs, comma-separated; default: the
    bundled page).
    """

    name = "reviews"

    custom_settings = {
        # The short mode: 32-bit fingerprints of the text, a wider distance confirmed by edit
        # distance, spam symbols stripped, a namespace of its own.
        "SIMHASH_PROFILE": "short",
        # One review through the pipeline at a time, in page order: the first copy always reaches
        # the index first (as NEWS_SEQUENTIAL does for the news spider).
        "CONCURRENT_ITEMS": 1,
        "FEEDS": {"reviews.jsonl": {"format": "jsonlines", "encoding": "utf8", "overwrite": True}},
    }

    def __init__(self, start_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url
        self.site: LocalSite | None = None
        self.selectors: dict[str, str] = dict(SELECTORS)
        self.site_dir: Path = SITE_DIR

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ReviewsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        assert isinstance(spider, ReviewsSpider)
        spider.selectors = {**SELECTORS, **crawler.settings.getdict("REVIEW_SELECTORS")}
        spider.site_dir = Path(crawler.settings.get("NEWS_SITE_DIR") or SITE_DIR)
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for request in self._start():
            yield request

    def start_requests(self) -> Iterator[scrapy.Request]:  # Scrapy < 2.13 calls this instead of start()
        yield from self._start()

    def _start(self) -> Iterator[scrapy.Request]:
        if self.start_url:
            urls = [u.strip() for u in self.start_url.split(",") if u.strip()]
        else:
            if not (self.site_dir / PRODUCT_PAGE).is_file():
                raise FileNotFoundError(f"bundled product page not found: {self.site_dir / PRODUCT_PAGE}")
            self.site = LocalSite(self.site_dir)
            urls = [self.site.start() + PRODUCT_PAGE]
            logger.info("Serving the bundled product page at %s", urls[0])
        for url in urls:
            yield scrapy.Request(url, callback=self.parse, dont_filter=True)

    def parse(self, response: Response, **kwargs: Any) -> Iterable[ReviewItem]:
        """One item per review, in page order; its URL is the page's with the review's anchor."""
        sel = self.selectors
        reviews = response.css(sel["review"])
        if not reviews:
            logger.warning("No reviews on %s with selector %r", response.url, sel["review"])
        for n, review in enumerate(reviews, 1):
            text = _clean(" ".join(review.css(sel["text"]).getall()))
            if not text:
                continue
            anchor = review.attrib.get("id") or f"review-{n}"
            yield ReviewItem(
                url=f"{response.url.split('#')[0]}#{anchor}",
                text=text,
                author=_clean(" ".join(review.css(sel["author"]).getall())) or None,
                posted=review.css(sel["posted"]).get(),
            )

    def _closed(self, spider: scrapy.Spider) -> None:
        if self.site is not None:
            self.site.stop()
            self.site = None


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
