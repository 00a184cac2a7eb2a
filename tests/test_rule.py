"""The tier rule (scrapy_simhash/index/rule.py) on one verdict table, and every backend against it.

The table states what the rule answers in each case. It is run through the Python rule over a plain
in-memory store (the rule alone, no database), through the SQLite index (the same rule inside its
transaction) and through the Redis index (the same rule over Redis keys, in optimistic
transactions): all three must give the table's answer, by ``check_and_add`` and by ``peek``. A
random stream then compares the three outcome by outcome.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.fingerprint.simhash import band_layout, split_bands
from scrapy_simhash.index import Entry, Match, Query, Tier, open_index, rule
from tests.test_index_protocol import redis_server_url, with_prefix

M64 = (1 << 64) - 1


class MemoryStore:
    """The rule's Store in plain Python dicts: the reference the backends are held to."""

    def __init__(self, title_k: int = 2, body_k: int = 3) -> None:
        self.layout = {"title": band_layout(64, title_k), "body": band_layout(64, body_k)}
        self.entries: list[tuple[Entry, tuple[str, ...]]] = []
        self.decisions: dict[str, tuple[str, str, int, int]] = {}

    def _bands(self, tier: Tier, fp: int) -> list[tuple[int, int]]:
        return list(enumerate(split_bands(fp, self.layout[tier])))

    def candidates(self, tier: Tier, fp: int) -> Iterable[int]:
        mine = set(self._bands(tier, fp))
        for entry, _ in self.entries:
            other = entry.title_fp if tier == "title" else entry.body_fp
            if other is not None and mine & set(self._bands(tier, other)):
                yield other

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Entry]:
        found = sorted(
            (e for e, _ in self.entries if (e.title_fp if tier == "title" else e.body_fp) == fp
             and e.first_seen >= not_before),
            key=lambda e: (e.first_seen, e.id),
        )
        return found[offset:] if limit is None else found[offset:offset + limit]

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[tuple[Entry, int, int]]:
        counted = [h for h in hashes if sum(h in s for _, s in self.entries) < rule.SENTENCE_MAX_HOLDERS]
        out = [(e, sum(h in s for h in counted), len(s)) for e, s in self.entries if e.first_seen >= not_before]
        return sorted(((e, n, k) for e, n, k in out if n), key=lambda t: (t[0].first_seen, t[0].id))

    def insert(self, query: Query, seen_at: float) -> int:
        stored = tuple(sorted(set(query.sentences))[: rule.SENTENCES_STORED])
        entry = Entry(len(self.entries) + 1, "default", query.url, query.title, seen_at, query.title_fp,
                      query.body_fp, query.numbers, stored, query.short_body, query.chars)
        self.entries.append((entry, stored))
        return entry.id

    def record(self, query: Query, match: Match, status: str, seen_at: float) -> None:
        assert query.url is not None
        self.decisions[query.url] = (status, match.tier, match.distance, match.entry.id)


class Memory:
    """The memory store behind the index methods the table uses."""

    def __init__(self) -> None:
        self.store = MemoryStore()

    def check_and_add(self, query: Query, *, flagged: Any = ()) -> Any:
        return rule.check_and_add(self.store, query, flagged)

    def peek(self, query: Query) -> Match | None:
        return rule.peek(self.store, query)

    def close(self) -> None:
        pass


def flip(fp: int, *positions: int) -> int:
    for p in positions:
        fp ^= 1 << p
    return fp


T, B = 0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210  # a title and a body fingerprint
N1 = "0000000a 0000000b 0000000c"  # number signatures: N1 and N2 share nothing
N2 = "0000001a 0000001b 0000001c"
S = tuple(f"{n:016x}" for n in range(1, 9))  # sentence hashes
LONG = tuple(f"{n:016x}" for n in range(100, 100 + 2 * rule.SENTENCES_STORED))  # more than an entry stores
K = rule.SENTENCES_STORED
H1, H2 = "00000000000000a1", "00000000000000a2"  # digests of two different short bodies
FAR = rule.TITLE_BODY_DISTANCE


@dataclass(frozen=True)
class Case:
    name: str
    stored: tuple[dict[str, Any], ...]  # Query fields of the entries added first, in order
    ask: dict[str, Any]
    expect: tuple[str, int, int] | None  # (tier, distance, which stored entry, 0-based) or None: new


CASES = [
    Case("empty index: new", (), {"title_fp": T, "body_fp": B}, None),
    Case("title within 2", ({"title_fp": T, "body_fp": B},),
         {"title_fp": flip(T, 1, 9), "body_fp": flip(B, *range(FAR))}, ("title", 2, 0)),
    Case("title within 2 over a body further than TITLE_BODY_DISTANCE: new", ({"title_fp": T, "body_fp": B},),
         {"title_fp": flip(T, 1, 9), "body_fp": flip(B, *range(FAR + 1))}, None),
    Case("far bodies: the title tier skips to a holder whose body agrees",
         ({"title_fp": T, "body_fp": ~B & M64}, {"title_fp": flip(T, 2), "body_fp": flip(B, 30)}),
         {"title_fp": T, "body_fp": B}, ("title", 1, 1)),
    Case("far bodies sharing a stored sampled sentence agree (a truncated copy)",
         ({"title_fp": T, "body_fp": B, "sentences": S[:4]},),
         {"title_fp": T, "body_fp": ~B & M64, "sentences": (S[3], S[6])}, ("title", 0, 0)),
    Case("a sentence the entry did not store does not count",
         ({"title_fp": T, "body_fp": B, "sentences": S[:4]},),
         {"title_fp": T, "body_fp": ~B & M64, "sentences": (S[4], S[6])}, None),
    Case("a title-only item matches a title with a body", ({"title_fp": T, "body_fp": B},), {"title_fp": T},
         ("title", 0, 0)),
    Case("a title-only entry matches an item with a body", ({"title_fp": T},), {"title_fp": T, "body_fp": B},
         ("title", 0, 0)),
    Case("two short bodies: equal digests agree", ({"title_fp": T, "short_body": H1},),
         {"title_fp": T, "short_body": H1}, ("title", 0, 0)),
    Case("two short bodies: other digests contradict", ({"title_fp": T, "short_body": H1},),
         {"title_fp": T, "short_body": H2}, None),
    Case("a short body against a fingerprinted one contradicts", ({"title_fp": T, "body_fp": B},),
         {"title_fp": T, "short_body": H1}, None),
    Case("a fingerprinted body against a short one contradicts", ({"title_fp": T, "short_body": H1},),
         {"title_fp": T, "body_fp": B}, None),
    Case("a title of few features does not decide alone: no body on its side", ({"title_fp": T, "body_fp": B},),
         {"title_fp": T, "title_features": rule.TITLE_ALONE_FEATURES - 1}, None),
    Case("a title of few features does not decide alone: no body on the entry's side", ({"title_fp": T},),
         {"title_fp": T, "body_fp": B, "title_features": rule.TITLE_ALONE_FEATURES - 1}, None),
    Case("a title of few features decides with bodies that agree", ({"title_fp": T, "body_fp": B},),
         {"title_fp": flip(T, 1), "body_fp": flip(B, *range(FAR)), "title_features": 2}, ("title", 1, 0)),
    Case("a title of few features decides with equal short bodies", ({"title_fp": T, "short_body": H1},),
         {"title_fp": T, "short_body": H1, "title_features": 2}, ("title", 0, 0)),
    Case("a title of TITLE_ALONE_FEATURES features decides alone", ({"title_fp": T},),
         {"title_fp": T, "title_features": rule.TITLE_ALONE_FEATURES}, ("title", 0, 0)),
    Case("title at 3 misses, body within 3", ({"title_fp": T, "body_fp": B},),
         {"title_fp": flip(T, 1, 2, 3), "body_fp": flip(B, 4, 5, 6)}, ("body", 3, 0)),
    Case("body at 4 misses: new", ({"title_fp": T, "body_fp": B},),
         {"title_fp": flip(T, 1, 2, 3), "body_fp": flip(B, 4, 5, 6, 7)}, None),
    Case("the title tier comes first, even with a nearer body",
         ({"title_fp": T, "body_fp": flip(B, *range(10))}, {"title_fp": 2, "body_fp": B}),
         {"title_fp": flip(T, 60, 61), "body_fp": B}, ("title", 2, 0)),
    Case("nearest wins over earliest", ({"title_fp": flip(T, 0, 1)}, {"title_fp": flip(T, 0)}), {"title_fp": T},
         ("title", 1, 1)),
    Case("equal distance: earliest first seen", ({"title_fp": flip(T, 5)}, {"title_fp": flip(T, 7)}),
         {"title_fp": T}, ("title", 1, 0)),
    Case("one fingerprint, many holders: the earliest", ({"title_fp": T}, {"title_fp": T}), {"title_fp": T},
         ("title", 0, 0)),
    Case("number guard: a disagreeing title is skipped for an agreeing one further away",
         ({"title_fp": T, "numbers": N2}, {"title_fp": flip(T, 3), "numbers": N1}),
         {"title_fp": T, "numbers": N1, "title_numbers": 70}, ("title", 1, 1)),
    Case("number guard: none agrees, the body tier decides",
         ({"title_fp": T, "body_fp": B, "numbers": N2},), {"title_fp": T, "body_fp": flip(B, 9), "numbers": N1,
                                                             "title_numbers": 70}, ("body", 1, 0)),
    Case("number guard: none agrees, no body: new", ({"title_fp": T, "numbers": N2},),
         {"title_fp": T, "numbers": N1, "title_numbers": 70}, None),
    Case("number guard off: the earliest holder", ({"title_fp": T, "numbers": N2},),
         {"title_fp": T, "numbers": N1, "title_numbers": 0}, ("title", 0, 0)),
    Case("an entry stored without numbers agrees", ({"title_fp": T},),
         {"title_fp": T, "numbers": N1, "title_numbers": 70}, ("title", 0, 0)),
    Case("expired entries never match", ({"title_fp": T, "seen_at": 5.0}, {"title_fp": flip(T, 1), "seen_at": 20.0}),
         {"title_fp": T, "not_before": 10.0}, ("title", 1, 1)),
    Case("figure-heavy body: the body tier needs agreeing numbers", ({"body_fp": B, "numbers": N2},),
         {"body_fp": flip(B, 3), "numbers": N1, "title_numbers": 70, "figures": True}, None),
    Case("figure-heavy body: a disagreeing body is skipped for an agreeing one further away",
         ({"body_fp": B, "numbers": N2}, {"body_fp": flip(B, 3, 4), "numbers": N1}),
         {"body_fp": B, "numbers": N1, "title_numbers": 70, "figures": True}, ("body", 2, 1)),
    Case("not figure-heavy: the body tier ignores numbers", ({"body_fp": B, "numbers": N2},),
         {"body_fp": flip(B, 3), "numbers": N1, "title_numbers": 70}, ("body", 1, 0)),
    Case("figure-heavy with the guard off: numbers ignored", ({"body_fp": B, "numbers": N2},),
         {"body_fp": flip(B, 3), "numbers": N1, "title_numbers": 0, "figures": True}, ("body", 1, 0)),
    Case("sentence tier off: new", ({"body_fp": B, "sentences": S[:4]},), {"body_fp": ~B & M64, "sentences": S[:4]},
         None),
    Case("sentence tier: more than the share, distance = stored hashes missing",
         ({"body_fp": B, "sentences": S[:4]},), {"body_fp": ~B & M64, "sentences": S[1:4], "sentences_shared": 50},
         ("sentence", 1, 0)),
    Case("sentence tier: half is not more than half",
         ({"body_fp": B, "sentences": S[:4]},), {"body_fp": ~B & M64, "sentences": S[2:6], "sentences_shared": 50},
         None),
    Case("sentence tier: one shared sentence and a body within 8 bits",
         ({"body_fp": B, "sentences": S[:4]},),
         {"body_fp": flip(B, *range(0, 64, 9)), "sentences": (S[0], S[6]), "sentences_shared": 50},
         ("sentence", 3, 0)),
    Case("sentence tier: one sentence of a full sample is too small a part, however close the bodies",
         ({"body_fp": B, "sentences": LONG},),
         {"body_fp": flip(B, *range(0, 64, 9)), "sentences": (LONG[0], LONG[K]), "sentences_shared": 50}, None),
    Case("sentence tier: 1/SENTENCE_BODY_PART of a full sample and a close body",
         ({"body_fp": B, "sentences": LONG},),
         {"body_fp": flip(B, *range(0, 64, 9)), "sentences": (*LONG[: K // rule.SENTENCE_BODY_PART], LONG[K]),
          "sentences_shared": 50}, ("sentence", K - K // rule.SENTENCE_BODY_PART, 0)),
    Case("sentence tier: numbers must agree below SENTENCES_FIGURES shared sentences",
         ({"body_fp": B, "sentences": S[:3], "numbers": N2},),
         {"body_fp": ~B & M64, "sentences": S[:2], "sentences_shared": 50, "numbers": N1, "title_numbers": 70}, None),
    Case("sentence tier: SENTENCES_FIGURES shared sentences carry the figures",
         ({"body_fp": B, "sentences": S[: rule.SENTENCES_FIGURES + 1], "numbers": N2},),
         {"body_fp": ~B & M64, "sentences": S[: rule.SENTENCES_FIGURES], "sentences_shared": 50, "numbers": N1,
          "title_numbers": 70}, ("sentence", 1, 0)),
    Case("sentence tier: the item mostly inside an entry that stored all it has",
         ({"body_fp": B, "sentences": S[:4]},), {"body_fp": ~B & M64, "sentences": (S[0], S[1], S[6]),
                                                  "sentences_shared": 50}, ("sentence", 2, 0)),
    Case("sentence tier: the item mostly inside the range the entry's sample covers",
         ({"body_fp": B, "sentences": LONG},),
         {"body_fp": ~B & M64, "sentences": (LONG[0], LONG[3], LONG[K - 1]), "sentences_shared": 50},
         ("sentence", K - 3, 0)),
    Case("sentence tier: an item reaching past the sample's range is not measured by it",
         ({"body_fp": B, "sentences": LONG},),
         {"body_fp": ~B & M64, "sentences": (LONG[0], LONG[3], LONG[K]), "sentences_shared": 50},
         None),
    Case("sentence tier: a side without numbers agrees", ({"body_fp": B, "sentences": S[:4], "numbers": ""},),
         {"body_fp": ~B & M64, "sentences": S[:4], "sentences_shared": 50, "numbers": N1, "title_numbers": 70},
         ("sentence", 0, 0)),
    Case("sentence tier: the earliest matching entry",
         ({"body_fp": 1, "sentences": S[4:8], "seen_at": 2.0}, {"body_fp": 2, "sentences": S[4:7], "seen_at": 1.0}),
         {"body_fp": ~B & M64, "sentences": S[4:8], "sentences_shared": 50}, ("sentence", 0, 1)),
    Case("title tier: the earliest holder whose body agrees, past the first pages of holders",
         (*({"title_fp": T, "body_fp": B ^ (M64 >> 32)} for _ in range(30)), {"title_fp": T, "body_fp": B}),
         {"title_fp": T, "body_fp": B}, ("title", 0, 30)),
]


def _query(fields: dict[str, Any], n: int) -> Query:
    fields = {"title_fp": None, "body_fp": None, "seen_at": 100.0 + n, **fields}
    return Query(title_k=2, body_k=3, url=f"u{n}", **fields)


@pytest.fixture(params=["memory", "sqlite", "redis"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made: list[Any] = []

    def new(name: str) -> Any:
        if request.param == "memory":
            index: Any = Memory()
        elif request.param == "sqlite":
            index = open_index(tmp_path / f"{len(made)}.sqlite3")
        else:
            index = open_index(with_prefix(redis_server_url(), f"rule-{os.urandom(6).hex()}"))
        made.append(index)
        return index

    yield new
    for index in made:
        index.close()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_verdict_table(make: Any, case: Case) -> None:
    index = make(case.name)
    ids = []
    for n, fields in enumerate(case.stored):  # stored as given: every earlier entry counts as expired here
        outcome = index.check_and_add(_query({"seen_at": float(n + 1), **fields, "not_before": 1e12}, n))
        assert outcome.match is None, f"setup entry {n} was not new: {outcome.match}"
        ids.append(outcome.entry_id)
    ask = _query(case.ask, 99)
    peeked = index.peek(ask)
    outcome = index.check_and_add(ask, flagged={"sentence"})
    for match in (peeked, outcome.match):
        got = None if match is None else (match.tier, match.distance, ids.index(match.entry.id))
        assert got == case.expect
    assert (outcome.entry_id is None) == (case.expect is not None)


def test_peek_writes_nothing(make: Any) -> None:
    index = make("peek")
    assert index.peek(_query({"title_fp": T}, 0)) is None
    assert index.check_and_add(_query({"title_fp": T}, 1)).match is None  # peek did not add it


def test_a_random_stream_decides_alike_everywhere(tmp_path: Path) -> None:
    """Memory, SQLite and Redis over one stream of near and far fingerprints with numbers,
    sentences and expiry: the same outcome (tier, distance, original) for every item."""
    rng = random.Random(14)
    centres = [rng.getrandbits(64) for _ in range(6)]
    numbers = [N1, N2, "", None]
    queries = []
    for n in range(300):
        def near() -> int:
            return flip(rng.choice(centres), *rng.sample(range(64), rng.randint(0, 5)))

        title_fp = near() if rng.random() < 0.8 else None
        queries.append(Query(
            title_fp=title_fp, body_fp=near() if title_fp is None or rng.random() < 0.85 else None, title_k=2, body_k=3,
            url=f"s{n}", seen_at=float(n), not_before=float(n - 150) if rng.random() < 0.3 else None,
            numbers=rng.choice(numbers), title_numbers=rng.choice([0, 70]),
            sentences=tuple(sorted(rng.sample(S, rng.randint(0, 5)))), sentences_shared=rng.choice([0, 50]),
            short_body=rng.choice([H1, H2, None]), figures=rng.random() < 0.3,
        ))
    backends = [Memory(), open_index(tmp_path / "s.sqlite3"),
                open_index(with_prefix(redis_server_url(), f"rule-{os.urandom(6).hex()}"))]
    try:
        answers = []
        for index in backends:
            ids: dict[int, int] = {}
            seen = []
            for n, query in enumerate(queries):
                peeked = index.peek(query)
                outcome = index.check_and_add(query)
                assert peeked == outcome.match
                if outcome.entry_id is not None:
                    ids[outcome.entry_id] = n
                m = outcome.match
                seen.append(None if m is None else (m.tier, m.distance, ids[m.entry.id]))
            answers.append(seen)
        assert answers[1] == answers[0], "SQLite differs from the rule"
        assert answers[2] == answers[0], "Redis differs from the rule"
        tiers = {a[0] for a in answers[0] if a is not None}
        assert tiers == {"title", "body", "sentence"}, tiers  # the stream reaches every tier
    finally:
        for index in backends:
            index.close()



def test_the_server_side_code_is_a_short_read_and_holds_no_rule() -> None:
    """Redis runs the rule in Python (this module's): the package's only server-side code is a
    read-only script of at most ~300 lines in all, which calls nothing but ``HMGET``."""
    import re
    from importlib import resources

    scripts = [p for p in resources.files("scrapy_simhash").joinpath("index/redis").iterdir()
               if p.name.endswith(".lua")]
    texts = [p.read_text(encoding="utf-8") for p in scripts]
    assert sum(len(t.splitlines()) for t in texts) <= 300
    assert {c for t in texts for c in re.findall(r"redis\.call\('([A-Z]+)'", t)} == {"HMGET"}


def test_a_crowded_title_fingerprint_reads_one_page() -> None:
    """A boilerplate title fingerprint held by 500 entries whose bodies agree: the rule reads the
    first page of holders, not all of them (the check's cost must not grow with the crowd)."""
    store = MemoryStore()
    for n in range(500):
        rule.check_and_add(store, _query({"title_fp": T, "body_fp": B, "seen_at": float(n + 1), "not_before": 1e12}, n))
    read: list[Entry] = []
    real = store.holders

    def counted(*args: Any, **kwargs: Any) -> list[Entry]:
        page = real(*args, **kwargs)
        read.extend(page)
        return page

    store.holders = counted  # type: ignore[method-assign]
    match = rule.peek(store, _query({"title_fp": T, "body_fp": B}, 999))
    assert match is not None and match.entry.id == 1
    assert len(read) <= rule.HOLDERS_PAGE
