"""The compiled engine (``_vocabulary_c`` over ``_segment_c``'s cut: one pass from a text's characters
to its fingerprint) gives exactly the fingerprints of the pure-Python fallback: on real
articles and pages, under every option that reaches it, and its feature words are
``FeatureExtractor._word``'s. Also: the compiled sentence cut (``_signatures_c``) is the Python one,
and the signatures' date pre-check changes no output."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash._compiled import _signatures_c, _vocabulary_c
from scrapy_simhash.fingerprint import signatures
from scrapy_simhash.fingerprint import simhash as sh
from scrapy_simhash.fingerprint.features import FeatureExtractor, builtin_stop_words
from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
from scrapy_simhash.fingerprint.segment import COMPILED, Segmenter
from tests.conftest import CORPUS

pytestmark = pytest.mark.skipif(not COMPILED, reason="extension not built (setup.py build_ext --inplace)")

ARTICLES = ("zh/inews-bdci2019.jsonl.gz", "zh/newsspider-2016.jsonl.gz", "en/reuters21578.jsonl.gz")
OPTIONS = [{}, {"bits": 32}, {"bits": 128}, {"tf": "log"}, {"tf": "sqrt"}, {"max_share": None}, {"top_k": 8},
           {"stop_words": ["记者", "reuters"]}]


def fallback(fp: Fingerprinter) -> Fingerprinter:
    """``fp`` with the pure-Python segmenter, word loop, weights and vote."""
    fp.features._compiled = None
    fp.features.segmenter = Segmenter(fp.features.tokenizer, compiled=False)
    return fp


@pytest.fixture(scope="module")
def items() -> list[tuple[object, object]]:
    if not CORPUS.is_dir():
        pytest.skip(f"corpus missing: {CORPUS} (../shared/corpus next to the repo)")
    out: list[tuple[object, object]] = []
    for name in ARTICLES:
        with gzip.open(CORPUS / name, "rt", encoding="utf-8") as f:
            out += [(r.get("title"), r.get("body")) for r in map(json.loads, itertools.islice(f, 250))]
    for path in sorted(CORPUS.glob("html/**/*.htm*"))[::6]:
        out.append((path.stem, gzip.decompress(path.read_bytes())))
    return out


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_compiled_and_fallback_fingerprints_are_identical(items, options, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = [Fingerprinter(**options).fingerprint(t, b) for t, b in items]
    monkeypatch.setattr(sh, "_vote_compiled", None)
    monkeypatch.setattr(sh, "_np", None)
    slow = fallback(Fingerprinter(**options))
    assert compiled == [slow.fingerprint(t, b) for t, b in items]
    assert sum(x.body is not None for x in compiled) > len(items) // 2


def test_the_word_caches_filling_up_change_nothing(items, monkeypatch: pytest.MonkeyPatch) -> None:
    big, small = Fingerprinter(), Fingerprinter()
    want = [big.fingerprint(t, b) for t, b in items[:300]]
    monkeypatch.setattr("scrapy_simhash.fingerprint.features._WORD_CACHE_MAX", 500)  # emptied every few items
    assert [small.fingerprint(t, b) for t, b in items[:300]] == want
    assert small.features._compiled.size < big.features._compiled.size


def test_feature_words_are_the_python_ones(items) -> None:
    stop = builtin_stop_words()
    extractor = FeatureExtractor()
    texts = [str(x or "") for item in items[:300] for x in item]
    tokens = {tok for text in texts for tok in extractor.segmenter.cut(text)}
    rnd = random.Random(5)
    tokens |= {chr(c) for c in range(0x20, 0x3100)} | {chr(c) for c in range(0xF800, 0xFB00)}
    tokens |= {"".join(rnd.choice(" _-.%1aA中\u3000\t½²٣İ") for _ in range(rnd.randint(1, 4))) for _ in range(3000)}
    for token in tokens:
        assert _vocabulary_c.feature_word(token, stop) == extractor._word(token), repr(token)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(["1", "12", "2023", "-", ":", " ", "T", "a", "中", "."]), max_size=14).map("".join))
def test_the_date_pre_check_of_the_signatures_changes_nothing(text: str) -> None:
    assert signatures._without_dates(text) == signatures._DATE_TIME.sub(" ", text)


def test_a_long_text_lets_other_threads_run() -> None:
    """A long text is one compiled call: it must not keep a thread that waits for the interpreter
    (the crawl's reactor, when the pipeline fingerprints in a thread) waiting for all of it."""
    import threading
    import time

    rng = random.Random(5)
    text = "。".join("".join(chr(rng.randrange(0x4E00, 0x9000)) for _ in range(rng.randrange(8, 20)))
                    for _ in range(40_000))
    fp = Fingerprinter()
    fp.body(text[:1000])  # tables loaded
    done, call = threading.Event(), []

    def work() -> None:
        started = time.monotonic()
        fp.features.fingerprint(text, True, 64)
        call.append(time.monotonic() - started)
        done.set()

    ticks = []
    worker = threading.Thread(target=work)
    worker.start()
    while not done.is_set():
        ticks.append(time.monotonic())
        time.sleep(0.001)
    worker.join()
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert len(gaps) >= 2, "the waiting thread never ran while the text was fingerprinted"
    assert max(gaps) < 0.5 * call[0], (max(gaps), call[0])


_ALPHABET = [*"中国人民银行很长的一个新词鑫淼犇龘㐀", "𠀀", "𠀁", "\x00", *"ab1.%-_ ,。\n", "12.5%", "x1"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_ALPHABET), min_size=1, max_size=40).map("".join), min_size=1, max_size=30))
def test_unusual_words_weigh_as_in_python(tmp_path_factory, texts: list[str]) -> None:
    """Words outside the compact tables (outside the BMP, with NUL, longer than 4 characters), a
    prefix-only entry, unknown runs through the HMM and words it must split: the compiled pass from
    characters to fingerprint takes the Python segmenter's words."""
    from jieba import finalseg

    user_dict = tmp_path_factory.getbasetemp() / "unusual-user-dict.txt"
    if not user_dict.exists():
        user_dict.write_text("𠀀𠀁 50000\n中\x00国 50000\n很长很长的一个新词 90000\n鑫淼犇龘集团 5\n", "utf-8")
    han = [c for c in _ALPHABET if len(c) == 1 and "\u3400" <= c <= "\u9fff"]
    every_pair = {a + b for a, b in itertools.product(han, repeat=2)}  # whatever the HMM makes of them
    for force_split in (set(), every_pair):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(finalseg, "Force_Split_Words", force_split)
            fast = FeatureExtractor(user_dict=user_dict)
            slow = FeatureExtractor(user_dict=user_dict)
            slow._compiled = None
            slow.segmenter = Segmenter(slow.tokenizer, compiled=False)
            for text, body in itertools.product(texts, (False, True)):
                assert fast.fingerprint(text, body) == slow.fingerprint(text, body), (text, force_split, body)


_SIGNATURE_BITS = [*"。!?;.\"'”’)]」』 \t\n\u3000\u2028\x1cabcİK中文1,=Ａ１“【\u200b\ud800", "ab" * 12, "中文" * 6]
_SIGNATURE_TEXT = st.lists(st.sampled_from(_SIGNATURE_BITS), max_size=60).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_SIGNATURE_TEXT)
def test_the_compiled_sentence_cut_is_the_python_one(text: str) -> None:
    from scrapy_simhash.text import normalize

    class Text(str):  # what lxml returns: a str subclass
        pass

    for given_text in (text, Text(text)):
        assert _signatures_c.sentence_pieces(given_text) == signatures._pieces_python(text)
        assert _signatures_c.non_space(given_text) == signatures._non_space_python(text)
        assert normalize._changed_chars(given_text) == normalize._changed_chars_python(text)
        for min_chars in (0, 3, signatures.MIN_SENTENCE_CHARS):
            assert _outcome(_signatures_c.sentence_hashes, given_text, min_chars) == _outcome(
                signatures._sentence_hashes_python, text, min_chars)


def _outcome(hashes: Any, *args: Any) -> Any:
    """The hashes, in order, or the type of the error raised (a lone surrogate cannot be UTF-8 encoded)."""
    try:
        return hashes(*args)
    except UnicodeEncodeError as exc:
        return type(exc)


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_the_compiled_hash_is_blake2b(data: bytes, digest_size: int) -> None:
    assert _signatures_c.blake2b_hex(data, digest_size) == hashlib.blake2b(data, digest_size=digest_size).hexdigest()


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.text(st.sampled_from([*"0123456789.,", "١", "²", "\ud800", "中"]), max_size=12), max_size=20))
def test_the_compiled_number_hashes_are_the_python_ones(numbers: list[str]) -> None:
    assert _signatures_c.number_hashes(numbers) == signatures._number_hashes_python(numbers)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([*"0123456789.,- a", "١٢", "²"]), max_size=20).map("".join))
def test_the_number_pattern_finds_what_it_found(text: str) -> None:
    import re

    assert signatures._NUMBER.findall(text) == re.findall(r"\d+(?:[.,]\d+)*", text)
