"""The bundled site (``example_project/site/``), served on 127.0.0.1 for a crawl, and the start that
the example's spiders share: the pages given with ``-a start_url=URL``, else the bundled site's."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: The bundled site, served when no ``start_url`` is given (``NEWS_SITE_DIR`` overrides).
SITE_DIR = Path(__file__).resolve().parents[1] / "site"


class _QuietHandler(SimpleHTTPRequestHandler):
    """Static files, without a stderr line per request (Scrapy already logs every response)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class LocalSite:
    """A directory served over HTTP on 127.0.0.1, on a free port, from a daemon thread."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        """Start serving; return the base URL (``http://127.0.0.1:<port>/``)."""
        handler = partial(_QuietHandler, directory=str(self.directory))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="news-site", daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}/"

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class BundledSiteSpider(scrapy.Spider):
    """Starts from ``start_url`` (URLs separated by commas), else from :attr:`start_page` of the
    bundled site, served for the length of the crawl; each start page goes to :meth:`parse`."""

    #: The bundled page to start from, relative to the site ("": its home page).
    start_page = ""

    def __init__(self, start_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_url = start_url
        self.site: LocalSite | None = None
        self.site_dir: Path = SITE_DIR

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Any:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.site_dir = Path(crawler.settings.get("NEWS_SITE_DIR") or SITE_DIR)
        crawler.signals.connect(spider._stop_site, signal=signals.spider_closed)
        return spider

    async def start(self) -> AsyncIterator[scrapy.Request]:
        if self.start_url:
            urls = [u.strip() for u in self.start_url.split(",") if u.strip()]
        else:
            page = self.site_dir / (self.start_page or "index.html")
            if not page.is_file():
                raise FileNotFoundError(f"bundled page not found: {page}")
            self.site = LocalSite(self.site_dir)
            urls = [self.site.start() + self.start_page]
            logger.info("Serving the bundled site %s at %s", self.site_dir, urls[0])
        for url in urls:
            yield scrapy.Request(url, callback=self.parse, dont_filter=True)

    def _stop_site(self, spider: scrapy.Spider) -> None:
        if self.site is not None:
            self.site.stop()
            self.site = None
