"""The segmenter cuts exactly as jieba does: fingerprints are made of its words."""

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

from scrapy_simhash.features import get_tokenizer
from scrapy_simhash.normalize import normalize_body
from scrapy_simhash.segment import Segmenter, _hmm_cut

from .conftest import STORY_EN, STORY_ZH, STORY_ZH_2, read_jsonl

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def tokenizer() -> jieba.Tokenizer:
    return get_tokenizer()


def jieba_words(tokenizer: jieba.Tokenizer, text: str) -> list[str]:
    return list(tokenizer.cut(text))


def test_the_stories_and_the_html_fixtures_cut_as_jieba_cuts_them(tokenizer: jieba.Tokenizer) -> None:
    texts = [s[k] for s in (STORY_ZH, STORY_ZH_2, STORY_EN) for k in ("title", "body")]
    for page in sorted(FIXTURES.glob("*.html.gz")):
        html = gzip.decompress(page.read_bytes())
        texts += [html.decode("utf-8", "replace"), normalize_body(html)]
    segmenter = Segmenter(tokenizer)
    for text in texts:
        assert segmenter.cut(text) == jieba_words(tokenizer, text)
    for text in texts:  # the second time from what it remembered
        assert segmenter.cut(text) == jieba_words(tokenizer, text)


@pytest.mark.parametrize(("corpus", "field"), [
    ("zh/newsspider-2016.jsonl.gz", "body"), ("zh/inews-bdci2019.jsonl.gz", "body"),
    ("zh/inews-bdci2019.jsonl.gz", "title"), ("en/reuters21578.jsonl.gz", "body"), ("en/bbc-2225.jsonl.gz", "body"),
])
def test_real_articles_cut_as_jieba_cuts_them(tokenizer: jieba.Tokenizer, corpus: str, field: str) -> None:
    segmenter = Segmenter(tokenizer)
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


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET), max_size=60).map("".join))
def test_any_text_cuts_as_jieba_cuts_it(text: str) -> None:
    tokenizer = get_tokenizer()
    assert Segmenter(tokenizer).cut(text) == jieba_words(tokenizer, text)


def test_unknown_runs_go_through_the_same_hmm() -> None:
    rnd = random.Random(7)
    han = [chr(c) for c in range(0x4E00, 0x9FD6)]
    for _ in range(3000):
        run = "".join(rnd.choice(han) for _ in range(rnd.randint(1, 9)))
        run += rnd.choice(["", "abc", "12.5%", " ", "x1"]) + "".join(rnd.choice(han) for _ in range(rnd.randint(0, 4)))
        assert _hmm_cut(run) == tuple(finalseg.cut(run)), run


def test_a_user_dictionary_is_honoured(tmp_path: Path) -> None:
    text = "台中正确应该不会被切开，八一双鹿更名为八一南昌，鑫淼犇龘集团今日上市"
    user_dict = tmp_path / "user.txt"
    user_dict.write_text("八一双鹿 10 nz\n鑫淼犇龘集团 5\n", "utf-8")
    tokenizer = get_tokenizer(user_dict)
    words = Segmenter(tokenizer).cut(text)
    assert "鑫淼犇龘集团" in words
    assert words == jieba_words(tokenizer, text)


def test_a_dictionary_changed_later_is_not_hidden_by_what_was_remembered(tmp_path: Path) -> None:
    tokenizer = jieba.Tokenizer()  # its own dictionary: the shared one stays untouched
    tokenizer.initialize()
    segmenter = Segmenter(tokenizer)
    text = "龘犇鑫淼是一家公司"
    before = segmenter.cut(text)
    assert "龘犇鑫淼" not in before
    tokenizer.add_word("龘犇鑫淼", 1000)
    after = segmenter.cut(text)
    assert "龘犇鑫淼" in after
    assert after == jieba_words(tokenizer, text)
