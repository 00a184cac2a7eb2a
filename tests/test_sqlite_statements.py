"""The SQL of one SQLite check-and-add (issue 18: the constant part of a durable transaction).

A new item's two fingerprints are probed by one statement, and its band rows go into their buckets
with the sizes that read gave (no second read of the same buckets); the answers, the rows stored
and the buckets split are those of the statement-per-tier path, on crowded fingerprints that make
buckets split as entries arrive one at a time.
"""

from __future__ import annotations

import dataclasses
import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.index import Query
from scrapy_simhash.index.sqlite import dense as sqlite_dense
from scrapy_simhash.index.sqlite.index import SqliteIndex
from scrapy_simhash.index.sqlite.tables import Tables

from .test_bands import flips


def _statements(ix: SqliteIndex, query: Query) -> list[str]:
    conn = ix._conn
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        ix.check_and_add(query)
    finally:
        conn.set_trace_callback(None)
    return seen


def test_a_new_item_reads_the_band_table_once(tmp_path: Path) -> None:
    rng = random.Random(1)
    with SqliteIndex.open(tmp_path / "i.sqlite3") as ix:
        ix.add([(rng.getrandbits(64), rng.getrandbits(64), f"u{i}", None, 1.0) for i in range(500)])
        seen = _statements(ix, Query(rng.getrandbits(64), rng.getrandbits(64), 2, 3, url="new", seen_at=2.0))
        band_reads = [s for s in seen if s.startswith(("SELECT", "WITH")) and re.search(r"\bband\b(?!2)", s)]
        assert len(band_reads) == 1, band_reads  # both tiers' probes; the insert's bucket sizes come from it


def _crowd(rng: random.Random, n: int) -> list[tuple[int, int]]:
    title, body = rng.getrandbits(64), rng.getrandbits(64)
    return [(flips(rng, title, 64, rng.randint(1, 5)), flips(rng, body, 64, rng.randint(1, 6))) for _ in range(n)]


def _run(path: Path, pairs: list[tuple[int, int]]) -> tuple[list[Any], list[Any]]:
    with SqliteIndex.open(path) as ix:
        out = [ix.check_and_add(Query(t, b, 2, 3, url=f"u{i}", seen_at=float(i))) for i, (t, b) in enumerate(pairs)]
        assert ix._conn is not None
        rows = [ix._conn.execute(f"SELECT key, fp FROM {table} ORDER BY key, fp").fetchall()
                for table in ("band", "band2")]
    verdicts = [(o.entry_id, None if o.match is None else (o.match.tier, o.match.distance, o.match.entry.id))
                for o in out]
    return verdicts, rows


def test_the_shared_read_answers_and_stores_what_a_read_per_tier_does(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2)
    pairs = _crowd(rng, 700) + [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(300)]
    rng.shuffle(pairs)
    pairs += pairs[:50]  # exact repeats: duplicates
    checked: list[int] = []
    place = sqlite_dense._place

    def exact_sizes(conn: sqlite3.Connection, rows: Any, items: Any, depth: int, known: Any = None) -> Any:
        if known is not None:  # the sizes given are the table's, bucket by bucket
            for key in {item[0] for item in items}:
                count, marked = conn.execute("SELECT count(*), coalesce(max(fp = x''), 0) FROM band WHERE key = ?",
                                             (key,)).fetchone()
                assert known[key] == (count, bool(marked))
            checked.append(len(items))
        return place(conn, rows, items, depth, known)

    monkeypatch.setattr(sqlite_dense, "_place", exact_sizes)
    shared = _run(tmp_path / "shared.sqlite3", pairs)
    assert len(checked) == sum(entry_id is not None for entry_id, _ in shared[0]) > 400  # every insert took them
    monkeypatch.setattr(Tables, "_prefetched", lambda self, tier, fp: None)
    monkeypatch.setattr(Tables, "_sizes", lambda self, query, keys: None)
    apart = _run(tmp_path / "apart.sqlite3", pairs)
    assert shared == apart
    assert sum(v[1] is not None for v in shared[0]) >= 50 and shared[1][1]  # duplicates found, buckets split


def test_a_new_item_writes_its_band_and_sentence_rows_with_one_statement_each(tmp_path: Path) -> None:
    rng = random.Random(3)
    sample = tuple(sorted(f"{rng.getrandbits(63):016x}" for _ in range(20)))
    with SqliteIndex.open(tmp_path / "i.sqlite3") as ix:
        ix.add([(rng.getrandbits(64), rng.getrandbits(64), f"u{i}", None, 1.0) for i in range(200)])
        query = Query(rng.getrandbits(64), rng.getrandbits(64), 2, 3, url="new", seen_at=2.0, sentences=sample)
        seen = _statements(ix, query)
        assert ix._conn is not None
        entry = ix._conn.execute("SELECT max(id) FROM entry").fetchone()[0]
        stored = ix._conn.execute("SELECT count(*) FROM sentence WHERE entry = ?", (entry,)).fetchone()[0]
        found = ix.lookup(query.title_fp, query.body_fp, title_k=0, body_k=0)
    writes = {table: [s for s in seen if s.startswith(f"INSERT OR IGNORE INTO {table}(")]
              for table in ("band", "sentence")}
    assert len(writes["band"]) == 1 and len(writes["sentence"]) == 1, writes
    assert stored == 12  # rule.SENTENCES_STORED rows, all from that one statement
    assert [m.entry.id for m in found] == [entry, entry]  # both fingerprints' rows are there


def test_the_probe_read_builds_no_temporary_index(tmp_path: Path) -> None:
    """The default layout's probe keys are distinct: they are read by a join with their list, each
    key one seek, not by ``key IN (…)``, which first copies the 132 keys into a temporary index."""
    with SqliteIndex.open(tmp_path / "i.sqlite3") as ix:
        assert ix._conn is not None
        rows = ix._rows
        for sql, keys in ((rows.sql_band["title"], rows.probe_keys("title", 12345)),
                          (rows.sql_band_both, rows.probe_keys("title", 12345) + rows.probe_keys("body", 6789))):
            assert len(set(keys)) == len(keys)
            opcodes = {row[1] for row in ix._conn.execute("EXPLAIN " + sql, keys)}
            assert "SeekGE" in opcodes or "NotFound" in opcodes or "Found" in opcodes or "SeekRowid" in opcodes \
                or "IdxGE" in opcodes, opcodes
            assert "OpenEphemeral" not in opcodes, sql


def _batch_statements(ix: SqliteIndex, queries: list[Query]) -> tuple[list[Any], list[str]]:
    conn = ix._conn
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        out = ix.check_and_add_many(queries)
    finally:
        conn.set_trace_callback(None)
    return out, seen


def _contents(path: Path) -> list[list[Any]]:
    conn = sqlite3.connect(path)
    try:
        return [conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                for table in ("entry", "band", "band2", "sentence", "decision")]
    finally:
        conn.close()


def test_a_batch_takes_savepoints_only_when_an_item_fails(tmp_path: Path) -> None:
    """A batch runs without a savepoint an item; when an item fails (a value in the file that is
    not ours), the batch runs again with them, and its answers and rows are those of the items
    decided one transaction each."""
    from .test_item_errors import _q, _tampered_index

    rng = random.Random(4)
    with SqliteIndex.open(tmp_path / "clean.sqlite3") as ix:
        out, seen = _batch_statements(ix, [_q(rng.getrandbits(64), f"u{i}") for i in range(5)])
    assert all(o.entry_id is not None for o in out)
    assert not [s for s in seen if s.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK"))], seen

    victim = _tampered_index(tmp_path / "batch.sqlite3", rng)
    (tmp_path / "apart.sqlite3").write_bytes((tmp_path / "batch.sqlite3").read_bytes())
    queries = [_q(rng.getrandbits(64), "a"), _q(victim ^ 1, "near"), _q(victim, "b"), _q(rng.getrandbits(64), "c")]
    queries.append(_q(queries[0].title_fp ^ 3, "dup"))  # a duplicate of the batch's first item
    queries = [dataclasses.replace(query, seen_at=100.0 + n) for n, query in enumerate(queries)]
    with SqliteIndex.open(tmp_path / "batch.sqlite3") as ix:
        batch, seen = _batch_statements(ix, queries)
    assert any(s.startswith("SAVEPOINT") for s in seen)
    with SqliteIndex.open(tmp_path / "apart.sqlite3") as ix:
        apart = [ix.check_and_add_many([query])[0] for query in queries]

    def answers(outs: list[Any], name: str) -> list[Any]:
        return [(o.entry_id, o.error and o.error.replace(name, "FILE"),
                 None if o.match is None else (o.match.tier, o.match.distance, o.match.entry.id)) for o in outs]

    assert answers(batch, "batch.sqlite3") == answers(apart, "apart.sqlite3")
    assert [o.error is not None for o in batch] == [False, True, True, False, False]
    assert batch[4].match is not None and batch[4].match.entry.id == batch[0].entry_id
    assert _contents(tmp_path / "batch.sqlite3") == _contents(tmp_path / "apart.sqlite3")
