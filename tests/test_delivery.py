"""An entry becomes a reference for good only once its item was delivered.

Index level, on SQLite and Redis: a pending entry matches like any other (two copies in flight
admit exactly one); releasing it (its item was dropped downstream) lets the next copy in;
delivering it makes it permanent; at the next open, the pending entries of an owner that died are
released, never those of a live process sharing the index, and pending rows that cannot be right
(no entry, another host for a file, a stamp no process of ours wrote) are refused, not acted on.
Crawl level: a copy whose pending original is rejected downstream is checked again and stored;
every admitted item carries a story key, the same when the same text is admitted again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_simhash.index import Query, open_index
from scrapy_simhash.index.owners import _host, _start_stamp, alive, new_owner
from tests.test_index_protocol import raw_redis, redis_server_url, with_prefix


def q(title_fp: int, owner: str | None, url: str = "u") -> Query:
    return Query(title_fp=title_fp, body_fp=None, title_k=2, body_k=3, url=url, owner=owner)


def dead_owner() -> str:
    """The token of a process of this host that has exited (started before the entries it owns)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    return f"{_host()}|{int(child.stdout)}|{_start_stamp(os.getpid())}|dead"


@pytest.fixture(params=["sqlite", "redis"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "index.sqlite3")
    else:
        yield with_prefix(redis_server_url(), f"delivery-{os.urandom(6).hex()}")


def test_owner_tokens() -> None:
    me = new_owner()
    assert alive(me) is True and me != new_owner()
    assert alive(dead_owner()) is False
    assert alive("elsewhere|1|2|3") is None and alive("not a token") is None


def test_a_pending_entry_matches_then_release_lets_the_next_copy_in(location: str) -> None:
    owner = new_owner()
    with open_index(location) as ix:
        first = ix.check_and_add(q(0xABC, owner, "a"))
        assert first.match is None
        copy = ix.check_and_add(q(0xABC ^ 1, owner, "b"))  # in flight at once: exactly one admitted
        assert copy.match is not None and copy.match.entry.id == first.entry_id
        assert ix.release([first.entry_id]) == 1  # "a" was dropped by a later pipeline
        again = ix.check_and_add(q(0xABC ^ 1, owner, "b"))
        assert again.match is None and ix.count() == 1


def test_a_delivered_entry_is_never_released(location: str) -> None:
    owner = new_owner()
    with open_index(location) as ix:
        added = ix.check_and_add(q(0xDEF, owner)).entry_id
        ix.deliver([added])
        assert ix.release([added]) == 0 and ix.count() == 1
        assert ix.check_and_add(q(0xDEF, owner)).match is not None


def test_recover_releases_the_pending_entries_of_dead_owners_only(location: str) -> None:
    dead, live = dead_owner(), new_owner()
    with open_index(location) as ix:
        lost = ix.check_and_add(q(0x111, dead, "lost")).entry_id
        delivered = ix.check_and_add(q(0x22222, dead, "delivered")).entry_id
        ix.deliver([delivered])
        in_flight = ix.check_and_add(q(0x3333333, live, "in-flight")).entry_id  # another live process
        plain = ix.check_and_add(q(0x44444444444, None, "plain")).entry_id  # added without tracking
        assert None not in (lost, delivered, in_flight, plain)
    with open_index(location) as ix:  # the next open
        assert ix.recover() == 1
        assert sorted(e.url for e in ix.entries()) == ["delivered", "in-flight", "plain"]
        assert ix.check_and_add(q(0x111, None, "again")).match is None  # the lost item is admitted again
        assert ix.recover() == 0


def test_forget_purge_and_reset_take_pending_rows_along(location: str) -> None:
    owner = new_owner()
    with open_index(location) as ix:
        a = ix.check_and_add(q(0x5, owner, "a")).entry_id
        ix.forget(a)
        assert ix.release([a]) == 0 and ix.count() == 0
        ix.check_and_add(q(0x6, owner, "b"))
        assert ix.reset() == 1 and ix.recover() == 0


def test_redis_owner_on_another_host_is_dead_once_its_lease_is_gone() -> None:
    url = with_prefix(redis_server_url(), f"delivery-{os.urandom(6).hex()}")
    with open_index(url) as ix:
        ix.check_and_add(q(0x7, "elsewhere|1|2|a", "leased"))  # its lease key is set by the call
        ix.check_and_add(q(0x70000000, "elsewhere|1|2|b", "expired"))
        raw_redis(url.split("?")[0]).delete(f"{ix._base}alive:elsewhere|1|2|b")
        assert ix.recover() == 1
        assert [e.url for e in ix.entries()] == ["leased"]
        ix.heartbeat("elsewhere|1|2|a")


# -- the pipeline and the command line -------------------------------------------------------------


class RejectFirstCopy:
    """A validation pipeline after the simhash one that drops the first item it sees."""

    seen = 0

    def process_item(self, item: Any, spider: Any = None) -> Any:
        from scrapy.exceptions import DropItem

        RejectFirstCopy.seen += 1
        if RejectFirstCopy.seen == 1:
            raise DropItem("failed validation")
        return item


@pytest_twisted.ensureDeferred
async def test_a_copy_rejected_downstream_lets_the_next_copy_in(tmp_path: Path) -> None:
    """A validation pipeline at 300 dropped one copy of a story, and the other copy was then dropped as
    its near-duplicate: 0 copies stored. Now the rejected copy's entry is released."""
    from tests.conftest import STORY_ZH, crawl_settings, repost_with_suffix, run_crawl

    RejectFirstCopy.seen = 0
    settings = crawl_settings(tmp_path / "i.sqlite3")
    settings["ITEM_PIPELINES"] = {**settings["ITEM_PIPELINES"], RejectFirstCopy: 300}
    items = [{**STORY_ZH, "url": "first"}, {**repost_with_suffix(STORY_ZH), "url": "second"}]
    crawler = await run_crawl({**settings, "CONCURRENT_ITEMS": 1}, items)
    stats = crawler.stats.get_stats()
    assert [i["url"] for i in crawler.spider.collected] == ["second"]
    assert stats.get("simhash/released") == 1 and stats.get("simhash/new") == 2
    with open_index(tmp_path / "i.sqlite3", readonly=True) as ix:
        assert [e.url for e in ix.entries()] == ["second"]
    again = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), [{**STORY_ZH, "url": "third"}])
    assert again.spider.collected == [] and again.stats.get_value("simhash/recovered") == 0  # delivered for good


class Recording:
    """An index that records the deliver and release calls it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[int]]] = []

    def deliver(self, entry_ids: list[int]) -> None:
        if entry_ids:
            self.calls.append(("deliver", list(entry_ids)))

    def release(self, entry_ids: list[int]) -> int:
        if entry_ids:
            self.calls.append(("release", list(entry_ids)))
        return len(entry_ids)


def test_fates_are_flushed_by_one_thread_a_moment_after_they_arrive() -> None:
    """One flusher thread for the crawl (not a thread per moment), one flush per moment; before a
    batch, the fates are applied only when a release is among them (a delivery changes no decision)."""
    import threading
    import time

    from scrapy_simhash.scrapy.delivery import DeliveryTracker

    index, flushers = Recording(), []

    def flush() -> None:
        flushers.append(threading.current_thread().name)
        tracker.apply(index)  # type: ignore[arg-type]

    def flushed(count: int) -> None:
        deadline = time.monotonic() + 10
        while len(index.calls) < count and time.monotonic() < deadline:
            time.sleep(0.01)

    tracker = DeliveryTracker(lambda item: None, flush=flush, delay=0.5)
    items = [object() for _ in range(8)]
    for n, item in enumerate(items):
        tracker.track(item, n)
    for item in items[:4]:
        tracker.fate(item, "deliver")
    assert tracker.apply(index, if_released=True) == 0 and index.calls == []  # not before a batch
    flushed(1)
    for item in items[4:6]:
        tracker.fate(item, "deliver")
    flushed(2)
    assert index.calls == [("deliver", [0, 1, 2, 3]), ("deliver", [4, 5])]  # one transaction a moment
    tracker.fate(items[6], "deliver")
    tracker.fate(items[7], "release")
    assert tracker.apply(index, if_released=True) == 1  # before a batch: a release is queued
    tracker.stop()
    assert index.calls[2:] == [("deliver", [6]), ("release", [7])]
    assert len(set(flushers)) == 1, flushers


# -- a copy waits for the fate of its pending original --------------------------------------------


class RejectKept:
    """A validation pipeline after the simhash one that rejects the item with URL ``first``."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        from scrapy.exceptions import DropItem

        if item["url"] == "first":
            raise DropItem("failed validation")
        return item


@pytest.mark.parametrize("workers", [0, 1])
@pytest_twisted.ensureDeferred
async def test_two_copies_in_one_batch_the_kept_one_rejected_the_other_is_stored(tmp_path: Path, workers: int) -> None:
    """Both copies are checked in one batch (one response, ``CONCURRENT_REQUESTS = 1``): ``first`` is
    admitted and ``second`` found its duplicate; a validation pipeline then rejects ``first``. The
    duplicate waited for that fate, was checked again, and is stored."""
    from tests.conftest import STORY_ZH, crawl_settings, repost_with_suffix, run_crawl

    settings = crawl_settings(tmp_path / "i.sqlite3", SIMHASH_WORKERS=workers, CONCURRENT_REQUESTS=1)
    settings["ITEM_PIPELINES"] = {**settings["ITEM_PIPELINES"], RejectKept: 500}
    items = [{**STORY_ZH, "url": "first"}, {**repost_with_suffix(STORY_ZH), "url": "second"}]
    crawler = await run_crawl(settings, items)
    stats = crawler.stats.get_stats()
    assert [i["url"] for i in crawler.spider.collected] == ["second"]
    assert stats.get("simhash/released") == 1 and stats.get("simhash/new") == 2
    assert stats.get("simhash/dropped/title", 0) + stats.get("simhash/dropped/body", 0) == 0
    with open_index(tmp_path / "i.sqlite3", readonly=True) as ix:
        assert [e.url for e in ix.entries()] == ["second"]


@pytest_twisted.ensureDeferred
async def test_a_copy_of_a_stored_original_in_one_batch_is_dropped(tmp_path: Path) -> None:
    """The same batch with no rejection: the duplicate waits for its original's delivery, then drops."""
    from tests.conftest import STORY_ZH, crawl_settings, repost_with_suffix, run_crawl

    settings = crawl_settings(tmp_path / "i.sqlite3", CONCURRENT_REQUESTS=1)
    items = [{**STORY_ZH, "url": "first"}, {**repost_with_suffix(STORY_ZH), "url": "second"}]
    crawler = await run_crawl(settings, items)
    assert [i["url"] for i in crawler.spider.collected] == ["first"]
    assert crawler.stats.get_value("simhash/new") == 1 and crawler.stats.get_value("simhash/released") == 0


def test_waiters_learn_the_fate_release_once_written_and_time_out() -> None:
    from scrapy_simhash.scrapy.delivery import DeliveryTracker

    index = Recording()
    tracker = DeliveryTracker(lambda item: None)
    kept, rejected, stuck = object(), object(), object()
    for n, item in enumerate((kept, rejected, stuck)):
        tracker.track(item, n)
    assert tracker.waiter(99) is None  # not one of ours
    delivered, released, timed_out = tracker.waiter(0), tracker.waiter(1), tracker.waiter(2, timeout=0.05)
    assert delivered is not None and released is not None and timed_out is not None
    tracker.fate(kept, "deliver")
    assert delivered.result(0) == "deliver"
    tracker.fate(rejected, "release")
    assert not released.done()  # the entry is still in the index until the release is written
    assert tracker.waiter(1) is not None
    assert tracker.apply(index) == 1  # type: ignore[arg-type]
    assert released.result(0) == "release" and tracker.waiter(1) is None
    assert timed_out.result(5) == "timeout"
    tracker.untold()  # the end of the crawl: the item no signal told about went somewhere
    assert tracker.waiter(2) is None


# -- the story key ---------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_the_story_key_is_the_same_when_the_story_is_admitted_again(tmp_path: Path) -> None:
    """Every admitted item carries its story key; the same text admitted again after a release (a copy
    rejected downstream; a crash: next test) or in another index gets the same key."""
    from tests.conftest import STORY_ZH, STORY_ZH_2, crawl_settings, run_crawl

    RejectFirstCopy.seen = 0
    settings = crawl_settings(tmp_path / "a.sqlite3", CONCURRENT_ITEMS=1)
    settings["ITEM_PIPELINES"] = {**settings["ITEM_PIPELINES"], RejectFirstCopy: 500}
    first = await run_crawl(settings, [{**STORY_ZH, "url": "a"}, {**STORY_ZH, "url": "a"}, {**STORY_ZH_2, "url": "b"}])
    assert first.stats.get_value("simhash/released") == 1
    keys = {i["url"]: i["simhash_story"] for i in first.spider.collected}
    assert sorted(keys) == ["a", "b"] and keys["a"] != keys["b"]
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys.values())
    fresh = await run_crawl(crawl_settings(tmp_path / "b.sqlite3"), [{**STORY_ZH, "url": "elsewhere"}])
    assert fresh.spider.collected[0]["simhash_story"] == keys["a"]
    off = await run_crawl(crawl_settings(tmp_path / "c.sqlite3", SIMHASH_STORY_FIELD=None), [dict(STORY_ZH)])
    assert "simhash_story" not in off.spider.collected[0]


@pytest_twisted.ensureDeferred
async def test_an_item_passed_on_again_after_a_crash_has_the_same_key(tmp_path: Path, caplog: Any) -> None:
    """A crawl died after storing an item but before its delivery was written: the next crawl releases
    the entry (a WARNING says so) and passes the item on again, with the same story key."""
    from tests.conftest import STORY_ZH, crawl_settings, run_crawl

    first = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), [dict(STORY_ZH)])
    key = first.spider.collected[0]["simhash_story"]
    with open_index(tmp_path / "i.sqlite3") as ix:  # as if its delivery had not been written
        (entry,) = ix.entries()
    import sqlite3

    conn = sqlite3.connect(tmp_path / "i.sqlite3")
    with conn:
        conn.execute("INSERT INTO pending(entry, owner) VALUES (?, ?)", (entry.id, dead_owner()))
    conn.close()
    again = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), [dict(STORY_ZH)])
    assert again.stats.get_value("simhash/recovered") == 1
    assert [i["simhash_story"] for i in again.spider.collected] == [key]
    assert any(r.levelname == "WARNING" and "released 1 entries" in r.getMessage() for r in caplog.records)


# -- pending rows that cannot be right are refused -------------------------------------------------


def _plant(location: str, ids: list[int], owner: str) -> None:
    """Pending rows (SQLite) or ids (Redis) with this owner, written behind the index's back."""
    if location.startswith("redis"):
        with open_index(location) as ix:
            pending = ix._k.pending.decode()
        raw_redis(location.split("?")[0]).hset(pending, mapping={str(i): owner for i in ids})
        return
    import sqlite3

    conn = sqlite3.connect(location)
    with conn:
        conn.executemany("INSERT OR REPLACE INTO pending(entry, owner) VALUES (?, ?)", [(i, owner) for i in ids])
    conn.close()


def _stored(location: str, n: int) -> list[int]:
    with open_index(location) as ix:
        ids = [ix.check_and_add(q(0x9E3779B97F4A7C15 * (k + 1) % (1 << 64), None, f"s{k}")).entry_id for k in range(n)]
    assert None not in ids
    return ids  # type: ignore[return-value]


@pytest.mark.parametrize("stamp", ["no start", "started later", "not a token"])
def test_planted_pending_rows_are_refused_not_released(location: str, stamp: str) -> None:
    """Delivered entries given pending rows of a dead local process afterwards: the next open must
    not release (delete) them all; recovery refuses, naming the check, and every entry stays."""
    import time as _time

    from scrapy_simhash.index import IndexOpenError

    ids = _stored(location, 40)
    dead_pid = dead_owner().split("|")[1]
    boot = int(_time.time()) + 3600  # a start an hour from now: after every entry was added
    owner = {"no start": f"{_host()}|{dead_pid}||x", "started later": f"{_host()}|{dead_pid}|100:{boot}|x",
             "not a token": "whatever"}[stamp]
    _plant(location, ids, owner)
    with open_index(location) as ix:
        with pytest.raises(IndexOpenError, match="pending"):
            ix.recover()
        assert ix.count() == 40


def test_pending_rows_that_no_entry_owns_are_refused(location: str) -> None:
    from scrapy_simhash.index import IndexOpenError

    ids = _stored(location, 5)
    live = dead_owner()
    _plant(location, [max(ids) + 1000], live)
    with open_index(location) as ix, pytest.raises(IndexOpenError, match="no entry owns"):
        ix.recover()


def test_sqlite_pending_rows_of_another_host_are_refused(tmp_path: Path) -> None:
    """A file copied or restored from another machine with pending rows: its owners cannot be told
    dead or alive from here, and a file is used on one host."""
    from scrapy_simhash.index import IndexOpenError

    location = str(tmp_path / "index.sqlite3")
    ids = _stored(location, 5)
    _plant(location, ids[:2], "otherhost|1234|100:1700000000|x")
    with open_index(location) as ix, pytest.raises(IndexOpenError, match="another host"):
        ix.recover()


@pytest_twisted.ensureDeferred
async def test_a_crawl_on_planted_pending_rows_is_refused_at_open_and_keeps_every_entry(tmp_path: Path) -> None:
    from tests.conftest import crawl_settings, refused_crawl

    location = str(tmp_path / "i.sqlite3")
    ids = _stored(location, 30)
    _plant(location, ids, f"{_host()}|{dead_owner().split('|')[1]}||x")
    reason = await refused_crawl(crawl_settings(location), [])
    assert "pending rows" in reason, reason
    with open_index(location, readonly=True) as ix:
        assert ix.count() == 30


# -- the delivery journal ------------------------------------------------------------------------------


def test_recover_delivers_what_the_journal_lists(location: str) -> None:
    dead = dead_owner()
    with open_index(location) as ix:
        stored = ix.check_and_add(q(0x111, dead, "stored")).entry_id
        lost = ix.check_and_add(q(0x2222222, dead, "lost")).entry_id
        assert stored is not None and lost is not None
    asked: list[str] = []

    def journal(owner: str) -> set[int]:
        asked.append(owner)
        return {stored, 999_999}  # (an id it does not own changes nothing)

    with open_index(location) as ix:
        assert ix.recover(journal) == 1 and asked == [dead]
        assert [e.url for e in ix.entries()] == ["stored"]
        assert ix.release([stored]) == 0  # delivered for good
        assert ix.recover(journal) == 0


_STORE_THEN_DIE = '''
import json, os, signal
import scrapy

class FsyncStore:
    """Appends and fsyncs each item; SIGKILLs the crawl when item DIE_AT arrives, before storing it."""
    def __init__(self, path, die_at):
        self.fd, self.die_at, self.n = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644), die_at, 0
    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings["STORE_PATH"], crawler.settings.getint("DIE_AT"))
    def process_item(self, item, spider=None):
        self.n += 1
        if self.n == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        os.write(self.fd, (json.dumps(dict(item), ensure_ascii=False) + "\\n").encode("utf-8"))
        os.fsync(self.fd)
        return item

class Pages(scrapy.Spider):
    name = "pages"
    custom_settings = {"ADDONS": {"scrapy_simhash.Addon": 300}, "ITEM_PIPELINES": {FsyncStore: 900},
                       "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "INFO"}
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(kwargs["input"], encoding="utf-8") as f:
            self.items = [json.loads(line) for line in f]
    async def start(self):
        for n in range(len(self.items)):
            yield scrapy.Request(f"data:,{n}", dont_filter=True)
    def parse(self, response):
        yield dict(self.items[int(response.text)])
'''


def test_a_crawl_killed_after_storing_items_stores_none_of_them_again(tmp_path: Path) -> None:
    """A real crawl whose store fsyncs each item dies (SIGKILL) when item 40 reaches the store: the 39
    items before it were stored, their deliveries in the journal whether or not the index had their
    marks yet. The next crawl on the index stores every other story once and none of the 39 again."""
    import json

    from tests.conftest import REPO
    from tests.test_reliability import faults, needs_corpus

    if not faults.corpus_available():
        pytest.skip(str(needs_corpus.kwargs.get("reason")))
    articles = faults.load_articles(80)
    items = tmp_path / "items.jsonl"
    faults.write_jsonl(items, articles)
    spider = tmp_path / "pages.py"
    spider.write_text(_STORE_THEN_DIE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}

    def crawl(store: str, die_at: int, index: str = "i") -> list[str]:
        code = subprocess.run(
            [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"input={items}",
             "-s", f"SIMHASH_INDEX_URL=sqlite:///{tmp_path / index}.sqlite3", "-s", f"STORE_PATH={tmp_path / store}",
             "-s", f"DIE_AT={die_at}", "--logfile", str(tmp_path / f"{store}.log")],
            cwd=tmp_path, env=env, timeout=300).returncode
        assert code == (-9 if die_at else 0), (tmp_path / f"{store}.log").read_text(encoding="utf-8")[-3000:]
        return [json.loads(line)["url"] for line in (tmp_path / store).read_text(encoding="utf-8").splitlines()]

    clean = crawl("clean", 0, index="clean")  # what a crawl that is not killed stores
    first = crawl("first", 40)
    assert len(first) == 39
    again = crawl("again", 0)
    assert not set(first) & set(again)
    assert sorted(first + again) == sorted(clean)
