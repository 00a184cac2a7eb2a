"""A check-and-add sent again with its request id gets the answer it was given (SQLite, issue 18).

The pipeline's worker processes commit a batch, then answer; one that dies in between leaves items
whose fate the crawl process does not know. Sent again (to a fresh worker, or checked in the crawl
process) with the same request ids, each gets its first answer back: a new item its own entry (not
itself as its duplicate), a duplicate the same match; nothing more is written.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from scrapy_simhash.index import Query, open_index
from scrapy_simhash.index.sqlite.schema import REQUEST_TTL


def q(title_fp: int, url: str, request_id: str | None, seen_at: float = 1000.0) -> Query:
    return Query(title_fp=title_fp, body_fp=None, title_k=2, body_k=3, url=url, seen_at=seen_at,
                 request_id=request_id)


def answers(outcomes: list) -> list[tuple]:
    return [(o.entry_id, None if o.match is None else (o.match.tier, o.match.distance, o.match.entry.id))
            for o in outcomes]


def test_a_batch_sent_again_gets_the_same_answers_and_writes_nothing(tmp_path: Path) -> None:
    with open_index(tmp_path / "i.sqlite3") as ix:
        ix.check_and_add(q(0xF0F0, "earlier", None))
        batch = [q(0xF0F1, "dup", "r1"), q(0x0F0F0F00, "new", "r2"), q(0x0F0F0F01, "dup of new", "r3")]
        first = ix.check_and_add_many(batch)
        assert [o.match is None for o in first] == [False, True, False]
        count = ix.count()
        again = ix.check_and_add_many(batch)
        assert answers(again) == answers(first)
        assert ix.count() == count
        alone = ix.check_and_add(batch[1])  # one by one too (a batch of one is its own transaction)
        assert answers([alone]) == answers(first[1:2])
        other = ix.check_and_add(q(0x0F0F0F00, "new", "r4"))  # another request: checked, a duplicate of it
        assert other.match is not None and other.match.entry.id == first[1].entry_id


def test_old_request_tokens_go(tmp_path: Path) -> None:
    with open_index(tmp_path / "i.sqlite3") as ix:
        ix.check_and_add(q(0xAB, "a", "old", seen_at=1000.0))
        ix.check_and_add(q(0xAB00000000, "b", "new", seen_at=1000.0 + REQUEST_TTL + 61))
    conn = sqlite3.connect(tmp_path / "i.sqlite3")
    assert [t for (t,) in conn.execute("SELECT token FROM request")] == ["new"]
    conn.close()
