"""The SQLite entry table: small under a crawl's values (docs/decisions/0302-sqlite-entry-layout.md).

``first_seen`` keeps the whole second (4 bytes on disk where ``time.time()`` took 8, in the row and in
three indexes), entries of one second ordered by id; ``url_key`` is a 32-bit digest; the fingerprint
indexes are keyed on the fingerprint XOR a namespace mask, without an ``ns`` column. Every time order
is the stored times' own, never the id order: a writer whose clock is behind (or an import) adds
entries that are ordered, expired and purged by their times.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from scrapy_simhash.fingerprint.simhash import to_signed64
from scrapy_simhash.index import IndexParams, Query, open_index
from scrapy_simhash.index.sqlite.file import SCHEMA_VERSION
from scrapy_simhash.index.sqlite.index import SqliteIndex
from scrapy_simhash.index.sqlite.schema import FP_MIX, fp_key_sql

NOW = 1_796_145_886.0  # a whole second of the crawl's clock


def q(title: int | None, body: int | None, **kw: object) -> Query:
    return Query(title_fp=title, body_fp=body, title_k=2, body_k=3, **kw)  # type: ignore[arg-type]


def test_entry_layout(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    rng = random.Random(6)
    with open_index(path) as ix:
        for i in range(100):
            out = ix.check_and_add(q(rng.getrandbits(64), rng.getrandbits(64), url=f"https://news.example/{i}",
                                     seen_at=NOW + i + 0.731))
            assert out.match is None
        conn = ix._conn
        assert conn is not None
        meta = dict(conn.execute("SELECT key, value FROM simhash_meta").fetchall())
        assert json.loads(meta["schema_version"]) == SCHEMA_VERSION == 8  # the first release's
        for tier in ("title", "body"):  # keyed on the fp XOR the namespace mask, then the time: no ns column
            columns = [(r[1], r[2]) for r in conn.execute(f"PRAGMA index_xinfo(entry_{tier})") if r[5]]
            assert columns == [(-2, None), (4, "first_seen")], columns
            (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (f"entry_{tier}",)).fetchone()
            assert fp_key_sql(f"{tier}_fp") in sql
        rows = conn.execute("SELECT first_seen, typeof(first_seen), url_key, ns, title_fp FROM entry").fetchall()
        assert [r[0] for r in rows] == [NOW + i for i in range(100)]  # the whole second
        assert {r[1] for r in rows} == {"real"}  # read back as a float
        assert all(-(1 << 31) <= r[2] < 1 << 31 for r in rows)  # a 32-bit digest
        keys = conn.execute(f"SELECT {fp_key_sql('title_fp')} FROM entry ORDER BY id").fetchall()
        assert [k for (k,) in keys] == [tfp ^ (ns * FP_MIX) for _, _, _, ns, tfp in rows]
        # on disk an integer: entry_seen's record is a 4-byte header, ns 1 (no byte), 4 bytes of time
        # (a sub-second REAL: 8) and the rowid (1 byte; none for id 1)
        (payload,) = conn.execute("SELECT sum(payload) FROM dbstat WHERE name = 'entry_seen'").fetchone()
        assert payload == 100 * (4 + 4) + 99
        assert ix.forget("https://news.example/7") == 1 and ix.forget("https://news.example/x") == 0


def test_hot_statements_name_their_tier_index(tmp_path: Path) -> None:
    """The holders of a fingerprint and the band-row cleanup read ``entry_<tier>`` (``ns = ?`` alone
    led SQLite to ``entry_seen``: every entry of the namespace after the cut-off)."""
    with SqliteIndex.open(tmp_path / "i.sqlite3") as ix:
        conn, rows = ix._conn, ix._rows
        assert conn is not None
        for tier in ("title", "body"):
            key = rows.fp_key(rows.enc(12345))
            statements = ((rows.sql_first[tier], (key, 1, 12345, 0.0, 1, 0)), (rows.sql_used[tier], (key, 1, 12345)))
            for sql, args in statements:
                plan = [r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args)]
                assert plan == [plan[0]] and plan[0].startswith(f"SEARCH entry USING INDEX entry_{tier} "), plan


def test_entries_of_one_second_are_ordered_by_id(tmp_path: Path) -> None:
    """Whole seconds: two holders first seen within one second are told apart by id (commit order),
    whatever their fractions were, for the rule, ``entries()`` and ``entries(latest=1)`` alike."""
    fp = 0x1234_5678_9ABC_DEF0
    with open_index(tmp_path / "i.sqlite3") as ix:
        ix.add([(fp, None, "late-in-the-second", None, NOW + 0.9), (fp, None, "early-in-the-second", None, NOW + 0.1)])
        first, second = list(ix.entries())
        assert (first.url, second.url) == ("late-in-the-second", "early-in-the-second")
        assert first.first_seen == second.first_seen == NOW and first.id < second.id
        m = ix.check_and_add(q(fp ^ 1, None, seen_at=NOW + 5)).match
        assert m is not None and m.entry.id == first.id
        assert [m.entry.id for m in ix.lookup(fp, None, title_k=2, body_k=0, limit=5)] == [first.id, second.id]
        assert [e.id for e in ix.entries(latest=1)] == [second.id]


def test_a_writer_whose_clock_is_behind_is_ordered_by_its_time(tmp_path: Path) -> None:
    """Two processes on one file, the second one's clock an hour behind: its entry gets the higher
    id and the earlier time, and it is the earliest holder, the oldest entry, expired and purged by
    that time (the id order is never taken for the time order)."""
    path, fp = tmp_path / "i.sqlite3", 0x0F0F_0000_FFFF_1111
    with open_index(path) as ahead, open_index(path) as behind:
        a = ahead.check_and_add(q(fp, None, url="ahead", seen_at=NOW + 3600.4)).entry_id
        b = behind.add([(fp, None, "behind", None, NOW + 0.6)]) and max(e.id for e in behind.entries())
        assert a is not None and b > a
        assert [e.id for e in ahead.entries()] == [b, a]
        assert [e.id for e in ahead.entries(latest=1)] == [a]
        stats = ahead.stats()
        assert (stats["oldest"], stats["newest"]) == (NOW, NOW + 3600)
        m = ahead.check_and_add(q(fp, None, seen_at=NOW + 7200)).match
        assert m is not None and m.entry.id == b  # the earliest first seen, not the lowest id
        m = ahead.check_and_add(q(fp, None, seen_at=NOW + 7200, not_before=NOW + 1800)).match
        assert m is not None and m.entry.id == a  # b expired by its own time
        assert ahead.purge(NOW + 1800) == 1 and [e.id for e in ahead.entries()] == [a]


def test_expiry_and_purge_cut_at_the_stored_second(tmp_path: Path) -> None:
    """An entry first seen at 0.7 past a second is stored at the second: a cut-off inside that
    second already excludes it (expiry up to a second early), and purge agrees with the rule."""
    fp = 0x7777_0000_0000_0001
    with open_index(tmp_path / "i.sqlite3") as ix:
        ix.check_and_add(q(fp, None, url="u", seen_at=NOW + 0.7))
        assert ix.lookup(fp, None, title_k=0, body_k=0, not_before=NOW + 0.5) == []
        assert len(ix.lookup(fp, None, title_k=0, body_k=0, not_before=NOW)) == 1
        assert ix.purge(NOW) == 0 and ix.purge(NOW + 0.5) == 1


def test_namespaces_whose_fingerprints_share_an_index_key(tmp_path: Path) -> None:
    """Namespace b holds the fingerprint whose index key is that of namespace a's: each namespace
    still finds, and drops the band rows of, its own entries only (``ns`` and the fingerprint are
    compared on the row)."""
    path, fp = tmp_path / "i.sqlite3", 0x0123_4567_89AB_CDEF
    with open_index(path, namespace="a") as a, open_index(path, namespace="b") as b:
        assert (a._ns_id, b._ns_id) == (1, 2)
        other = fp ^ (1 * FP_MIX) ^ (2 * FP_MIX)  # b's key of `other` is a's key of `fp`
        assert b._rows.fp_key(to_signed64(other)) == a._rows.fp_key(to_signed64(fp))
        ida = a.check_and_add(q(fp, fp, url="a", seen_at=NOW)).entry_id
        idb = b.check_and_add(q(other, other, url="b", seen_at=NOW - 10)).entry_id
        assert [m.entry.id for m in a.lookup(fp, fp, title_k=0, body_k=0, limit=5)] == [ida, ida]
        assert [m.entry.id for m in b.lookup(other, other, title_k=0, body_k=0, limit=5)] == [idb, idb]
        assert a.lookup(other, other, title_k=0, body_k=0) == [] and b.lookup(fp, fp, title_k=0, body_k=0) == []
        assert a.forget(ida) == 1  # a's band rows go, b's stay
        lo, hi = a._rows.key_range
        conn = a._conn
        assert conn is not None
        assert conn.execute("SELECT count(*) FROM band WHERE key >= ? AND key < ?", (lo, hi)).fetchone() == (0,)
        assert [m.entry.id for m in b.lookup(other, None, title_k=0, body_k=0)] == [idb]


def test_128_bit_fingerprints_are_their_own_index_key(tmp_path: Path) -> None:
    fp = (0xDEAD_BEEF << 96) | 12345
    with open_index(tmp_path / "i.sqlite3", params=IndexParams(bits=128)) as ix:
        ident = ix.check_and_add(Query(title_fp=fp, body_fp=None, title_k=2, body_k=3, seen_at=NOW)).entry_id
        conn = ix._conn
        assert conn is not None
        assert conn.execute(f"SELECT {fp_key_sql('title_fp')} FROM entry").fetchone() == (fp.to_bytes(16, "big"),)
        assert [m.entry.id for m in ix.lookup(fp ^ 3, None, title_k=2, body_k=0)] == [ident]
