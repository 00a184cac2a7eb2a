"""The cheap pre-checks in front of normalize's patterns change no output.

``_normalize_chars`` and ``_strip_adversarial`` skip a pattern when the text lacks a character the
pattern needs, and translate only the characters present. Here the same steps run unguarded (every
pattern over every text, ``str.translate``, the plain space-run pattern), as they ran before the
guards, on generated texts made of the characters the rules care about and on real articles.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.text import dates, normalize

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
_OLD_SPACE_RUN_RE = re.compile(r"[^\S\n]+")
_OLD_MONTH_HINT_RE = re.compile(r"jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", re.IGNORECASE)


def unguarded_chars(text: str) -> str:
    """``_normalize_chars`` without pre-checks: every pattern runs."""
    text = normalize._CRLF_RE.sub("\n", text).translate(normalize._CHAR_TABLE)
    text = normalize._DASH_RUN_RE.sub("-", text)
    text = normalize._ELLIPSIS_RE.sub("…", text)
    text = _OLD_SPACE_RUN_RE.sub(" ", text)
    if dates._YEAR_HINT_RE.search(text):
        months = _OLD_MONTH_HINT_RE.search(text)
        for rx in dates._DATE_RES if months else dates._DATE_RES[:3]:
            text = rx.sub(dates._date_sub, text)
    text = dates._LONE_TIME_RE.sub(dates._lone_time_sub, text)
    return normalize._SPACE_NL_RE.sub("\n", text).strip()


def unguarded(text: str) -> str:
    return normalize._ADVERSARIAL_RE.sub("", unguarded_chars(text)) if text else ""


_BITS = [
    "2023", "1999", "年", "月", "日", "号", "1", "01", "12", "-", "/", ".", "...", "。。。", "…", "--", " ", "  ",
    "\n", "\r\n", "\r", "\t", "\u3000", "\xa0", "\u200b", "，", "Ａ", "１", "“", "”", "【", "】", "—", "·", "*",
    "|", "@", "★", " * ", "中", "文", "a", "Jan", "may", "MAR", "March", "1st", ",", "at ", "T", "8:30",
    "12:00:00", "PM", "p.m.", "am", "a", "上午", "下午", "中午", "8点30分", ":", "\x85", "\x93", "\ud800",
    "2023年1月1日", "2023 年 01 月 01 日", "2023-01-01", "2023/1/2", "2023.01.01", "1/2/2023", "1 Jan 2023",
    "Jan. 1, 2023", "8:30 PM", "下午8:30", "购*买", "中 · 文",
]
texts = st.lists(st.sampled_from(_BITS), max_size=16).map("".join)


@settings(max_examples=4000, deadline=None)
@given(texts)
def test_guarded_normalization_equals_unguarded(text: str) -> None:
    assert normalize.normalize_text(text) == unguarded(text)


@settings(max_examples=2000, deadline=None)
@given(st.text(max_size=40))
def test_translation_equals_str_translate(text: str) -> None:
    assert normalize._translate_chars(text) == text.translate(normalize._CHAR_TABLE)


def test_every_table_character_is_translated() -> None:
    text = "".join(map(chr, normalize._CHAR_TABLE))
    assert normalize._translate_chars(text) == text.translate(normalize._CHAR_TABLE)


@pytest.mark.parametrize("name", ["zh/inews-bdci2019.jsonl.gz", "en/reuters21578.jsonl.gz"])
def test_real_articles_normalize_as_unguarded(name: str) -> None:
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"corpus file missing: {path} (../shared/corpus next to the repo)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= 400:
                break
            rec = json.loads(line)
            for raw in (rec.get("title") or "", rec.get("body") or ""):
                text = normalize.to_text(raw)
                assert normalize.normalize_text(text) == unguarded(text)


def unguarded_title(raw: str) -> str:
    """``normalize_title`` with every title pattern run on every pass (no bracket or mark pre-checks)."""
    text = unguarded_chars(normalize.to_text(raw).replace("\n", " "))
    for _ in range(4):
        before = text
        text = normalize._FLASH_RE.sub("", text)
        text = normalize._TITLE_TAG_RE.sub(" ", text).strip()
        text = normalize._LEADING_BRACKET_RE.sub("", text)
        text = normalize._TITLE_PREFIX_RE.sub("", text)
        text = normalize._TITLE_TRAILING_MARK_RE.sub("", text)
        split = normalize._split_suffix(text)
        if split and normalize._is_site_suffix(*split):
            text = split[0].rstrip(" -_|")
        if text == before:
            break
    text = _OLD_SPACE_RUN_RE.sub(" ", text).strip()
    return normalize._ADVERSARIAL_RE.sub("", text)


_TITLE_BITS = [
    "[", "]", "(", ")", "【", "】", "（", "）", "转载", "转帖", "转", "原创", "独家", "图", "组图", "视频",
    "Video", "photos", ":", "：", " ", "  ", "\t", "-", " - ", "_", "|", "»", "::", "新闻", "网", "BBC News",
    "中", "文", "a", "1", "*", "\n", "快讯", "!", "！", "突发", "UPDATE 2", "BREAKING",
]
titles = st.lists(st.sampled_from(_TITLE_BITS), max_size=14).map("".join)


@settings(max_examples=4000, deadline=None)
@given(titles)
def test_guarded_title_equals_unguarded(text: str) -> None:
    assert normalize.normalize_title(text) == unguarded_title(text)
