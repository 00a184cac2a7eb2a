"""The sentence tier on real articles of the shared corpora (issue 15: recall at 30 % edits, and the
inews spam pair), through the default engine. Each test pins one mechanism and fails without it:

* a page's sample is its sentences, not the lines around them (related-link headlines, chrome);
* a cut copy of a page is measured by the share of *its own* sentences the page's sample holds;
* three shared sentences carry the story's figures: an edit that adds and drops figures is caught,
  while two Freddie Mac rate tables sharing only template lines stay apart;
* markup left in a scraped text is no sentence: two inews spam pages shared only CSS pieces;
* one sentence of a full sample is no repost, however close the bodies: two reports of one event;
* a related-links box inside an HTML body is no part of the story: two articles under one box.
"""

from __future__ import annotations

import html
import itertools
from pathlib import Path

import pytest

from scrapy_simhash import Deduplicator, Fingerprinter
from scrapy_simhash.fingerprint.signatures import _SENTENCE_END, is_line, sentence_signature
from scrapy_simhash.index import rule

from .conftest import read_jsonl

FP = Fingerprinter()


@pytest.fixture(scope="module")
def inews() -> dict[str, dict]:
    return {d["id"]: d for d in read_jsonl("zh/inews-bdci2019.jsonl.gz")}


@pytest.fixture(scope="module")
def newsspider() -> dict[str, dict]:
    return {d["id"]: d for d in read_jsonl("zh/newsspider-2016.jsonl.gz")}


@pytest.fixture(scope="module")
def reuters() -> dict[str, dict]:
    return {d["id"]: d for d in read_jsonl("en/reuters21578.jsonl.gz")}


def _sentences(text: str) -> list[str]:
    """A normalized text's sentences (each with its end mark), in order."""
    parts = _SENTENCE_END.split(text)
    marks = _SENTENCE_END.findall(text)
    return [p.strip() + m for p, m in zip(parts, marks, strict=False) if len(p.strip()) >= 20]


def _links(inews: dict[str, dict], n: int) -> list[str]:
    """Real headlines of other inews articles, long enough to count as lines (and, as most
    headlines, without a sentence mark: a headline with a ? is a sentence)."""
    heads = (FP.clean_body(d["title"]) for d in inews.values())
    return [h for h in heads if len(h) >= 24 and not _SENTENCE_END.search(h)][:n]


def _dedup(tmp_path: Path, name: str) -> Deduplicator:
    return Deduplicator.open(f"sqlite:///{tmp_path / name}.sqlite3")


def test_a_page_samples_its_sentences_before_its_lines(inews):
    """An article with more sentences than an entry stores, on a page with a box of related
    headlines: the stored sample is the article's sentences, so a repost elsewhere shares it."""
    def size(d: dict) -> int:
        return len(sentence_signature(FP.clean_body(d["body"])))

    article = next(d for d in inews.values() if 2 * rule.SENTENCES_STORED <= size(d) <= 40)
    text = FP.clean_body(article["body"])
    page = text + "\n相关阅读\n" + "\n".join(_links(inews, 16))
    assert len(set(sentence_signature(page)) - set(sentence_signature(text))) >= 12  # the headlines count
    sample = sentence_signature(page)[: rule.SENTENCES_STORED]
    assert set(sample) <= set(sentence_signature(text))


def test_a_cut_copy_of_a_page_is_caught(inews, tmp_path):
    """inews:train:2080 (a fire in Miyun) first seen on a page with related headlines, then
    reposted alone with a sentence dropped and another article's sentence added: most of the
    repost's sentences are in the page's sample, though not most of the sample is in the repost."""
    doc = inews["inews:train:2080"]
    text = FP.clean_body(doc["body"])
    page = text + "\n延伸阅读\n" + "\n".join(_links(inews, 8))
    own = _sentences(text)
    foreign = _sentences(FP.clean_body(inews["inews:train:3855"]["body"]))[0]
    repost = "".join(own[1:]) + foreign
    sample = sentence_signature(page)[: rule.SENTENCES_STORED]
    shared = len(set(sample) & set(sentence_signature(repost)))
    assert shared >= 2 and 2 * shared <= len(sample)  # not more than half of the page's sample
    with _dedup(tmp_path, "cut") as dedup:
        assert dedup.check_and_add(doc["title"], page, url="page").is_new
        v = dedup.check_and_add("密云一居民楼起火 无人员伤亡", repost, url="repost")
    assert v.status == "duplicate" and v.tier == "sentence" and v.original.url == "page", v.summary()


def _edited(text: str, other: str) -> str:
    """Every fourth sentence of ``text`` replaced by one of ``other`` (English, one paragraph)."""
    own, theirs = _sentences(text), _sentences(other)
    return " ".join(theirs[(n // 4) % len(theirs)] if n % 4 == 1 else s for n, s in enumerate(own))


def test_three_shared_sentences_carry_the_figures(reuters, tmp_path):
    """A Reuters report with a quarter of its sentences replaced by another report's: the figures
    the edit brought and took fail the number check, yet most sentences are shared: caught. (The
    first such pair of long reports with figures in corpus order.)"""
    def long_with_figures(d: dict) -> bool:
        f = FP.fingerprint("", d["body"])
        return len(_sentences(FP.clean_body(d["body"]))) >= 10 and f.numbers is not None and len(f.numbers.split()) >= 8

    reports = [d for d in reuters.values() if long_with_figures(d)]
    for original, other in itertools.pairwise(reports):
        repost = _edited(FP.clean_body(original["body"]), FP.clean_body(other["body"]))
        a, b = FP.fingerprint(original["title"], original["body"]), FP.fingerprint("", repost)
        if not rule.numbers_agree(a.numbers, b.numbers, 70):
            break
    else:
        pytest.fail("no edit broke the number check")
    shared = set(a.sentences[: rule.SENTENCES_STORED]) & set(b.sentences)
    assert sum(not is_line(h) for h in shared) >= rule.SENTENCES_FIGURES
    with _dedup(tmp_path, "figs") as dedup:
        assert dedup.check_and_add(original["title"], original["body"], url="orig").is_new
        v = dedup.check_and_add("Edited: " + other["title"], repost, url="repost")
    assert v.status == "duplicate" and v.tier == "sentence" and v.original.url == "orig", v.summary()


def test_rate_tables_sharing_their_template_sentence_stay_apart(reuters, tmp_path):
    """Two Freddie Mac discount-rate tables (reuters:12010, reuters:12912): the same template lines
    (hard-wrapped, a header row) and other figures. Most of the sample is shared, but lines, not
    sentences, so the number check still applies and keeps them apart."""
    a, b = reuters["reuters:12010"], reuters["reuters:12912"]
    fa, fb = FP.fingerprint(a["title"], a["body"]), FP.fingerprint(b["title"], b["body"])
    shared = set(fa.sentences[: rule.SENTENCES_STORED]) & set(fb.sentences)
    assert len(shared) >= rule.SENTENCES_FIGURES and 2 * len(shared) > len(fa.sentences)
    assert sum(not is_line(h) for h in shared) < rule.SENTENCES_FIGURES
    with _dedup(tmp_path, "rates") as dedup:
        assert dedup.check_and_add(a["title"], a["body"], url="a").is_new
        v = dedup.check_and_add(b["title"], b["body"], url="b")
    assert v.is_new, v.summary()


def test_markup_in_a_scraped_text_is_no_sentence(inews, tmp_path):
    """Two inews spam pages (a nanny-arson story, a list of corrupt officials) whose bodies carry
    the same broken ``style="margin-bottom: 10px; …"`` text: those pieces are not sentences, so
    the pages share none, and the later one is kept."""
    first = next(d for d in inews.values() if d["title"].startswith("最新中国贪污10亿以上贪官排名"))
    later = next(d for d in inews.values() if d["title"].startswith("保姆纵火案真相曝光"))
    assert 'style="margin-bottom' in first["body"] and 'style="margin-bottom' in later["body"]
    fa, fb = FP.fingerprint(first["title"], first["body"]), FP.fingerprint(later["title"], later["body"])
    assert not set(fa.sentences) & set(fb.sentences)
    with _dedup(tmp_path, "spam") as dedup:
        assert dedup.check_and_add(first["title"], first["body"], url="first").is_new
        assert dedup.check_and_add(later["title"], later["body"], url="later").is_new


def test_one_sentence_of_a_full_sample_is_another_report(newsspider, tmp_path):
    """Two reports of one event in Haikou (newsspider:1.txt:13, a police account retold; newsspider:
    2.txt:33, China News Service's), both in the tune half of accuracy.py, where the second was a
    `topic` hard negative dropped: their bodies are a few bits apart (the same topic words), and one
    of the first's twelve sampled sentences is in the second (the police statement both quote). One
    sentence shared is enough only when it is a real part of the sample: kept."""
    a, b = newsspider["newsspider:1.txt:13"], newsspider["newsspider:2.txt:33"]
    fa, fb = FP.fingerprint(a["title"], a["body"]), FP.fingerprint(b["title"], b["body"])
    sample = fa.sentences[: rule.SENTENCES_STORED]
    shared = len(set(sample) & set(fb.sentences))
    assert len(sample) == rule.SENTENCES_STORED and shared == 1
    assert rule.SENTENCE_BODY_PART * shared < len(sample)
    assert 3 < (fa.body ^ fb.body).bit_count() <= rule.SENTENCE_BODY_DISTANCE  # the body tier misses, close
    with _dedup(tmp_path, "haikou") as dedup:
        assert dedup.check_and_add(a["title"], a["body"], url="a").is_new
        v = dedup.check_and_add(b["title"], b["body"], url="b")
    assert v.is_new, v.summary()


def _portal_body(paragraphs: list[str], headlines: list[str]) -> str:
    """An article as a portal's content ``div`` holds it: paragraphs, an ad, a related-links box."""
    links = "".join(f'<li><a href="/{i}">{html.escape(h)}</a></li>' for i, h in enumerate(headlines))
    return (
        '<div class="article-text">' + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
        + '<div class="ad"><a href="https://ad.example/c?1"><img src="/ad.jpg"></a>'
        "<span>搜狐新闻客户端 新闻资讯随时看 精彩推荐 点击下载</span></div>"
        f'<div class="related"><h3>推荐阅读</h3><ul>{links}</ul></div></div>'
    )


@pytest.mark.parametrize("main_content", [None, False])
def test_a_related_links_box_is_no_shared_text(inews, tmp_path, main_content):
    """A one-sentence complaint (inews:dev:880) and a nine-story digest (inews:train:1307) on one
    portal, whose boxes share three headlines (one with figures): the box is left out of an HTML
    body by default, so the two stay apart; taken as text (``main_content=False``), the shared
    headlines are most of the short entry's sample and its figures agree, and the digest is
    dropped (the tune-split false drop this fixes)."""
    heads = [inews[k]["title"] for k in ("inews:train:1262", "inews:train:3644", "inews:train:3902",
                                         "inews:train:4349", "inews:dev:172")]
    short, digest = inews["inews:dev:880"], inews["inews:train:1307"]
    with Deduplicator.open(f"sqlite:///{tmp_path}/box.sqlite3", main_content=main_content) as dedup:
        first = _portal_body([short["body"].split("。")[0] + "。"], heads[:4])
        assert dedup.check_and_add(short["title"], first, url="short").is_new
        v = dedup.check_and_add(digest["title"], _portal_body(digest["body"].split("\n"), heads[1:]), url="digest")
    if main_content is None:
        assert v.is_new, v.summary()
    else:
        assert (v.tier, v.original.url) == ("sentence", "short"), v.summary()
