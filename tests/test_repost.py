"""The repost generator of the accuracy benchmark does what each transformation says, deterministically."""

from __future__ import annotations

import random
import sys
import unicodedata
from pathlib import Path

import lxml.html
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import repost
from repost import RECIPES, Article, Draft, make_repost, split_sentences

ZH = Article(
    "zh:1",
    "zh",
    "北京三元食品获“北京知名品牌”殊荣",
    (
        "2016年3月18日，第六届北京质量奖颁奖表彰大会在京隆重举行。北京三元食品股份有限公司液体乳被评选为“北京知名品牌”。",
        "北京知名品牌推选表彰活动是业内最具影响力的质量评选之一。整个推选过程公开、公平、公正。评审共有7个环节。",
        "此次专家审评组从市场评价、规模经济、产品质量等7个方面进行了综合评审。三元食品表示将继续提升品质。",
        "据悉，三元食品还荣获2015年度中国乳制品工业协会质量优秀奖。活动于14:30结束。",
    ),
)
EN = Article(
    "en:1",
    "en",
    "U.K. MONEY MARKET GIVEN FURTHER 152 MLN STG HELP",
    (
        "The Bank of England said it provided the money market with 152 mln stg help in the afternoon session. "
        "Mr. Smith said on March 3, 1987 that U.S. rates were steady.",
        "This brings the total help so far today to 300 mln stg. The bank had forecast a shortage of 400 mln.",
        "Dealers said rates eased slightly. They expected further assistance later in the week.",
        "The market closed at 16:45 with sterling firmer against the dollar. Volume was light.",
    ),
)
POOL = ("另一篇文章里完全无关的一句话。", "Another story entirely, about grain exports.")
HEADLINES = ("无关新闻标题一则，关于天气", "Unrelated headline about oil prices")


def sentences(paragraphs: tuple[str, ...], lang: str) -> list[str]:
    return [s for p in paragraphs for s in split_sentences(p, lang)]


def visible(html: str) -> str:
    return lxml.html.fromstring(html).text_content()


@pytest.mark.parametrize("recipe", list(RECIPES))
@pytest.mark.parametrize("art", [ZH, EN], ids=["zh", "en"])
def test_every_recipe_is_deterministic_per_seed(recipe: str, art: Article) -> None:
    a = make_repost(art, recipe, random.Random(7), pool=POOL, headlines=HEADLINES)
    b = make_repost(art, recipe, random.Random(7), pool=POOL, headlines=HEADLINES)
    assert (a.title, a.body, a.steps) == (b.title, b.body, b.steps)
    assert a.body and a.title
    assert (a.title, a.body) != (art.title, art.body), f"{recipe} changed nothing"


def test_different_seeds_give_different_reposts() -> None:
    bodies = {make_repost(ZH, "portal", random.Random(s), pool=POOL, headlines=HEADLINES).body for s in range(6)}
    assert len(bodies) > 1


def test_sentence_splitting_keeps_abbreviations() -> None:
    sents = split_sentences(EN.paragraphs[0], "en")
    assert sents == [
        "The Bank of England said it provided the money market with 152 mln stg help in the afternoon session.",
        "Mr. Smith said on March 3, 1987 that U.S. rates were steady.",
    ]
    assert len(split_sentences(ZH.paragraphs[1], "zh")) == 3


@pytest.mark.parametrize("art", [ZH, EN], ids=["zh", "en"])
def test_template_wraps_the_body_with_an_ad_and_related_links_inside(art: Article) -> None:
    d = repost.template(Draft.of(art, POOL, HEADLINES), random.Random(1))
    root = lxml.html.fromstring(d.body)
    text = root.text_content()
    for p in art.paragraphs:
        assert p in text
    assert root.xpath("//div[@class='ad-block']"), "ad block missing from the article region"
    related = root.xpath("//div[@class='related']//a")
    assert related and {a.text_content() for a in related} <= set(HEADLINES)
    assert d.steps[-1].startswith("template:")
    page = repost.template(Draft.of(art, POOL, HEADLINES), random.Random(1), full_page=True).body
    assert page.startswith("<!DOCTYPE html>") and 'class="nav"' in page and 'class="footer"' in page


def test_template_must_come_last() -> None:
    d = repost.template(Draft.of(ZH), random.Random(1))
    with pytest.raises(ValueError, match="template"):
        repost.truncate(d, random.Random(1))


def test_source_line_adds_house_lines() -> None:
    zh = repost.source_line(Draft.of(ZH), random.Random(3))
    assert "来源：" in zh.paragraphs[0] and "编辑：" in zh.paragraphs[-1]
    assert zh.paragraphs[1:-1] == ZH.paragraphs
    en = [repost.source_line(Draft.of(EN), random.Random(s)).body for s in range(12)]
    assert any("(Reuters) - " in b for b in en) and any(b.startswith("By ") for b in en)


@pytest.mark.parametrize("art", [ZH, EN], ids=["zh", "en"])
def test_title_suffix_is_a_site_name_or_repost_mark(art: Article) -> None:
    marks = {p.suffix for p in repost.PORTALS} | {"【转】", "（转载）", "（组图）", "(图)"}
    for seed in range(10):
        t = repost.title_suffix(Draft.of(art), random.Random(seed)).title
        assert art.title in t and t != art.title
        extra = t.replace(art.title, "", 1)
        assert extra in marks
    assert repost.title_suffix(Draft.of(art), random.Random(0), suffix="_网易新闻").title == art.title + "_网易新闻"


def test_title_rewrite_changes_words_and_uses_the_original_title_signal() -> None:
    for seed in range(5):
        for art in (ZH, EN):
            d = repost.title_rewrite(Draft.of(art), random.Random(seed))
            assert d.title and d.title != art.title
    body = ("（原标题：三元食品获北京知名品牌殊荣）据报道，三元食品获奖。",)
    natural = Article("zh:2", "zh", "新标题：三元获奖", body)
    d = repost.title_rewrite(Draft.of(natural), random.Random(0))
    assert d.title == "三元食品获北京知名品牌殊荣"
    assert "原标题" not in d.body


def test_date_format_rewrites_dates_and_times() -> None:
    zh = repost.date_format(Draft.of(ZH), random.Random(2)).body
    assert "2016年3月18日" not in zh and "14:30" not in zh
    assert "下午2:30" in zh
    en = repost.date_format(Draft.of(EN), random.Random(2)).body
    assert "March 3, 1987" not in en and "4:45 PM" in en
    plain = Article("zh:3", "zh", "无日期的新闻标题", ("这里没有任何日期。也没有时间。",))
    assert repost.date_format(Draft.of(plain), random.Random(0)).paragraphs[0].startswith("发布时间：")


def test_fullwidth_converts_digits_and_latin_only() -> None:
    d = repost.fullwidth(Draft.of(EN), random.Random(0))
    assert "１５２" in d.title and "152" not in d.body
    assert not any(c.isascii() and c.isalnum() for c in d.body)
    assert unicodedata.normalize("NFKC", d.body) == EN.body


def test_paragraph_order_swaps_and_truncate_drops_the_last() -> None:
    d = repost.paragraph_order(Draft.of(ZH), random.Random(4))
    assert sorted(d.paragraphs) == sorted(ZH.paragraphs) and d.paragraphs != ZH.paragraphs
    assert repost.truncate(Draft.of(ZH), random.Random(0)).paragraphs == ZH.paragraphs[:-1]
    one = Article("en:2", "en", "One paragraph story", ("First sentence here. Second one. Third one.",))
    assert repost.truncate(Draft.of(one), random.Random(0)).paragraphs == ("First sentence here. Second one.",)


def _long_article(n: int) -> Article:
    paras = tuple(
        "".join(f"这是第{i * 5 + j}句不同的新闻内容，记者在现场看到了变化。" for j in range(5)) for i in range(n // 5)
    )
    return Article("zh:long", "zh", "很长的一篇新闻稿件标题", paras)


@pytest.mark.parametrize("rate", [0.05, 0.10, 0.20, 0.30])
def test_edit_sentences_hits_the_requested_rate(rate: float) -> None:
    art = _long_article(100)
    d = repost.edit_sentences(Draft.of(art, POOL[:1]), random.Random(5), rate)
    assert d.edit_rate == pytest.approx(rate, abs=0.005)
    before = sentences(art.paragraphs, "zh")
    after = sentences(d.paragraphs, "zh")
    kept = set(before) & set(after)
    # Every edit removes or changes one original sentence, except an insertion (which keeps it).
    assert len(before) - len(kept) <= round(rate * len(before))
    assert len(before) - len(kept) >= round(rate * len(before)) // 2
    assert d.steps == (f"edit@{round(rate * 100)}%",)


def test_edit_sentences_inserts_sentences_of_other_articles() -> None:
    d = repost.edit_sentences(Draft.of(_long_article(100), POOL), random.Random(5), 0.3)
    assert POOL[0] in d.body


def test_portal_repost_composes_the_typical_steps() -> None:
    d = repost.portal_repost(Draft.of(ZH, POOL, HEADLINES), random.Random(9), portal="163")
    assert d.steps == ("date_format", "source_line", "title_suffix", "template:163")
    assert d.title == ZH.title + "_网易新闻"
    text = visible(d.body)
    assert "来源：" in text and "网易新闻客户端" in text and "2016年3月18日" not in text


def test_unknown_recipe_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown recipe"):
        make_repost(ZH, "nope", random.Random(0))
