"""A Redis server that forgets is caught, however it forgot; Redis state that cannot be right is
refused, never answered from.

Each test runs its own ``redis-server`` on a free loopback port (it flushes, kills, restarts it from
an older copy of its files, or tampers with its keys): skipped only when ``redis-server`` is not
installed (under ``CI`` it must be). Figures for the same scenarios at 1,200 stories:
``python benchmarks/faults.py --redis-forgets``.
"""

from __future__ import annotations

import logging
import random
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.index import IndexOpenError, IndexWriteError, Query, SimhashIndexError, open_index
from scrapy_simhash.index.redis.index import RedisIndex
from tests.redis_server import RedisProcess
from tests.test_index_protocol import raw_redis


def story(n: int, *, repost: bool = False, rng_seed: int = 7) -> Query:
    """Story ``n`` (random fingerprints); its repost: title 1 bit away, body 2 (a duplicate)."""
    rng = random.Random(rng_seed * 1_000_003 + n)
    title, body = rng.getrandbits(64), rng.getrandbits(64)
    if repost:
        title, body = title ^ 1, body ^ 0b110
    return Query(title_fp=title, body_fp=body, title_k=2, body_k=3,
                 url=f"https://{'b' if repost else 'a'}.example/{n}")


def feed(ix: Any, stories: range) -> None:
    for n in stories:
        assert ix.check_and_add(story(n)).match is None


def private(directory: Path, *args: str) -> RedisProcess:
    directory.mkdir(parents=True, exist_ok=True)
    return RedisProcess(directory, *args)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    process = private(tmp_path / "data")
    yield process
    process.stop()


def restart_from(server: RedisProcess, copy: Path) -> None:
    """SIGKILL the server, put ``copy`` of its data directory in place, start it again."""
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait(10)
    server.proc = None
    shutil.rmtree(server.directory)
    shutil.copytree(copy, server.directory)
    server.start()


# -- a server that forgets ------------------------------------------------------------------------


def test_flushall_then_another_open_the_first_process_refuses_for_good(server: RedisProcess) -> None:
    """FLUSHALL under a running process, then any writable open (``dedup`` of an empty file) makes
    the namespace again, with a marker of its own: the first process never takes it for the one
    it opened, whatever it calls, and never answers from it."""
    with open_index(server.url) as first:
        feed(first, range(10))
        raw_redis(server.url).flushall()
        with pytest.raises(IndexWriteError, match="lost its keys"):
            first.check_and_add(story(3, repost=True))
        open_index(server.url).close()  # another process opens it: a new, empty index
        for call in (lambda: first.check_and_add(story(3, repost=True)), lambda: first.check_and_add(story(99)),
                     lambda: first.lookup(story(3).title_fp, None, title_k=2, body_k=0)):
            with pytest.raises(SimhashIndexError, match=r"lost its keys.*refusing to go on"):
                call()
    with open_index(server.url) as later:  # a new process starts from what the server holds: nothing
        assert later.count() == 0


def test_flushall_and_a_new_open_before_the_first_process_calls_again(server: RedisProcess) -> None:
    """The first process's next call meets a namespace made again: refused, naming why, for good."""
    with open_index(server.url) as first:
        feed(first, range(10))
        raw_redis(server.url).flushall()
        with open_index(server.url) as second:
            assert second.check_and_add(story(0)).match is None  # its own index, new
        with pytest.raises(IndexWriteError, match="emptied and made again since this process opened it"):
            first.check_and_add(story(5, repost=True))
        with pytest.raises(SimhashIndexError, match="emptied and made again"):
            first.peek(story(5, repost=True))
    with open_index(server.url, readonly=True) as ix:
        assert ix.count() == 1  # nothing of the first process's was written to the new index


def test_a_restart_from_an_older_copy_of_the_aof_is_noticed(tmp_path: Path) -> None:
    """The data directory copied, more stories added, the server killed and started from the copy:
    the copy holds the namespace's marker, but the id counter is below the ids the process had, so
    its next call (a check, or only a lookup) is refused and nothing is admitted again."""
    server = private(tmp_path / "data", "--appendfsync", "always")
    try:
        with open_index(server.url) as ix, open_index(server.url) as reader:
            feed(ix, range(20))
            assert reader.lookup(story(0).title_fp, None, title_k=2, body_k=0)
            shutil.copytree(server.directory, tmp_path / "copy")
            feed(ix, range(20, 40))
            restart_from(server, tmp_path / "copy")
            with pytest.raises(IndexWriteError, match=r"id counter went backwards.*refusing to go on"):
                ix.check_and_add(story(30, repost=True))  # its original is gone with the rollback
            with pytest.raises(IndexWriteError, match="id counter went backwards"):
                ix.check_and_add(story(1, repost=True))  # for good, whatever it asks
            assert raw_redis(server.url).get("simhash:{default}:n") == "20"  # nothing written
    finally:
        server.stop()


def test_a_restart_of_an_rdb_only_server_from_its_snapshot_is_noticed_with_warn(tmp_path: Path, caplog: Any) -> None:
    """RDB snapshots only, used anyway (``warn``): SIGKILL, and the restart takes the index back to
    the last snapshot; the running process notices at its reconnection."""
    server = private(tmp_path / "data", "--appendonly", "no", "--save", "3600 1")
    try:
        with caplog.at_level(logging.WARNING), open_index(server.url, redis_unsafe="warn") as ix:
            feed(ix, range(10))
            raw_redis(server.url).save()  # the snapshot the server would take on its own, in time
            feed(ix, range(10, 20))
            assert server.proc is not None
            server.proc.kill()
            server.proc.wait(10)
            server.start()
            with pytest.raises(IndexWriteError, match="id counter went backwards"):
                ix.check_and_add(story(15, repost=True))
        assert "RDB snapshots only" in caplog.text
    finally:
        server.stop()


@pytest.mark.parametrize(("args", "why"), [
    (("--appendonly", "no", "--save", "3600 1"), r"persists by RDB snapshots only \(appendonly no, save '3600 1'\)"),
    (("--appendonly", "yes", "--appendfsync", "no"), "appendfsync is no"),
])
def test_a_server_that_can_lose_acknowledged_writes_is_refused_unless_warn(
        tmp_path: Path, caplog: Any, args: tuple[str, ...], why: str) -> None:
    server = private(tmp_path / "data", *args)
    try:
        with pytest.raises(IndexOpenError, match=f"may forget entries.*{why}.*SIMHASH_REDIS_UNSAFE = 'warn'"):
            open_index(server.url)
        with caplog.at_level(logging.WARNING), open_index(server.url, redis_unsafe="warn") as ix:
            assert ix.check_and_add(story(1)).match is None
        assert "may forget entries" in caplog.text and why.split(" ")[0] in caplog.text
        with open_index(server.url, readonly=True) as ix:  # reading is never refused for it
            assert ix.count() == 1
    finally:
        server.stop()


def test_everysec_and_always_are_accepted(tmp_path: Path) -> None:
    for fsync in ("everysec", "always"):
        server = private(tmp_path / fsync, "--appendfsync", fsync)
        try:
            open_index(server.url).close()
        finally:
            server.stop()


# -- state that cannot be right -------------------------------------------------------------------

BASE = "simhash:{default}:"


def delete_matching(client: Any, pattern: str) -> None:
    keys = list(client.scan_iter(match=pattern, count=1000))
    assert keys, pattern
    client.delete(*keys)


TAMPERINGS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "SET seq 0": (lambda c: c.set(BASE + "seq", 0), "check 'entries within ids given'"),
    "DEL seq": (lambda c: c.delete(BASE + "seq"), r"check 'counters present': …:seq is missing"),
    "seq set back by 10": (lambda c: c.decrby(BASE + "seq", 10), "check 'entries within ids given'"),
    "DEL n": (lambda c: c.delete(BASE + "n"), r"check 'counters present': …:n is missing"),
    "SET n to text": (lambda c: c.set(BASE + "n", "many"), "check 'counters readable'"),
    "DEL nbands": (lambda c: c.delete(BASE + "nbands"), r"check 'counters present': …:nbands"),
    "DEL hours": (lambda c: c.delete(BASE + "hours"), "check 'time buckets present'"),
    "DEL the record": (lambda c: c.delete("simhash:meta"), "check 'record present'"),
    "DEL the holders": (lambda c: delete_matching(c, BASE + "h[tb]:*"), "check 'entries listed as holders'"),
    "DEL the band buckets": (lambda c: delete_matching(c, BASE + "b[0-9]*"), "check 'entries filed in band buckets'"),
}


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_tampered_state_is_refused_at_open_naming_the_check(server: RedisProcess, name: str) -> None:
    tamper, check = TAMPERINGS[name]
    with open_index(server.url) as ix:
        feed(ix, range(30))
    tamper(raw_redis(server.url))
    for readonly in (False, True):
        with pytest.raises(IndexOpenError, match=f"state that cannot be right \\({check}"):
            open_index(server.url, readonly=readonly)


def test_a_counter_below_the_newest_ids_is_refused_when_entries_were_forgotten(server: RedisProcess) -> None:
    """Fewer entries than ids (some forgotten), the id counter set back under the newest ones."""
    with open_index(server.url) as ix:
        feed(ix, range(30))
        for entry_id in range(1, 16):
            ix.forget(entry_id)
    raw_redis(server.url).set(BASE + "seq", 20)
    with pytest.raises(IndexOpenError, match=r"check 'id counter above the entries'.*…:seq is 20"):
        open_index(server.url)


def test_deleted_records_are_refused_where_a_check_reads_them(server: RedisProcess) -> None:
    with open_index(server.url) as ix:
        feed(ix, range(30))
    delete_matching(raw_redis(server.url), BASE + "e:*")
    with open_index(server.url) as ix:
        with pytest.raises(IndexWriteError, match="check 'holders exist'"):
            ix.check_and_add(story(4, repost=True))
        with pytest.raises(SimhashIndexError, match="check 'holders exist'"):
            ix.peek(story(4, repost=True))
        assert ix.check_and_add(story(100)).match is None  # a story nothing is filed near is still new


def test_tampering_under_a_running_process_is_refused_before_anything_is_written(server: RedisProcess) -> None:
    """The id counter set back under a running process: its next reservation is refused before any
    entry takes an id given before. A holder deleted, a record replaced by another: the check that
    reads them is refused, naming what it found."""
    admin = raw_redis(server.url, decode=False)
    with open_index(server.url) as ix:
        feed(ix, range(30))
        admin.set(BASE + "seq", 0)
        before = {k: admin.get(k) for k in admin.scan_iter(match=(BASE + "e:*").encode())}
        with pytest.raises(IndexWriteError, match="id counter went backwards"):
            ix.check_and_add(story(100))
        assert {k: admin.get(k) for k in admin.scan_iter(match=(BASE + "e:*").encode())} == before
    admin.set(BASE + "seq", 30)
    with open_index(server.url) as ix:
        assert isinstance(ix, RedisIndex)
        key, field = ix._k.holders("title", story(5).title_fp)  # type: ignore[arg-type]
        admin.hdel(key, field)
        with pytest.raises(IndexWriteError, match="check 'band rows held'"):
            ix.check_and_add(story(5, repost=True))
        admin.set(BASE + "e:8", admin.get(BASE + "e:9"))
        with pytest.raises(IndexWriteError, match="check 'holders hold'"):
            ix.check_and_add(story(7, repost=True))  # story 7 is entry 8
        assert ix.check_and_add(story(20, repost=True)).match is not None  # the rest answers as it should


def test_removals_by_another_process_meanwhile_are_not_taken_for_damage(server: RedisProcess) -> None:
    """A check reads bands, then holders, then records, in several round trips; another process
    forgetting those entries between them is a change (the check is made again), not damage."""
    with open_index(server.url) as ix:
        feed(ix, range(150))
    errors: list[str] = []

    def forgetting() -> None:
        with open_index(server.url) as other:
            for n in range(150):
                other.forget(f"https://a.example/{n}")

    thread = threading.Thread(target=forgetting)
    with open_index(server.url) as ix:
        thread.start()
        for _ in range(3):
            for n in range(150):
                try:
                    ix.peek(story(n, repost=True))
                    ix.check_and_add(story(n, repost=True))
                except SimhashIndexError as exc:
                    errors.append(str(exc))
        thread.join()
    assert errors == []


def test_a_reset_keeps_the_id_counter_so_running_processes_go_on(server: RedisProcess) -> None:
    with open_index(server.url) as running, open_index(server.url) as resetting:
        feed(running, range(10))
        assert resetting.reset() == 10
        assert running.check_and_add(story(3)).match is None  # emptied on purpose: new again, no refusal
        assert running.check_and_add(story(3, repost=True)).match is not None
    with open_index(server.url) as ix:  # and the state is whole at the next open
        assert ix.count() == 1


def test_a_crawl_worker_refuses_an_index_made_again_since_the_crawl_opened_it(server: RedisProcess) -> None:
    """A crawl's workers open the index themselves (again when a pool is replaced): one started after
    FLUSHALL and another open would find a new, empty namespace; it refuses it, as its crawl does."""
    from scrapy_simhash.workers import process

    with open_index(server.url) as crawl:
        assert isinstance(crawl, RedisIndex)
        options = process.index_options(server.url, {}, None, 0, 0.0, crawl.identity)
        process._start_worker({}, options)  # the same namespace: the worker opens it
        assert process._dedup is not None
        process._dedup.close()
        raw_redis(server.url).flushall()
        open_index(server.url).close()
        with pytest.raises(SimhashIndexError, match="not the one this crawl opened"):
            process._start_worker({}, options)
        assert process._dedup is None


def test_opens_while_another_process_adds_and_forgets_are_never_refused(server: RedisProcess) -> None:
    """The open's checks read the counters and the newest entries in several round trips; entries
    added or removed meanwhile by others are not state that cannot be right."""
    with open_index(server.url) as ix:
        feed(ix, range(20))
    stop = threading.Event()

    def writing() -> None:
        with open_index(server.url) as other:
            n = 1000
            while not stop.is_set():
                other.check_and_add(story(n))
                other.forget(f"https://a.example/{n - 3}")
                n += 1

    thread = threading.Thread(target=writing)
    thread.start()
    try:
        for _ in range(40):
            open_index(server.url).close()
    finally:
        stop.set()
        thread.join()
