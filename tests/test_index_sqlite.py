"""The SQLite band index against every requirement of issue 3: exact, atomic, durable,
self-describing, safe to open, flat under skew, maintainable. Real files, real processes."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlitedict import SqliteDict

from scrapy_simhash.index import (
    BandIndex,
    Decision,
    Entry,
    IndexError_,
    IndexOpenError,
    IndexParams,
    IndexWriteError,
    Match,
    Outcome,
    ParameterMismatch,
    Query,
    open_index,
)
from scrapy_simhash.index.sqlite import FORMAT, META_TABLE, SCHEMA_VERSION, SqliteIndex
from scrapy_simhash.simhash import hamming_distance

REPO = Path(__file__).resolve().parents[1]
M64 = (1 << 64) - 1


def q(title_fp: int | None, body_fp: int | None, /, *, tk: int = 2, bk: int = 3, **kw: object) -> Query:
    return Query(title_fp=title_fp, body_fp=body_fp, title_k=tk, body_k=bk, **kw)  # type: ignore[arg-type]


def flip(fp: int, positions: tuple[int, ...] | list[int]) -> int:
    for p in positions:
        fp ^= 1 << p
    return fp


def band_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        n = conn.execute("SELECT count(*) FROM band").fetchone()[0]
    conn.close()
    return n


def file_state(path: Path) -> tuple[str, int, list[str]]:
    """Content hash, mtime and sibling files: enough to prove a file was not touched."""
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_mtime_ns,
        sorted(p.name for p in path.parent.iterdir()),
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "index.sqlite3"


@pytest.fixture
def index(path: Path):
    ix = open_index(path)
    yield ix
    ix.close()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# -- open_index ---------------------------------------------------------------------------------


def test_open_index_plain_path_pathlike_and_protocol(path: Path) -> None:
    with open_index(str(path)) as ix:
        assert isinstance(ix, SqliteIndex)
        assert isinstance(ix, BandIndex)
        assert ix.location == str(path)
        assert ix.namespace == "default"
        assert ix.params == IndexParams()
    with open_index(path) as ix:  # os.PathLike, the file now exists
        assert ix.count() == 0


def test_sqlite_urls_follow_sqlalchemy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_index("sqlite:///rel/index.sqlite3") as ix:  # three slashes: relative to the cwd
        assert ix.location == str(tmp_path / "rel" / "index.sqlite3")
    absolute = tmp_path / "abs.sqlite3"
    url = f"sqlite:///{absolute}"  # absolute path starts with "/": four slashes in all
    assert url.startswith("sqlite:////")
    with open_index(url) as ix:
        assert ix.location == str(absolute)
    assert absolute.exists() and (tmp_path / "rel" / "index.sqlite3").exists()


@pytest.mark.parametrize("url", ["redis://:s3cret@localhost:6379/0", "rediss://cache.example:6380/1"])
def test_redis_urls_are_a_clear_error(url: str) -> None:
    with pytest.raises(IndexOpenError) as err:
        open_index(url)
    message = str(err.value)
    assert "not available yet" in message and "scrapy-simhash[redis]" in message
    assert "s3cret" not in message


@pytest.mark.parametrize("url", ["postgres://db/x", "mongodb://h/x", "sqlite://", "sqlite:///", "sqlite://rel.db"])
def test_unknown_scheme_or_empty_sqlite_url(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IndexOpenError, match=r"cannot open|names no file"):
        open_index(url)
    assert list(tmp_path.iterdir()) == []


def test_missing_file_with_create_false_or_readonly(path: Path) -> None:
    for kwargs in ({"create": False}, {"readonly": True}):
        with pytest.raises(IndexOpenError, match=str(path)):
            open_index(path, **kwargs)
    assert not path.exists()


def test_reexported_names() -> None:
    import scrapy_simhash.index as mod

    for name in ("BandIndex", "IndexParams", "Query", "Outcome", "Match", "Entry", "Decision",
                 "IndexOpenError", "ParameterMismatch", "IndexWriteError", "IndexError_", "open_index"):
        assert hasattr(mod, name), name
    assert {Outcome, Match, Entry, Decision} <= {getattr(mod, n) for n in mod.__all__}


# -- exactness ----------------------------------------------------------------------------------


def test_every_flip_pattern_up_to_k_is_found_and_k_plus_1_never(index: SqliteIndex) -> None:
    """Title tier, k=2 over 64 bits: all 2,081 patterns of ≤2 flips of three random fingerprints
    are found at their exact distance; all 41,664 patterns of 3 flips are never returned."""
    rng = random.Random(20240601)
    bases = [rng.getrandbits(64) for _ in range(3)]
    for base in bases:
        assert index.check_and_add(q(base, None)).match is None
    for n, base in enumerate(bases):
        patterns = [c for r in range(3) for c in itertools.combinations(range(64), r)]
        assert len(patterns) == 2081
        for positions in patterns:
            found = index.lookup(flip(base, positions), None, title_k=2, body_k=0)
            assert [(m.entry.title_fp, m.distance) for m in found] == [(base, len(positions))], positions
        if n == 0:
            for positions in itertools.combinations(range(64), 3):
                assert index.lookup(flip(base, positions), None, title_k=2, body_k=0) == []


def test_body_tier_k3_every_pattern_and_stored_side(path: Path) -> None:
    """Body tier, k=3 (4 bands): every ≤3-flip pattern of a stored fingerprint is found; stored
    the other way round (all 43,745 patterns of ≤3 flips stored), a query returns exactly the
    2,081 within k=2 when asked for k=2, each at its true distance, nothing beyond."""
    rng = random.Random(7)
    base = rng.getrandbits(64)
    with open_index(path) as ix:
        ix.add([(None, base, None, None, 1.0)])
        for r in range(4):
            for positions in itertools.combinations(range(64), r):
                found = ix.lookup(None, flip(base, positions), title_k=0, body_k=3)
                assert [(m.tier, m.distance) for m in found] == [("body", r)], positions
        for positions in rng.sample(list(itertools.combinations(range(64), 4)), 3000):
            assert ix.lookup(None, flip(base, positions), title_k=0, body_k=3) == []
    other = path.with_name("stored.sqlite3")
    with open_index(other) as ix:
        stored = [flip(base, c) for r in range(4) for c in itertools.combinations(range(64), r)]
        assert ix.add([(None, fp, f"u{i}", None, float(i)) for i, fp in enumerate(stored)]) == 43745
        found = ix.lookup(None, base, title_k=0, body_k=2, limit=10**6)
        expected = {fp for fp in stored if hamming_distance(fp, base) <= 2}
        assert len(expected) == 2081
        assert {m.entry.body_fp for m in found} == expected
        assert all(m.distance == hamming_distance(m.entry.body_fp, base) for m in found)  # type: ignore[arg-type]
        assert [m.distance for m in found] == sorted(m.distance for m in found)


@pytest.fixture(scope="module")
def shared_indexes(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("prop")
    ixs = {64: open_index(d / "i64.sqlite3"), 128: open_index(d / "i128.sqlite3", params=IndexParams(bits=128))}
    yield ixs
    for ix in ixs.values():
        ix.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), bits=st.sampled_from([64, 128]), tier=st.sampled_from(["title", "body"]))
def test_property_random_fingerprints(shared_indexes, data, bits: int, tier: str) -> None:
    """Random fingerprint, random k up to the layout's limit (smaller k is exact too), random flips:
    within k always found at the exact distance; k+1 … k+6 flips never returned."""
    ix = shared_indexes[bits]
    max_k = (ix.params.title_bands if tier == "title" else ix.params.body_bands) - 1
    base = data.draw(st.integers(0, (1 << bits) - 1), "base")
    k = data.draw(st.integers(0, max_k), "k")
    ix.add([(base, None, None, None, 1.0)] if tier == "title" else [(None, base, None, None, 1.0)])

    def near(fp: int) -> set[int]:
        args = (fp, None) if tier == "title" else (None, fp)
        kw = {"title_k": k, "body_k": 0} if tier == "title" else {"title_k": 0, "body_k": k}
        found = ix.lookup(*args, **kw, limit=10**6)
        for m in found:
            stored = m.entry.title_fp if tier == "title" else m.entry.body_fp
            assert m.tier == tier and m.distance == hamming_distance(stored, fp) <= k
        return {m.entry.title_fp if tier == "title" else m.entry.body_fp for m in found}

    close = data.draw(st.lists(st.integers(0, bits - 1), max_size=k, unique=True), "close")
    assert base in near(flip(base, close))
    far = data.draw(st.lists(st.integers(0, bits - 1), min_size=k + 1, max_size=k + 6, unique=True), "far")
    assert base not in near(flip(base, far))


def test_nearest_wins_then_earliest(index: SqliteIndex) -> None:
    base = 0x0123_4567_89AB_CDEF
    index.add([(flip(base, (1, 2)), None, "two", None, 10.0), (flip(base, (9,)), None, "one-late", None, 30.0),
               (flip(base, (40,)), None, "one-early", None, 20.0)])
    out = index.check_and_add(q(base, None))
    assert out.match is not None and out.entry_id is None
    assert (out.match.distance, out.match.entry.url) == (1, "one-early")
    found = index.lookup(base, None, title_k=2, body_k=0, limit=3)
    assert [(m.distance, m.entry.url) for m in found] == [(1, "one-early"), (1, "one-late"), (2, "two")]
    assert [m.entry.url for m in index.lookup(base, None, title_k=2, body_k=0, limit=2)] == ["one-early", "one-late"]


def test_k_beyond_the_layout_is_a_value_error(index: SqliteIndex) -> None:
    with pytest.raises(ValueError, match=r"title distance 3 .*0\.\.2"):
        index.check_and_add(q(1, 2, tk=3))
    with pytest.raises(ValueError, match=r"body distance 4 .*0\.\.3"):
        index.lookup(1, 2, title_k=2, body_k=4)
    with pytest.raises(ValueError):
        index.check_and_add(q(1, 2, tk=-1))
    assert index.count() == 0


def test_bad_fingerprints_and_empty_queries(index: SqliteIndex) -> None:
    for bad in (-1, 1 << 64, "12"):
        with pytest.raises(ValueError, match="unsigned 64-bit"):
            index.check_and_add(q(bad, None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="title or a body"):
        index.check_and_add(q(None, None))
    with pytest.raises(ValueError, match="title or a body"):
        index.add([(None, None, "u", "t", 1.0)])
    assert index.count() == 0


def test_signed_64_bit_mapping_round_trips(index: SqliteIndex, path: Path) -> None:
    top = (1 << 63) | 0xABC
    out = index.check_and_add(q(top, M64))
    assert out.match is None
    [entry] = list(index.entries())
    assert (entry.title_fp, entry.body_fp) == (top, M64)
    conn = sqlite3.connect(path)
    raw = conn.execute("SELECT title_fp, body_fp FROM entry").fetchone()
    conn.close()
    assert raw == (top - (1 << 64), -1)  # stored signed, read back unsigned
    assert index.check_and_add(q(top ^ 1, None)).match.distance == 1  # type: ignore[union-attr]


def test_128_bit_index(path: Path) -> None:
    with open_index(path, params=IndexParams(bits=128)) as ix:
        base = (1 << 127) | 12345
        assert ix.check_and_add(q(base, base >> 1)).match is None
        m = ix.check_and_add(q(flip(base, (0, 127)), None)).match
        assert m is not None and (m.tier, m.distance, m.entry.title_fp) == ("title", 2, base)
        assert ix.check_and_add(q(flip(base, (0, 64, 127)), None)).match is None
        with pytest.raises(ValueError, match="128-bit"):
            ix.lookup(1 << 128, None, title_k=0, body_k=0)


# -- the tiered rule ----------------------------------------------------------------------------


def test_title_tier_comes_first(index: SqliteIndex) -> None:
    a = index.check_and_add(q(0xAAAA_0000_0000_0001, 0x1111_0000_0000_0000, url="a")).entry_id
    b = index.check_and_add(q(0x0000_5555_0000_0002, 0x2222_0000_0000_0000, url="b")).entry_id
    assert a and b
    # title within 2 of a's, body identical to b's: the title tier answers, with a
    out = index.check_and_add(q(flip(0xAAAA_0000_0000_0001, (60, 61)), 0x2222_0000_0000_0000, url="c"))
    assert out.match is not None and (out.match.tier, out.match.distance, out.match.entry.id) == ("title", 2, a)


def test_body_tier_when_title_is_far_or_missing(index: SqliteIndex) -> None:
    a = index.check_and_add(q(0xAAAA_0000_0000_0001, 0x1111_0000_0000_0000, url="a")).entry_id
    far_title = flip(0xAAAA_0000_0000_0001, (3, 4, 5))  # 3 > title k
    out = index.check_and_add(q(far_title, flip(0x1111_0000_0000_0000, (1, 2, 3)), url="b"))
    assert out.match is not None and (out.match.tier, out.match.distance, out.match.entry.id) == ("body", 3, a)
    out = index.check_and_add(q(None, flip(0x1111_0000_0000_0000, (7,)), url="c"))
    assert out.match is not None and (out.match.tier, out.match.distance) == ("body", 1)
    # a title-only item never matches through the body tier
    out = index.check_and_add(q(far_title ^ (1 << 50), None, url="d"))
    assert out.match is None and out.entry_id is not None
    assert index.count() == 2


def test_new_item_is_added_with_its_data(index: SqliteIndex) -> None:
    out = index.check_and_add(q(10, 20, url="https://x/1", title="标题" * 200, seen_at=1234.5))
    assert out.match is None and isinstance(out.entry_id, int)
    [entry] = list(index.entries())
    assert (entry.id, entry.url, entry.first_seen, entry.title_fp, entry.body_fp) == (
        out.entry_id, "https://x/1", 1234.5, 10, 20)
    assert entry.title == ("标题" * 200)[:300] and entry.namespace == "default"
    before = time.time()
    assert index.check_and_add(q(0xFFFF_0000_FFFF_0000, 0xFF00_FF00_FF00_FF00)).match is None  # seen_at: now
    assert max(e.first_seen for e in index.entries()) >= before


# -- expiry, namespaces, maintenance ------------------------------------------------------------


def test_ttl_not_before(index: SqliteIndex) -> None:
    fp = 0xFEED_0000_0000_BEEF
    index.check_and_add(q(fp, None, url="old", seen_at=1000.0))
    assert index.lookup(fp, None, title_k=2, body_k=0, not_before=2000.0) == []
    assert len(index.lookup(fp, None, title_k=2, body_k=0)) == 1
    out = index.check_and_add(q(fp ^ 1, None, url="again", seen_at=5000.0, not_before=2000.0))
    assert out.match is None  # the old one expired: admitted again
    # the nearest *non-expired* entry answers: same fp at old and new → the new one
    m = index.check_and_add(q(fp, None, seen_at=6000.0, not_before=2000.0)).match
    assert m is not None and (m.entry.url, m.distance) == ("again", 1)
    # expired closer (distance 0, "old") loses against a valid farther one (distance 1)
    m = index.check_and_add(q(fp, None, seen_at=6000.0, not_before=1500.0)).match
    assert m is not None and m.entry.url == "again"
    m = index.check_and_add(q(fp, None, seen_at=6000.0)).match  # no TTL: the original
    assert m is not None and (m.entry.url, m.distance) == ("old", 0)


def test_namespaces_are_isolated(path: Path) -> None:
    with open_index(path, namespace="a") as a, open_index(path, namespace="b") as b:
        assert a.check_and_add(q(42, 43)).match is None
        assert b.check_and_add(q(42, 43)).match is None  # same story, other namespace: new there too
        assert a.check_and_add(q(42, 43)).match is not None
        b.check_and_add(q(1 << 60, None))
        assert (a.count(), b.count()) == (1, 2)
        rows_before = band_rows(path)
        assert a.reset() == 1
        assert (a.count(), b.count()) == (0, 2)
        assert band_rows(path) == rows_before - 7  # only a's 3 title + 4 body band rows went
        assert b.check_and_add(q(42, None)).match is not None  # b still finds its entry
        assert a.check_and_add(q(42, None)).match is None
        stats = b.stats()
        assert stats["namespaces"]["a"]["entries"] == 1 and stats["namespaces"]["b"]["entries"] == 2


def test_purge_removes_old_entries_and_unshared_band_rows(index: SqliteIndex, path: Path) -> None:
    shared, lonely = 0x1234_5678_0000_0000, 0x0000_0000_8765_4321
    index.add([(shared, None, "old-shared", None, 100.0), (lonely, None, "old-lonely", None, 100.0),
               (shared, None, "new-shared", None, 900.0)])
    assert band_rows(path) == 6
    assert index.purge(500.0) == 2
    assert [e.url for e in index.entries()] == ["new-shared"]
    assert band_rows(path) == 3  # the shared fingerprint keeps its rows, the lonely one lost them
    assert index.check_and_add(q(shared, None)).match.entry.url == "new-shared"  # type: ignore[union-attr]
    assert index.check_and_add(q(lonely, None)).match is None
    assert index.purge(0.0) == 0


def test_purge_in_batches(index: SqliteIndex, path: Path) -> None:
    rng = random.Random(3)
    index.add([(rng.getrandbits(64), rng.getrandbits(64), None, None, float(i)) for i in range(1200)])
    assert index.purge(1000.0, batch=250) == 1000
    assert index.count() == 200 and band_rows(path) == 200 * 7


def test_forget_by_id_and_by_url(index: SqliteIndex, path: Path) -> None:
    a = index.check_and_add(q(0xF0F0, 0x0F0F_0000, url="https://a", seen_at=100.0)).entry_id
    index.add([(0xF0F0, None, "https://b", None, 200.0)])  # shares a's title fingerprint
    dup = index.check_and_add(q(0xF0F0 ^ 1, None, url="https://dup", seen_at=300.0))
    assert dup.match is not None and dup.match.entry.id == a  # the earliest of the two
    assert band_rows(path) == 7
    assert index.forget(a) == 1  # type: ignore[arg-type]
    assert band_rows(path) == 3  # body rows gone, title rows kept for https://b
    assert index.explain("https://dup").original is None  # type: ignore[union-attr]
    assert index.forget("https://b") == 1
    assert band_rows(path) == 0 and index.count() == 0
    assert index.forget("https://nowhere") == 0 and index.forget(99999) == 0
    assert index.forget("https://dup") == 0 and index.explain("https://dup") is None
    with pytest.raises(TypeError):
        index.forget(1.5)  # type: ignore[arg-type]


def test_explain(index: SqliteIndex) -> None:
    orig = index.check_and_add(q(0xABCDEF, 0x123456, url="https://orig", title="原文", seen_at=100.0))
    assert index.explain("https://orig") is None  # new items have no decision
    index.check_and_add(q(0xABCDEF ^ 3, None, url="https://copy", seen_at=200.0))
    d = index.explain("https://copy")
    assert isinstance(d, Decision)
    assert (d.status, d.tier, d.distance, d.decided_at) == ("duplicate", "title", 2, 200.0)
    assert d.original is not None and (d.original.id, d.original.title) == (orig.entry_id, "原文")
    flagged = {"title": "duplicate", "body": "flagged"}
    index.check_and_add(q(None, 0x123456 ^ 7, url="https://copy", seen_at=300.0, statuses=flagged))
    d = index.explain("https://copy")  # the latest decision replaces the earlier one
    assert d is not None and (d.status, d.tier, d.distance, d.decided_at) == ("flagged", "body", 3, 300.0)
    assert index.explain("https://never-seen") is None
    assert index.stats()["decisions"] == 1
    index.check_and_add(q(0xABCDEF ^ 1, None, url="https://copy2", title="副本", seen_at=400.0))
    recent = index.decisions(10)
    assert [(d.url, d.title, d.decided_at) for d in recent] == [("https://copy2", "副本", 400.0),
                                                                 ("https://copy", None, 300.0)]
    assert recent[0].original is not None and recent[0].original.url == "https://orig"
    assert [d.url for d in index.decisions(1)] == ["https://copy2"]
    index.forget("https://orig")  # the original goes: its decisions stay, without it
    assert index.explain("https://copy2").original is None


def test_stats(index: SqliteIndex, path: Path) -> None:
    index.add([(1, 2, "u1", None, 50.0), (3 << 30, None, "u2", None, 70.0)])
    index.check_and_add(q(1, None, url="u3"))
    s = index.stats()
    assert s["location"] == str(path) and s["backend"] == "sqlite"
    assert s["file_size"] >= path.stat().st_size > 0
    assert s["params"] == IndexParams().as_dict()
    assert (s["format"], s["schema_version"]) == (FORMAT, SCHEMA_VERSION)
    assert (s["entries"], s["oldest"], s["newest"], s["decisions"]) == (2, 50.0, 70.0, 1)
    assert s["namespaces"] == {"default": {"entries": 2, "oldest": 50.0, "newest": 70.0, "decisions": 1}}
    assert s["title_layout"] == [[0, 22], [22, 21], [43, 21]]
    assert s["body_layout"] == [[0, 16], [16, 16], [32, 16], [48, 16]]
    assert s["band_rows"] == 7 + 3 and s["readonly"] is False
    assert time.time() - 3600 < s["created"] <= time.time()
    json.dumps(s)  # plain data, printable by the command line


def test_entries_oldest_first_across_pages(index: SqliteIndex) -> None:
    rng = random.Random(11)
    times = [float(rng.randrange(10**6)) for _ in range(2500)]
    index.add([(rng.getrandbits(64), None, f"u{i}", None, t) for i, t in enumerate(times)])
    got = list(index.entries())
    assert len(got) == 2500 and len({e.id for e in got}) == 2500
    assert [e.first_seen for e in got] == sorted(times)
    assert index.count() == 2500


def test_close_is_idempotent_and_context_manager(path: Path) -> None:
    with open_index(path) as ix:
        ix.check_and_add(q(5, 6))
    ix.close()
    ix.close()
    with pytest.raises(IndexError_, match="closed"):
        ix.check_and_add(q(7, 8))
    with pytest.raises(IndexError_, match="closed"):
        ix.count()
    assert "closed" in repr(ix)


def test_calls_from_several_threads(index: SqliteIndex) -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(50):
                assert index.check_and_add(q(rng.getrandbits(64), rng.getrandbits(64))).match is None
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and index.count() == 200


def test_lock_held_past_busy_timeout_is_a_write_error(path: Path) -> None:
    with open_index(path, busy_timeout=0.2) as ix:
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        with pytest.raises(IndexWriteError, match=f"{path}.*write lock"):
            ix.check_and_add(q(1, 2))
        assert time.monotonic() - start < 5
        assert ix.lookup(1, None, title_k=0, body_k=0) == []  # readers are not blocked (WAL)
        other.execute("ROLLBACK")
        other.close()
        assert ix.check_and_add(q(1, 2)).match is None


# -- flat cost under skew -----------------------------------------------------------------------


def test_identical_fingerprints_are_stored_once_in_the_band_table(index: SqliteIndex, path: Path) -> None:
    boiler_title, empty_body = 0x5555_AAAA_5555_AAAA, 0x0
    index.add([(boiler_title, empty_body, f"https://site/{i}", None, float(i)) for i in range(3000)])
    assert index.count() == 3000
    assert band_rows(path) == 3 + 4  # one row per band per fingerprint, not per entry
    # TTL re-admits the same fingerprints: still one row per band
    for day in range(1, 31):
        out = index.check_and_add(q(boiler_title, empty_body, seen_at=1e6 * day, not_before=1e6 * day - 1))
        assert out.match is None
    assert index.count() == 3030 and band_rows(path) == 7
    # a check against the crowd reads one candidate per band and answers with the earliest live entry
    with sqlite3.connect(path) as conn:
        keys = index._keys("title", boiler_title)
        assert len(conn.execute(index._sql_band["title"], keys).fetchall()) == 3
    conn.close()
    m = index.check_and_add(q(boiler_title, None, seen_at=4e7, not_before=15e6)).match
    assert m is not None and m.entry.first_seen == 15e6


def test_hot_queries_use_indexes(index: SqliteIndex) -> None:
    """O(log n) per step: every statement of the hot path is an index SEARCH, never a SCAN."""
    conn = index._conn
    assert conn is not None
    plans = []
    for tier in ("title", "body"):
        keys = index._keys(tier, 12345)
        plans += conn.execute("EXPLAIN QUERY PLAN " + index._sql_band[tier], keys).fetchall()
        plans += conn.execute("EXPLAIN QUERY PLAN " + index._sql_first[tier], (1, 5, 0.0, 1)).fetchall()
        plans += conn.execute("EXPLAIN QUERY PLAN " + index._sql_used[tier], (1, 5)).fetchall()
    details = [row[3] for row in plans]
    assert details and all(d.startswith("SEARCH") for d in details), details
    assert any("entry_title" in d for d in details) and any("entry_body" in d for d in details)


# -- self-describing, safe to open --------------------------------------------------------------


def test_meta_is_a_json_sqlitedict_mapping(path: Path) -> None:
    params = IndexParams(bits=64, title_bands=2, body_bands=5, tokenizer="jieba-test", features_version="9")
    open_index(path, params=params).close()
    conn = sqlite3.connect(path)
    raw = dict(conn.execute(f"SELECT key, value FROM {META_TABLE}").fetchall())
    conn.close()
    assert all(isinstance(v, str) for v in raw.values())  # text, not pickled bytes
    decoded = {k: json.loads(v) for k, v in raw.items()}
    # any tool can read it through sqlitedict (journal_mode="WAL": its default would switch the file)
    with SqliteDict(str(path), tablename=META_TABLE, flag="r", decode=json.loads, journal_mode="WAL") as sd:
        assert dict(sd.items()) == decoded
    assert decoded["format"] == FORMAT and decoded["schema_version"] == SCHEMA_VERSION
    assert decoded["params"] == params.as_dict()
    assert decoded["title_layout"] == [[0, 32], [32, 32]] and len(decoded["body_layout"]) == 5
    with open_index(path) as ix:  # params=None: what the file has
        assert ix.params == params


def test_parameter_mismatch_names_file_and_fields(path: Path) -> None:
    open_index(path).close()
    before = file_state(path)
    wanted = IndexParams(title_bands=4, tokenizer="pkuseg")
    with pytest.raises(ParameterMismatch) as err:
        open_index(path, params=wanted)
    message = str(err.value)
    assert str(path) in message
    assert "title_bands: index 3 vs requested 4" in message
    assert "tokenizer: index 'jieba' vs requested 'pkuseg'" in message
    assert "body_bands" not in message and "bits" not in message
    assert isinstance(err.value, IndexOpenError)
    assert file_state(path) == before


def test_more_bands_than_requested_answer_smaller_distances(path: Path) -> None:
    # An index built for title <= 2 / body <= 3 answers title <= 1 / body <= 2 exactly: no new index
    # is needed to lower a threshold; raising one past the layout is a mismatch.
    open_index(path).close()
    with open_index(path, params=IndexParams(title_bands=2, body_bands=3)) as ix:
        assert ix.params == IndexParams()  # what the file has
    with pytest.raises(ParameterMismatch, match="body_bands: index 4 vs requested 5"):
        open_index(path, params=IndexParams(body_bands=5))
    with pytest.raises(ParameterMismatch, match="bits: index 64 vs requested 128"):
        open_index(path, params=IndexParams(bits=128, title_bands=2))


def test_foreign_sqlite_file_is_refused_untouched(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB)")
    conn.execute("CREATE TABLE entry (id INTEGER PRIMARY KEY, url TEXT)")
    conn.execute("INSERT INTO meta VALUES ('format', 'someone-else')")
    conn.commit()
    conn.close()
    time.sleep(0.01)
    before = file_state(path)
    for kwargs in ({}, {"readonly": True}, {"params": IndexParams()}):
        with pytest.raises(IndexOpenError, match=f"{path}.*not a scrapy-simhash index"):
            open_index(path, **kwargs)
    assert file_state(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


def test_garbage_and_empty_files_are_refused_untouched(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(random.Random(5).randbytes(8192))
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    text = tmp_path / "notes.sqlite3"
    text.write_text("SQLite format 3 is what this file talks about, but it is text.\n" * 10)
    for f in (garbage, empty, text):
        before = file_state(f)
        with pytest.raises(IndexOpenError, match=str(f)):
            open_index(f)
        assert file_state(f) == before


def test_truncated_file_is_refused(path: Path) -> None:
    rng = random.Random(9)
    with open_index(path) as ix:
        ix.add([(rng.getrandbits(64), rng.getrandbits(64), f"https://x/{i}", "t" * 50, 1.0) for i in range(4000)])
    data = path.read_bytes()
    assert len(data) > 200_000
    for size in (len(data) // 2, 4096 * 3, 50):
        path.write_bytes(data[:size])
        with pytest.raises(IndexOpenError, match=f"{path}.*truncated"):
            open_index(path)
        assert path.stat().st_size == size  # nothing recreated


def test_corrupt_schema_page_is_refused(path: Path) -> None:
    open_index(path).close()
    data = bytearray(path.read_bytes())
    data[100:4096] = random.Random(1).randbytes(3996)  # page 1 after the header: the schema
    path.write_bytes(bytes(data))
    with pytest.raises(IndexOpenError, match=str(path)):
        open_index(path)
    assert path.read_bytes() == bytes(data)


def test_damaged_index_missing_a_table(path: Path) -> None:
    open_index(path).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE band")
    conn.commit()
    conn.close()
    with pytest.raises(IndexOpenError, match=f"{path}.*damaged.*band"):
        open_index(path)


class _Boom:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # unpickling this would create the marker file
        return (open, (self.marker, "w"))


def test_nothing_read_from_the_file_is_unpickled(path: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    open_index(path).close()
    payload = pickle.dumps(_Boom(str(marker)))
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {META_TABLE} SET value = ? WHERE key = 'params'", (payload,))
    conn.commit()
    conn.close()
    with pytest.raises(IndexOpenError, match=f"{path}.*unreadable"):
        open_index(path)
    assert not marker.exists()
    pickle.loads(payload).close()  # the payload is real: unpickling it does create the marker
    assert marker.exists()


def test_newer_schema_version_is_refused(path: Path) -> None:
    open_index(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE {META_TABLE} SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(IndexOpenError, match=f"{path}.*schema version 99.*upgrade"):
        open_index(path)


def test_readonly_open_reads_and_refuses_writes(path: Path) -> None:
    with open_index(path) as ix:
        ix.check_and_add(q(77, 88, url="orig"))
        ix.check_and_add(q(77, None, url="dup"))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with open_index(path, readonly=True) as ro:
        assert ro.count() == 1 and ro.stats()["readonly"] is True
        assert ro.lookup(77, None, title_k=2, body_k=0)[0].entry.url == "orig"
        assert ro.explain("dup").tier == "title"  # type: ignore[union-attr]
        assert [e.url for e in ro.entries()] == ["orig"]
        for write in (lambda: ro.check_and_add(q(1, 2)), lambda: ro.add([(1, 2, None, None, 1.0)]),
                      lambda: ro.forget("orig"), lambda: ro.purge(time.time()), ro.reset):
            with pytest.raises(IndexWriteError, match=f"{path} was opened read-only"):
                write()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):  # a truly read-only connection
            ro._conn.execute("DELETE FROM entry")  # type: ignore[union-attr]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    with open_index(path, readonly=True, namespace="elsewhere") as ro:  # unknown namespace: empty, no write
        assert ro.count() == 0 and ro.lookup(77, None, title_k=2, body_k=0) == [] and list(ro.entries()) == []


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_file_on_disk(path: Path) -> None:  # pragma: no cover - not run as root
    with open_index(path) as ix:
        ix.check_and_add(q(1, 2))
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        with pytest.raises(IndexOpenError, match=f"{path}.*readonly=True"):
            open_index(path)
        with open_index(path, readonly=True) as ro:
            assert ro.count() == 1
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)


# -- real processes: atomic, durable ------------------------------------------------------------

_CONTEND = textwrap.dedent(
    """
    import json, os, sys, time
    from scrapy_simhash.index import open_index, Query
    path, go, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    def wait():
        while not os.path.exists(go):
            time.sleep(0.0005)
    if mode == "create":
        wait()
    ix = open_index(path)
    print("ready", flush=True)
    if mode != "create":
        wait()
    title, body = 0x7A3F_0000_1234_5678 ^ (1 << n), 0x0BAD_CAFE_0000_0000 ^ (1 << (n + 8))
    out = ix.check_and_add(Query(title_fp=title, body_fp=body, title_k=2, body_k=3, url=f"proc-{n}"))
    print(json.dumps({"new": out.match is None, "id": out.entry_id}), flush=True)
    ix.close()
    """
)


def _contend(path: Path, go: Path, mode: str, n_procs: int = 4) -> list[dict]:
    procs = [
        subprocess.Popen([sys.executable, "-c", _CONTEND, str(path), str(go), mode, str(n)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=REPO)
        for n in range(n_procs)
    ]
    if mode != "create":  # every process has the index open before the start signal
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    else:
        time.sleep(0.3)  # let them all start polling
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_concurrent_creation_then_same_story(tmp_path: Path) -> None:
    """Four processes create the same new file at the same moment and add the same story."""
    for round_ in range(2):
        path, go = tmp_path / f"c{round_}.sqlite3", tmp_path / f"go{round_}"
        results = _contend(path, go, "create")
        assert sum(r["new"] for r in results) == 1, results
        with open_index(path) as ix:
            assert ix.count() == 1
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".creating")] == []


def test_atomic_check_and_add_across_processes(tmp_path: Path) -> None:
    """Four processes with the index open add near-identical stories at one signal: one wins."""
    path = tmp_path / "atomic.sqlite3"
    open_index(path).close()
    for round_ in range(3):
        with open_index(path) as ix:
            ix.reset()
        results = _contend(path, tmp_path / f"go{round_}", "open")
        assert sum(r["new"] for r in results) == 1, results
        with open_index(path) as ix:
            assert ix.count() == 1
            assert sum(1 for n in range(4) if ix.explain(f"proc-{n}") is not None) == 3


_WRITER = textwrap.dedent(
    """
    import random, sys
    from scrapy_simhash.index import open_index, Query
    ix = open_index(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    print("ready", flush=True)
    n = 0
    while True:
        n += 1
        fp = rng.getrandbits(64)
        if n % 5 == 0:
            fp = 0x5A5A_5A5A_5A5A_5A5A ^ (1 << rng.randrange(64))  # some duplicates too
        out = ix.check_and_add(Query(title_fp=fp, body_fp=rng.getrandbits(64), title_k=2, body_k=3,
                                     url=f"https://x/{sys.argv[2]}/{n}", title="t" * rng.randrange(200)))
        if out.match is None:
            print(out.entry_id, flush=True)
    """
)


def test_durable_after_sigkill(path: Path) -> None:
    """A writer killed at random moments: the file opens, passes integrity_check, and holds every
    entry that was reported new."""
    rng = random.Random(1234)
    reported: set[int] = set()
    open_index(path).close()
    for round_ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(round_)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=REPO)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, err
        ids = {int(line) for line in out.split()}
        reported |= ids
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
        with open_index(path) as ix:
            stored = {e.id for e in ix.entries()}
            assert reported <= stored, sorted(reported - stored)[:10]
            assert ix.count() == len(stored)
    assert len(reported) > 20  # the writers did get work done between kills
