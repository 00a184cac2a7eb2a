"""The multi-index band layout (index/bands.py) and re-banding a SQLite index in place.

Exactness: every fingerprint within the threshold shares a stored row with the query's probes, at
every backend's costs (SQLite's two wide parts with a radius, Redis's ``k + 1`` exact parts) and
through split buckets, and the index answers exactly (k found, k+1 never), property-tested on real
SQLite files. Re-banding keeps every entry, answers the new threshold, converts a file of the
previous schema version, and a SIGKILL in the middle of it leaves an index that opens and holds
every entry.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_simhash.fingerprint.simhash import to_signed64
from scrapy_simhash.index import IndexParams, ParameterMismatch, Query, bands, open_index
from scrapy_simhash.index.bands import REDIS, SQLITE, Costs, bands_for, tier_bands
from scrapy_simhash.index.sqlite import dense as sqlite_dense
from scrapy_simhash.index.sqlite.index import SqliteIndex
from scrapy_simhash.index.sqlite.reband import reband

from .conftest import kill_mid_reband
from .test_cli import SCRAPY, make_project, ok, run


def flips(rng: random.Random, fp: int, bits: int, n: int) -> int:
    for bit in rng.sample(range(bits), n):
        fp ^= 1 << bit
    return fp


BACKENDS = pytest.mark.parametrize("costs", [SQLITE, REDIS], ids=["sqlite", "redis"])


@BACKENDS
@pytest.mark.parametrize("bits", [32, 64, 128])
@pytest.mark.parametrize("k", range(8))
def test_every_fingerprint_within_k_shares_a_probed_row(bits: int, k: int, costs: Costs) -> None:
    layout = tier_bands(bits, k, costs)
    assert layout.probes <= costs.max_probes or len(layout.parts) == k + 1
    assert sum(w for _, w in layout.parts) == bits and layout.radius == k // len(layout.parts)
    rng = random.Random(bits * 100 + k)
    for _ in range(300):
        fp = rng.getrandbits(bits)
        other = flips(rng, fp, bits, rng.randint(0, k))
        assert set(layout.store(other)) & set(layout.probe(fp))


@given(fp=st.integers(0, (1 << 64) - 1), positions=st.lists(st.integers(0, 63), max_size=3, unique=True))
def test_flip_patterns_up_to_3_share_a_probed_row(fp: int, positions: list[int]) -> None:
    other = fp
    for bit in positions:
        other ^= 1 << bit
    for k in range(len(positions), 4):
        for costs in (SQLITE, REDIS):
            layout = tier_bands(64, k, costs)
            assert set(layout.store(other)) & set(layout.probe(fp))


def _leaves_stored(top: bands.TierBands, fp: int) -> set[tuple[Any, ...]]:
    """The buckets ``fp`` is filed in when every bucket its layout can split is split (the deepest)."""
    out: set[tuple[Any, ...]] = set()

    def down(bucket: tuple[Any, ...], path: bands.Path, rest: int) -> None:
        if path not in bands.plan(top):
            out.add(bucket)
            return
        for code, value, sub, sub_rest in bands.children(top, path, rest):
            down((*bucket, code, value), sub, sub_rest)

    for n, value in top.store(fp):
        down((n, value), (n,), top.rest(fp, n))
    return out


def _leaves_probed(top: bands.TierBands, fp: int) -> set[tuple[Any, ...]]:
    """The buckets a query for ``fp`` reads when every bucket its layout can split is split."""
    out: set[tuple[Any, ...]] = set()

    def down(bucket: tuple[Any, ...], path: bands.Path, rest: int, left: int) -> None:
        if path not in bands.plan(top):
            out.add(bucket)
            return
        for code, value, sub, sub_rest, sub_left in bands.sub_probes(top, path, rest, left):
            down((*bucket, code, value), sub, sub_rest, sub_left)

    for (n, value), (part, spent) in zip(top.probe(fp), bands.probe_spent(top), strict=True):
        down((n, value), (part,), top.rest(fp, part), top.distance - spent)
    return out


@settings(max_examples=300, deadline=None)
@given(fp=st.integers(0, (1 << 64) - 1), positions=st.lists(st.integers(0, 63), max_size=7, unique=True),
       k=st.integers(0, 7), costs=st.sampled_from([SQLITE, REDIS]))
def test_split_buckets_keep_every_fingerprint_within_k_found(
    fp: int, positions: list[int], k: int, costs: Costs
) -> None:
    """The shared layout's splitter, every bucket split as deep as its plan goes (what a crowd makes):
    a fingerprint within ``k`` of a query is filed in a sub-bucket the query reads (``children`` /
    ``sub_probes`` with the bits a probe has left); the backends store what this module decides."""
    other = fp
    for bit in positions:
        other ^= 1 << bit
    top = tier_bands(64, k, costs)
    if len(positions) <= k:
        assert _leaves_stored(top, other) & _leaves_probed(top, fp)


def test_default_layout_and_its_cost() -> None:
    """64 bits, title k=2 and body k=3: on SQLite two 32-bit parts, probed with their one-bit
    neighbours; on Redis k+1 parts probed exactly (the pigeonhole bands: 3 and 4 probes)."""
    tiers = bands_for(IndexParams())
    for tier in ("title", "body"):
        assert tiers[tier].parts == ((0, 32), (32, 32)) and tiers[tier].radius == 1 and tiers[tier].probes == 66
    tiers = bands_for(IndexParams(), REDIS)
    assert tiers["title"].parts == ((0, 22), (22, 21), (43, 21)) and tiers["title"].probes == 3
    assert tiers["body"].parts == ((0, 16), (16, 16), (32, 16), (48, 16)) and tiers["body"].probes == 4
    assert tiers["title"].radius == tiers["body"].radius == 0


@pytest.fixture(scope="module")
def exact_index(tmp_path_factory: pytest.TempPathFactory) -> SqliteIndex:
    ix = SqliteIndex.open(tmp_path_factory.mktemp("exact") / "i.sqlite3", params=IndexParams(body_bands=4))
    yield ix  # type: ignore[misc]
    ix.close()


_EXAMPLES = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), k=st.integers(0, 3), extra=st.integers(0, 4))
def test_sqlite_finds_k_and_never_k_plus_1(exact_index: SqliteIndex, seed: int, k: int, extra: int) -> None:
    """An entry d bits from the query is found by the body tier with threshold k iff d <= k."""
    rng = random.Random(seed)
    fp = rng.getrandbits(64)
    distance = min(k + extra, 63)
    url = f"u{next(_EXAMPLES)}"
    exact_index.add([(None, flips(rng, fp, 64, distance), url, None, 1.0)])
    found = exact_index.lookup(None, fp, title_k=0, body_k=k, limit=50)
    near = [m for m in found if m.entry.url == url]
    assert bool(near) == (distance <= k)
    assert all(m.distance <= k for m in found)


def answers_as_a_scan(ix: Any, fps: list[int], centre: int, rng: random.Random, k: int = 3) -> None:
    """Lookups near the centre (either backend) find exactly the entries a scan finds within ``k`` bits."""
    for _ in range(40):
        query = flips(rng, centre, 64, rng.randint(0, k + 3))
        found = {m.entry.body_fp for m in ix.lookup(None, query, title_k=0, body_k=k, limit=10_000)}
        assert found == {fp for fp in fps if (fp ^ query).bit_count() <= k}


def _split_everything_at(monkeypatch: pytest.MonkeyPatch, size: int | None) -> None:
    """Make every splittable bucket split at ``size`` fingerprints (None: the shipped thresholds)."""
    if size is not None:
        monkeypatch.setattr(bands, "MIN_SPLIT", size)
        monkeypatch.setattr(bands, "split_at", lambda top, split: size)


def _markers(conn: sqlite3.Connection) -> tuple[int, int]:
    """Split buckets in ``band`` and in ``band2``."""
    return tuple(conn.execute(f"SELECT count(*) FROM {t} WHERE fp = x''").fetchone()[0]  # type: ignore[return-value]
                 for t in ("band", "band2"))


@pytest.mark.parametrize("split_at", [None, 8, 2])
def test_clustered_fingerprints_are_all_found_and_only_those(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split_at: int | None
) -> None:
    """Distinct entries sharing most bits (one centre, random flips): the index answers as a scan would,
    with its dense buckets split two levels deep (a small threshold splits many), after removals and
    after a reband."""
    _split_everything_at(monkeypatch, split_at)
    rng = random.Random(7)
    centre = rng.getrandbits(64)
    fps = sorted({flips(rng, centre, 64, rng.randint(1, 6)) for _ in range(3000)})
    path = tmp_path / "c.sqlite3"
    with SqliteIndex.open(path) as ix:
        ix.add([(None, fp, f"u{fp}", None, float(i)) for i, fp in enumerate(fps[:2000])])
        for i, fp in enumerate(fps[2000:]):  # one at a time: buckets fill up and split as entries arrive
            ix.check_and_add(Query(title_fp=None, body_fp=fp, title_k=0, body_k=0, url=f"u{fp}", seen_at=1e4 + i))
        conn = ix._conn
        assert conn is not None
        split, split_below = _markers(conn)
        assert split > 0 and conn.execute("SELECT count(*) FROM band2").fetchone()[0] > split
        assert split_below > 0  # the second level is used
        answers_as_a_scan(ix, fps, centre, rng)
        assert ix.purge(1000.0) == 1000  # the first 1000 go, with their plain and split rows
        kept = [fp for i, fp in enumerate(fps) if i >= 1000]
        answers_as_a_scan(ix, kept, centre, rng)
        assert ix.forget(f"u{kept[0]}") == 1
        kept = kept[1:]
        answers_as_a_scan(ix, kept, centre, rng)
        remaining = {fp for (fp,) in conn.execute("SELECT fp FROM band2 WHERE fp != x''")}
        assert remaining <= {to_signed64(fp) for fp in kept}  # nothing of a removed entry is left below
    reband(path, body_bands=5)
    with SqliteIndex.open(path) as ix, SqliteIndex.open(path, namespace="other") as other:
        answers_as_a_scan(ix, kept, centre, rng)  # reopened: the sampled entries' rows are checked, split or not
        other.add([(None, fp, f"o{fp}", None, 1.0) for fp in kept[:500]])
        assert ix.reset() == len(kept)  # its rows go, split or not; the other namespace's stay and answer
        below = 1 + sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS
        assert ix._conn is not None and {key >> below for (key,) in ix._conn.execute("SELECT key FROM band2")} == {
            other._ns_id}
        answers_as_a_scan(other, kept[:500], centre, rng)
        assert ix.lookup(None, kept[0], title_k=0, body_k=3) == []


def test_no_plain_bucket_reaches_the_split_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets split as they fill, one check-and-add at a time and in bulk: no bucket left plain
    that can split holds its threshold, in ``band`` or in the first level of ``band2`` (what keeps a
    check's candidates bounded under skew)."""
    _split_everything_at(monkeypatch, 8)
    rng = random.Random(11)
    centre = rng.getrandbits(64)
    fps = sorted({flips(rng, centre, 64, rng.randint(1, 4)) for _ in range(600)})
    codes = {c for split in bands.plan(bands_for(IndexParams())["body"]).values() if split.depth == 1
             for c in split.codes}  # band2 buckets that split again
    with SqliteIndex.open(tmp_path / "d.sqlite3") as ix:
        conn = ix._conn
        assert conn is not None
        worst = ("SELECT max(n) FROM (SELECT count(*) AS n FROM band WHERE key NOT IN"
                 " (SELECT key FROM band WHERE fp = x'') GROUP BY key)")

        def worst_below() -> int:
            sizes = conn.execute("SELECT key, count(*) FROM band2 WHERE key NOT IN"
                                 " (SELECT key FROM band2 WHERE fp = x'') GROUP BY key").fetchall()
            return max([n for key, n in sizes if (key >> sqlite_dense.HASH_BITS) & 0xFF in codes
                        and key >> (sqlite_dense.HASH_BITS + sqlite_dense.PATH_BITS) & 1], default=0)

        for i, fp in enumerate(fps[:300]):
            ix.check_and_add(Query(title_fp=fp, body_fp=fp, title_k=0, body_k=0, url=f"u{fp}", seen_at=float(i)))
            assert conn.execute(worst).fetchone()[0] < 8
        assert worst_below() < 8
        ix.add([(fp, fp, f"u{fp}", None, 1e3 + i) for i, fp in enumerate(fps[300:])])
        assert conn.execute(worst).fetchone()[0] < 8 and worst_below() < 8
        assert min(_markers(conn)) > 0


def test_shipped_thresholds() -> None:
    """SQLite: title (k=2) buckets split at 4 fingerprints (a neighbour's split bucket costs 2
    sub-probes), body (k=3) at 17 in ``band`` (34 sub-probes), 4 in ``band2``; two levels at most.
    Redis, where a level of sub-buckets costs a round trip: title at 132 then 116, body at 148 then
    132, two levels at most."""
    tiers = bands_for(IndexParams())
    for tier, first in (("title", 4), ("body", 17)):
        steps = bands.plan(tiers[tier])
        assert {path: bands.split_at(tiers[tier], s) for path, s in steps.items()} == {
            (0,): first, (1,): first, (0, 0): 4, (0, 1): 4, (1, 0): 4, (1, 1): 4}
    tiers = bands_for(IndexParams(), REDIS)
    for tier, first, second in (("title", 132, 116), ("body", 148, 132)):
        steps = bands.plan(tiers[tier])
        parts = range(len(tiers[tier].parts))
        assert {path: bands.split_at(tiers[tier], s) for path, s in steps.items()} == {
            **{(n,): first for n in parts}, **{(n, j): second for n in parts for j in parts}}


@pytest.fixture(scope="class")
def crowd(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An index of 3000 fingerprints within 4 bits of one centre (both tiers), split at 2, and the centre;
    the thresholds stay patched while the class's tests run."""
    with pytest.MonkeyPatch.context() as mp:
        _split_everything_at(mp, 2)
        rng = random.Random(5)
        centre = rng.getrandbits(64)
        ix = SqliteIndex.open(tmp_path_factory.mktemp("deep") / "i.sqlite3")
        ix.add([(flips(rng, centre, 64, rng.randint(1, 4)), flips(rng, centre, 64, rng.randint(1, 4)),
                 f"crowd{i}", None, 1.0) for i in range(3000)])
        assert ix._conn is not None and min(_markers(ix._conn)) > 100
        yield ix, centre
        ix.close()


class TestDeeperSplit:
    """Exactness through both split levels: a crowd around one centre, every bucket split at 2
    fingerprints, so a query near the centre reaches its candidates through ``band2`` buckets two
    levels down; every flip pattern up to k is found there, k+1 never."""

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(seed=st.integers(0, 2**32), k=st.integers(0, 3),
           positions=st.lists(st.integers(0, 63), max_size=4, unique=True), title=st.booleans())
    def test_every_flip_pattern_up_to_k_is_found_and_k_plus_1_never(
        self, crowd: Any, seed: int, k: int, positions: list[int], title: bool
    ) -> None:
        ix, centre = crowd
        k = min(k, 2) if title else k  # the default index answers title k <= 2, body k <= 3
        query = flips(random.Random(seed), centre, 64, random.Random(seed).randint(0, 3))
        entry = query
        for bit in positions:
            entry ^= 1 << bit
        url = f"u{next(_EXAMPLES)}"
        ix.add([(entry, None, url, None, 2.0)] if title else [(None, entry, url, None, 2.0)])
        found = ix.lookup(query if title else None, None if title else query,
                          title_k=k if title else 0, body_k=0 if title else k, limit=10_000)
        assert any(m.entry.url == url for m in found) == (len(positions) <= k)
        assert all(m.distance <= k for m in found)


# -- re-banding ------------------------------------------------------------------------------------


def filled(path: Path, n: int, params: IndexParams | None = None, seed: int = 1) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    pairs = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(n)]
    with open_index(path, params=params or IndexParams()) as ix:
        ix.add([(t, b, f"https://x/{i}", "t", float(i)) for i, (t, b) in enumerate(pairs)])
    return pairs


def test_reband_keeps_every_entry_and_answers_the_new_threshold(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    pairs = filled(path, 2000)
    with open_index(path) as ix, open_index(path, namespace="other") as other:
        other.add([(None, pairs[0][1], "https://other/0", None, 5.0)])
        before = [(e.id, e.url, e.title_fp, e.body_fp) for e in ix.entries()]
    with pytest.raises(ParameterMismatch):
        open_index(path, params=IndexParams(body_bands=6))
    done = reband(path, body_bands=6)
    assert done["entries"] == 2001 and done["params"]["body_bands"] == 6
    with open_index(path, params=IndexParams(body_bands=6)) as ix:
        assert [(e.id, e.url, e.title_fp, e.body_fp) for e in ix.entries()] == before
        rng = random.Random(3)
        for _, b in pairs[:200]:  # each body 5 bits away is found, 6 bits away is not
            for d in (5, 6):
                query = flips(rng, b, 64, d)
                found = ix.lookup(None, query, title_k=0, body_k=5, limit=5)
                assert any(m.entry.body_fp == b for m in found) == (d <= 5)
    with open_index(path, namespace="other", params=IndexParams(body_bands=6)) as other:
        assert other.count() == 1 and other.lookup(None, pairs[0][1], title_k=0, body_k=5)[0].distance == 0


def test_the_command_line_rebands_without_a_progress_bar_off_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    pairs = filled(path, 500)
    proc = ok(run("reband", path, "--body-bands", "6"))
    assert "500 entries" in proc.stdout and "\r" not in proc.stderr  # no progress bar without a terminal
    with open_index(path, params=IndexParams(body_bands=6)) as ix:
        assert ix.count() == 500
        for _, b in pairs[:50]:
            assert ix.peek(Query(title_fp=None, body_fp=b ^ 0b111, title_k=2, body_k=3)).entry.body_fp == b  # type: ignore[union-attr]


def test_scrapy_simhash_reband_uses_the_project_index(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p")
    index = root / ".scrapy" / "simhash" / "index.sqlite3"
    filled(index, 50)
    ok(run("simhash", "reband", "--title-max-distance", "4", cwd=root, cmd=SCRAPY))
    with open_index(index) as ix:
        assert ix.params.title_bands == 5 and ix.count() == 50


_REBANDER = """
import sys
from scrapy_simhash.index.sqlite import reband as sqlite_reband
sqlite_reband.PROGRESS_EVERY = 1000

def progress(done, total):
    print(done, flush=True)

sqlite_reband.reband(sys.argv[1], body_bands=6, progress=progress)
"""


def test_sigkill_during_reband_leaves_every_entry(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    pairs = filled(path, 60_000)
    kill_mid_reband(path, _REBANDER)
    with open_index(path, params=IndexParams()) as ix:  # as it was: the old layout, every entry
        assert ix.count() == 60_000 and ix.params.body_bands == 4
        for t, _ in random.Random(2).sample(pairs, 100):
            assert ix.peek(Query(title_fp=t ^ 1, body_fp=None, title_k=2, body_k=3)).entry.title_fp == t  # type: ignore[union-attr]
    reband(path, body_bands=6)  # and it can be re-banded afterwards
    with open_index(path, params=IndexParams(body_bands=6)) as ix:
        assert ix.count() == 60_000


def _crowded(path: Path, n_random: int, seed: int = 4) -> tuple[int, list[int]]:
    """A file of ``n_random`` random entries and 2000 bodies within 6 bits of one centre; the centre
    and the crowd's bodies."""
    filled(path, n_random, seed=seed)
    rng = random.Random(seed)
    centre = rng.getrandbits(64)
    crowd = sorted({flips(rng, centre, 64, rng.randint(1, 6)) for _ in range(2000)})
    with open_index(path) as ix:
        ix.add([(None, fp, f"c{fp}", None, 1e6) for fp in crowd])
    return centre, crowd


def test_reband_splits_a_crowd_again_and_answers_as_a_scan(tmp_path: Path) -> None:
    path = tmp_path / "crowd.sqlite3"
    centre, crowd = _crowded(path, 500)
    proc = ok(run("reband", path))
    assert f"{500 + len(crowd):,} entries" in proc.stdout
    with SqliteIndex.open(path) as ix:
        assert ix.count() == 500 + len(crowd)
        assert ix._conn is not None and min(_markers(ix._conn)) > 0  # split again, two levels deep
        answers_as_a_scan(ix, crowd, centre, random.Random(8))


def test_sigkill_while_a_crowd_is_rebanded_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "crowd.sqlite3"
    centre, crowd = _crowded(path, 60_000)
    with SqliteIndex.open(path) as ix:
        assert ix._conn is not None
        markers = _markers(ix._conn)
    kill_mid_reband(path, _REBANDER.replace("body_bands=6", "body_bands=None"))
    with SqliteIndex.open(path) as ix:  # as it was: every entry, its split buckets, exact answers
        assert ix.count() == 60_000 + len(crowd)
        assert ix._conn is not None and _markers(ix._conn) == markers
        answers_as_a_scan(ix, crowd, centre, random.Random(9))
    reband(path)  # and it can be re-banded afterwards
    with SqliteIndex.open(path) as ix:
        assert ix.count() == 60_000 + len(crowd)
        answers_as_a_scan(ix, crowd, centre, random.Random(9))
