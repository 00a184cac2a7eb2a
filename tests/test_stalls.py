"""Every wait has a bound: a stopped worker, a stopping crawl, an endless field, a crawl faster than
its verdicts.

* A worker that stops answering (``SIGSTOP``) is killed once a call waits ``SIMHASH_WORKER_TIMEOUT``
  seconds; a fresh one takes its items, and the crawl finishes with every item decided once.
* ``SIGTERM`` (once, or twice: Scrapy's forced stop) to a crawl whose worker is stopped ends it within
  seconds, with no traceback and no process left; after one, every item that entered the pipeline
  is passed on (checked in the crawl process) and in the index.
* A field that is an endless iterator (of ``None``, of empty strings, or slow) is a counted skip with
  its reason, with and without workers; the items after it are decided.
* Items yielded by ``start()`` as fast as the spider can: the item pipelines never hold more than
  ``SIMHASH_MAX_AWAITING`` items (counted, not timed), and every item comes out; :class:`Places`
  holds at most its size, in arrival order, and passes on the place of a cancelled waiter.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from scrapy_simhash.text import normalize
from scrapy_simhash.workers.fingerprints import STOPPING_GRACE
from tests.conftest import (
    REPO,
    STORY_EN,
    STORY_ZH,
    STORY_ZH_2,
    ItemsSpider,
    crawl_settings,
    repost_with_suffix,
    run_crawl,
)
from tests.procs import descendants, running
from tests.test_workers import (
    faults,
    items_with_reposts,
    lines,
    pipeline_of,
    record_checks,
    start_crawl,
    wait_for,
    workers_of,
)

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
            assert pool.wait_ready(60)
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


@pytest.mark.parametrize("signals_sent", [1, 2], ids=["sigterm", "sigterm-twice"])
def test_sigterm_with_a_stopped_worker_ends_the_crawl_in_seconds(tmp_path: Path, signals_sent: int) -> None:
    proc, paths = start_crawl(tmp_path, script=False)
    stopped: set[int] = set()
    try:
        wait_for(lambda: lines(paths["kept"]), 60, "the first item passed on")
        below = descendants(proc.pid)
        stopped = workers_of(proc)
        assert stopped, "no worker process"
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.5)  # items reach the stopped worker
        signalled = time.monotonic()
        for _ in range(signals_sent):
            os.kill(proc.pid, signal.SIGTERM)
            time.sleep(0.2)
        status = proc.wait(30)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in stopped:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
    log = paths["log"].read_text("utf-8")
    assert took < STOPPING_GRACE + 10, (took, log[-3000:])
    assert "Traceback" not in log, log[-3000:]
    if signals_sent == 1:  # the crawl waits for its calls out: the watchdog kills the stopped worker
        assert "did not answer within 3 s" in log, log[-3000:]
    else:  # a forced stop never closes the pipeline: the stopped worker is killed at the exit
        assert "fingerprint worker(s) killed" in log, log[-3000:]
    if signals_sent == 1:  # a graceful stop: every item that entered the pipeline came out, in the index
        assert status == 0, log[-3000:]
        entered, kept = lines(paths["entered"]), lines(paths["kept"])
        assert 0 < len(kept) < 200
        assert sorted(kept) == sorted(entered), "an item that entered the pipeline did not come out"
        assert sorted(faults.index_urls(paths["index.sqlite3"])) == sorted(kept)
    wait_for(lambda: not any(running(p) for p in below), 10, "the crawl's processes to end")


def slow_nones() -> Iterator[None]:
    while True:
        time.sleep(0.01)
        yield None


@pytest.mark.parametrize("workers", [0, 1])
@pytest_twisted.ensureDeferred
async def test_an_endless_body_is_a_counted_skip_and_the_items_after_it_are_decided(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    monkeypatch.setattr(normalize, "MAX_READ_SECONDS", 2.0)  # the slow iterator's bound, in this (the crawl) process
    items = [
        {"title": STORY_ZH["title"], "body": itertools.repeat(None), "url": "https://t.example/nones"},
        {"title": STORY_EN["title"], "body": itertools.repeat(""), "url": "https://t.example/empties"},
        {"title": itertools.repeat(None), "body": STORY_ZH_2["body"], "url": "https://t.example/title"},
        {"title": STORY_ZH_2["title"], "body": slow_nones(), "url": "https://t.example/slow"},
        dict(STORY_ZH, url="https://t.example/a"),
        dict(repost_with_suffix(STORY_ZH), url="https://t.example/b"),
    ]
    started = time.monotonic()
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3", SIMHASH_WORKERS=workers), items)
    assert time.monotonic() - started < 30
    stats = crawler.stats.get_stats()
    assert stats["simhash/skipped/bad_input"] == 4
    assert stats["simhash/new"] == 1 and stats["item_dropped_count"] == 1
    assert stats["item_scraped_count"] == 5  # the four unreadable ones passed on unchecked
    warnings = {r.getMessage().split(" (")[0].rsplit("/", 1)[1]: r.getMessage() for r in caplog.records
                if "cannot read" in r.getMessage()}
    assert sorted(warnings) == ["empties", "nones", "slow", "title"], warnings
    assert "field 'body'" in warnings["nones"] and "endless iterator" in warnings["nones"]
    assert "field 'title'" in warnings["title"] and "endless iterator" in warnings["title"]
    assert "took more than 2 s to read" in warnings["slow"]
    assert "endless iterator" in warnings["empties"] or "took more than 2 s" in warnings["empties"]


class Unpaced(ItemsSpider):
    """Yields its items from ``start()``, as fast as the engine takes them."""

    async def start(self) -> AsyncIterator[Any]:
        for item in self.items_to_yield:
            yield dict(item)


class Held:
    """A pipeline before the plugin's: the most items the item pipelines held at once (Scrapy's count,
    this one included) and the most that had entered the plugin's pipeline and not come out."""

    made: list[Held] = []

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.most = self.in_plugin = self.most_in_plugin = 0
        self.made.append(self)
        crawler.signals.connect(self.out, signals.item_scraped)
        crawler.signals.connect(self.out, signals.item_dropped)

    @classmethod
    def from_crawler(cls, crawler: Any) -> Held:
        return cls(crawler)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        self.most = max(self.most, self.crawler.engine.scraper.slot.itemproc_size)
        self.in_plugin += 1
        self.most_in_plugin = max(self.most_in_plugin, self.in_plugin)
        return item

    def out(self, **kwargs: Any) -> None:
        self.in_plugin -= 1


@pytest.mark.parametrize("reactor", [None, "twisted.internet.epollreactor.EPollReactor"],
                         ids=["asyncio", "default-reactor"])
def test_an_unpaced_start_holds_at_most_max_awaiting_items(tmp_path: Path, reactor: str | None) -> None:
    """Run in a subprocess: a reactor of its own (the suite's is asyncio's)."""
    script = tmp_path / "crawl.py"
    script.write_text(UNPACED_SCRIPT, "utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "i.sqlite3"), reactor or ""],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["out"] == report["items"] == 600
    assert report["new"] > 0
    assert report["held"] > 1  # items did queue up …
    assert report["held"] <= 25 and report["in_plugin"] <= 25, report  # … never more than SIMHASH_MAX_AWAITING


UNPACED_SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    from scrapy.crawler import CrawlerProcess

    from tests.conftest import STORY_EN, STORY_ZH, STORY_ZH_2, crawl_settings
    from tests.test_stalls import Held, Unpaced

    stories = [STORY_ZH, STORY_ZH_2, STORY_EN]
    items = [{"title": f"{s['title']} {n}", "body": s["body"] + f" 第{n}号", "url": f"https://t.example/{n}"}
             for n in range(200) for s in stories]
    settings = crawl_settings(sys.argv[1], SIMHASH_WORKERS=0, SIMHASH_MAX_AWAITING=25, LOG_LEVEL="WARNING",
                              SIMHASH_SUMMARY=False)
    settings["ITEM_PIPELINES"] = {**settings["ITEM_PIPELINES"], Held: 100}
    if sys.argv[2]:
        settings["TWISTED_REACTOR"] = sys.argv[2]
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Unpaced)
    process.crawl(crawler, items=items)
    process.start()
    held = Held.made[-1]
    stats = crawler.stats.get_stats()
    print(json.dumps({"items": len(items), "held": held.most, "in_plugin": held.most_in_plugin,
                      "new": stats.get("simhash/new", 0),
                      "out": stats.get("item_scraped_count", 0) + stats.get("item_dropped_count", 0)}))
    """
)


@pytest_twisted.ensureDeferred
async def test_places_hold_at_most_their_size_in_arrival_order_and_pass_on_a_cancelled_turn() -> None:
    from scrapy_simhash.scrapy.awaiting import Places

    async def main() -> None:
        loop = asyncio.get_running_loop()
        places, inside, order = Places(2), [0], []
        gates = [loop.create_future() for _ in range(6)]

        async def hold(n: int) -> None:
            async with places:
                order.append(n)
                inside[0] += 1
                assert inside[0] <= 2
                await gates[n]
                inside[0] -= 1
            if n == 1:  # its place was just handed to 4, which is cancelled before it takes it up
                tasks[4].cancel()

        tasks = [loop.create_task(hold(n)) for n in range(6)]
        await asyncio.sleep(0.01)
        assert order == [0, 1] and places.held == 2
        tasks[2].cancel()  # a waiter that gives up before its turn
        gates[0].set_result(None)
        await asyncio.sleep(0.01)
        assert order == [0, 1, 3]
        gates[1].set_result(None)  # 1 leaves: 4 gets its place, gives it up, and 5 gets it
        await asyncio.sleep(0.01)
        assert order == [0, 1, 3, 5]
        for gate in gates:
            if not gate.done():
                gate.set_result(None)
        await asyncio.gather(*tasks, return_exceptions=True)
        assert places.held == 0 and places.most == 2

    await Deferred.fromFuture(asyncio.ensure_future(main()))
