"""One item the index cannot decide fails alone: its batch neighbours are decided and committed.

A value in the index that is not ours (a tampered fingerprint in SQLite, a foreign member in a
Redis band set) used to fail the whole group commit: every item of the batch was dropped (the CLI:
"lines 1–32 not decided") although Redis had already added the others. And a poisoned Redis key
met at open crashed the crawl with tracebacks instead of closing it cleanly.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest_twisted

from scrapy_simhash.cli import main
from scrapy_simhash.index import Query, open_index
from tests.conftest import crawl_settings, refused_crawl, run_crawl
from tests.test_index_protocol import raw_redis, redis_server_url, with_prefix
from tests.test_index_redis import poison_band


def _q(title_fp: int, url: str) -> Query:
    return Query(title_fp=title_fp, body_fp=None, title_k=2, body_k=3, url=url)


def _tamper_sqlite(path: Path, title_fp: int) -> None:
    """Store a value of the wrong type in the entry holding ``title_fp`` (its band rows stay)."""
    conn = sqlite3.connect(path)
    conn.execute("UPDATE entry SET title_fp = 'not a fingerprint' WHERE url = 'victim'")
    conn.execute("UPDATE band SET fp = 'not a fingerprint' WHERE fp = ?", (title_fp - (1 << 64) if title_fp >> 63
                                                                           else title_fp,))
    conn.commit()
    conn.close()


def _tampered_index(path: Path, rng: random.Random) -> int:
    """An index at ``path`` whose one entry ("victim") is tampered with; returns its title fingerprint."""
    victim = rng.getrandbits(64)
    with open_index(path) as ix:
        ix.check_and_add(_q(victim, "victim"))
    _tamper_sqlite(path, victim)
    return victim


def test_sqlite_batch_with_a_tampered_candidate_decides_the_others(tmp_path: Path) -> None:
    rng = random.Random(1)
    path = tmp_path / "i.sqlite3"
    victim = _tampered_index(path, rng)
    with open_index(path) as ix:
        out = ix.check_and_add_many([_q(rng.getrandbits(64), "a"), _q(victim, "b"), _q(rng.getrandbits(64), "c")])
        assert [o.entry_id is not None for o in out] == [True, False, True]
        assert out[1].error is not None and "corrupt" in out[1].error and out[1].match is None
        assert ix.count() == 3  # the victim and the two neighbours; nothing of "b"
        assert ix.explain("b") is None


def test_sqlite_single_item_batch_with_a_tampered_candidate_fails_alone(tmp_path: Path) -> None:
    """A batch of one (no savepoint: its transaction is rolled back) answers the error, writes
    nothing, and leaves the index usable."""
    rng = random.Random(2)
    path = tmp_path / "i.sqlite3"
    victim = _tampered_index(path, rng)
    with open_index(path) as ix:
        (out,) = ix.check_and_add_many([_q(victim, "b")])
        assert out.entry_id is None and out.match is None
        assert out.error is not None and out.error.startswith("SimhashIndexError") and "corrupt" in out.error
        assert ix.count() == 1 and ix.explain("b") is None
        (after,) = ix.check_and_add_many([_q(rng.getrandbits(64), "c")])
        assert after.error is None and after.entry_id is not None and ix.count() == 2


def test_redis_batch_with_a_poisoned_band_key_decides_the_others() -> None:
    url = with_prefix(redis_server_url(), f"items-{os.urandom(6).hex()}")
    rng = random.Random(2)
    bad = rng.getrandbits(64)
    with open_index(url) as ix:
        poison_band(raw_redis(url.split("?")[0], decode=False), ix, bad)
        out = ix.check_and_add_many([_q(rng.getrandbits(64), "a"), _q(bad, "b"), _q(rng.getrandbits(64), "c")])
        assert [o.entry_id is not None for o in out] == [True, False, True]
        assert out[1].error is not None
        assert ix.count() == 2


def _items(victim_title: str) -> list[dict[str, Any]]:
    bodies = ["江城地铁十二号线今日开通，全长三十八公里，设站二十五座，采用全自动无人驾驶系统。",
              "南山茶园迎来春茶开采季，茶农首次大面积使用无人机巡园，农药使用量比去年减少三成。",
              "港口城市启用潮汐能电站，十四台水下涡轮机最多可发电三十二兆瓦，足够两万户家庭使用。"]
    return [{"url": f"https://site/{n}", "title": t, "body": b}
            for n, (t, b) in enumerate(zip(["地铁新线开通", victim_title, "潮汐电站启用"], bodies, strict=True))]


@pytest_twisted.ensureDeferred
async def test_a_crawl_drops_only_the_item_the_index_cannot_decide(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    title = "南山茶园春茶开采 茶农采用无人机巡园"
    first = await run_crawl(crawl_settings(path), [{"url": "victim", "title": title, "body": "茶园" * 40}])
    assert first.stats.get_value("simhash/new") == 1
    with open_index(path, readonly=True) as ix:
        victim = next(iter(ix.entries())).title_fp
    assert victim is not None
    _tamper_sqlite(path, victim)
    crawler = await run_crawl(crawl_settings(path), _items(title))
    stats = crawler.stats.get_stats()
    assert stats.get("simhash/new") == 2 and stats.get("simhash/index_error") == 1
    assert [i["url"] for i in crawler.spider.collected] == ["https://site/0", "https://site/2"]


def test_cli_dedup_reports_the_one_line_it_cannot_decide(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "i.sqlite3"
    title = "南山茶园春茶开采 茶农采用无人机巡园"
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"url": "victim", "title": title, "body": "茶园" * 40}) + "\n", encoding="utf-8")
    assert main(["dedup", str(seed), "--index", str(path), "-q", "--no-progress"]) == 0
    with open_index(path, readonly=True) as ix:
        victim = next(iter(ix.entries())).title_fp
    assert victim is not None
    _tamper_sqlite(path, victim)
    src = tmp_path / "items.jsonl"
    src.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in _items(title)), encoding="utf-8")
    decisions = tmp_path / "decisions.jsonl"
    main(["dedup", str(src), "--index", str(path), "--decisions", str(decisions), "-q", "--no-progress"])
    records = [json.loads(line) for line in decisions.read_text(encoding="utf-8").splitlines()]
    assert [r["status"] for r in records] == ["new", "error", "new"]
    assert "index" in records[1]["error"]


@pytest_twisted.ensureDeferred
async def test_a_poisoned_redis_key_at_open_refuses_the_crawl_cleanly(tmp_path: Path, caplog: Any) -> None:
    url = with_prefix(redis_server_url(), f"items-{os.urandom(6).hex()}")
    with open_index(url) as ix:
        raw = raw_redis(url.split("?")[0])
        raw.delete(f"{ix._base}n")
        raw.hset(f"{ix._base}n", "not", "a counter")  # the entry counter is a hash: the open fails
    reason = await refused_crawl(crawl_settings(tmp_path / "unused", SIMHASH_INDEX_URL=url), _items("x"))
    assert "counters present" in reason, reason
    assert "Traceback" not in caplog.text
