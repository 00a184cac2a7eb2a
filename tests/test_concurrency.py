"""jieba's CPU time must not stall downloading, and two copies of one story in flight cannot both pass.

A real crawl of a local HTTP server on 127.0.0.1: pages carry long bodies, so fingerprinting an item
takes a while. While an item is inside the simhash pipeline, other responses keep arriving and the
reactor keeps ticking: fingerprinting runs on a worker thread. No absolute time is asserted; the
reactor's longest pause is compared with the time one fingerprint takes, both measured in this run.
"""

from __future__ import annotations

import gc
import itertools
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import pytest_twisted
from scrapy import Request, Spider, signals
from scrapy.utils.test import get_crawler

from scrapy_simhash import Fingerprinter
from tests.conftest import crawl_settings

PAGES = 12


def text(seed: int, chars: int) -> str:
    """Distinct filler Chinese text: random common characters in short sentences."""
    rng = random.Random(seed)
    out = []
    while sum(map(len, out)) < chars:
        out.append("".join(chr(rng.randrange(0x4E00, 0x9000)) for _ in range(rng.randrange(8, 20))) + "。")
    return "".join(out)


def article(n: int, chars: int = 40_000) -> str:
    return text(n, chars)


def page(n: int) -> bytes:
    # Pages 0 and 1 carry the same story: they are in flight together.
    story = 0 if n < 2 else n
    return (f"<html><head><title>{text(1000 + story, 16)}</title></head>"
            f"<body><div id='a'>{article(story)}</div></body></html>").encode()


class Handler(BaseHTTPRequestHandler):
    pages: dict[int, bytes] = {}

    def do_GET(self) -> None:
        n = int(self.path.rsplit("/", 1)[-1])
        time.sleep(0.1 * (n % 3))  # spread the responses out over the crawl
        data = self.pages[n]  # made before the crawl: the server's threads share this process's GIL
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    Handler.pages = {n: page(n) for n in range(PAGES)}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


class PagesSpider(Spider):
    name = "pages"

    def __init__(self, base: str = "", **kwargs):
        super().__init__(**kwargs)
        self.base = base
        self.collected = []

    async def start(self):
        for request in self.start_requests():
            yield request

    def start_requests(self):
        for n in range(PAGES):
            yield Request(f"{self.base}/page/{n}", dont_filter=True)

    def parse(self, response):
        # No HTML parsing here: the reactor's pauses measured below must be the pipeline's, not the
        # spider's (the pipeline parses the page itself, on its worker thread).
        page = response.text
        yield {"url": response.url, "title": page[page.index("<title>") + 7:page.index("</title>")], "body": page}


class EntryRecorder:
    """Runs just before the simhash pipeline and notes when each item enters it."""

    entered: dict[str, float]

    @classmethod
    def from_crawler(cls, crawler):
        obj = cls()
        obj.entered = crawler.entered = {}
        return obj

    def process_item(self, item, spider=None):
        self.entered[item["url"]] = time.monotonic()
        return item


@pytest_twisted.ensureDeferred
async def test_downloads_flow_while_items_are_fingerprinted(tmp_path, server):
    from twisted.internet import task

    # What one fingerprint of such a page costs here, now (the yardstick for the reactor's pauses).
    fp = Fingerprinter()
    started = time.monotonic()
    fp.body(f"<div>{article(99)}</div>")
    one_fingerprint = time.monotonic() - started

    settings = crawl_settings(tmp_path / "i.sqlite3", CONCURRENT_REQUESTS=4, ITEM_PIPELINES={EntryRecorder: 100})
    crawler = get_crawler(PagesSpider, settings)
    received: list[float] = []
    left: dict[str, float] = {}

    def on_response(response, **kwargs):
        received.append(time.monotonic())

    def on_item_left(item, **kwargs):
        left[item["url"]] = time.monotonic()

    # (handlers are held weakly by Scrapy's signal manager: keep them in local names)
    crawler.signals.connect(on_response, signals.response_received)
    crawler.signals.connect(on_item_left, signals.item_scraped)
    crawler.signals.connect(on_item_left, signals.item_dropped)
    ticks: list[float] = []
    loop = task.LoopingCall(lambda: ticks.append(time.monotonic()))
    loop.start(0.005)
    # The pauses measured are the pipeline's, not the interpreter's: a full cyclic garbage collection
    # of this test process's heap (pytest, every module the suite imported) holds the GIL for 50-90 ms
    # whatever runs, so the collector waits until the crawl is over (the pipeline itself freezes what
    # is alive at open, see SimhashPipeline.open_spider).
    gc.disable()
    try:
        await crawler.crawl(base=server)
    finally:
        gc.enable()
        loop.stop()

    assert crawler.stats.get_value("simhash/new") == PAGES - 1
    # The two copies of one story that were in flight together: exactly one passed.
    assert crawler.stats.get_value("simhash/dropped/title") == 1
    # Responses arrived while an item was inside the simhash pipeline.
    entered = crawler.entered
    overlapping = sum(
        any(entered[url] < t < left[url] for url in entered if url in left) for t in received
    )
    assert overlapping >= 1, "no response was received while an item was being fingerprinted"
    # While items were in the pipeline, the reactor never paused for half as long as one fingerprint
    # takes (the crawler's own start-up, before any item exists, is not what is measured here).
    first_in, last_out = min(entered.values()), max(left.values())
    gaps = [b - a for a, b in itertools.pairwise(ticks) if b > first_in and a < last_out]
    assert gaps
    assert max(gaps) < 0.5 * one_fingerprint, (max(gaps), one_fingerprint)
