"""The compiled pass of hints answers what each hint's regex answers (``regex_flags``).

A wrong "no" would skip a rule that had work to do (a date left unconverted, a run of spaces left),
so every bit is compared with its regex on generated texts made of the characters the hints look
at, and on real articles at each stage a hint is asked at.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash._compiled import _text_c
from scrapy_simhash.fingerprint import signatures
from scrapy_simhash.text import dates, hints, normalize

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
compiled = pytest.mark.skipif(_text_c is None, reason="the compiled extension is not built")

_BITS = [
    "0", "1", "2", "8", "9", "18", "19", "20", "21", "2023", "1999", "123", "\u0661", "\uff11", "年", "月", "日", "号",
    "-", "/", ".", ":", ",", " ", "  ", "\n", "\t", "\u3000", "\xa0", "\x00", "A", "a", "P", "p", "M", "m", "x",
    "st", "上", "下", "中", "早", "晚", "凌", "清", "傍", "夜", "午", "晨", "间", "上午", "下午", "晚上", "傍晚",
    "*", "|", "@", "★", "·", "\\", "文", "\u4e00", "\uf900", "\U00020001", "\U0001f600", "st", "ND", "rD", "th",
    "Jan", "mAY", "ju", "l", "dec", "s", "e", "p", "\u017f", "\u212a", "é", "\u0130", ",",
]
texts = st.lists(st.sampled_from(_BITS), max_size=24).map("".join)


def regex_flags(text: str) -> int:
    """The reference: each hint's regex run on ``text`` (what ``hints.hint_flags`` answers in one pass)."""
    tests = (
        (hints.H_SPACE_RUN, normalize._SPACE_RUN_RE.search(text)),
        (hints.H_YEAR, dates._YEAR_HINT_RE.search(text)),
        (hints.H_DATE0, dates._DATE_HINT_RES[0].search(text)),
        (hints.H_DATE1, dates._DATE_HINT_RES[1].search(text)),
        (hints.H_DATE2, dates._DATE_HINT_RES[2].search(text)),
        (hints.H_AP, dates._AP_HINT_RE.search(text)),
        (hints.H_CN_TIME, dates._CN_TIME_HINT_RE.search(text)),
        (hints.H_SPACE_NL, normalize._SPACE_NL_RE.sub("\n", text) != text),
        (hints.H_ADVERSARIAL, normalize._ADVERSARIAL_HINT_RE.search(text)),
        (hints.H_DATE_TIME, signatures._DATE_TIME_HINT.search(text)),
        (hints.H_DATE3, dates._DATE_HINT_RES[3].search(text)),
        (hints.H_DATE4, dates._DATE_HINT_RES[4].search(text)),
        (hints.H_MONTHS, dates.has_month_letters(text)),
    )
    return sum(bit for bit, found in tests if found) | hints.H_EXACT


def expected(text: str) -> int:
    """The regexes' answers; no answer (every hint a maybe) for a text outside the BMP or with a
    character that a case-insensitive ASCII letter matches (ſ, the Kelvin sign)."""
    table = hints._class_table()
    if any(ord(c) > 0xFFFF or table[ord(c)] & hints._FOLD for c in text):
        return hints.H_ALL
    return regex_flags(text)


@compiled
@settings(max_examples=6000, deadline=None)
@given(texts)
def test_compiled_hints_equal_the_regexes(text: str) -> None:
    assert hints.hint_flags(text) == expected(text)


@compiled
@pytest.mark.parametrize(
    "text",
    [
        "2023 年 1 月 1 日", "2023年123月1日", "8:30 p.m", "8:30 p. m", "8:30\u3000PM", "8 \n\tam", "下午 8:30",
        "下午123:30", "傍晚8:3", "12/1/2", "1.12.1", "1-1-1", "1-123-1", "a \nb", "a\n b", "a\nb", "中 *", "中*",
        "\u0663\u0660:\u0661", "2\u0660\u0661\u0662", "1899", "2200", "x\xa0y", "x \ty", "1st Jan", "2 ST\tmar",
        "3rd, 2019", "1, 2019", "1 , 2019", "1th,  2100", "1 Ja中n", "J中a中n", "1\u017ft Jan", "1 \u017fep",
        "Dé\u0301c 1, 2019",
    ],
)
def test_compiled_hints_on_texts_that_need_the_rules(text: str) -> None:
    assert hints.hint_flags(text) == expected(text)


@compiled
def test_every_bmp_character_alone_and_after_a_digit() -> None:
    for c in map(chr, range(0x10000)):
        for text in (c, "1" + c + "1", c + "\n" + c):
            assert hints.hint_flags(text) == expected(text), repr(text)


@compiled
@pytest.mark.parametrize("name", ["zh/inews-bdci2019.jsonl.gz", "en/reuters21578.jsonl.gz"])
def test_real_articles_hints(name: str) -> None:
    for raw in corpus_texts(name):
        text = normalize._translate_chars(normalize.to_text(raw))
        for stage in (text, normalize._SPACE_RUN_RE.sub(" ", text), normalize.normalize_text(text)):
            assert hints.hint_flags(stage) == expected(stage)


def corpus_texts(name: str, limit: int = 300) -> list[str]:
    """The titles and bodies of the first ``limit`` records of a corpus file (skips without it)."""
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"corpus file missing: {path} (../shared/corpus next to the repo)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in itertools.islice(f, limit)]
    return [r.get(k) or "" for r in records for k in ("title", "body")]


_REWRITE_BITS = [
    " ", "  ", "\n", " \n", "\n ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", "\u200b",
    "1", "23", "\u0661", "\U0001d7ce", "\U000104a0", ".", ",", "..", ",,", "a", "中", "\U00020001",
]
rewrite_texts = st.lists(st.sampled_from(_REWRITE_BITS), max_size=24).map("".join)


@compiled
@settings(max_examples=4000, deadline=None)
@given(rewrite_texts)
def test_compiled_rewrites_equal_the_regexes(text: str) -> None:
    c = hints.compiled()
    assert c is not None
    assert c.collapse_spaces(text) == normalize._SPACE_RUN_RE.sub(" ", text) == re.sub(r"[^\S\n]+", " ", text)
    assert c.tidy_line_breaks(text) == normalize._SPACE_NL_RE.sub("\n", text)
    assert c.numbers(text) == signatures._NUMBER.findall(text)


@compiled
@pytest.mark.parametrize("name", ["zh/inews-bdci2019.jsonl.gz", "en/reuters21578.jsonl.gz"])
def test_real_articles_rewrites(name: str) -> None:
    c = hints.compiled()
    assert c is not None
    for raw in corpus_texts(name):
        text = normalize.to_text(raw)
        assert c.collapse_spaces(text) == normalize._SPACE_RUN_RE.sub(" ", text)
        assert c.tidy_line_breaks(text) == normalize._SPACE_NL_RE.sub("\n", text)
        assert c.numbers(text) == signatures._NUMBER.findall(text)


@compiled
def test_the_remembered_flags_are_the_normalized_body_s() -> None:
    body = normalize.normalize_text("收入 1-2 亿元，中*文 12:30。")
    assert hints.remembered(body) & hints.H_EXACT
    assert hints.remembered(body) & hints.H_DATE_TIME == regex_flags(body) & hints.H_DATE_TIME
    assert hints.remembered("".join(["收入 ", "1-2 亿元"])) == hints.H_ALL  # another text: no answer kept


@compiled
def test_the_characters_without_an_answer() -> None:
    table = hints._class_table()
    folded = [c for c in range(0x10000) if table[c] & hints._FOLD]
    assert 0x17F in folded and 0x212A in folded and all(c >= 128 for c in folded)


def test_without_the_compiled_pass_every_hint_is_a_maybe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hints, "_compiled", lambda: hints._maybe)
    assert hints.hint_flags("2023年1月1日 下午8:30") == hints.H_ALL
    # and the rules then run their own patterns: the same normalization
    assert normalize.normalize_text("2023年1月1日 下午8:30  购*买") == "2023-01-01 20:30 购买"
