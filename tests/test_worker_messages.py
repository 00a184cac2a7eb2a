"""What the crawl process and a pipeline worker send each other (:mod:`scrapy_simhash.workers.messages`):
JSON, never pickle; every value comes back as it went, and what no message may hold is refused."""

from __future__ import annotations

import sqlite3

import pytest

from scrapy_simhash import Fingerprinter
from scrapy_simhash.engine import Verdict
from scrapy_simhash.index.base import Entry, IndexWriteError
from scrapy_simhash.workers import messages
from scrapy_simhash.workers.process import _fingerprint_many
from tests.conftest import STORY_ZH


def test_a_call_names_its_function_and_keeps_every_kind_of_item_value() -> None:
    items = [("标题\ud800", b"<p>\xff\xfe bytes</p>", "https://a.example/1", "r1"),
             (["para 1", None, b"b"], None, None, "r2")]
    function, args = messages.read_call(messages.call(_fingerprint_many, (items, ([1, 2], [3]))))
    assert function is _fingerprint_many
    got_items, fates = args
    assert [tuple(i) for i in got_items] == [items[0], (["para 1", None, b"b"], None, None, "r2")]
    assert fates == [[1, 2], [3]]


def test_an_answer_brings_back_fingerprints_verdicts_their_entries_and_errors() -> None:
    fps = Fingerprinter().fingerprint(STORY_ZH["title"], STORY_ZH["body"])
    fields = [getattr(fps, name) for name in messages.FINGERPRINT_FIELDS]
    entry = Entry(7, "default", "https://a.example/1", "标题", 1.5e9, 2**64 - 1, 2**63, "ab", ("s1", "s2"), None, "k")
    verdict = Verdict("duplicate", "body", 2, entry, None, 1, 2**64 - 5, None, 0.8125)
    errors = [IndexWriteError("disk full"), sqlite3.OperationalError("database is locked"), KeyError("x")]
    answer = (3, [(fields, verdict), None, *[(fields, e) for e in errors]], 1)
    kind, value = messages.read_answer(messages.answer("answer", answer))
    assert kind == "answer"
    retries, results, released = value
    assert (retries, released, results[1]) == (3, 1, None)
    assert messages.fingerprints(results[0][0]) == fps
    assert results[0][1] == verdict
    got = [error for _, error in results[2:]]
    assert [type(e) for e in got] == [IndexWriteError, sqlite3.OperationalError, RuntimeError]
    assert str(got[0]) == "disk full" and "KeyError" in str(got[2])


def test_a_value_no_message_may_hold_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot hold a set"):
        messages.answer("answer", {1, 2})
