"""The Redis index's own storage: records keep every title and URL as given, a random stream gets the
verdicts SQLite gives, purge drops whole time buckets, and crowded band buckets split (as the shared
layout decides) and still answer as a scan. Against the shared test server
(``SIMHASH_TEST_REDIS_URL``); helpers in ``test_index_redis.py``.
"""

from __future__ import annotations

import collections
import itertools
import random
from pathlib import Path
from typing import Any

from scrapy_simhash.index import Query, open_index
from tests.test_bands import answers_as_a_scan, flips
from tests.test_index_protocol import raw_redis
from tests.test_index_redis import q


def test_records_keep_every_title_and_url_as_given(url: str, tmp_path: Path) -> None:
    """Every title and URL comes back as given, as from SQLite, whatever its script, length or scheme."""
    titles = ["标题" * 10, "Ünïcödé title", "emoji 😀", "标题标题😀𠀀标题", "", "a" * 200, "混合 mixed 文字",
              "한국어 제목"]
    urls = ["https://a.example/1", "http://b.example/2", "ftp://c.example/3", "", "https://" + "x" * 200,
            "HTTPS://upper.example/", "https:/" + "y" * 130, "https://", "新闻/路径"]
    rng = random.Random(7)
    with open_index(tmp_path / "texts.sqlite3") as lite, open_index(url) as red:
        for n, (title, address) in enumerate(itertools.product(titles, urls)):
            query = q(rng.getrandbits(64), rng.getrandbits(64), url=address, title=title, seen_at=100.0 + n,
                      sentences=(f"{rng.getrandbits(64):016x}",))
            assert lite.check_and_add(query) == red.check_and_add(query), n
        assert list(lite.entries()) == list(red.entries())
        assert [(e.title, e.url) for e in red.entries()] == list(itertools.product(titles, urls))
        for address in urls:
            assert lite.forget(address) == red.forget(address) == len(titles)
        assert red.count() == 0


def test_same_verdicts_as_sqlite_on_a_random_stream(url: str, tmp_path: Path) -> None:
    """1,500 check-and-adds of reposts at 0–5 bits, missing titles or bodies, expiry windows, number
    and sentence signatures, fed to a SQLite file and to Redis: every outcome (tier, distance,
    original entry and its id) is the same, and so are later lookups, decisions and entries."""
    rng = random.Random(2024)
    bases = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(150)]
    numbers = ["", "0000000a", "0000000a 0000000b", "0000000c 0000000d"]
    sentences = [f"{rng.getrandbits(64):016x}" for _ in range(12)]

    def flip(fp: int, n: int) -> int:
        for p in rng.sample(range(64), n):
            fp ^= 1 << p
        return fp

    queries = []
    for i in range(1500):
        t, b = rng.choice(bases)
        title = None if rng.random() < 0.1 else flip(t, rng.choice([0, 1, 2, 3, 4]))
        body = None if title is not None and rng.random() < 0.1 else flip(b, rng.choice([0, 1, 2, 3, 4, 5]))
        kw: dict[str, Any] = {"url": f"https://s/{i % 1200}", "title": f"t{i}", "seen_at": 1000.0 + i,
                              "not_before": None if rng.random() < 0.5 else 1000.0 + i - rng.choice([50, 500])}
        kw.update(numbers=rng.choice([None, *numbers]), title_numbers=rng.choice([0, 50]),
                  sentences=tuple(rng.sample(sentences, rng.randint(0, 3))), sentences_shared=rng.choice([0, 2]))
        queries.append(Query(title_fp=title, body_fp=body, title_k=rng.choice([1, 2]), body_k=rng.choice([2, 3]), **kw))
    with open_index(tmp_path / "same.sqlite3") as lite, open_index(url) as red:
        tiers = collections.Counter()
        for n, query in enumerate(queries):
            a, b = lite.check_and_add(query), red.check_and_add(query)
            assert a == b, (n, query, a, b)
            tiers[None if a.match is None else a.match.tier] += 1
        assert min(tiers.values()) > 20 and set(tiers) == {None, "title", "body", "sentence"}, tiers  # all exercised
        for _ in range(300):
            t, b = rng.choice(bases)
            args = (flip(t, rng.randint(0, 3)), flip(b, rng.randint(0, 4)))
            kw = {"title_k": 2, "body_k": 3, "not_before": rng.choice([None, 2000.0]), "limit": rng.choice([1, 5, 50])}
            assert lite.lookup(*args, **kw) == red.lookup(*args, **kw)
        assert lite.decisions(5000) == red.decisions(5000)  # decision times are distinct: one order
        assert list(lite.entries()) == list(red.entries()) and lite.count() == red.count()
        assert lite.purge(1800.0) == red.purge(1800.0) > 0 and list(lite.entries()) == list(red.entries())
        assert lite.decisions(5000) == red.decisions(5000)


def test_purge_drops_whole_time_buckets_and_sorts_out_only_the_last(url: str) -> None:
    """Expiry stays cheap: entries live in hourly time buckets, and purge deletes the buckets wholly
    before its limit without reading their entries one by one from anywhere else, then sorts out
    the bucket the limit falls in."""
    hour = 3600.0
    rng = random.Random(8)
    with open_index(url) as ix:
        raw = raw_redis(url.split("?")[0], decode=False)
        ids = {t: ix.check_and_add(q(rng.getrandbits(64), rng.getrandbits(64), seen_at=t)).entry_id
               for t in (10.0, 20.0, hour + 5, 2 * hour + 10, 2 * hour + 3000, 5 * hour)}
        assert raw.zrange(f"{ix._base}hours", 0, -1) == [b"0", b"1", b"2", b"5"]
        assert ix.purge(2 * hour + 100) == 4
        assert raw.zrange(f"{ix._base}hours", 0, -1) == [b"2", b"5"]
        assert not raw.exists(f"{ix._base}t:0", f"{ix._base}t:1")
        assert raw.get(f"{ix._base}t:2") == ids[2 * hour + 3000].to_bytes(4, "big")
        assert [e.first_seen for e in ix.entries()] == [2 * hour + 3000, 5 * hour]
        assert ix.stats()["oldest"] == 2 * hour + 3000 and ix.count() == 2
        assert ix.purge(6 * hour) == 2 and ix.count() == 0 and raw.zcard(f"{ix._base}hours") == 0
        raw.close()


def test_purge_takes_a_bucket_larger_than_its_batch_in_several_calls(url: str) -> None:
    rng = random.Random(9)
    with open_index(url) as ix:
        ix.add([(rng.getrandbits(64), rng.getrandbits(64), f"u{i}", None, float(i)) for i in range(30)])
        ix.add([(rng.getrandbits(64), None, "late", None, 7200.0)])
        assert ix.purge(3600.0 + 1, batch=7) == 30
        assert [e.url for e in ix.entries()] == ["late"] and ix.stats()["band_rows"] == len(ix._k.tiers["title"].parts)


def _split(raw: Any, base: str) -> collections.Counter[str]:
    """Split band buckets (their value the mark) by depth: 'split' right under a top bucket's key,
    'deeper' below a sub-bucket."""
    out: collections.Counter[str] = collections.Counter()
    for key in raw.scan_iter(match=f"{base}b[0-9]*".encode(), count=1000):
        marks = sum(v == b"\0" for v in raw.hvals(key))
        out["deeper" if b"/" in key else "split"] += marks
    return out


def test_crowded_band_buckets_split_and_answer_as_a_scan(url: str) -> None:
    """Distinct fingerprints crowded around one centre share band buckets: a bucket that fills up
    splits (the shared layout's splitter, :mod:`scrapy_simhash.index.bands`), its sub-buckets again.
    The index answers as a scan would, one check at a time and in bulk, after purges and forgets; a
    crowd's check reads far fewer candidates than the crowd, and an emptied index keeps no fingerprint
    in any bucket."""
    rng = random.Random(7)
    centre = rng.getrandbits(64)
    fps = sorted({flips(rng, centre, 64, rng.randint(4, 6)) for _ in range(3000)})  # 8-12 bits apart
    rng.shuffle(fps)
    with open_index(url) as ix:
        raw = raw_redis(url.split("?")[0], decode=False)
        ix.add([(None, fp, f"u{fp}", None, float(i)) for i, fp in enumerate(fps[:2000])])
        for i, fp in enumerate(fps[2000:]):  # one at a time: buckets fill up and split as entries arrive
            ix.check_and_add(Query(title_fp=None, body_fp=fp, title_k=0, body_k=0, url=f"u{fp}", seen_at=1e4 + i))
        moved = _split(raw, ix._base)
        assert moved["split"] > 0 and moved["deeper"] > 0, moved
        depths = {key.count(b"/") for key in raw.scan_iter(match=f"{ix._base}b[0-9]*".encode(), count=1000)}
        assert max(depths) <= 2  # two levels of sub-buckets at most
        answers_as_a_scan(ix, fps, centre, rng)
        near = [flips(rng, centre, 64, 6) for _ in range(50)]
        read = [ix._reading("bands", lambda view, fp=fp: len(view.candidates("body", fp))) for fp in near]
        assert sum(read) / len(read) < 0.1 * len(fps), sum(read) / len(read)
        assert ix.purge(1000.0) == 1000  # the first 1000 go, from the split buckets' sub-buckets too
        kept = fps[1000:]
        answers_as_a_scan(ix, kept, centre, rng)
        assert ix.forget(f"u{kept[0]}") == 1
        kept = kept[1:]
        answers_as_a_scan(ix, kept, centre, rng)
        assert ix.purge(1e6) == len(kept) and ix.stats()["band_rows"] == 0
        left = [v for k in raw.scan_iter(match=f"{ix._base}b[0-9]*".encode(), count=1000) for v in raw.hvals(k)]
        assert all(v == b"\0" for v in left)  # split buckets stay split, empty
        raw.close()
