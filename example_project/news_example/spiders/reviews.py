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
from collections.abc import Iterable
from typing import Any

from scrapy.crawler import Crawler
from scrapy.http import Response

from news_example.bundled import BundledSiteSpider
from news_example.items import ReviewItem

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


class ReviewsSpider(BundledSiteSpider):
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

    start_page = PRODUCT_PAGE

    def __init__(self, start_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(start_url, **kwargs)
        self.selectors: dict[str, str] = dict(SELECTORS)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ReviewsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        assert isinstance(spider, ReviewsSpider)
        spider.selectors = {**SELECTORS, **crawler.settings.getdict("REVIEW_SELECTORS")}
        return spider

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


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
