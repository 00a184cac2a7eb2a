"""No crafted item makes the per-item time grow faster than its length.

``re`` holds the GIL while it matches, so one backtracking pattern on a hostile title stops the
whole crawl (downloads, reactor, signals): ``"x" + ":" * 65536 + "-"`` once took 104 s in
``normalize_title``. Every regular expression of the package that runs on item text has here at
least one hostile input (long runs of what the pattern scans: separators, whitespace, prefixes,
near misses), fed through the public function that applies it at ``n`` and ``8 n`` units. A linear
function takes at most about 8 times as long (less, with its fixed costs); a quadratic one takes
about 64 times as long. Ratios only, the smallest of several repeats, so a loaded machine does not
matter; each call has a time limit, so a regression fails instead of hanging.

:func:`test_every_pattern_has_a_hostile_case` collects the compiled patterns of every module, so a
new pattern without a case here fails. The rewritten patterns are checked against the ones they
replaced on random short texts (where the old ones are fast).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scrapy_simhash
from scrapy_simhash import Fingerprinter
from scrapy_simhash.fingerprint.features import FeatureExtractor, get_tokenizer
from scrapy_simhash.fingerprint.fingerprinter import unstuff
from scrapy_simhash.fingerprint.segment import Segmenter
from scrapy_simhash.fingerprint.signatures import number_signature, sentence_signature
from scrapy_simhash.text import dates, normalize
from scrapy_simhash.text.normalize import (
    html_to_text,
    looks_like_html,
    looks_like_page,
    main_text,
    normalize_body,
    normalize_text,
    normalize_title,
)
from scrapy_simhash.text.similarity import char_key

GROWTH = 8  # the long input has GROWTH times the units of the short one
MAX_RATIO = 24.0  # linear: ≤ GROWTH (plus noise); quadratic: ≈ GROWTH ** 2
REPEATS = 5  # the time of an input is the smallest of this many calls
ROUNDS = 3  # a case fails only if the ratio stays above MAX_RATIO this many times
CALL_LIMIT = 3.0  # seconds; one call longer than this fails the case at once

# Patterns that never see item text.
EXEMPT = {
    "index._SCHEME": "the scheme of the index URL from the settings",
    "index.redis.reband._BAND_KEY": "the names of the index's own band keys (re-banding)",
}
SCANS = {"text.normalize._split_suffix"}  # the linear scan that replaced the title-suffix pattern


def _features(text: str) -> dict[str, float]:
    return FeatureExtractor().body_features(text)  # a new extractor: no word or block remembered


def _cut(text: str) -> list[str]:
    return Segmenter(get_tokenizer()).cut(text)


def _json_array(text: str) -> list[Any]:
    """The elements ``dedup`` reads from an input that is a JSON array (whitespace between them)."""
    import io

    from scrapy_simhash.cli.input import Reader

    source = type("Source", (), {"stream": io.BufferedReader(io.BytesIO(text.encode("utf-8")))})()
    return list(Reader(source, 1 << 30))  # type: ignore[arg-type]


def _char_key(text: str) -> Any:
    return char_key(text, limit=10**9)


def _fingerprint_title(text: str) -> Any:
    return Fingerprinter().fingerprint(text, "")


@dataclass(frozen=True)
class Case:
    patterns: tuple[str, ...]  # the patterns (module.NAME) this input attacks
    func: Callable[[Any], Any]  # the public function that applies them
    build: Callable[[int], Any]  # n units → input
    n: int = 1000

    def __str__(self) -> str:
        return f"{'+'.join(self.patterns)}:{getattr(self.func, '__name__', self.func)}"


NL = "\n"
CASES = [
    # HTML detection and conversion
    Case(("text.html._HTML_RE",), looks_like_html, lambda n: "<div" + " " * (4 * n) + "x"),
    Case(("text.html._HTML_RE",), looks_like_html, lambda n: "<div class" + "-x" * (2 * n)),
    Case(("text.html._HTML_RE",), looks_like_html, lambda n: "</div " * n),
    Case(("text.html._LOWER_TAG_RE",), looks_like_html, lambda n: "<b" + " " * (4 * n) + "/"),
    Case(("text.html._LOWER_TAG_RE",), looks_like_html, lambda n: "<b /" * n),
    Case(("text.html._ENTITY_RE",), normalize_body, lambda n: "&" + "a" * (4 * n)),
    Case(("text.html._ENTITY_RE",), normalize_body, lambda n: "&#x" * n),
    Case(("text.html._PAGE_RE",), looks_like_page, lambda n: "<htm <bod <nav" * n + "x"),
    Case(("text.html._PAGE_RE",), looks_like_page, lambda n: "<" * (4 * n) + "x"),
    Case(("text.html._LINK_RE",), looks_like_page, lambda n: "<a" * (2 * n) + "x"),
    Case(("text.html._HTML_SPACE_RE",), html_to_text, lambda n: "<p>" + " \t\r" * n + "x</p><p>y</p>"),
    Case(("text.html._PUNCT_RE", "text.html._NON_SPACE_RE", "text.html._FOOTER_RE"), main_text,
         lambda n: "<div><p>" + "，copyrigh ICP" * (n // 4) + "</p></div><div><a href=x>y</a></div>"),
    # character-level rules
    Case(("text.normalize._CRLF_RE",), normalize_text, lambda n: "\r" * (4 * n) + "x"),
    Case(("text.normalize._DASH_RUN_RE",), normalize_text, lambda n: "-" * (4 * n) + "x"),
    Case(("text.normalize._ELLIPSIS_RE",), normalize_text, lambda n: "..。。…" * n + "x"),
    Case(("text.normalize._SPACE_RUN_RE",), normalize_text, lambda n: " \t" * (2 * n) + "x"),
    Case(("text.normalize._SPACE_NL_RE",), normalize_text, lambda n: "a" + " \n" * (2 * n) + "x"),
    Case(("text.normalize._ADVERSARIAL_RE",), normalize_text, lambda n: "中" + "*" * (4 * n) + "文"),
    Case(("text.normalize._ADVERSARIAL_RE",), normalize_text, lambda n: "中 * " * n + "文"),
    # dates: each followed by a long run of line breaks (where the time would start) and no time
    Case(("text.dates._DATE_RES[0]", "text.dates._YEAR_HINT_RE"), normalize_text,
         lambda n: "2023年1月1日" + NL * (4 * n) + "x", n=100),
    Case(("text.dates._DATE_RES[0]",), normalize_text, lambda n: "2023" + " 年" * (2 * n)),
    Case(("text.dates._DATE_RES[1]",), normalize_text, lambda n: "2023-01-01" + NL * (4 * n) + "x", n=100),
    Case(("text.dates._DATE_RES[2]",), normalize_text, lambda n: "1/2/2023" + NL * (4 * n) + "x", n=100),
    Case(("text.dates._DATE_RES[3]",), normalize_text, lambda n: "1 Jan 2023" + NL * (4 * n) + "x", n=100),
    Case(("text.dates._DATE_RES[4]",), normalize_text, lambda n: "Jan 1, 2023" + NL * (4 * n) + "at", n=100),
    Case(("text.dates._DATE_RES[4]",), normalize_text, lambda n: "jan 2019 " * n),
    Case(("text.dates._DATE_HINT_RES[0]",), normalize_text, lambda n: "2023 年 1 月 1" * n + " " * (4 * n) + "x"),
    Case(("text.dates._DATE_HINT_RES[1]",), normalize_text, lambda n: "2023-1-" * n + "-" * (4 * n) + "1"),
    Case(("text.dates._DATE_HINT_RES[2]",), normalize_text, lambda n: "2023 1/1" * n + "/" * (4 * n) + "1"),
    Case(("text.dates._DATE_HINT_RES[3]",), normalize_text, lambda n: "2023 may 1st" * n + " " * (4 * n) + "ma"),
    Case(("text.dates._DATE_HINT_RES[4]",), normalize_text, lambda n: "2023 may 1st," * n + " " * (4 * n) + "20"),
    Case(("text.dates._CN_TIME_HINT_RE",), normalize_text, lambda n: "2023:" + "下午 1" * n + " " * (4 * n) + "1"),
    Case(("text.dates._LONE_TIME_RE",), normalize_text, lambda n: "8:30" + NL * (4 * n) + "P", n=250),
    Case(("text.dates._LONE_TIME_RE",), normalize_text, lambda n: "下午" + NL * (4 * n) + "8", n=250),
    Case(("text.dates._YEAR_HINT_RE", "text.dates._LONE_TIME_RE"), normalize_text, lambda n: "2023:" * n),
    Case(("text.dates._AP_HINT_RE",), normalize_text, lambda n: "8:30" + " 1" * (2 * n) + " a"),
    Case(("text.normalize._ADVERSARIAL_HINT_RE",), normalize_text, lambda n: "中" + " " * (4 * n) + "*"),
    Case(("text.normalize._CHAR_CHANGE_RE",), normalize_text, lambda n: "，“" * (2 * n)),
    # titles: runs of colons before a hyphen; runs of spaces left by removed tags
    Case(("text.normalize._split_suffix",), normalize_title, lambda n: "x" + ":" * (4 * n) + "-"),
    Case(("text.normalize._split_suffix",), normalize_title, lambda n: "a::b" + "(转)" * n + "c"),
    Case(("text.normalize._split_suffix",), _fingerprint_title, lambda n: "标题" + ":" * (4 * n) + "_"),
    Case(("text.normalize._TITLE_TAG_RE",), normalize_title, lambda n: "标题" + "(图)" * n + "x"),
    Case(("text.normalize._TITLE_TAG_RE",), normalize_title, lambda n: "标题" + "(转 " * n),
    Case(("text.normalize._TITLE_TRAILING_MARK_RE",), normalize_title, lambda n: "标题" + "(图)" * n + "原创x"),
    Case(("text.normalize._LEADING_BRACKET_RE",), normalize_title, lambda n: "[" * (4 * n) + "x"),
    Case(("text.normalize._TITLE_PREFIX_RE",), normalize_title, lambda n: "转载" * (2 * n) + ":"),
    Case(("text.normalize._FLASH_RE",), normalize_title, lambda n: "突发！" * (2 * n) + "x"),  # marks, too short a rest
    Case(("text.normalize._FLASH_RE",), normalize_title, lambda n: "快" + "!" * (4 * n) + "x"),
    Case(("text.normalize._FLASH_RE",), normalize_title, lambda n: "UPDATE 2-" * n + " " * (4 * n) + "x"),
    Case(("text.normalize._FLASH_RE",), normalize_title, lambda n: "快讯:" * n + "快讯" * (2 * n)),
    Case(("text.normalize._SITE_WORDS_RE", "text.normalize._DIGIT_RE"), normalize_title,
         lambda n: "标题 - " + "Daily" * n + "1"),
    # features, fingerprint signatures, segmentation
    Case(("fingerprint.features._NO_WORD",), _features, lambda n: "_" * (4 * n) + "a"),
    Case(("fingerprint.features._NUMBER", "fingerprint.features._HAN"), _features, lambda n: "1,中 " * n),
    Case(("cli.input._SPACE",), _json_array, lambda n: "[" + " \t\r\n" * n + "{}" + " " * n + "]"),
    Case(("fingerprint.signatures._NUMBER",), number_signature, lambda n: "1." * (2 * n) + "x"),
    Case(("fingerprint.signatures._DATE_TIME",), number_signature, lambda n: "2023-1-1 1:" * n),
    Case(("fingerprint.signatures._DATE_TIME_HINT",), number_signature, lambda n: "1-x1:" * (2 * n)),
    Case(("fingerprint.signatures._SENTENCE_END", "fingerprint.signatures._SPACE"), sentence_signature,
         lambda n: ".。 " * n + " " * (2 * n) + "x"),
    Case(("fingerprint.segment._BLOCK",), _cut, lambda n: "a-" * (2 * n) + "\r\n " * n),  # and jieba's re_skip
    Case(("fingerprint.segment._BLOCK",), _cut, lambda n: "龘" * (4 * n)),  # unknown characters: jieba's HMM
    Case(("fingerprint.segment._BLOCK",), _cut, lambda n: "1.1%" * n),  # digits in an unknown run
    # short texts: their character key, and symbols stuffed between CJK characters (the short profile)
    Case(("text.similarity._DROP",), _char_key, lambda n: " ,_" * (2 * n) + "x"),
    Case(("fingerprint.fingerprinter._STUFFED",), unstuff, lambda n: "中" + " *-" * (2 * n) + "x"),
    Case(("fingerprint.fingerprinter._STUFFED",), unstuff, lambda n: "中 *" * (2 * n)),
]


def _module_patterns() -> Iterator[str]:
    """``module.NAME`` (``module.NAME[i]`` inside a list or tuple) of every compiled pattern that
    a module of the package defines or imports."""
    for info in pkgutil.walk_packages(scrapy_simhash.__path__, "scrapy_simhash."):
        if info.name.endswith(".__main__"):
            continue  # importing it runs the command line
        module = importlib.import_module(info.name)
        short = info.name.removeprefix("scrapy_simhash.")
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                yield f"{short}.{name}"
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, re.Pattern):
                        yield f"{short}.{name}[{i}]"


def test_every_pattern_has_a_hostile_case() -> None:
    found = set(_module_patterns())
    covered = {p for case in CASES for p in case.patterns} | set(EXEMPT)
    assert found - covered == set(), "patterns without a hostile case in CASES"
    assert covered - found == SCANS, "CASES names patterns that no module has any more"


class _TooSlow(Exception):
    pass


def _raise_too_slow(signum: int, frame: Any) -> None:
    raise _TooSlow


def _best_time(func: Callable[[Any], Any], arg: Any) -> float:
    """Smallest wall time of REPEATS calls; a call over CALL_LIMIT seconds fails the test (the
    alarm interrupts a running regex too: ``re`` checks for signals while it backtracks)."""
    best = float("inf")
    for _ in range(REPEATS):
        signal.setitimer(signal.ITIMER_REAL, CALL_LIMIT)
        try:
            start = time.perf_counter()
            func(arg)
            best = min(best, time.perf_counter() - start)
        except _TooSlow:
            pytest.fail(f"one call on {len(arg)} characters took more than {CALL_LIMIT} s")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return best


# pytest-timeout watches these tests from a thread: SIGALRM is the per-call limit's.
pytestmark = pytest.mark.timeout(300, method="thread")


@pytest.fixture
def alarm() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _raise_too_slow)
    yield
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_time_grows_linearly(case: Case, alarm: None) -> None:
    short, long = case.build(case.n), case.build(case.n * GROWTH)
    case.func(short)  # warm up: dictionaries, tables, caches of compiled patterns
    ratios = []
    for _ in range(ROUNDS):
        ratio = _best_time(case.func, long) / max(_best_time(case.func, short), 1e-6)
        ratios.append(round(ratio, 1))
        if ratio <= MAX_RATIO:
            return
    pytest.fail(f"{GROWTH}x the input took {min(ratios)}x the time (rounds: {ratios}; linear ≤ {MAX_RATIO})")


# --- the rewritten patterns match what the old ones matched ----------------------------------------

OLD_SUFFIX_RE = re.compile(r"^(?P<head>.*\S)(?P<sep>\s*(?:-|_|\||::|»)\s*)(?P<seg>[^-_|»]+?)\s*$", re.S)
OLD_REWRITTEN = {
    "_TITLE_TAG_RE": re.compile(rf"\s*[\[(]\s*(?:{normalize._TAG_WORDS})\s*[\])]\s*", re.IGNORECASE),
    "_TITLE_TRAILING_MARK_RE": re.compile(r"\s+(?:原创|转载)\s*$"),
    "_SPACE_NL_RE": re.compile(r" *\n[\s]*"),
}
OLD_TIME_RE = r"(?:\s*,?\s*(?:at\s+)?|T|\s*)"
NEW_TIME_RE = r"(?:\s*(?:,\s*)?(?:at\s+)?|T)"

title_bits = st.lists(st.sampled_from(["a", "网", " ", "\n", "\t", "\u3000", ":", "::", "-", "_", "|", "»",
                                       "(", ")", "[", "]", "转", "原创", "图"]), max_size=14).map("".join)
date_bits = st.lists(st.sampled_from(["2023-01-01", "2023年1月1日", "1/2/2023", "1 Jan 2023", "Jan 1, 2023", " ",
                                      "\n", ",", "at", "AT ", "T", "下午", "8:30", "25:70", "8点30分", "PM",
                                      "p.m.", "1", ":", "12:00:00"]), max_size=9).map("".join)


def _spans(rx: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], dict[str, str | None]]]:
    return [(m.span(), m.groupdict()) for m in rx.finditer(text)]


@settings(max_examples=3000, deadline=None)
@given(title_bits)
def test_title_rewrites_match_as_before(text: str) -> None:
    m = OLD_SUFFIX_RE.match(text)
    assert normalize._split_suffix(text) == (m and (m["head"], m["sep"], m["seg"]))
    for name, old in OLD_REWRITTEN.items():
        assert _spans(getattr(normalize, name), text) == _spans(old, text)


@settings(max_examples=2000, deadline=None)
@given(date_bits)
def test_date_rewrite_matches_as_before(text: str) -> None:
    assert NEW_TIME_RE in dates._TIME_RE
    old_time = dates._TIME_RE.replace(NEW_TIME_RE, OLD_TIME_RE)
    for pattern, new in zip(dates._DATE_PATTERNS, dates._DATE_RES, strict=True):
        old = re.compile(rf"{pattern}(?P<time>{old_time})?", re.IGNORECASE)
        assert _spans(new, text) == _spans(old, text)


# Patterns rewritten to start with a character class (a search skips to where a match can start).
CJK, SYM = normalize._CJK, normalize._SYM
OLD_SCANS = {
    "_ELLIPSIS_RE": re.compile(r"(?:…|\.{3,}|。{3,})+"),
    "_SPACE_RUN_RE": re.compile(r"[^\S\n]{2,}|[^\S\n ]"),
    "_SPACE_NL_RE": re.compile(r"(?<! ) *\n\s*"),
    "_ADVERSARIAL_RE": re.compile(rf"(?<=[{CJK}])(?:{SYM}| {SYM} )(?=[{CJK}])"),
}
OLD_ADVERSARIAL_HINT_RE = re.compile(rf"[{CJK} ]{SYM}")
scan_bits = st.lists(st.sampled_from(["…", ".", "..", "。", "。。", " ", "  ", "\n", "\t", "\u3000", "\xa0", "a",
                                      "中", "*", "·", "\\", "@", "★", "x\n"]), max_size=16).map("".join)


@settings(max_examples=4000, deadline=None)
@given(scan_bits)
def test_scan_rewrites_match_as_before(text: str) -> None:
    for name, old in OLD_SCANS.items():
        assert _spans(getattr(normalize, name), text) == _spans(old, text), name
    assert bool(normalize._ADVERSARIAL_HINT_RE.search(text)) == bool(OLD_ADVERSARIAL_HINT_RE.search(text))


N = dates
OLD_YEAR_FIRST = [  # the first two date patterns as they were, their lookbehind first
    rf"(?<!\d){N._YEAR}\s*年\s*{N._M}\s*月\s*{N._D}\s*[日号]",
    rf"(?<![\d.]){N._YEAR}(?P<sep>[-/.]){N._M}(?P=sep){N._D}(?!\d|\.\d)",
]
OLD_DATE_TIME = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b")
year_bits = st.lists(st.sampled_from(["2023", "1999", "2199", "1", "12", "0", "年", "月", "日", "号", " ", "-", "/",
                                      ".", ":", "T", "a", "_", "中", "١", "8:30", "12:00:00", "2023-01-01"]),
                     max_size=12).map("".join)


@settings(max_examples=4000, deadline=None)
@given(year_bits)
def test_year_first_rewrites_match_as_before(text: str) -> None:
    for old, new in zip(OLD_YEAR_FIRST, N._DATE_RES, strict=False):
        assert _spans(new, text) == _spans(re.compile(rf"{old}(?P<time>{N._TIME_RE})?", re.IGNORECASE), text)
    from scrapy_simhash.fingerprint import signatures

    assert _spans(signatures._DATE_TIME, text) == _spans(OLD_DATE_TIME, text)
