"""Every behaviour of the band index protocol, run against each backend: a real SQLite file and a
real Redis server. Same inputs, same verdicts: exact, tiered, expiring, namespaced, maintainable,
self-checking, atomic across real processes.

Redis: the server named by ``SIMHASH_TEST_REDIS_URL``, else one the suite starts itself
(:mod:`tests.redis_server`). Each test uses its own key prefix and deletes its keys afterwards. Without
a server (no URL, no ``redis-server`` installed) the Redis half is skipped, with the command that
enables it, unless ``CI`` is set: then it fails.
Backend-specific checks (SQLite files, WAL, SIGKILL; Redis connections, passwords, retries) live in
``test_index_sqlite.py`` and ``test_index_redis.py``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_simhash.fingerprint.simhash import hamming_distance
from scrapy_simhash.index import (
    BandIndex,
    Decision,
    IndexOpenError,
    IndexParams,
    ParameterMismatch,
    Query,
    SimhashIndexError,
    open_index,
)
from scrapy_simhash.index import rule as index_rule
from scrapy_simhash.index.bands import REDIS, SQLITE, records
from scrapy_simhash.index.redis import index as redis_module
from scrapy_simhash.index.sqlite import index as sqlite_module
from tests.redis_server import shared_server_url

REPO = Path(__file__).resolve().parents[1]
M64 = (1 << 64) - 1


def q(title_fp: int | None, body_fp: int | None, /, *, tk: int = 2, bk: int = 3, **kw: object) -> Query:
    return Query(title_fp=title_fp, body_fp=body_fp, title_k=tk, body_k=bk, **kw)  # type: ignore[arg-type]


def flip(fp: int, positions: tuple[int, ...] | list[int]) -> int:
    for p in positions:
        fp ^= 1 << p
    return fp


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# -- the test Redis server ------------------------------------------------------------------------

_server: dict[str, Any] = {}


def redis_server_url() -> str:
    """URL of the test Redis server (no prefix): :func:`tests.redis_server.shared_server_url`. Skips
    when none answers, or fails under ``CI``."""
    if "url" not in _server:
        try:
            url = shared_server_url()
        except pytest.skip.Exception as exc:  # no redis-server to start, no URL given
            _server["url"], _server["error"] = "", str(exc)
        else:
            try:
                import redis

                client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
                client.ping()
                client.close()
                _server["url"], _server["error"] = url, None
            except Exception as exc:  # ImportError, connection refused, auth…
                error = f"no Redis server answers at {url} ({type(exc).__name__}: {exc})"
                _server["url"], _server["error"] = url, error
    if _server["error"] is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the Redis tests must run: {_server['error']}", pytrace=False)
        pytest.skip(_server["error"])
    return _server["url"]


def with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if urlsplit(url).query else '?'}prefix={prefix}"


def raw_redis(url: str, decode: bool = True) -> Any:
    import redis

    return redis.Redis.from_url(url, decode_responses=decode)


class Backend:
    """One place to keep indexes of one kind for one test: open them, inspect them for real."""

    name: str
    module: Any  # the backend's module: FORMAT, SCHEMA_VERSION
    costs: Any  # the read costs its band layout is chosen for (index/bands.py)

    def url(self, name: str = "index") -> str:
        raise NotImplementedError

    def location(self, name: str = "index") -> str:
        raise NotImplementedError

    def open(self, name: str = "index", **kwargs: Any) -> Any:
        return open_index(self.url(name), **kwargs)

    def band_rows(self, name: str = "index") -> int:
        """Band members actually stored, every namespace, counted from the storage itself."""
        raise NotImplementedError

    def rows_per_fp(self, tier: str, params: IndexParams | None = None) -> int:
        """Band rows one distinct fingerprint of ``tier`` stores: one per part of the shared layout
        (:mod:`scrapy_simhash.index.bands`) at the backend's costs."""
        params = params or IndexParams()
        return len(records(params, self.costs)[tier]["parts"])  # type: ignore[index]

    @property
    def per_entry(self) -> int:
        """Band rows of an entry with a title and a body fingerprint, default parameters."""
        return self.rows_per_fp("title") + self.rows_per_fp("body")

    def band_candidates(self, index: Any, tier: str, fp: int) -> int:
        """How many stored fingerprints one check of ``fp`` reads from its bands."""
        raise NotImplementedError

    def raw_fps(self, index: Any, entry_id: int) -> tuple[Any, Any]:
        """The stored (title, body) fingerprint of an entry, as the storage holds it."""
        raise NotImplementedError

    def state(self, name: str = "index") -> Any:
        """Everything stored, to prove an operation changed nothing."""
        raise NotImplementedError

    def cleanup(self) -> None:
        pass


class SqliteBackend(Backend):
    name = "sqlite"
    module = sqlite_module
    costs = SQLITE

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.sqlite3"

    def url(self, name: str = "index") -> str:
        return str(self.path(name))

    def location(self, name: str = "index") -> str:
        return str(self.path(name))

    def band_rows(self, name: str = "index") -> int:
        conn = sqlite3.connect(self.path(name))
        n = conn.execute("SELECT count(*) FROM band").fetchone()[0]
        conn.close()
        return n

    def band_candidates(self, index: Any, tier: str, fp: int) -> int:
        conn = sqlite3.connect(self.path("index"))
        n = len(conn.execute(index._rows.sql_band[tier], index._rows.probe_keys(tier, fp)).fetchall())
        conn.close()
        return n

    def raw_fps(self, index: Any, entry_id: int) -> tuple[Any, Any]:
        conn = sqlite3.connect(index.location)
        raw = conn.execute("SELECT title_fp, body_fp FROM entry WHERE id = ?", (entry_id,)).fetchone()
        conn.close()
        return raw

    def state(self, name: str = "index") -> Any:
        path = self.path(name)
        return (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns,
                sorted(p.name for p in path.parent.iterdir()))


class RedisBackend(Backend):
    name = "redis"
    module = redis_module
    costs = REDIS

    def __init__(self, server: str) -> None:
        self.server = server
        self.tag = uuid.uuid4().hex[:12]
        self.raw = raw_redis(server)
        self.raw_bytes = raw_redis(server, decode=False)

    def prefix(self, name: str) -> str:
        return f"test-{self.tag}-{name}"

    def url(self, name: str = "index") -> str:
        return with_prefix(self.server, self.prefix(name))

    def location(self, name: str = "index") -> str:
        return self.url(name)

    def keys(self, name: str = "index") -> list[str]:
        return sorted(self.raw.scan_iter(match=f"{self.prefix(name)}:*", count=1000))

    def band_rows(self, name: str = "index") -> int:
        """Band members as stored: 8-byte fingerprints in the fields of the band buckets' hashes
        (``…:b<gen><t|b><part>:…``, split buckets' sub-buckets included), markers left out."""
        n = 0
        for key in self.keys(name):
            if re.fullmatch(r"b\d+[tb]\d+:.*", [*key.split(":", 2), "", ""][2]):
                n += sum(len(v) // 8 for v in self.raw_bytes.hvals(key) if len(v) % 8 == 0)
        return n

    def band_candidates(self, index: Any, tier: str, fp: int) -> int:
        return int(index._reading("bands", lambda view: len(view.candidates(tier, fp))))

    def raw_fps(self, index: Any, entry_id: int) -> tuple[Any, Any]:
        """The two fingerprints as the entry's record holds them (bytes 9–25: after its first-seen
        time and flags)."""
        record = self.raw_bytes.get(f"{index._base}e:{entry_id}")
        return record[9:17].hex(), record[17:25].hex()

    def state(self, name: str = "index") -> Any:
        return [(k, self.raw_bytes.dump(k), self.raw.pttl(k)) for k in self.keys(name)]

    def cleanup(self) -> None:
        keys = list(self.raw.scan_iter(match=f"test-{self.tag}-*", count=1000))
        if keys:
            self.raw.unlink(*keys)
        self.raw.close()
        self.raw_bytes.close()


BACKENDS = ["sqlite", "redis"]


def make_backend(kind: str, directory: Path) -> Backend:
    return SqliteBackend(directory) if kind == "sqlite" else RedisBackend(redis_server_url())


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path):
    b = make_backend(request.param, tmp_path)
    yield b
    b.cleanup()


@pytest.fixture
def index(backend: Backend):
    ix = backend.open()
    yield ix
    ix.close()


# -- exactness ------------------------------------------------------------------------------------


def test_every_flip_pattern_up_to_k_is_found_and_k_plus_1_never(index: Any) -> None:
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


def test_body_tier_k3_every_pattern_and_stored_side(backend: Backend) -> None:
    """Body tier, k=3 (4 bands): every ≤3-flip pattern of a stored fingerprint is found; stored
    the other way round (all 43,745 patterns of ≤3 flips stored), a query returns exactly the
    2,081 within k=2 when asked for k=2, each at its true distance, nothing beyond."""
    rng = random.Random(7)
    base = rng.getrandbits(64)
    with backend.open() as ix:
        ix.add([(None, base, None, None, 1.0)])
        for r in range(4):
            for positions in itertools.combinations(range(64), r):
                found = ix.lookup(None, flip(base, positions), title_k=0, body_k=3)
                assert [(m.tier, m.distance) for m in found] == [("body", r)], positions
        for positions in rng.sample(list(itertools.combinations(range(64), 4)), 3000):
            assert ix.lookup(None, flip(base, positions), title_k=0, body_k=3) == []
    with backend.open("stored") as ix:
        stored = [flip(base, c) for r in range(4) for c in itertools.combinations(range(64), r)]
        assert ix.add([(None, fp, f"u{i}", None, float(i)) for i, fp in enumerate(stored)]) == 43745
        found = ix.lookup(None, base, title_k=0, body_k=2, limit=10**6)
        expected = {fp for fp in stored if hamming_distance(fp, base) <= 2}
        assert len(expected) == 2081
        assert {m.entry.body_fp for m in found} == expected
        assert all(m.distance == hamming_distance(m.entry.body_fp, base) for m in found)  # type: ignore[arg-type]
        assert [m.distance for m in found] == sorted(m.distance for m in found)


def _shared_indexes(kind: str, tmp_path_factory: pytest.TempPathFactory):
    b = make_backend(kind, tmp_path_factory.mktemp("prop"))
    ixs = {64: b.open("i64"), 128: b.open("i128", params=IndexParams(bits=128))}
    yield ixs
    for ix in ixs.values():
        ix.close()
    b.cleanup()


@pytest.fixture(scope="module")
def shared_indexes_sqlite(tmp_path_factory: pytest.TempPathFactory):
    yield from _shared_indexes("sqlite", tmp_path_factory)


@pytest.fixture(scope="module")
def shared_indexes_redis(tmp_path_factory: pytest.TempPathFactory):
    yield from _shared_indexes("redis", tmp_path_factory)


def _property_random_fingerprints(ix: Any, data: Any, bits: int, tier: str) -> None:
    """Random fingerprint, random k up to the layout's limit (smaller k is exact too), random flips:
    within k always found at the exact distance; k+1 … k+6 flips never returned."""
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


# One hypothesis test per backend: pytest-twisted cannot run one @given function under two
# parameters in a session (its greenlet is re-entered), so the backends get a function each.
_PROPERTY = (
    settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]),
    given(data=st.data(), bits=st.sampled_from([64, 128]), tier=st.sampled_from(["title", "body"])),
)


@_PROPERTY[0]
@_PROPERTY[1]
def test_property_random_fingerprints_sqlite(shared_indexes_sqlite, data, bits: int, tier: str) -> None:
    """Random fingerprints and flips against SQLite (see ``_property_random_fingerprints``)."""
    _property_random_fingerprints(shared_indexes_sqlite[bits], data, bits, tier)


@_PROPERTY[0]
@_PROPERTY[1]
def test_property_random_fingerprints_redis(shared_indexes_redis, data, bits: int, tier: str) -> None:
    """Random fingerprints and flips against Redis (see ``_property_random_fingerprints``)."""
    _property_random_fingerprints(shared_indexes_redis[bits], data, bits, tier)


def test_nearest_wins_then_earliest(index: Any) -> None:
    base = 0x0123_4567_89AB_CDEF
    index.add([(flip(base, (1, 2)), None, "two", None, 10.0), (flip(base, (9,)), None, "one-late", None, 30.0),
               (flip(base, (40,)), None, "one-early", None, 20.0)])
    out = index.check_and_add(q(base, None))
    assert out.match is not None and out.entry_id is None
    assert (out.match.distance, out.match.entry.url) == (1, "one-early")
    found = index.lookup(base, None, title_k=2, body_k=0, limit=3)
    assert [(m.distance, m.entry.url) for m in found] == [(1, "one-early"), (1, "one-late"), (2, "two")]
    assert [m.entry.url for m in index.lookup(base, None, title_k=2, body_k=0, limit=2)] == ["one-early", "one-late"]


def test_k_beyond_the_layout_is_a_value_error(index: Any) -> None:
    with pytest.raises(ValueError, match=r"title distance 3 .*0\.\.2"):
        index.check_and_add(q(1, 2, tk=3))
    with pytest.raises(ValueError, match=r"body distance 4 .*0\.\.3"):
        index.lookup(1, 2, title_k=2, body_k=4)
    with pytest.raises(ValueError):
        index.check_and_add(q(1, 2, tk=-1))
    assert index.count() == 0


def test_bad_fingerprints_and_empty_queries(index: Any) -> None:
    for bad in (-1, 1 << 64, "12"):
        with pytest.raises(ValueError, match="unsigned 64-bit"):
            index.check_and_add(q(bad, None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="title or a body"):
        index.check_and_add(q(None, None))
    with pytest.raises(ValueError, match="title or a body"):
        index.add([(None, None, "u", "t", 1.0)])
    assert index.count() == 0


def test_signed_64_bit_mapping_round_trips(index: Any, backend: Backend) -> None:
    """The top bit survives storage: SQLite keeps signed 64-bit integers, Redis fixed-width hex."""
    top = (1 << 63) | 0xABC
    out = index.check_and_add(q(top, M64))
    assert out.match is None
    [entry] = list(index.entries())
    assert (entry.title_fp, entry.body_fp) == (top, M64)
    expected_raw = {"sqlite": (top - (1 << 64), -1), "redis": (f"{top:016x}", "f" * 16)}[backend.name]
    assert backend.raw_fps(index, out.entry_id) == expected_raw  # stored as such, read back unsigned
    assert index.check_and_add(q(top ^ 1, None)).match.distance == 1  # type: ignore[union-attr]


def test_128_bit_index(backend: Backend) -> None:
    with backend.open(params=IndexParams(bits=128)) as ix:
        base = (1 << 127) | 12345
        assert ix.check_and_add(q(base, base >> 1)).match is None
        m = ix.check_and_add(q(flip(base, (0, 127)), None)).match
        assert m is not None and (m.tier, m.distance, m.entry.title_fp) == ("title", 2, base)
        assert ix.check_and_add(q(flip(base, (0, 64, 127)), None)).match is None
        with pytest.raises(ValueError, match="128-bit"):
            ix.lookup(1 << 128, None, title_k=0, body_k=0)


# -- the tiered rule ------------------------------------------------------------------------------


def test_title_tier_comes_first(index: Any) -> None:
    a = index.check_and_add(q(0xAAAA_0000_0000_0001, 0x1111_0000_0000_0000, url="a")).entry_id
    b = index.check_and_add(q(0x0000_5555_0000_0002, 0x2222_0000_0000_0000, url="b")).entry_id
    assert a and b
    # title within 2 of a's, body identical to b's: the title tier answers, with a
    out = index.check_and_add(q(flip(0xAAAA_0000_0000_0001, (60, 61)), 0x2222_0000_0000_0000, url="c"))
    assert out.match is not None and (out.match.tier, out.match.distance, out.match.entry.id) == ("title", 2, a)


def test_body_tier_when_title_is_far_or_missing(index: Any) -> None:
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


def test_new_item_is_added_with_its_data(backend: Backend, index: Any) -> None:
    out = index.check_and_add(q(10, 20, url="https://x/1", title="标题" * 200, seen_at=1234.5))
    assert out.match is None and isinstance(out.entry_id, int)
    [entry] = list(index.entries())
    kept = math.floor if backend.name == "sqlite" else float  # SQLite keeps the whole second (schema 6)
    assert (entry.id, entry.url, entry.first_seen, entry.title_fp, entry.body_fp) == (
        out.entry_id, "https://x/1", kept(1234.5), 10, 20)
    assert type(entry.first_seen) is float
    assert entry.title == ("标题" * 200)[:300] and entry.namespace == "default"
    before = time.time()
    assert index.check_and_add(q(0xFFFF_0000_FFFF_0000, 0xFF00_FF00_FF00_FF00)).match is None  # seen_at: now
    assert max(e.first_seen for e in index.entries()) >= kept(before)


def test_a_batch_decides_as_the_same_queries_one_by_one(backend: Backend) -> None:
    rnd = random.Random(11)
    bases = [rnd.getrandbits(64) for _ in range(6)]
    queries = []
    for n in range(40):  # copies of a few stories, near and far, title-only and body-only
        base = bases[n % len(bases)]
        near = flip(base, rnd.sample(range(64), rnd.randint(0, 5)))
        title, body = rnd.choice([(near, near), (None, near), (near, None), (rnd.getrandbits(64), near)])
        queries.append(q(title, body, url=f"https://x/{n}", seen_at=1000.0 + n))
    one = backend.open(namespace="one")
    many = backend.open(namespace="many")
    try:
        expected = [one.check_and_add(query) for query in queries]
        got = many.check_and_add_many(queries[:15]) + many.check_and_add_many(queries[15:])
        strip = lambda o: (o.match and (o.match.tier, o.match.distance, o.match.entry.url), o.entry_id is None)  # noqa: E731
        assert [strip(o) for o in got] == [strip(o) for o in expected]
        assert sum(o.match is None for o in got) >= 6
        assert [e.url for e in many.entries()] == [e.url for e in one.entries()]
        assert many.check_and_add_many([]) == []
    finally:
        one.close()
        many.close()


def test_a_batch_with_a_bad_query_writes_nothing(index: Any) -> None:
    with pytest.raises(ValueError, match="title or a body"):
        index.check_and_add_many([q(1, 2, url="https://x/ok"), q(None, None)])
    assert index.count() == 0


# -- expiry, namespaces, maintenance --------------------------------------------------------------


def test_ttl_not_before(index: Any) -> None:
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


def test_namespaces_are_isolated(backend: Backend) -> None:
    with backend.open(namespace="a") as a, backend.open(namespace="b") as b:
        assert a.check_and_add(q(42, 43)).match is None
        assert b.check_and_add(q(42, 43)).match is None  # same story, other namespace: new there too
        assert a.check_and_add(q(42, 43)).match is not None
        b.check_and_add(q(1 << 60, None))
        assert (a.count(), b.count()) == (1, 2)
        rows_before = backend.band_rows()
        assert a.reset() == 1
        assert (a.count(), b.count()) == (0, 2)
        assert backend.band_rows() == rows_before - backend.per_entry  # only a's title + body band rows went
        assert b.check_and_add(q(42, None)).match is not None  # b still finds its entry
        assert a.check_and_add(q(42, None)).match is None
        stats = b.stats()
        assert stats["namespaces"]["a"]["entries"] == 1 and stats["namespaces"]["b"]["entries"] == 2


def test_purge_removes_old_entries_and_unshared_band_rows(index: Any, backend: Backend) -> None:
    shared, lonely = 0x1234_5678_0000_0000, 0x0000_0000_8765_4321
    index.add([(shared, None, "old-shared", None, 100.0), (lonely, None, "old-lonely", None, 100.0),
               (shared, None, "new-shared", None, 900.0)])
    assert backend.band_rows() == 2 * backend.rows_per_fp("title")
    assert index.purge(500.0) == 2
    assert [e.url for e in index.entries()] == ["new-shared"]
    assert backend.band_rows() == backend.rows_per_fp("title")  # the shared fingerprint keeps its rows
    assert index.check_and_add(q(shared, None)).match.entry.url == "new-shared"  # type: ignore[union-attr]
    assert index.check_and_add(q(lonely, None)).match is None
    assert index.purge(0.0) == 0


def test_purge_in_batches(index: Any, backend: Backend) -> None:
    rng = random.Random(3)
    index.add([(rng.getrandbits(64), rng.getrandbits(64), None, None, float(i)) for i in range(1200)])
    assert index.purge(1000.0, batch=250) == 1000
    assert index.count() == 200 and backend.band_rows() == 200 * backend.per_entry


def test_forget_by_id_and_by_url(index: Any, backend: Backend) -> None:
    a = index.check_and_add(q(0xF0F0, 0x0F0F_0000, url="https://a", seen_at=100.0)).entry_id
    index.add([(0xF0F0, None, "https://b", None, 200.0)])  # shares a's title fingerprint
    dup = index.check_and_add(q(0xF0F0 ^ 1, None, url="https://dup", seen_at=300.0))
    assert dup.match is not None and dup.match.entry.id == a  # the earliest of the two
    assert backend.band_rows() == backend.per_entry
    assert index.forget(a) == 1  # type: ignore[arg-type]
    assert backend.band_rows() == backend.rows_per_fp("title")  # body rows gone, title rows kept for https://b
    assert index.explain("https://dup").original is None  # type: ignore[union-attr]
    assert index.forget("https://b") == 1
    assert backend.band_rows() == 0 and index.count() == 0
    assert index.forget("https://nowhere") == 0 and index.forget(99999) == 0
    assert index.forget("https://dup") == 0 and index.explain("https://dup") is None
    with pytest.raises(TypeError):
        index.forget(1.5)  # type: ignore[arg-type]


def test_explain(index: Any) -> None:
    orig = index.check_and_add(q(0xABCDEF, 0x123456, url="https://orig", title="原文", seen_at=100.0))
    assert index.explain("https://orig") is None  # new items have no decision
    index.check_and_add(q(0xABCDEF ^ 3, None, url="https://copy", seen_at=200.0))
    d = index.explain("https://copy")
    assert isinstance(d, Decision)
    assert (d.status, d.tier, d.distance, d.decided_at) == ("duplicate", "title", 2, 200.0)
    assert d.original is not None and (d.original.id, d.original.title) == (orig.entry_id, "原文")
    index.check_and_add(q(None, 0x123456 ^ 7, url="https://copy", seen_at=300.0), flagged={"body"})
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


def test_stats(index: Any, backend: Backend) -> None:
    index.add([(1, 2, "u1", None, 50.0), (3 << 30, None, "u2", None, 70.0)])
    index.check_and_add(q(1, None, url="u3"))
    s = index.stats()
    assert s["location"] == backend.location() and s["backend"] == backend.name
    if backend.name == "sqlite":
        assert s["file_size"] >= Path(backend.location()).stat().st_size > 0
    else:
        assert s["used_memory"] > 0 and s["redis_version"]
    assert s["params"] == IndexParams().as_dict()
    assert (s["format"], s["schema_version"]) == (backend.module.FORMAT, backend.module.SCHEMA_VERSION)
    assert (s["entries"], s["oldest"], s["newest"], s["decisions"]) == (2, 50.0, 70.0, 1)
    assert s["namespaces"] == {"default": {"entries": 2, "oldest": 50.0, "newest": 70.0, "decisions": 1}}
    # one layout module for both backends, multi-index hashing (index/bands.py) at each backend's costs:
    # SQLite two 32-bit parts a tier probed within 1 bit, Redis k+1 parts probed exactly
    if backend.name == "sqlite":
        parts = {"title": [[0, 32], [32, 32]], "body": [[0, 32], [32, 32]]}
    else:
        parts = {"title": [[0, 22], [22, 21], [43, 21]], "body": [[0, 16], [16, 16], [32, 16], [48, 16]]}
    for tier, k in (("title", 2), ("body", 3)):
        radius = 1 if backend.name == "sqlite" else 0
        assert s[f"{tier}_layout"] == {"scheme": "mih", "distance": k, "radius": radius, "parts": parts[tier]}
    assert s["band_rows"] == len(parts["title"]) * 2 + len(parts["body"])  # u3 shares u1's title
    assert s["readonly"] is False
    assert time.time() - 3600 < s["created"] <= time.time()
    json.dumps(s)  # plain data, printable by the command line


def test_entries_oldest_first_across_pages(index: Any) -> None:
    rng = random.Random(11)
    times = [float(rng.randrange(10**6)) for _ in range(2500)]
    index.add([(rng.getrandbits(64), None, f"u{i}", None, t) for i, t in enumerate(times)])
    got = list(index.entries())
    assert len(got) == 2500 and len({e.id for e in got}) == 2500
    assert [e.first_seen for e in got] == sorted(times)
    assert index.count() == 2500


def test_entries_ties_in_first_seen_across_pages(index: Any) -> None:
    """More entries share one first-seen time than a page holds: each comes once, in id order."""
    rng = random.Random(12)
    index.add([(rng.getrandbits(64), None, f"u{i}", None, 5.0 if i % 3 else 1.0) for i in range(2600)])
    got = list(index.entries())
    assert len(got) == 2600 and len({e.id for e in got}) == 2600
    assert [(e.first_seen, e.id) for e in got] == sorted((e.first_seen, e.id) for e in got)


def test_close_is_idempotent_and_context_manager(backend: Backend) -> None:
    with backend.open() as ix:
        assert isinstance(ix, BandIndex)
        ix.check_and_add(q(5, 6))
    ix.close()
    ix.close()
    with pytest.raises(SimhashIndexError, match="closed"):
        ix.check_and_add(q(7, 8))
    with pytest.raises(SimhashIndexError, match="closed"):
        ix.count()
    assert "closed" in repr(ix)


def test_calls_from_several_threads(index: Any) -> None:
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


# -- flat cost under skew -------------------------------------------------------------------------


def test_identical_fingerprints_are_stored_once_in_the_band_table(index: Any, backend: Backend) -> None:
    boiler_title, empty_body = 0x5555_AAAA_5555_AAAA, 0x0
    index.add([(boiler_title, empty_body, f"https://site/{i}", None, float(i)) for i in range(3000)])
    assert index.count() == 3000
    assert backend.band_rows() == backend.per_entry  # one row per band per fingerprint, not per entry
    # TTL re-admits the same fingerprints: still one row per band
    for day in range(1, 31):
        out = index.check_and_add(q(boiler_title, empty_body, seen_at=1e6 * day, not_before=1e6 * day - 1))
        assert out.match is None
    assert index.count() == 3030 and backend.band_rows() == backend.per_entry
    # a check against the crowd reads one candidate per band and answers with the earliest live entry
    assert backend.band_candidates(index, "title", boiler_title) == backend.rows_per_fp("title")
    m = index.check_and_add(q(boiler_title, None, seen_at=4e7, not_before=15e6)).match
    assert m is not None and m.entry.first_seen == 15e6


# -- self-describing, safe to open ----------------------------------------------------------------


def test_parameter_mismatch_names_location_and_fields(backend: Backend) -> None:
    backend.open().close()
    before = backend.state()
    wanted = IndexParams(title_bands=4, tokenizer="pkuseg")
    with pytest.raises(ParameterMismatch) as err:
        backend.open(params=wanted)
    message = str(err.value)
    assert backend.location() in message
    assert "title_bands: index 3 vs requested 4" in message
    assert "tokenizer: index 'jieba' vs requested 'pkuseg'" in message
    assert "body_bands" not in message and "bits" not in message
    assert isinstance(err.value, IndexOpenError)
    assert backend.state() == before


def test_more_bands_than_requested_answer_smaller_distances(backend: Backend) -> None:
    # An index built for title <= 2 / body <= 3 answers title <= 1 / body <= 2 exactly: no new index
    # is needed to lower a threshold; raising one past the layout is a mismatch.
    backend.open().close()
    with backend.open(params=IndexParams(title_bands=2, body_bands=3)) as ix:
        assert ix.params == IndexParams()  # what the index has
    with pytest.raises(ParameterMismatch, match="body_bands: index 4 vs requested 5"):
        backend.open(params=IndexParams(body_bands=5))
    with pytest.raises(ParameterMismatch, match="bits: index 64 vs requested 128"):
        backend.open(params=IndexParams(bits=128, title_bands=2))


def test_an_index_of_other_features_says_what_to_do(backend: Backend) -> None:
    """Fingerprints of another features version (an upgrade changed the weighting) are refused with
    the remedy: a reset keeps the recorded parameters, so only a new index (or deleting it) helps."""
    backend.open(params=IndexParams(features_version="2")).close()
    with pytest.raises(ParameterMismatch, match="features_version: index '2'") as raised:
        backend.open(params=IndexParams())
    assert "delete it or use a new index" in str(raised.value) and "SIMHASH_RESET" in str(raised.value)


def test_params_none_reads_what_the_index_records(backend: Backend) -> None:
    params = IndexParams(bits=64, title_bands=2, body_bands=5, tokenizer="jieba-test", features_version="9")
    backend.open(params=params).close()
    with backend.open() as ix:
        assert ix.params == params
        assert ix.stats()["title_layout"] == records(params, backend.costs)["title"]  # one layout module
        assert ix.stats()["body_layout"] == records(params, backend.costs)["body"]


def test_missing_index_with_create_false_or_readonly(backend: Backend) -> None:
    for kwargs in ({"create": False}, {"readonly": True}):
        with pytest.raises(IndexOpenError, match="does not exist"):
            backend.open(**kwargs)
    backend.open().close()  # now it exists: both open it
    for kwargs in ({"create": False}, {"readonly": True}):
        with backend.open(**kwargs) as ix:
            assert ix.count() == 0


# -- real processes: atomic -----------------------------------------------------------------------

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


def _contend(location: str, go: Path, mode: str, n_procs: int = 4) -> list[dict]:
    procs = [
        subprocess.Popen([sys.executable, "-c", _CONTEND, location, str(go), mode, str(n)],
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


def test_concurrent_creation_then_same_story(backend: Backend, tmp_path: Path) -> None:
    """Four processes create the same new index at the same moment and add the same story."""
    for round_ in range(2):
        name = f"c{round_}"
        results = _contend(backend.url(name), tmp_path / f"go{round_}", "create")
        assert sum(r["new"] for r in results) == 1, results
        with backend.open(name) as ix:
            assert ix.count() == 1
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".creating")] == []


def test_atomic_check_and_add_across_processes(backend: Backend, tmp_path: Path) -> None:
    """Four processes with the index open add near-identical stories at one signal: one wins."""
    backend.open("atomic").close()
    for round_ in range(3):
        with backend.open("atomic") as ix:
            ix.reset()
        results = _contend(backend.url("atomic"), tmp_path / f"go{round_}", "open")
        assert sum(r["new"] for r in results) == 1, results
        with backend.open("atomic") as ix:
            assert ix.count() == 1
            assert sum(1 for n in range(4) if ix.explain(f"proc-{n}") is not None) == 3


# -- the title tier's number guard ----------------------------------------------------------------



def test_title_tier_takes_the_nearest_entry_whose_numbers_agree(index: Any) -> None:
    title, x, y, z = 0x1111_2222_3333_4444, "0000000a 0000000b", "0000000c 0000000d", "0000000e 0000000f"
    a = index.check_and_add(q(title, 0xA0A0 << 40, url="a", numbers=x, seen_at=1.0)).entry_id
    # the same headline over other figures (and another body) is news
    b = index.check_and_add(q(title ^ 1, 0x0B0B, url="b", numbers=y, title_numbers=50, seen_at=2.0))
    assert b.match is None
    # b is nearer (distance 0) but disagrees: the nearest agreeing entry, a at distance 1, answers
    m = index.check_and_add(q(title ^ 1, 0x7777 << 20, numbers=x, title_numbers=50, seen_at=3.0)).match
    assert m is not None and (m.tier, m.distance, m.entry.id, m.entry.numbers) == ("title", 1, a, x)
    # nobody agrees: the body tier decides
    m = index.check_and_add(q(title ^ 1, 0x0B0B ^ 0b101, numbers=z, title_numbers=50, seen_at=4.0)).match
    assert m is not None and (m.tier, m.distance, m.entry.id) == ("body", 2, b.entry_id)
    # no guard asked, or no signature to compare: plain nearest
    for kw in ({"numbers": z, "title_numbers": 0}, {"numbers": None, "title_numbers": 50}):
        m = index.check_and_add(q(title ^ 1, 0x5555 << 30, seen_at=5.0, **kw)).match
        assert m is not None and (m.tier, m.distance, m.entry.id) == ("title", 0, b.entry_id)
    # an entry stored without a signature agrees with any
    c = index.check_and_add(q(0x0F0F_0000_0000_0000, None, url="c", seen_at=6.0)).entry_id
    m = index.check_and_add(q(0x0F0F_0000_0000_0000, None, numbers=z, title_numbers=100, seen_at=7.0)).match
    assert m is not None and m.entry.id == c and m.entry.numbers is None
    assert {e.url: e.numbers for e in index.entries()} == {"a": x, "b": y, "c": None}
    assert index.count() == 3


def test_numbers_guard_matches_numbers_agree(index: Any) -> None:
    """400 pairs of number signatures as articles and their reposts give them (bottom-k samples of
    number sets of 0–70 figures, some dropped, some added) and random thresholds: the index's title
    verdict is ``numbers_agree`` every time, including where cutting full signatures to their
    common range changes the answer."""
    nmax = index_rule.NUMBERS_MAX
    rng = random.Random(99)
    universe = [f"{rng.getrandbits(32):08x}" for _ in range(200)]

    def bottom(hashes: set[str]) -> str:  # as fingerprint.number_signature: the smallest, sorted
        return " ".join(sorted(hashes)[:nmax])

    def uncut(a: str, b: str, pct: int) -> bool:  # the rule without the common-range cut
        xs, ys = set(a.split()), set(b.split())
        if not xs or not ys:
            return not xs and not ys
        return 100 * len(xs & ys) >= pct * min(len(xs), len(ys))

    agreed = cut_mattered = 0
    for case in range(400):
        original = set(rng.sample(universe, rng.choice([0, 1, 3, 10, 20, 40])))
        repost = original - set(rng.sample(sorted(original), rng.randint(0, len(original) // 2)))
        repost |= set(rng.sample(universe, rng.choice([0, 0, 2, 10, 30])))
        stored, asked = (bottom(original), bottom(repost)) if rng.random() < 0.5 else (bottom(repost), bottom(original))
        pct = rng.choice([1, 30, 50, 80, 100])
        title = rng.getrandbits(64)
        index.check_and_add(q(title, None, url=f"s{case}", numbers=stored, seen_at=float(case)))
        m = index.check_and_add(q(title ^ 1, None, numbers=asked, title_numbers=pct, seen_at=float(case))).match
        expected = index_rule.numbers_agree(asked, stored, pct)
        assert (m is not None) == expected, (stored, asked, pct)
        agreed += expected
        cut_mattered += expected != uncut(asked, stored, pct)
    assert 50 < agreed < 350 and cut_mattered >= 10, (agreed, cut_mattered)  # every branch was exercised


# -- the opt-in sentence tier ---------------------------------------------------------------------

H = [f"{n:016x}" for n in (0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6)]


def test_sentence_tier_after_title_and_body(index: Any) -> None:
    far = {"title_fp": None, "body_fp": None}
    rng = random.Random(8)
    ta, ba, tb, bb = (rng.getrandbits(64) for _ in range(4))
    a = index.check_and_add(q(ta, ba, url="a", sentences=(H[0], H[1], H[2]), numbers="0000000a", seen_at=10.0)).entry_id
    b = index.check_and_add(q(tb, bb, url="b", sentences=(H[0], H[1], H[3]), seen_at=20.0)).entry_id
    assert a and b

    def ask(sentences: tuple[str, ...], shared: int, flagged: tuple[str, ...] = (), **kw: Any) -> Any:
        kw = {**far, "title_fp": random.Random(str(kw)).getrandbits(64), **kw}
        query = Query(title_k=2, body_k=3, sentences=sentences, sentences_shared=shared, **kw)
        return index.check_and_add(query, flagged=flagged)

    # more than half of a's three stored hashes: the earliest such holder, distance = its stored
    # hashes the query lacks
    m = ask((H[0], H[1], H[4]), 50, url="c", seen_at=30.0).match
    assert m is not None and (m.tier, m.distance, m.entry.id) == ("sentence", 1, a)
    # a repeated hash counts once; more than 67 % needed: all three of b's
    m = ask((H[3], H[0], H[1], H[1]), 67, seen_at=31.0).match
    assert m is not None and (m.tier, m.distance, m.entry.id) == ("sentence", 0, b)
    # expired holders do not count; the tier is off unless asked; the title tier still comes first
    assert ask((H[0], H[1], H[2]), 50, not_before=25.0, seen_at=32.0).match is None  # added as new
    assert ask((H[0], H[1], H[2]), 0, seen_at=33.0).match is None
    m = index.check_and_add(q(ta ^ 1, None, sentences=(H[0], H[1]), sentences_shared=1, seen_at=34.0)).match
    assert m is not None and (m.tier, m.entry.id) == ("title", a)
    # numbers must agree when the guard is on: a disagrees, so b (later) answers
    m = ask((H[0], H[1]), 50, ("sentence",), numbers="0000000f", title_numbers=50, url="d", seen_at=35.0).match
    assert m is not None and (m.tier, m.entry.id) == ("sentence", b)
    d = index.explain("d")
    assert d is not None and (d.status, d.tier, d.distance, d.original.id) == ("flagged", "sentence", 1, b)
    # the hashes go with their entries
    assert index.forget(b) == 1 and index.purge(15.0) == 1  # b, then a
    assert ask((H[0], H[1], H[3]), 67, seen_at=36.0).match is None  # nobody holds all three any more
    m = ask((H[0], H[1], H[3]), 50, seen_at=37.0).match  # the entries added at 32 and 33 hold two
    assert m is not None and (m.tier, m.distance, m.entry.first_seen) == ("sentence", 1, 32.0)


def test_an_entry_keeps_its_smallest_sentence_hashes_only(index: Any) -> None:
    k = index_rule.SENTENCES_STORED
    assert k == 12
    many = tuple(f"{n:016x}" for n in range(100, 124))  # 24 hashes: the k smallest are kept
    rng = random.Random(9)
    index.check_and_add(q(rng.getrandbits(64), None, url="a", sentences=tuple(reversed(many)), seen_at=1.0))

    def probe(sentences: tuple[str, ...]) -> Any:  # what matches; a probe added as new is forgotten again
        out = index.check_and_add(q(rng.getrandbits(64), None, sentences=sentences, sentences_shared=20))
        if out.match is None:
            index.forget(out.entry_id)
        return out.match

    assert probe(many[k:]) is None  # the hashes beyond the k smallest were not stored
    assert probe(many[k:] + many[:1]) is None  # 1 of the k stored (at least 2 needed)
    m = probe(many[:3] + many[k + 2 :])
    assert m is not None and (m.tier, m.distance, m.entry.url) == ("sentence", k - 3, "a")  # k stored, 3 found


def test_one_stored_sentence_with_a_close_body_is_a_sentence_match(index: Any) -> None:
    body = 0x0123_4567_89AB_CDEF
    index.check_and_add(q(None, body, url="a", sentences=(H[0], H[1], H[2]), seen_at=1.0))
    nine = flip(body, range(20, 29))
    assert index.check_and_add(q(None, nine, sentences=(H[0], H[5]), sentences_shared=50, seen_at=2.0)).match is None
    m = index.check_and_add(q(None, flip(body, range(8)), sentences=(H[0], H[5]), sentences_shared=50)).match
    assert m is not None and (m.tier, m.distance, m.entry.url) == ("sentence", 2, "a")


def test_a_sentence_many_stories_hold_is_boilerplate(index: Any) -> None:
    cap = index_rule.SENTENCE_MAX_HOLDERS
    chrome = ("c" * 16, "d" * 16)  # two "sentences" every page of a site carries
    rng = random.Random(12)

    def own(n: int) -> tuple[str, str]:
        return f"{2 * n:016x}", f"{2 * n + 1:016x}"

    def story(n: int) -> Any:  # stored with the tier off: nothing matches it
        return index.check_and_add(q(rng.getrandbits(64), rng.getrandbits(64), url=f"s{n}",
                                     sentences=(*chrome, *own(n))))

    def ask(*sentences: str) -> Any:
        return index.check_and_add(q(rng.getrandbits(64), None, sentences=sentences, sentences_shared=40)).match

    for n in range(cap - 1):
        assert story(n).match is None
    # cap - 1 holders: the two chrome sentences are 2 of the 4 stored of s0 (50 % > 40 %), a match
    m = ask(*chrome, "e" * 16)
    assert m is not None and (m.tier, m.entry.url) == ("sentence", "s0")
    assert story(cap).match is None  # the cap-th holder
    # now they are boilerplate and ignored: the stories' own sentences decide
    assert ask(*chrome, "f" * 16) is None
    m = ask(*chrome, *own(5), "9" * 16)
    assert m is not None and (m.entry.url, m.distance) == ("s5", 2)  # 2 of 4 stored counted


def test_latest_entries_are_the_tail_of_all_entries(index: Any) -> None:
    """``entries(latest=k)`` (the report's window) is the last k of ``entries()``: ties on the
    first-seen time by id, several hours apart (Redis files entries in hourly buckets)."""
    rng = random.Random(3)
    times = [3600.0 * h + s for h in range(4) for s in (5.0, 5.0, 7.5)]
    index.add([(rng.getrandbits(64), rng.getrandbits(64), f"u{i}", "t", t) for i, t in enumerate(times)])
    everything = [(e.id, e.url) for e in index.entries()]
    assert len(everything) == len(times)
    for k in (0, 1, 2, 3, 4, 7, len(times), len(times) + 5):
        expected = everything[max(0, len(everything) - k):] if k else []
        assert [(e.id, e.url) for e in index.entries(latest=k)] == expected, k
