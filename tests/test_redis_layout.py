"""The Redis index's own layout (schema 6): records keep every title and URL as given, keys sharing a
tag (or whose tag bits ran out) are told apart by their entries, the script files under the layout's
bands, crowded band keys split (or spill, when a split would not spread them) and still answer as a
scan, purge drops whole time buckets, and a random stream gets the verdicts SQLite gives. Against the
shared test server (``SIMHASH_TEST_REDIS_URL``); helpers in ``test_index_redis.py``.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.index import Query, open_index
from scrapy_simhash.index.redis.keys import Keys
from tests.test_bands import answers_as_a_scan, flips
from tests.test_index_protocol import raw_redis
from tests.test_index_redis import colliding, mix, q


def test_records_keep_every_title_and_url_as_given(url: str, tmp_path: Path) -> None:
    """A record leaves out the URL's scheme (https://, http://), the title's length, and keeps a
    title in UTF-16 when that is shorter (CJK): every title and URL comes back as given, as from
    SQLite, whatever its script, length or scheme."""
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


def test_keys_sharing_a_tag_are_told_apart_by_their_entries(url: str, tmp_path: Path) -> None:
    """Title and body fingerprints, sentence hashes and URLs are filed under a 4-byte mix of
    themselves: keys made to share that mix (inline and spilled to sorted sets, removed again) give
    the same verdicts, lookups and entries as SQLite, which compares whole keys."""
    rng = random.Random(19)
    title, body, sentence = rng.getrandbits(64), rng.getrandbits(64), rng.getrandbits(63)
    titles = [title, *(colliding(title, rng) for _ in range(2))]
    bodies = [body, *(colliding(body, rng) for _ in range(2))]
    sentences = [sentence, *(colliding(sentence, rng) for _ in range(2))]
    assert len({mix(k.to_bytes(8, "big")) for k in titles + bodies + sentences}) == 3
    seen: dict[int, str] = {}  # two URLs whose digests share a mix: a birthday search
    for n in range(1 << 19):
        u = f"https://c/{n}"
        m = mix(hashlib.sha1(u.encode()).digest()[:8])
        if m in seen:
            urls = [seen[m], u]
            break
        seen[m] = u
    else:
        pytest.fail("no two URLs share a mix")
    rows = [(titles[k], bodies[k], urls[n % 2] if k else f"https://o/{n}", None, 900.0 + n)
            for n, k in enumerate([0] * 6 + [1, 2])]  # the first title and body: 6 holders, spilled
    # one sentence each, new items: sentence 0 for half of them (spilled), 1 and 2 for a quarter each
    queries = [q(rng.getrandbits(64), rng.getrandbits(64), url=f"https://s/{i}", seen_at=1000.0 + i,
                 sentences=(f"{sentences[(0, 1, 0, 2)[i % 4]]:016x}",), sentences_shared=50) for i in range(16)]
    for i in range(40):  # near copies of each title and body, and items sharing sentences
        k = rng.randrange(3)
        queries.append(q(titles[k] ^ (1 << rng.randrange(64)) if i % 3 == 0 else rng.getrandbits(64),
                         bodies[k] ^ (1 << rng.randrange(64)) if i % 3 == 1 else rng.getrandbits(64),
                         url=rng.choice(urls) if i % 2 else f"https://q/{i}", title=f"t{i}", seen_at=2000.0 + i,
                         sentences=tuple(f"{h:016x}" for h in rng.sample(sentences, 2)), sentences_shared=50))
    with open_index(tmp_path / "keys.sqlite3") as lite, open_index(url) as red:
        assert lite.add(rows) == red.add(rows) == 8
        for n, query in enumerate(queries):
            a, b = lite.check_and_add(query), red.check_and_add(query)
            assert a == b, (n, a, b)
        raw = raw_redis(url.split("?")[0], decode=False)
        spilled = [f"{t}:{k:016x}" for t, keys in (("th", titles), ("bh", bodies), ("sh", sentences)) for k in keys
                   if raw.exists(f"{red._base}Z{t}:{k:016x}")]
        assert spilled[:3] == [f"th:{titles[0]:016x}", f"bh:{bodies[0]:016x}", f"sh:{sentences[0]:016x}"], spilled
        raw.close()
        for fp in titles + bodies:
            for args in ((fp, None), (None, fp)):
                assert lite.lookup(*args, title_k=2, body_k=3, limit=50) == red.lookup(*args, title_k=2, body_k=3,
                                                                                        limit=50)
        assert lite.forget(urls[0]) == red.forget(urls[0]) > 0 and lite.forget(urls[1]) == red.forget(urls[1])
        assert lite.purge(1030.0) == red.purge(1030.0) > 0
        assert list(lite.entries()) == list(red.entries())
        for n, query in enumerate(queries[::3]):
            fresh = replace(query, url=f"https://again/{n}", seen_at=5000.0 + n)
            assert lite.check_and_add(fresh) == red.check_and_add(fresh), n


def test_keyed_records_whose_tag_bits_run_out_are_placed_by_their_entries(url: str, tmp_path: Path) -> None:
    """A keyed record's tag keeps fewer bits at each split of its bucket, then none: its entry's key
    places it. Forced here with 1-bit tags and buckets that split every 2 records a bucket (tags
    agree half the time; records run out at their second split; band tables split as often, their
    records placed by their own bands, one band's key split at 32): verdicts, lookups,
    entries, forgets and purges equal SQLite's, and records that ran out were there to be placed."""
    rng = random.Random(4)
    titles = [rng.getrandbits(64) for _ in range(40)]
    sentences = [f"{rng.getrandbits(64):016x}" for _ in range(1000)]
    queries = []
    for i in range(500):  # recurring titles and sentences: some keys' ids spill to sorted sets
        title = rng.choice(titles) ^ (1 << rng.randrange(64) if rng.random() < 0.3 else 0)
        if i % 5 == 0:  # titles sharing their first band: its key splits
            title = rng.getrandbits(42) << 22 | 0x2A_AAAA
        mine = rng.sample(sentences[:3], 1) + rng.sample(sentences, rng.choice([3, 6]))
        queries.append(q(title if rng.random() < 0.5 else None, rng.getrandbits(64), url=f"https://k/{i % 450}",
                         title=f"标题{i}", seen_at=1000.0 + i, sentences=tuple(sorted(set(mine))),
                         sentences_shared=50, not_before=rng.choice([None, 1000.0 + i - 200])))
    with open_index(tmp_path / "bits.sqlite3") as lite, open_index(url) as red:
        red._limits.update(tag_bits=1, load=2, band_node=32)
        for n, query in enumerate(queries):
            a, b = lite.check_and_add(query), red.check_and_add(query)
            assert a == b, (n, a, b)
            if n % 100 == 99:
                for fp in rng.sample(titles, 5):
                    assert lite.lookup(fp, None, title_k=2, body_k=3, limit=20) == red.lookup(
                        fp, None, title_k=2, body_k=3, limit=20)
        raw = raw_redis(url.split("?")[0], decode=False)
        levels = {t.decode(): int(v.split()[0]) for t, v in raw.hgetall(f"{red._base}lh").items()}
        assert min(levels[t] for t in ("th", "bh", "sh", "u")) >= 5, levels
        ran_out = sum(value[i] == 1 for key in raw.scan_iter(match=f"{red._base}sh:*".encode())  # 1-byte tags
                      for value in raw.hvals(key) for i in range(0, len(value), 5))
        assert ran_out > 20, ran_out
        node = raw.hgetall(f"{red._base}Ztb0:{0x2A_AAAA:016x}")  # its split node: fields of 3 children
        assert {f[0] for f in node} == {1, 2, 3} and sum(len(v) for v in node.values()) > 3 * 8 * 32
        raw.close()
        assert list(lite.entries()) == list(red.entries())
        for i in range(0, 450, 7):
            assert lite.forget(f"https://k/{i}") == red.forget(f"https://k/{i}")
        assert lite.purge(1300.0) == red.purge(1300.0) > 0
        assert list(lite.entries()) == list(red.entries())
        for n, query in enumerate(queries[::4]):
            again = replace(query, url=f"https://again/{n}", seen_at=5000.0 + n, not_before=None)
            assert lite.check_and_add(again) == red.check_and_add(again), n


def test_the_script_files_under_the_layouts_bands_and_reads_the_probe_keys(url: str) -> None:
    """A band layout and its probes, given from Python, plug in without touching the script: here
    the title layout is one band of all 64 bits (each fingerprint filed under itself) and a query
    probes itself and its one-bit neighbours, so exactly the fingerprints within one bit are
    candidates."""
    with open_index(url) as ix:
        ix._limits["bands"] = {**ix._limits["bands"], "t": [[0, 64]]}
        ix._k.probe_keys = lambda tier, fp: [(0, fp ^ m) for m in [0] + [1 << i for i in range(64)]]  # type: ignore[method-assign]
        fp = 0x0123_4567_89AB_CDEF
        first = ix.check_and_add(q(fp, None, url="a")).entry_id
        m = ix.check_and_add(q(fp ^ (1 << 40), None, url="b")).match
        assert m is not None and (m.entry.id, m.distance) == (first, 1)
        assert ix.check_and_add(q(fp ^ 0b11, None, url="c")).match is None  # 2 bits: never probed
        assert ix.lookup(fp ^ (1 << 63), None, title_k=2, body_k=0)[0].entry.id == first
        assert ix.lookup(fp ^ 1, None, title_k=2, body_k=0)[0].entry.url == "a"  # a and c: 1 bit each
        assert ix.forget("a") == 1 and ix.lookup(fp ^ 1, None, title_k=2, body_k=0)[0].entry.url == "c"


def test_a_check_whose_layout_probes_its_own_bands_sends_no_probes(url: str) -> None:
    """The pigeonhole layout probes the keys a fingerprint is filed under: a check sends none (the
    script masks the query's fingerprints itself, as when it files them); a layout that probes
    other keys sends them. Each band alone finds the story (the others differ by a bit each)."""
    rng = random.Random(11)
    with open_index(url) as ix:
        tfp, bfp = rng.getrandbits(64), rng.getrandbits(64)
        assert "probe" not in ix._k.query(q(tfp, bfp))
        first = ix.check_and_add(q(tfp, bfp, url="a")).entry_id
        for tc, fp in (("t", tfp), ("b", bfp)):
            bands = ix._limits["bands"][tc]
            for n in range(len(bands)):
                near = fp  # one bit off in every band but n: only band n's key is the entry's
                for other, (s, _) in enumerate(bands):
                    near ^= 0 if other == n else 1 << s
                k = len(bands) - 1
                query = Query(title_fp=near, body_fp=bfp, title_k=k, body_k=0) if tc == "t" else \
                    Query(title_fp=None, body_fp=near, title_k=2, body_k=k)
                m = ix.peek(query)
                assert m is not None and (m.tier[0], m.entry.id, m.distance) == (tc, first, k), (tc, n)
        ix._k.probe_keys = lambda tier, fp: Keys.band_keys(ix._k, tier, fp)[1:]  # type: ignore[method-assign]
        assert [n for n, _ in ix._k.query(q(tfp, bfp))["probe"]["t"]] == [1, 2]
        assert ix.peek(q(tfp, bfp)).entry.id == first  # type: ignore[union-attr]
        (_, _), (s1, _), (s2, _) = ix._limits["bands"]["t"]
        assert ix.peek(q(tfp ^ (1 << s1) ^ (1 << s2), None)) is None  # only band 0 agrees: not probed


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
        assert [e.url for e in ix.entries()] == ["late"] and ix.stats()["band_rows"] == 3


def test_entry_lists_keep_their_places_and_go_when_empty(url: str) -> None:
    """Entries are the elements of lists of 64 (element id % 64): a removed entry leaves an empty
    element, so its neighbours keep their places and stay readable, and a list left with no record
    is deleted (an emptied index keeps none); an entry added after that gets a list again."""
    rng = random.Random(10)
    with open_index(url) as ix:
        raw = raw_redis(url.split("?")[0], decode=False)
        ids = [ix.check_and_add(q(rng.getrandbits(64), None, url=f"https://l/{i}", seen_at=1.0 + i)).entry_id
               for i in range(70)]  # two lists: ids 1..63, 64..70
        keys = sorted({f"{ix._base}e:{i // 64}" for i in ids})
        assert len(keys) == 2 and all(raw.type(k) == b"list" for k in keys)
        for i in range(0, 70, 2):
            assert ix.forget(f"https://l/{i}") == 1
        assert raw.lindex(f"{ix._base}e:{ids[0] // 64}", ids[0] % 64) == b""
        assert [e.url for e in ix.entries()] == [f"https://l/{i}" for i in range(1, 70, 2)]
        assert all(ix.lookup(e.title_fp, None, title_k=0, body_k=0)[0].entry == e for e in ix.entries())
        for i in range(1, 70, 2):
            assert ix.forget(f"https://l/{i}") == 1
        assert ix.count() == 0 and not raw.exists(*keys)
        again = ix.check_and_add(q(rng.getrandbits(64), None, url="https://l/again", seen_at=99.0)).entry_id
        assert again == ids[-1] + 1 and [e.url for e in ix.entries()] == ["https://l/again"]
        assert raw.llen(f"{ix._base}e:{again // 64}") == again % 64 + 1  # padded up to its place
        raw.close()


def _band_keys_moved(raw: Any, base: str) -> collections.Counter[str]:
    """Where band keys' fingerprints moved: 'split' (a split node, a hash), 'zset' (a sorted set,
    read whole), and 'deeper' (nodes of a node's fields, split again)."""
    out: collections.Counter[str] = collections.Counter()
    for key in raw.scan_iter(match=f"{base}Z[tb]b*".encode(), count=1000):
        out["deeper" if b"/" in key else "split" if raw.type(key) == b"hash" else "zset"] += 1
    return out


def test_crowded_band_keys_split_and_answer_as_a_scan(url: str) -> None:
    """Distinct fingerprints crowded around one centre share band keys: a key that fills up splits
    its fingerprints into a node of child keys (whose fields split again, three levels deep), or
    keeps them in a sorted set where that would not spread them. The index answers as a scan would,
    one check at a time and in bulk, after purges and forgets; a crowd's check reads a few small
    fields (far fewer candidates than the crowd), and an emptied index keeps no node, sorted set or
    band record."""
    rng = random.Random(7)
    centre = rng.getrandbits(64)
    fps = sorted({flips(rng, centre, 64, rng.randint(4, 6)) for _ in range(3000)})  # 8-12 bits apart
    rng.shuffle(fps)
    with open_index(url) as ix:
        raw = raw_redis(url.split("?")[0], decode=False)
        ix.add([(None, fp, f"u{fp}", None, float(i)) for i, fp in enumerate(fps[:2000])])
        for i, fp in enumerate(fps[2000:]):  # one at a time: keys fill up and split as entries arrive
            ix.check_and_add(Query(title_fp=None, body_fp=fp, title_k=0, body_k=0, url=f"u{fp}", seen_at=1e4 + i))
        moved = _band_keys_moved(raw, ix._base)
        assert moved["split"] > 0 and moved["deeper"] > 0, moved
        depths = {key.count(b"/") for key in raw.scan_iter(match=f"{ix._base}Z[tb]b*".encode(), count=1000)}
        assert max(depths) <= 2  # a node's fields split twice more at most: three levels of children
        answers_as_a_scan(ix, fps, centre, rng)
        near = [flips(rng, centre, 64, 6) for _ in range(50)]
        read = [int(ix._script("bands", ix._args("bands", tc="b", probes=ix._k.probes(None, fp)["b"],
                                                 fp=ix._k.hex(fp)), write=False)) for fp in near]
        assert sum(read) / len(read) < 0.1 * len(fps), sum(read) / len(read)
        assert ix.purge(1000.0) == 1000  # the first 1000 go, from the split keys' children too
        kept = fps[1000:]
        answers_as_a_scan(ix, kept, centre, rng)
        assert ix.forget(f"u{kept[0]}") == 1
        kept = kept[1:]
        answers_as_a_scan(ix, kept, centre, rng)
        assert ix.purge(1e6) == len(kept) and ix.stats()["band_rows"] == 0
        assert not _band_keys_moved(raw, ix._base)
        assert not [k for k in raw.scan_iter(match=f"{ix._base}[tb]b*".encode(), count=1000) if raw.hlen(k)]
        raw.close()


def test_a_tight_crowd_is_not_split_but_spilled(url: str) -> None:
    """Fingerprints a bit or two from one centre agree on most parts of a split: filed in every
    child, they would be read more, not less. Their band keys keep them in a sorted set instead, and
    every answer is still exact."""
    rng = random.Random(3)
    centre = rng.getrandbits(64)
    fps = sorted({flips(rng, centre, 64, rng.randint(0, 2)) for _ in range(600)})
    with open_index(url) as ix:
        raw = raw_redis(url.split("?")[0], decode=False)
        ix.add([(None, fp, f"u{fp}", None, float(i)) for i, fp in enumerate(fps)])
        moved = _band_keys_moved(raw, ix._base)
        assert moved["zset"] > 0 and moved["split"] == 0, moved
        raw.close()
        answers_as_a_scan(ix, fps, centre, rng)


def test_split_nodes_answer_probes_of_neighbouring_keys(url: str) -> None:
    """A layout may probe a band's neighbouring keys (``Keys.probe_keys``): a split node reached that
    way is read under the probed key's band bits and the query's other bits. Probing only the keys one
    bit from the query's own, a check finds exactly the entries within k that differ from it by one
    bit in some band (the rest, k - 1 bits at most, leaves one part of the node's children equal)."""
    rng = random.Random(11)
    centre = rng.getrandbits(64)
    fps = sorted({flips(rng, centre, 64, rng.randint(4, 6)) for _ in range(2000)})
    with open_index(url) as ix:
        ix.add([(None, fp, f"u{fp}", None, float(i)) for i, fp in enumerate(fps)])
        raw = raw_redis(url.split("?")[0], decode=False)
        assert _band_keys_moved(raw, ix._base)["split"] > 0
        raw.close()
        own, bands = ix._k.band_keys, ix._limits["bands"]["b"]

        def neighbours(tier: str, fp: int) -> list[tuple[int, int]]:
            return [(n, key ^ (1 << (shift + i))) for (n, key), (shift, width) in zip(own(tier, fp), bands, strict=True)
                    for i in range(width)]

        def one_bit_in_a_band(a: int, b: int) -> bool:
            return any(((a ^ b) >> shift & (1 << width) - 1).bit_count() == 1 for shift, width in bands)

        ix._k.probe_keys = neighbours  # type: ignore[method-assign]
        found_any = 0
        for fp in rng.sample(fps, 60):
            query = flips(rng, fp, 64, rng.randint(1, 3))
            found = {m.entry.body_fp for m in ix.lookup(None, query, title_k=0, body_k=3, limit=10_000)}
            assert found == {f for f in fps if (f ^ query).bit_count() <= 3 and one_bit_in_a_band(f, query)}
            found_any += bool(found)
        assert found_any > 40
