"""How a SQLite index stores sentence samples and URLs, and what re-banding keeps of them.

An entry row keeps 4-byte prefixes of its sampled sentence hashes; the ``sentence`` rows hold the
whole hashes without a namespace column; ``entry_url`` indexes a digest. Prefixes that
collide (inside one sample, across samples, under a boilerplate sentence) must change no verdict
and no removal: checked against the rule's reference store on a stream where they collide all the
time. Re-banding rebuilds band rows only: every entry, id, sample and verdict stays.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from scrapy_simhash.index import IndexParams, Query, open_index, rule
from scrapy_simhash.index.sqlite.index import SqliteIndex
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
        assert blob == b"".join(bytes.fromhex(h[:8]) for h in sample[:K])  # not the whole 8 bytes
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


# -- re-banding ------------------------------------------------------------------------------------


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


def test_reband_keeps_every_entry_id_sample_and_verdict(tmp_path: Path) -> None:
    path = tmp_path / "i.sqlite3"
    queries, samples = filled(path, 300)
    probes = [Query(title_fp=q.title_fp, body_fp=q.body_fp, title_k=2, body_k=3, sentences=q.sentences,
                    sentences_shared=50, numbers=q.numbers, title_numbers=q.title_numbers) for q in queries[::3]]
    before = verdicts(path, probes)
    with open_index(path, namespace="a") as ix:
        top = ix._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'").fetchone()  # type: ignore[union-attr]
    proc = ok(run("reband", path, "--body-bands", "6"))
    assert f"{len(samples)} entries" in proc.stdout
    assert verdicts(path, probes) == before  # every entry, id, sample and verdict, in both namespaces
    with open_index(path, namespace="a", params=IndexParams(body_bands=6)) as ix:
        conn = ix._conn
        assert conn is not None
        assert conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'").fetchone() == top
        assert conn.execute("SELECT count(*) FROM sentence").fetchone()[0] == sum(map(len, samples.values()))
        url = next(e.url for e in ix.entries())
        assert ix.forget(url) == 1
        new = ix.check_and_add(Query(title_fp=None, body_fp=12345, title_k=2, body_k=3))
        assert new.entry_id == top[0] + 1  # no id is given twice
