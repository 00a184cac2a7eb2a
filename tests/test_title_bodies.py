"""A title match counts only when the bodies do not contradict it, and templated figures need their
numbers (issue 15, causes 2 and 3), on real items of the shared corpora through the default engine.

* Answers under one question title (toutiao Q&A in zh/newsspider-2016) are different texts: kept.
* A truncated copy or a title-only copy of an article under its title is still the same story: caught.
* Two Reuters earnings reports of different companies (KEANE, JEPSON) have templated bodies within
  the body threshold: kept apart by their figures; a repost of either is still caught.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from scrapy_simhash import Deduplicator
from scrapy_simhash.engine import DEFAULT_BODY_MAX_DISTANCE
from scrapy_simhash.index import rule

from .conftest import read_jsonl

QUESTION = "德国宣布扩军,它发动第三次世界大战的可能性有多大?"
ARTICLE = "中科院院士:不能因不法分子行为怀疑国产疫苗"


@pytest.fixture(scope="module")
def newsspider() -> tuple[list[dict], dict]:
    """The answers under QUESTION (file order) and the first article titled ARTICLE."""
    answers, article = [], None
    for doc in read_jsonl("zh/newsspider-2016.jsonl.gz"):
        if unicodedata.normalize("NFKC", doc["title"]).startswith(QUESTION):
            answers.append(doc)
        elif article is None and doc["title"].startswith(ARTICLE):
            article = doc
    assert len(answers) >= 4 and article is not None, "items missing from the corpus"
    return answers, article


def _open(tmp_path: Path, name: str) -> Deduplicator:
    return Deduplicator.open(f"sqlite:///{tmp_path / name}.sqlite3")


def _by_length(answers: list[dict], dedup: Deduplicator, fingerprinted: bool) -> list[dict]:
    fps = [(dedup.fingerprint(a["title"], a["body"]), a) for a in answers]
    return [a for f, a in fps if (f.body is not None) == fingerprinted and (f.body is not None or f.short_body)]


def test_two_answers_under_one_question_are_kept(newsspider, tmp_path):
    answers, _ = newsspider
    with _open(tmp_path, "qa") as dedup:
        long = _by_length(answers, dedup, fingerprinted=True)[:2]
        assert len(long) == 2
        a, b = (dedup.fingerprint(x["title"], x["body"]) for x in long)
        assert (a.title ^ b.title).bit_count() <= dedup.title_max_distance  # the title tier would match
        assert (a.body ^ b.body).bit_count() > rule.TITLE_BODY_DISTANCE  # the bodies are different texts
        verdicts = [dedup.check_and_add(x["title"], x["body"], url=x["url"]) for x in long]
    assert [v.status for v in verdicts] == ["new", "new"], [v.summary() for v in verdicts]


def test_two_short_answers_under_one_question_are_kept(newsspider, tmp_path):
    answers, _ = newsspider
    with _open(tmp_path, "short") as dedup:
        short = _by_length(answers, dedup, fingerprinted=False)[:2]
        assert len(short) == 2
        verdicts = [dedup.check_and_add(x["title"], x["body"], url=x["url"]) for x in short]
    assert [v.status for v in verdicts] == ["new", "new"], [v.summary() for v in verdicts]


def test_a_truncated_copy_and_a_title_only_copy_are_caught(newsspider, tmp_path):
    _, article = newsspider
    paragraphs = [p for p in article["body"].split("\n") if p.strip()]
    truncated = "\n".join(paragraphs[: max(2, len(paragraphs) // 3)])
    with _open(tmp_path, "trunc") as dedup:
        full, cut = dedup.fingerprint(article["title"], article["body"]), dedup.fingerprint(article["title"], truncated)
        assert (full.body ^ cut.body).bit_count() > DEFAULT_BODY_MAX_DISTANCE  # the body tier alone would miss it
        assert dedup.check_and_add(article["title"], article["body"], url="orig").is_new
        copy = dedup.check_and_add(article["title"], truncated, url="truncated")
        bare = dedup.check_and_add(article["title"], "", url="title-only")
    assert (copy.status, copy.tier) == ("duplicate", "title"), copy.summary()
    assert (bare.status, bare.tier) == ("duplicate", "title"), bare.summary()


def _reuters(*prefixes: str) -> list[dict]:
    found = {}
    for doc in read_jsonl("en/reuters21578.jsonl.gz"):
        for p in prefixes:
            if (doc.get("title") or "").startswith(p) and p not in found:
                found[p] = doc
    assert len(found) == len(prefixes), "items missing from the corpus"
    return [found[p] for p in prefixes]


def test_templated_earnings_reports_of_two_companies_are_kept(tmp_path):
    keane, jepson = _reuters("KEANE INC", "JEPSON CORP")
    with _open(tmp_path, "earnings") as dedup:
        a, b = dedup.fingerprint(keane["title"], keane["body"]), dedup.fingerprint(jepson["title"], jepson["body"])
        assert a.figures and b.figures
        assert (a.body ^ b.body).bit_count() <= DEFAULT_BODY_MAX_DISTANCE  # the template alone would match
        assert dedup.check_and_add(keane["title"], keane["body"], url="keane").is_new
        other = dedup.check_and_add(jepson["title"], jepson["body"], url="jepson")
        repost = dedup.check_and_add(keane["title"].lower() + " - Reuters wire", keane["body"], url="keane-repost")
    assert other.is_new, other.summary()
    assert repost.status == "duplicate" and repost.original is not None and repost.original.url == "keane"
