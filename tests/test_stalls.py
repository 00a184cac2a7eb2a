"""Every wait has a bound: a stopped worker, a stopping crawl, an endless field, a crawl faster than
its verdicts.

* A worker that stops answering (``SIGSTOP``) is killed once a call waits ``SIMHASH_WORKER_TIMEOUT``
  seconds; a fresh one takes its items, and the crawl finishes with every item decided once.
* ``SIGTERM`` to a crawl whose worker is stopped ends it within seconds, every item that entered the
  pipeline passed on (checked in the crawl process), no traceback, no process left.
* A body that is an endless iterator (of ``None``, of empty strings) is a counted skip with its reason,
  with and without workers; the items after it are decided.
* Items yielded by ``start()`` as fast as the spider can: the item pipelines never hold more than
  ``SIMHASH_MAX_AWAITING`` items (counted, not timed).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.utils.test import get_crawler

from tests.conftest import ItemsSpider, crawl_settings
from tests.procs import running
from tests.test_workers import items_with_reposts, pipeline_of, record_checks

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc")


class StopTheWorker:
    """A pipeline before the plugin's: at the first item, once the workers are started, stops them."""

    stopped: list[int] = []

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> StopTheWorker:
        return cls(crawler)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        if not self.stopped:
            pool = pipeline_of(self.crawler)._fingerprints
            for started in pool._executor.started:
                started.result(timeout=60)
            self.stopped.extend(pool.pids())
            for pid in self.stopped:
                os.kill(pid, signal.SIGSTOP)
        return item


@pytest_twisted.ensureDeferred
async def test_a_stopped_worker_is_replaced_and_the_crawl_finishes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    items = items_with_reposts(24, seed=11)
    checks = record_checks(monkeypatch)
    monkeypatch.setattr(StopTheWorker, "stopped", [])
    settings = crawl_settings(tmp_path / "i.sqlite3", SIMHASH_WORKERS=1, SIMHASH_WORKER_TIMEOUT=3)
    settings["ITEM_PIPELINES"] = {**settings["ITEM_PIPELINES"], StopTheWorker: 100}
    crawler = get_crawler(ItemsSpider, settings)
    after: list[int] = []

    def passed_on(**kwargs: Any) -> None:
        after[:] = pipeline_of(crawler)._fingerprints.pids()

    crawler.signals.connect(passed_on, signals.item_scraped)
    started = time.monotonic()
    try:
        await crawler.crawl(items=items)
    finally:
        for pid in StopTheWorker.stopped:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
    elapsed = time.monotonic() - started
    stats = crawler.stats.get_stats()
    stopped = StopTheWorker.stopped
    assert len(stopped) == 1
    assert stats.get("item_scraped_count", 0) + stats.get("item_dropped_count", 0) == len(items)
    assert sorted(url for url, *_ in checks) == sorted(it["url"] for it in items)  # each decided once
    assert stats["simhash/workers_died"] >= 1
    assert after and stopped[0] not in after  # a fresh worker decided them
    assert not running(stopped[0])  # the stopped worker was killed
    assert elapsed < 60, elapsed
