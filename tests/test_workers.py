"""The fingerprint worker processes under real crawls: same decisions, nothing lost, no orphan.

* Equality: a real crawl with ``SIMHASH_WORKERS = 1`` (real articles, their reposts, non-default
  engine settings) is recorded at the index, in the order items were checked (their fingerprints'
  order of completion); the single-process engine, fed the same items in that order, fingerprints
  and decides each one the same.
* A worker SIGKILLed mid-crawl: every item still reaches a verdict, exactly one check each, with
  the same decisions; a fresh worker took over. Workers that cannot start at all: the items are
  fingerprinted in the crawl process, the same.
* Processes: none is left after a crawl; ``SIGTERM`` to a crawl process (under Twisted's default
  reactor) and ``SIGINT`` to its whole process group (Ctrl-C) finish the items in flight, leave every
  item passed on in the index, and leave no worker behind; ``SIGKILL`` of a crawl process leaves no
  orphan either (the workers notice and exit).

The rest of the suite crawls with ``SIMHASH_WORKERS = 0`` (``tests/conftest.py``): spawning and
warming a worker costs ~1 s of CPU per crawl. ``SIMHASH_TEST_WORKERS=1`` runs it with the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.settings import Settings

from scrapy_simhash import Deduplicator, Fingerprinter, SimhashPipeline
from scrapy_simhash.settings import effective_settings, engine_options
from scrapy_simhash.workers import fingerprints as workers
from scrapy_simhash.workers import process as worker_process
from scrapy_simhash.workers.fingerprints import MAX_BATCH, MAX_RESTARTS, FingerprintPool
from tests.conftest import (
    REPO,
    STORY_EN,
    STORY_ZH,
    STORY_ZH_2,
    ItemsSpider,
    crawl_settings,
    repost_with_new_title,
    repost_with_suffix,
)
from tests.procs import children, cmdline, descendants, running

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads child processes from /proc")

sys.path.insert(0, str(REPO / "benchmarks"))
import faults  # noqa: E402

# Settings that change fingerprints: a worker that did not get them would fingerprint otherwise.
ENGINE = {"SIMHASH_WORKERS": 1, "SIMHASH_TOP_K": 48, "SIMHASH_STOP_WORDS": ["记者", "reuters"],
          "SIMHASH_TITLE_PATTERNS": [r"\s*-\s*网易新闻$"]}


class Markup(str):
    """A str subclass (as some HTML libraries return): not plain data, fingerprinted in the crawl process."""


def items_with_reposts(n: int, seed: int) -> list[dict[str, Any]]:
    """Real articles (the corpus, else the test stories) with reposts of half of them, distinct URLs."""
    rng = random.Random(seed)
    if faults.corpus_available():
        items = faults.with_reposts(faults.load_articles(n), 0.5, rng)
    else:
        stories = [STORY_ZH, STORY_ZH_2, STORY_EN]
        items = [*stories, *(repost_with_suffix(s) for s in stories),
                 repost_with_new_title(STORY_ZH, "地铁新线开通 市民出行更方便")]
    return [{"title": it["title"], "body": it["body"], "url": it.get("url") or f"https://t.example/{k}"}
            for k, it in enumerate(items)]


def record_checks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str | None, Any, Any]]:
    """Every check-and-add of the crawl (in a worker or in this process), in the order the answers
    came, which is the order of the index with one worker: (url, fingerprints, verdict)."""
    checks: list[tuple[str | None, Any, Any]] = []
    check = SimhashPipeline._check

    def answered(url: str | None, done: Any) -> None:
        if not done.exception():
            checks.append((url, *done.result()))

    def recording(self: SimhashPipeline, title: Any, body: Any, url: str | None) -> Any:
        future = check(self, title, body, url)
        future.add_done_callback(partial(answered, url))
        return future

    monkeypatch.setattr(SimhashPipeline, "_check", recording)
    return checks


def count_in_process(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Titles of the items fingerprinted in this (the crawl) process."""
    seen: list[str] = []
    fingerprint = Deduplicator.fingerprint

    def counting(self: Deduplicator, title: Any, body: Any) -> Any:
        seen.append(str(title))
        return fingerprint(self, title, body)

    monkeypatch.setattr(Deduplicator, "fingerprint", counting)
    return seen


def verdict_key(v: Any) -> tuple[Any, ...]:
    return (v.status, v.tier, v.distance, v.original.url if v.original else None)


def assert_single_process_agrees(checks: list[tuple[str | None, Any, Any]], items: list[dict[str, Any]],
                                 settings: dict[str, Any], index: Path) -> None:
    """The engine in this process, fed the items in the order the crawl checked them, fingerprints and
    decides each one as the crawl did."""
    by_url = {it["url"]: it for it in items}
    options = engine_options(effective_settings(Settings(settings), None))
    with Deduplicator.open(f"sqlite:///{index}", **options) as dedup:
        for url, fps, verdict in list(checks):  # (the replay's own checks are recorded too)
            item = by_url[url]
            assert dedup.fingerprinter.fingerprint(item["title"], item["body"]) == fps, url
            assert verdict_key(dedup.decide(fps, url)) == verdict_key(verdict), url


def pipeline_of(crawler: Any) -> Any:
    return next(mw for mw in crawler.engine.scraper.itemproc.middlewares if hasattr(mw, "_fingerprints"))


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
    return result


# -- in-process crawls ----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_the_pool_decides_as_the_single_process_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = items_with_reposts(40, seed=3)
    odd = [{"title": Markup(items[0]["title"]), "body": items[0]["body"], "url": "https://t.example/markup"},
           {"title": 42, "body": items[1]["body"], "url": "https://t.example/number"},  # unreadable: bad input
           {"title": [STORY_EN["title"]], "body": STORY_EN["body"].encode(), "url": "https://t.example/bytes"}]
    items += odd
    before = children()
    checks = record_checks(monkeypatch)
    in_process = count_in_process(monkeypatch)
    settings = crawl_settings(tmp_path / "i.sqlite3", **ENGINE)
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(ItemsSpider, settings)
    seen_workers: list[int] = []

    def opened(spider: Any) -> None:
        seen_workers.extend(pipeline_of(crawler)._fingerprints.pids())

    crawler.signals.connect(opened, signals.spider_opened)
    await crawler.crawl(items=items)

    stats = crawler.stats.get_stats()
    assert seen_workers, "the crawl had no worker process"
    assert stats["simhash/skipped/bad_input"] == 1
    assert stats.get("simhash/dropped/title", 0) + stats.get("simhash/dropped/body", 0) > 0  # reposts were caught
    assert sorted(in_process) == sorted(str(it["title"]) for it in odd[:2])  # the rest was fingerprinted by workers
    assert sorted(url for url, *_ in checks) == sorted(it["url"] for it in items if it["title"] != 42)
    assert_single_process_agrees(checks, items, settings, tmp_path / "replay.sqlite3")
    assert children() <= before, "a worker outlived the crawl"
    assert not any(running(pid) for pid in seen_workers)


@pytest_twisted.ensureDeferred
async def test_a_worker_killed_mid_crawl_loses_no_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = items_with_reposts(24, seed=5)
    for it in items:  # longer bodies: the items queue up in the pool while the first ones leave it
        it["body"] = "\n".join([it["body"]] * 8)
    checks = record_checks(monkeypatch)
    settings = crawl_settings(tmp_path / "i.sqlite3", **ENGINE)
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(ItemsSpider, settings)
    killed: list[int] = []
    after: list[int] = []

    def first_out(item: Any, **kwargs: Any) -> None:
        pool = pipeline_of(crawler)._fingerprints
        if not killed:
            killed.extend(pool.pids())
            os.kill(killed[0], signal.SIGKILL)
        else:
            after[:] = pool.pids()

    crawler.signals.connect(first_out, signals.item_scraped)
    crawler.signals.connect(first_out, signals.item_dropped)
    await crawler.crawl(items=items)

    stats = crawler.stats.get_stats()
    assert len(killed) == 1 and stats["simhash/workers_died"] == 1
    assert after and killed[0] not in after  # a fresh worker fingerprinted the rest
    assert stats.get("item_scraped_count", 0) + stats.get("item_dropped_count", 0) == len(items)
    urls = [url for url, *_ in checks]
    assert sorted(urls) == sorted(it["url"] for it in items)  # every item checked, none twice
    assert_single_process_agrees(checks, items, settings, tmp_path / "replay.sqlite3")
    assert not any(running(pid) for pid in killed + after)


def check_then_die(items: list[Any], fates: Any = ([], [])) -> Any:
    """In a worker: check a call's items (committed), then, the first time in the test (its marker
    file), die before answering."""
    answer = worker_process._check_many(items, fates)
    try:
        Path(os.environ["SIMHASH_TEST_DIE_MARKER"]).touch(exist_ok=False)
    except FileExistsError:
        return answer
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


@pytest_twisted.ensureDeferred
async def test_a_worker_killed_between_its_commit_and_its_answer_checks_no_item_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The items of the call the dead worker had committed are sent again with their request ids:
    each gets the answer it was given (a new item its own entry, not itself as its duplicate)."""
    items = items_with_reposts(24, seed=7)
    marker = tmp_path / "died"
    monkeypatch.setenv("SIMHASH_TEST_DIE_MARKER", str(marker))  # the workers are spawned with it
    checks = record_checks(monkeypatch)
    settings = crawl_settings(tmp_path / "i.sqlite3", **ENGINE)
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(ItemsSpider, settings)
    crawler.signals.connect(lambda spider: setattr(pipeline_of(crawler)._fingerprints, "_call", check_then_die),
                            signals.spider_opened, weak=False)
    await crawler.crawl(items=items)

    stats = crawler.stats.get_stats()
    assert marker.exists() and stats["simhash/workers_died"] == 1
    assert stats.get("item_scraped_count", 0) + stats.get("item_dropped_count", 0) == len(items)
    assert sorted(url for url, *_ in checks) == sorted(it["url"] for it in items)  # one answer each
    assert not [url for url, _, v in checks if v.original is not None and v.original.url == url]
    new = [url for url, _, v in checks if v.status == "new"]
    assert sorted(faults.index_urls(tmp_path / "i.sqlite3")) == sorted(new)  # one entry each
    assert_single_process_agrees(checks, items, settings, tmp_path / "replay.sqlite3")


@pytest_twisted.ensureDeferred
async def test_workers_check_against_a_redis_index_as_the_single_process_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker opens its own connection to the crawl's Redis index: same decisions, its entries
    the crawl's (pending under the crawl process's owner, delivered at the end)."""
    from tests.test_index_protocol import raw_redis, redis_server_url, with_prefix

    prefix = f"workers-{os.urandom(6).hex()}"
    url = with_prefix(redis_server_url(), prefix)
    items = items_with_reposts(24, seed=11)
    checks = record_checks(monkeypatch)
    settings = {**crawl_settings(tmp_path / "unused.sqlite3", **ENGINE), "SIMHASH_INDEX_URL": url}
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(ItemsSpider, settings)
    try:
        await crawler.crawl(items=items)
        stats = crawler.stats.get_stats()
        assert stats["simhash/workers_died"] == 0
        assert sorted(u for u, *_ in checks) == sorted(it["url"] for it in items)
        new = sum(v.status == "new" for _, _, v in checks)
        assert 0 < new < len(items) and stats["simhash/final"] == new
        assert_single_process_agrees(checks, items, settings, tmp_path / "replay.sqlite3")
        client = raw_redis(redis_server_url())
        assert not [k for k in client.scan_iter(f"{prefix}*") if ":pending:" in k]  # every entry delivered
    finally:
        client = raw_redis(redis_server_url())
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)


def test_items_that_queue_up_go_to_a_worker_together() -> None:
    """Items submitted while the worker is busy (here: still starting) go in calls of up to
    MAX_BATCH, and each gets its own fingerprints."""
    here = Fingerprinter()
    pool = FingerprintPool(1, {}, here.fingerprint)
    sizes: list[int] = []
    send = pool._send

    def counted(route: Any, batch: list[Any]) -> None:
        sizes.append(len(batch))
        send(route, batch)

    pool._send = counted  # type: ignore[method-assign]
    stories = [STORY_ZH, STORY_ZH_2, STORY_EN] * 12
    try:
        futures = [pool.submit(s["title"], s["body"]) for s in stories]
        got = [f.result(timeout=120) for f in futures]
    finally:
        pool.shutdown()
    assert got == [here.fingerprint(s["title"], s["body"]) for s in stories]
    assert pool.calls == len(sizes) <= len(stories) / 4, sizes
    assert sum(sizes) == len(stories) and max(sizes) <= MAX_BATCH


async def answered(future: Any) -> Any:
    """A worker's answer awaited in a test coroutine run by the reactor (on its asyncio loop)."""
    from twisted.internet.defer import Deferred

    return await Deferred.fromFuture(asyncio.wrap_future(future))


@pytest_twisted.ensureDeferred
async def test_a_lone_item_goes_at_once_and_items_under_load_go_together() -> None:
    """On the loop that submits (the reactor's), an item that finds the worker idle is sent in the
    submit itself, alone: no batch delay (counted, not timed). Items that arrive while the worker has
    IN_FLIGHT calls out wait, and go together in one call as soon as one comes back."""
    here = Fingerprinter()
    stories = [STORY_ZH, STORY_ZH_2, STORY_EN] * 2
    pool = FingerprintPool(1, {}, here.fingerprint, on_loop=True)
    try:
        assert pool.wait_ready(120)
        sent = []
        lone = pool.submit(STORY_EN["title"], STORY_EN["body"])
        sent.append(pool.calls)  # sent before submit returned
        await answered(lone)
        futures = [pool.submit(s["title"], s["body"]) for s in stories]  # in one turn of the loop
        sent.append(pool.calls)
        got = [await answered(f) for f in futures]
        sent.append(pool.calls)
    finally:
        pool.shutdown()
    assert got == [here.fingerprint(s["title"], s["body"]) for s in stories]
    assert sent[0] == 1  # the lone item went at once
    assert sent[1] == 1 + workers.IN_FLIGHT  # one call per free place, the rest waiting
    assert sent[2] == sent[1] + 1  # the items that waited went together in one call


@pytest_twisted.ensureDeferred
async def test_a_pool_on_the_submitters_loop_runs_no_thread() -> None:
    """A thread of the pool beside the reactor would take the GIL from it: on the loop items are
    submitted from, the pool sends, reads and settles there, with no thread of its own."""
    import threading

    here = Fingerprinter()
    stories = [STORY_ZH, STORY_ZH_2, STORY_EN] * 3
    before = set(threading.enumerate())
    pool = FingerprintPool(1, {}, here.fingerprint, on_loop=True)
    try:
        futures = [pool.submit(s["title"], s["body"]) for s in stories]
        got = [await answered(f) for f in futures]
        threads = [t.name for t in threading.enumerate() if t not in before]
    finally:
        pool.shutdown()
    assert got == [here.fingerprint(s["title"], s["body"]) for s in stories]
    assert threads == [], threads


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="no scheduling policies here")
def test_workers_run_as_batch_processes() -> None:
    """A worker woken by a call must not preempt the reactor that wrote it: it runs under SCHED_BATCH."""
    here = Fingerprinter()
    pool = FingerprintPool(2, {}, here.fingerprint)
    try:
        assert pool.wait_ready(120)
        assert [os.sched_getscheduler(pid) for pid in pool.pids()] == [os.SCHED_BATCH] * 2
    finally:
        pool.shutdown()


def test_shutdown_sends_the_items_still_waiting_at_once() -> None:
    """Items still waiting for the worker when the pool shuts down (it is starting) are fingerprinted
    by it then."""
    here = Fingerprinter()
    pool = FingerprintPool(1, {}, here.fingerprint)
    stories = [STORY_ZH, STORY_EN]
    futures = [pool.submit(s["title"], s["body"]) for s in stories]
    started = time.monotonic()
    pool.shutdown()
    assert time.monotonic() - started < 30
    assert [f.result(timeout=0) for f in futures] == [here.fingerprint(s["title"], s["body"]) for s in stories]
    assert pool.calls >= 1


def test_workers_that_cannot_start_leave_the_items_to_the_crawl_process(tmp_path: Path) -> None:
    """Each worker dies in its initializer (its user dictionary is gone): every item is retried once
    in a fresh worker, then fingerprinted in this process; after MAX_RESTARTS fresh executors the
    pool stops trying."""
    here = Fingerprinter()
    before = children()
    pool = FingerprintPool(1, {"user_dict": str(tmp_path / "gone.txt")}, here.fingerprint)
    stories = [STORY_ZH, STORY_ZH_2, STORY_EN]
    try:
        got = [pool.submit(s["title"], s["body"]).result(timeout=120) for s in stories]
    finally:
        pool.shutdown()
    assert got == [here.fingerprint(s["title"], s["body"]) for s in stories]
    assert pool.died == MAX_RESTARTS + 1 and not pool.pids()
    assert children() <= before


# -- crawl processes and signals ------------------------------------------------------------------

SPIDER = textwrap.dedent(
    """
    import json, os
    import scrapy

    class Recorder:
        def __init__(self, path):
            self.file = open(path, "a", encoding="utf-8")

        @classmethod
        def from_crawler(cls, crawler):
            return cls(crawler.settings[cls.SETTING])

        def process_item(self, item, spider=None):
            self.file.write(item["url"] + "\\n")
            self.file.flush()
            return item

    class Entered(Recorder):
        SETTING = "ENTERED_PATH"

    class Kept(Recorder):
        SETTING = "KEPT_PATH"

    class Pages(scrapy.Spider):
        name = "pages"
        custom_settings = {
            "ADDONS": {"scrapy_simhash.Addon": 300},
            "ITEM_PIPELINES": {Entered: 100, Kept: 900},
            "SIMHASH_WORKERS": 1,
            "CONCURRENT_REQUESTS": 1,
            "DOWNLOAD_DELAY": 0.2,
            "RANDOMIZE_DOWNLOAD_DELAY": False,
            "TELNETCONSOLE_ENABLED": False,
        }

        def __init__(self, input="", **kwargs):
            super().__init__(**kwargs)
            with open(input, encoding="utf-8") as f:
                self.items = [json.loads(line) for line in f]

        async def start(self):
            for n in range(0, len(self.items), 5):
                yield scrapy.Request(f"data:,{n}", cb_kwargs={"n": n})

        def parse(self, response, n):
            yield from self.items[n:n + 5]
    """
)
# Scrapy's "run from a script" way, with no ``if __name__ == "__main__"`` guard: workers must not run it.
SCRIPT = SPIDER + textwrap.dedent(
    """
    import sys
    from scrapy.crawler import CrawlerProcess

    process = CrawlerProcess(dict(arg.split("=", 1) for arg in sys.argv[2:]))
    process.crawl(Pages, input=sys.argv[1])
    process.start()
    """
)


def distinct_text(seed: int, chars: int) -> str:
    """Filler Chinese text: random common characters in short sentences (no two alike)."""
    rng = random.Random(seed)
    out: list[str] = []
    while sum(map(len, out)) < chars:
        out.append("".join(chr(rng.randrange(0x4E00, 0x9000)) for _ in range(rng.randrange(8, 20))) + "。")
    return "".join(out)


def start_crawl(tmp_path: Path, script: bool, reactor: str | None = None) -> tuple[subprocess.Popen[bytes],
                                                                                  dict[str, Path]]:
    """A crawl of 200 distinct items, 5 a response, a response each 0.2 s, 1 worker: ``scrapy
    runspider``, or a script running a ``CrawlerProcess``."""
    names = ("spider.py", "items.jsonl", "entered", "kept", "index.sqlite3", "log")
    paths = {name: tmp_path / name for name in names}
    paths["spider.py"].write_text(SCRIPT if script else SPIDER, "utf-8")
    faults.write_jsonl(paths["items.jsonl"], [
        {"url": f"https://t.example/{n}", "title": distinct_text(n, 20), "body": distinct_text(10_000 + n, 3000)}
        for n in range(200)])
    settings = [f"SIMHASH_INDEX_URL=sqlite:///{paths['index.sqlite3']}", f"ENTERED_PATH={paths['entered']}",
                f"KEPT_PATH={paths['kept']}", *([f"TWISTED_REACTOR={reactor}"] if reactor else [])]
    if script:
        command = [sys.executable, str(paths["spider.py"]), str(paths["items.jsonl"]), *settings]
    else:
        command = [sys.executable, "-m", "scrapy", "runspider", str(paths["spider.py"]),
                   "-a", f"input={paths['items.jsonl']}", *(x for kv in settings for x in ("-s", kv))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    with open(paths["log"], "wb") as log:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return proc, paths


def lines(path: Path) -> list[str]:
    return path.read_text("utf-8").split() if path.exists() else []


def workers_of(proc: subprocess.Popen[bytes]) -> set[int]:
    return {p for p in descendants(proc.pid) if b"spawn_main" in cmdline(p)}


@pytest.mark.parametrize(("sig", "group", "script", "reactor"), [
    (signal.SIGTERM, False, False, "twisted.internet.epollreactor.EPollReactor"),  # Twisted's default reactor
    (signal.SIGINT, True, True, None),  # Ctrl-C: the whole process group; a crawl script, the asyncio reactor
], ids=["sigterm-runspider-default-reactor", "sigint-group-script-asyncio"])
def test_a_signal_mid_crawl_finishes_the_items_and_leaves_no_process(
        tmp_path: Path, sig: signal.Signals, group: bool, script: bool, reactor: str | None) -> None:
    proc, paths = start_crawl(tmp_path, script, reactor)
    try:
        wait_for(lambda: lines(paths["kept"]), 60, "the first item passed on")
        below = descendants(proc.pid)
        assert workers_of(proc), "no worker process"
        (os.killpg if group else os.kill)(proc.pid, sig)
        assert proc.wait(60) == 0, paths["log"].read_text("utf-8")[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = paths["log"].read_text("utf-8")
    entered, kept = lines(paths["entered"]), lines(paths["kept"])
    assert 0 < len(kept) < 200, "the signal did not land mid-crawl"
    assert sorted(kept) == sorted(entered), "an item that entered the pipeline did not come out"
    assert sorted(faults.index_urls(paths["index.sqlite3"])) == sorted(kept)
    assert not faults.pending_urls(paths["index.sqlite3"])
    assert "worker died" not in log and "Traceback" not in log, log[-3000:]
    wait_for(lambda: not any(running(p) for p in below), 10, "the crawl's processes to end")


def test_sigkill_between_shared_commits_loses_no_item_passed_on(tmp_path: Path) -> None:
    """Items share index transactions (several entries committed with one time); a crawl SIGKILLed
    mid-crawl has every item it passed on in an intact index: none left before its commit."""
    from scrapy_simhash.index import open_index

    proc, paths = start_crawl(tmp_path, script=True)
    try:
        wait_for(lambda: len(lines(paths["kept"])) >= 30, 120, "30 items passed on")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    kept = lines(paths["kept"])
    assert 30 <= len(kept) < 200, "the kill did not land mid-crawl"
    assert faults.integrity(paths["index.sqlite3"]) == "ok"
    with open_index(paths["index.sqlite3"], create=False) as ix:
        entries = list(ix.entries())
    assert set(kept) <= {e.url for e in entries}, "an item was passed on before its commit"
    per_commit = list(Counter(e.first_seen for e in entries).values())
    assert max(per_commit) > 1, per_commit


def test_sigkill_of_the_crawl_leaves_no_orphan(tmp_path: Path) -> None:
    proc, paths = start_crawl(tmp_path, script=True)
    try:
        wait_for(lambda: lines(paths["kept"]), 60, "the first item passed on")
        below = descendants(proc.pid)
        assert workers_of(proc)
        proc.kill()
        proc.wait(10)
        try:
            wait_for(lambda: not any(running(p) for p in below), 10, "the workers to notice and exit")
        finally:  # an orphan of the test's own making: end it (the group holds only the crawl's processes)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
