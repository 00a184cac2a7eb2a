"""How a SQLite index stores sentence samples and URLs (schema 5, issue 15's storage target), and
the conversion of a schema 4 file.

An entry row keeps 4-byte prefixes of its sampled sentence hashes; the ``sentence`` rows hold the
whole hashes without a namespace column; ``entry_url`` indexes a digest. Prefixes that
collide (inside one sample, across samples, under a boilerplate sentence) must change no verdict
and no removal: checked against the rule's reference store on a stream where they collide all the
time. A schema 4 file is refused with the command that converts it; the conversion keeps every
entry, id and verdict, and a SIGKILL in the middle of it leaves the file as it was.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.fingerprint.simhash import to_signed64
from scrapy_simhash.index import IndexOpenError, Query, open_index, rule
from scrapy_simhash.index.sqlite.index import SqliteIndex
from scrapy_simhash.index.sqlite.reband import reband
from tests.conftest import kill_mid_reband
from tests.test_cli import ok, run
from tests.test_rule import Memory, flip

K = rule.SENTENCES_STORED


def hashes(rng: random.Random, n: int) -> tuple[str, ...]:
    return tuple(sorted({f"{rng.getrandbits(64):016x}" for _ in range(n)}))


def test_an_entry_row_keeps_4_bytes_a_sampled_hash_and_the_url_as_a_digest(tmp_path: Path) -> None:
    sample = hashes(random.Random(1), 30)
    with open_index(tmp_path / "i.sqlite3") as ix:
        ix.check_and_add(Query(title_fp=1, body_fp=2, title_k=2, body_k=3, url="https://news.example/a",
                               sentences=sample, sentences_shared=50))
        conn = ix._conn
        assert conn is not None
        (blob,) = conn.execute("SELECT sentences FROM entry").fetchone()
        assert blob == b"".join(bytes.fromhex(h[:8]) for h in sample[:K])  # schema 4: the whole 8 bytes
        assert [r[1] for r in conn.execute("PRAGMA table_info(sentence)")] == ["key", "entry"]  # no ns
        assert conn.execute("SELECT count(*) FROM sentence").fetchone()[0] == K
        assert [r[2] for r in conn.execute("PRAGMA index_info(entry_url)")] == ["url_key"]
        assert [e.sentences for e in ix.entries()] == [sample[:K]]  # read back whole, from the rows
        assert ix.forget("https://news.example/b") == 0 and ix.forget("https://news.example/a") == 1
        assert conn.execute("SELECT count(*) FROM sentence").fetchone()[0] == 0


def colliding_stream(n: int, seed: int) -> list[Query]:
    """Queries whose sentence hashes share a few 4-byte prefixes (several in one sample, across
    samples) and come from a pool, some held by more than SENTENCE_MAX_HOLDERS entries; titles and
    bodies near a few centres, so the title tier's body check and the sentence tier read samples."""
    rng = random.Random(seed)
    prefixes = [rng.getrandbits(32) for _ in range(64)]  # a sample of 12 often holds one twice

    def fresh() -> str:
        return f"{rng.choice(prefixes) << 32 | rng.getrandbits(32):016x}"

    pool = [fresh() for _ in range(40)]
    boiler = pool[:2]  # in almost every item: boilerplate soon
    centres = [rng.getrandbits(64) for _ in range(4)]
    queries = []
    for i in range(n):
        sample = {fresh() for _ in range(rng.randint(0, 14))} | set(rng.sample(pool, rng.randint(0, 6)))
        if rng.random() < 0.9:
            sample |= set(boiler)
        title = flip(rng.choice(centres), *rng.sample(range(64), rng.randint(0, 3))) if rng.random() < 0.5 else None
        body = flip(rng.choice(centres), *rng.sample(range(64), rng.randint(0, 30)))
        queries.append(Query(
            title_fp=title, body_fp=body if title is None or rng.random() < 0.9 else None, title_k=2, body_k=3,
            url=f"u{i}", seen_at=float(i + 1), numbers=rng.choice(["0000000a 0000000b", "", None]),
            title_numbers=rng.choice([0, 70]), sentences=tuple(sorted(sample)),
            sentences_shared=rng.choice([0, 30, 50]),
        ))
    return queries


def test_colliding_prefixes_change_no_verdict_and_no_removal(tmp_path: Path) -> None:
    queries = colliding_stream(400, seed=5)
    memory = Memory()
    samples: dict[int, tuple[str, ...]] = {}
    with SqliteIndex.open(tmp_path / "c.sqlite3") as ix:
        tiers = set()
        for query in queries:
            expected = memory.check_and_add(query)
            assert ix.peek(query) == expected.match
            got = ix.check_and_add(query)
            assert (got.match, got.entry_id) == (expected.match, expected.entry_id), query.url
            tiers.add(None if got.match is None else got.match.tier)
            if got.entry_id is not None:
                samples[got.entry_id] = tuple(sorted(set(query.sentences))[:K])
        assert tiers == {None, "title", "body", "sentence"}
        conn = ix._conn
        assert conn is not None
        blobs = [b for (b,) in conn.execute("SELECT sentences FROM entry WHERE sentences IS NOT NULL")]
        assert any(len(set(b[i:i + 4] for i in range(0, len(b), 4))) < len(b) // 4 for b in blobs)  # in one sample
        assert {e.id: e.sentences for e in ix.entries()} == {i: s for i, s in samples.items()}

        def rows() -> int:
            return conn.execute("SELECT count(*) FROM sentence").fetchone()[0]

        assert rows() == sum(map(len, samples.values()))
        gone = sorted(samples)[::7]
        for ident in gone:  # exactly the entry's rows go, whatever shares their prefixes
            assert ix.forget(ident) == 1
            del samples[ident]
            assert rows() == sum(map(len, samples.values()))
        ix.purge(200.0)
        samples = {e.id: e.sentences for e in ix.entries()}
        assert rows() == sum(map(len, samples.values())) and len(samples) < 200
        assert all(e.first_seen >= 200 for e in ix.entries())


def test_namespaces_share_the_sentence_rows_but_not_their_counts(tmp_path: Path) -> None:
    """A sentence boilerplate in one namespace (held by SENTENCE_MAX_HOLDERS of its entries) is a
    story's sentence in another, and no namespace finds another's entries through it."""
    path = tmp_path / "n.sqlite3"
    chrome, story = "00000000000000c1", "00000000000000c2"
    rng = random.Random(4)
    with open_index(path, namespace="a") as a, open_index(path, namespace="b") as b:
        for i in range(rule.SENTENCE_MAX_HOLDERS):  # bodies far apart: one sentence in two shared is no match
            assert a.check_and_add(Query(title_fp=None, body_fp=rng.getrandbits(64), title_k=2, body_k=3, url=f"a{i}",
                                         sentences=(chrome, f"{i + 1000:016x}"), sentences_shared=50)).entry_id
        b.check_and_add(Query(title_fp=None, body_fp=1, title_k=2, body_k=3, url="b0", sentences=(chrome, story),
                              sentences_shared=50))
        ask = Query(title_fp=None, body_fp=rng.getrandbits(64), title_k=2, body_k=3, sentences=(chrome, story),
                    sentences_shared=50)
        found = b.peek(ask)
        assert found is not None and found.tier == "sentence" and found.entry.url == "b0"
        assert a.peek(ask) is None  # in a, the chrome is boilerplate and the story is not there
        assert b.forget("a0") == 0 and a.count() == rule.SENTENCE_MAX_HOLDERS  # nor is a URL of a found in b
        conn = a._conn  # type: ignore[attr-defined]
        assert conn.execute("SELECT count(*) FROM sentence").fetchone()[0] == 2 * rule.SENTENCE_MAX_HOLDERS + 2
        b.reset()  # b's rows go, a's stay
        assert conn.execute("SELECT count(*) FROM sentence").fetchone()[0] == 2 * rule.SENTENCE_MAX_HOLDERS
        assert next(a.entries()).sentences == (chrome, f"{1000:016x}")


# -- schema 4 files ---------------------------------------------------------------------------------

#: How schema 4 wrote the tables this version changed (sqlite_tables.py at schema 4, verbatim).
SCHEMA_4_ENTRY = """CREATE TABLE entry (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ns INTEGER NOT NULL,
    title_fp,  -- untyped (no affinity): INTEGER for <= 64 bits, BLOB for 128
    body_fp,
    first_seen REAL NOT NULL,
    url TEXT,
    title TEXT,
    numbers BLOB,  -- number signature (rule.numbers_agree), 4 bytes a hash; NULL: added without one
    sentences BLOB,  -- stored sentence hashes, 8 bytes each; NULL: none
    short INTEGER  -- digest of a body too short to fingerprint; NULL: none
);
CREATE INDEX entry_title ON entry(ns, title_fp, first_seen) WHERE title_fp IS NOT NULL;
CREATE INDEX entry_body ON entry(ns, body_fp, first_seen) WHERE body_fp IS NOT NULL;
CREATE INDEX entry_seen ON entry(ns, first_seen);
CREATE INDEX entry_url ON entry(ns, url) WHERE url IS NOT NULL;
CREATE TABLE sentence (
    ns INTEGER NOT NULL,
    hash INTEGER NOT NULL,
    entry INTEGER NOT NULL,
    PRIMARY KEY (ns, hash, entry)
) WITHOUT ROWID;
"""


def as_schema_4(path: Path, samples: dict[int, tuple[str, ...]]) -> None:
    """Rewrite a file as schema 4 wrote it: the whole hashes in ``entry.sentences``, the sentence
    rows with a namespace column, the URL index on the text (``samples``: each entry's sample)."""
    conn = sqlite3.connect(path)
    (seq,) = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'").fetchone()
    old = conn.execute("SELECT id, ns, title_fp, body_fp, first_seen, url, title, numbers, short FROM entry").fetchall()
    conn.executescript(f"DROP TABLE entry; DROP TABLE sentence; {SCHEMA_4_ENTRY}")
    for ident, ns, tfp, bfp, seen, url, title, numbers, short in old:
        blob = b"".join(bytes.fromhex(h) for h in samples.get(ident, ())) or None
        conn.execute("INSERT INTO entry(id, ns, title_fp, body_fp, first_seen, url, title, numbers, sentences, short)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (ident, ns, tfp, bfp, seen, url, title, numbers, blob, short))
        conn.executemany("INSERT INTO sentence VALUES (?, ?, ?)",
                         [(ns, to_signed64(int(h, 16)), ident) for h in samples.get(ident, ())])
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'entry'", (seq,))
    conn.execute("UPDATE simhash_meta SET value = ? WHERE key = 'schema_version'", (json.dumps(4),))
    conn.commit()
    conn.close()


def filled(path: Path, n: int, seed: int = 3) -> tuple[list[Query], dict[int, tuple[str, ...]]]:
    """``n`` items through check-and-add in two namespaces; the queries and each entry's sample."""
    queries = colliding_stream(n, seed)
    samples: dict[int, tuple[str, ...]] = {}
    with open_index(path, namespace="a") as a, open_index(path, namespace="b") as b:
        for i, query in enumerate(queries):
            out = (a if i % 3 else b).check_and_add(query)
            if out.entry_id is not None:
                samples[out.entry_id] = tuple(sorted(set(query.sentences))[:K])
        last = a.check_and_add(Query(title_fp=None, body_fp=777, title_k=2, body_k=3)).entry_id
        assert last is not None and a.forget(last) == 1  # the id sequence is ahead of the highest id
    return queries, samples


def verdicts(path: Path, probes: list[Query]) -> list[Any]:
    with open_index(path, namespace="a", readonly=True) as a, open_index(path, namespace="b", readonly=True) as b:
        return [(a.peek(q), b.peek(q)) for q in probes] + [sorted((e.id, e.sentences, e.url) for e in ix.entries())
                                                          for ix in (a, b)]


def test_a_schema_4_file_is_refused_then_converted_by_reband(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    queries, samples = filled(path, 300)
    probes = [Query(title_fp=q.title_fp, body_fp=q.body_fp, title_k=2, body_k=3, sentences=q.sentences,
                    sentences_shared=50, numbers=q.numbers, title_numbers=q.title_numbers) for q in queries[::3]]
    before = verdicts(path, probes)
    with open_index(path, namespace="a") as ix:
        top = ix._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'").fetchone()  # type: ignore[union-attr]
    as_schema_4(path, samples)
    with pytest.raises(IndexOpenError, match=f"schema version 4.*convert it with `scrapy-simhash reband {path}`"):
        open_index(path)
    proc = ok(run("reband", path))
    assert f"{len(samples)} entries" in proc.stdout
    assert verdicts(path, probes) == before  # every entry, id, sample and verdict, in both namespaces
    with open_index(path, namespace="a") as ix:
        conn = ix._conn
        assert conn is not None
        assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'").fetchone() == top
        assert conn.execute("SELECT count(*) FROM sentence").fetchone()[0] == sum(map(len, samples.values()))
        url = next(e.url for e in ix.entries())
        assert ix.forget(url) == 1  # the URL index was rebuilt
        new = ix.check_and_add(Query(title_fp=None, body_fp=12345, title_k=2, body_k=3))
        assert new.entry_id == top[0] + 1  # no id is given twice


_CONVERTER = """
import sys
from scrapy_simhash.index.sqlite import reband as sqlite_reband
sqlite_reband.PROGRESS_EVERY = 1000

def progress(done, total):
    print(done, flush=True)

sqlite_reband.reband(sys.argv[1], progress=progress)
"""


def test_sigkill_during_the_conversion_leaves_the_schema_4_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    rng = random.Random(9)
    with SqliteIndex.open(path) as ix:  # many entries fast: bulk-added, their samples written below
        ix.add([(rng.getrandbits(64), rng.getrandbits(64), f"u{i}", None, float(i)) for i in range(30_000)])
        ids = [e.id for e in ix.entries()]
    samples = {ident: hashes(rng, K) for ident in ids}
    as_schema_4(path, samples)
    kill_mid_reband(path, _CONVERTER)  # the tables converted, band rows being computed: not committed
    with pytest.raises(IndexOpenError, match=r"schema version 4.*scrapy-simhash reband"):
        open_index(path)
    conn = sqlite3.connect(path)  # as it was: schema 4's tables, every entry and sentence row
    assert conn.execute("SELECT count(*), sum(length(sentences)) FROM entry").fetchone() == (30_000, 30_000 * 8 * K)
    assert conn.execute("SELECT count(*) FROM sentence WHERE ns = 1").fetchone()[0] == 30_000 * K
    conn.close()
    reband(path)  # and it converts afterwards
    with open_index(path) as ix:
        assert ix.count() == 30_000
        for ident in random.Random(2).sample(ids, 50):
            found = ix.peek(Query(title_fp=None, body_fp=rng.getrandbits(64), title_k=2, body_k=3,
                                  sentences=samples[ident], sentences_shared=50))
            assert found is not None and found.entry.id == ident and found.entry.sentences == samples[ident]
