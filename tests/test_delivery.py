"""An entry becomes a reference for good only once its item was delivered (issue 17, item 2).

Index level, on SQLite and Redis: a pending entry matches like any other (two copies in flight
admit exactly one); releasing it (its item was dropped downstream) lets the next copy in;
delivering it makes it permanent; at the next open, the pending entries of an owner that died are
released, never those of a live process sharing the index.
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
from scrapy_simhash.index.owners import _host, alive, new_owner
from tests.test_index_protocol import raw_redis, redis_server_url, with_prefix


def q(title_fp: int, owner: str | None, url: str = "u") -> Query:
    return Query(title_fp=title_fp, body_fp=None, title_k=2, body_k=3, url=url, owner=owner)


def dead_owner() -> str:
    """The token of a process of this host that has exited."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    return f"{_host()}|{int(child.stdout)}||dead"


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
