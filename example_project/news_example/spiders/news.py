"""The ``news`` spider: list pages → article pages, one item per article.

Without arguments it serves the bundled site (``example_project/site/``) on 127.0.0.1 with a free
port, for the duration of the crawl, and crawls it over real HTTP: nothing leaves the machine.
Point it at your own site with ``-a start_url=URL`` (a list page, or several separated by commas)
and ``-a portal=NAME``, where ``NAME`` picks a selector set from :data:`SELECTORS` or from the
``NEWS_SELECTORS`` setting (which is merged over :data:`SELECTORS`).
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response
from twisted.python.failure import Failure

from news_example.bundled import BundledSiteSpider
from news_example.items import NewsItem

logger = logging.getLogger(__name__)

#: CSS selectors per portal: ``list`` (article links on a list page), ``title``, ``body`` (the element
#: holding the article text: its HTML is passed on as is) and ``published``.
SELECTORS: dict[str, dict[str, str]] = {
    "huaxia": {
        "list": "ul.news-list a::attr(href)",
        "title": "h1.content-title::text",
        "body": "div.left_zw",
        "published": "div.left-t span.pubtime::text",
    },
    "harbor": {
        "list": "section.latest h2 a::attr(href)",
        "title": "article.story h1.headline::text",
        "body": "article.story div.story-body",
        "published": "article.story time::text",
    },
    "juhe": {
        "list": "div.news-flow a.title::attr(href)",
        "title": "div.post_main h1::text",
        "body": "div#endText",
        "published": "div.post_info::text",
    },
    "digest": {
        "list": "ol.digest a::attr(href)",
        "title": "#article h2.art-title::text",
        "body": "#article div.art-content",
        "published": "#article div.art-meta::text",
    },
    # A starting point for other sites: every link of the page, the first <h1>, the <article>.
    "default": {
        "list": "a::attr(href)",
        "title": "h1 ::text",
        "body": "article",
        "published": "time::attr(datetime)",
    },
}


class NewsSpider(BundledSiteSpider):
    """Crawl news portals: list pages → articles → :class:`~news_example.items.NewsItem`.

    Arguments (``-a name=value``): ``start_url`` (list page URLs, comma-separated; default: the
    bundled site), ``portal`` (selector set for ``start_url``; default ``default``), ``sequential``
    (``0``/``1``, overrides the ``NEWS_SEQUENTIAL`` setting).
    """

    name = "news"

    def __init__(self, start_url: str | None = None, portal: str | None = None,
                 sequential: str | None = None, **kwargs: Any) -> None:
        super().__init__(start_url, **kwargs)
        self.portal = portal or "default"
        self._sequential_arg = sequential
        self.selectors: dict[str, dict[str, str]] = dict(SELECTORS)  # with NEWS_SELECTORS, in from_crawler
        self.sequential = True  # NEWS_SEQUENTIAL or the argument, in from_crawler
        self._lists: deque[tuple[str, str]] = deque()  # (url, portal) still to fetch, in order
        self._articles: deque[tuple[str, str]] = deque()
        self._seen: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> NewsSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.selectors = {**SELECTORS, **settings.getdict("NEWS_SELECTORS")}
        spider.sequential = (
            settings.getbool("NEWS_SEQUENTIAL", True)
            if spider._sequential_arg is None
            else spider._sequential_arg.strip().lower() in ("1", "true", "yes", "on")
        )
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(spider._item_done, signal=signal)
        crawler.signals.connect(spider._idle, signal=signals.spider_idle)
        return spider

    # -- start page, list pages and articles -------------------------------------------------

    def parse(self, response: Response, **kwargs: Any) -> Iterable[scrapy.Request]:
        """A page with ``a.portal[data-portal]`` links (the bundled home page) lists portals;
        any other start page is a list page of ``self.portal``."""
        portals = response.css("a.portal[data-portal]")
        if portals:
            for link in portals:
                name = link.attrib["data-portal"]
                self._lists.append((response.urljoin(link.attrib["href"]), name))
            yield from self._release()
        else:
            yield from self.parse_list(response, self.portal)

    def parse_list(self, response: Response, portal: str) -> Iterable[scrapy.Request]:
        """Queue the article links of a list page, in page order."""
        sel = self._selectors(portal)
        links = response.css(sel["list"]).getall()
        if not links:
            logger.warning("No article links on %s with selector %r (portal %s)", response.url, sel["list"], portal)
        for href in links:
            url = response.urljoin(href)
            if url not in self._seen and url.startswith(("http://", "https://")):
                self._seen.add(url)
                self._articles.append((url, portal))
        yield from self._release()

    def parse_article(self, response: Response, portal: str) -> Iterable[NewsItem | scrapy.Request]:
        """One item per article; the body is the HTML of the article element."""
        sel = self._selectors(portal)
        title = _clean(" ".join(response.css(sel["title"]).getall()))
        body = response.css(sel["body"]).get()
        if not title or not body:
            logger.warning("No title/body on %s with the selectors of portal %s: skipped", response.url, portal)
            yield from self._release()  # no item, so no item signal: move on here
            return
        yield NewsItem(
            url=response.url,
            title=title,
            body=body,
            published=_clean(" ".join(response.css(sel["published"]).getall())) or None,
            portal=portal,
        )

    def article_failed(self, failure: Failure) -> Iterable[scrapy.Request]:
        logger.warning("Article download failed: %s", failure.getErrorMessage())
        yield from self._release()

    # -- ordering -------------------------------------------------------------------------------

    def _release(self) -> Iterator[scrapy.Request]:
        """Requests to send now: the next one only when sequential, else everything queued."""
        while self._lists or self._articles:
            yield self._pop()
            if self.sequential:
                return

    def _pop(self) -> scrapy.Request:
        if self._lists:
            url, portal = self._lists.popleft()
            return scrapy.Request(url, callback=self.parse_list, cb_kwargs={"portal": portal})
        url, portal = self._articles.popleft()
        return scrapy.Request(url, callback=self.parse_article, errback=self.article_failed,
                              cb_kwargs={"portal": portal})

    def _item_done(self, **kwargs: Any) -> None:
        """An item left the pipelines (kept, dropped or failed): in sequential mode, fetch the next."""
        if self.sequential:
            for request in self._release():
                self.crawler.engine.crawl(request)

    def _idle(self) -> None:
        """Safety net: if a chain step was lost (a filtered request, a callback without item),
        release the next request instead of closing."""
        requests = list(self._release())
        for request in requests:
            self.crawler.engine.crawl(request)
        if requests:
            raise DontCloseSpider

    def _selectors(self, portal: str) -> dict[str, str]:
        if portal not in self.selectors:
            logger.warning("No selectors for portal %r: using 'default'", portal)
            portal = "default"
        return {**self.selectors["default"], **self.selectors[portal]}


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
