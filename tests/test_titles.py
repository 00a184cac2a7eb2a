"""Titles: flash marks and labels removed, no single word deciding a short title, and a title of
too few features not deciding alone; on real titles (the question pairs of a public question-pair
set, the flash-marked and spam titles of the news corpora) through the default engine and a real
SQLite index.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scrapy_simhash import Deduplicator
from scrapy_simhash.engine import DEFAULT_TITLE_MAX_DISTANCE
from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
from scrapy_simhash.fingerprint.simhash import simhash
from scrapy_simhash.index import rule
from scrapy_simhash.text.normalize import normalize_title

PLAIN = "侯红当选郑州市市长"


def _open(tmp_path: Path) -> Deduplicator:
    return Deduplicator.open(f"sqlite:///{tmp_path / 'titles.sqlite3'}")


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("快讯！侯红当选郑州市市长", PLAIN),
        ("快讯!侯红当选郑州市市长", PLAIN),
        ("突发：侯红当选郑州市市长", PLAIN),
        ("重磅！寻人！江西5岁男孩失踪9天", "江西5岁男孩失踪9天"),
        ("死刑！男子持刀狂砍岳父和妻子", "男子持刀狂砍岳父和妻子"),
        ("【突发】北京市密云花园小区一居民楼突然起火!", "北京市密云花园小区一居民楼突然起火!"),
        ("[视频]江水平说装修，装修过程中怎么做会超支?_百度贴吧", "江水平说装修,装修过程中怎么做会超支?"),
        ("重磅！2018年度报告", "2018年度报告"),
        ("2018年度报告|德外独家", "2018年度报告"),
        ("BREAKING: Oil prices fall for a third day", "Oil prices fall for a third day"),
        ("UPDATE 2-Oil prices fall for a third day", "Oil prices fall for a third day"),
        ("EXCLUSIVE-Oil prices fall for a third day", "Oil prices fall for a third day"),
        ("Exclusive: Oil prices fall for a third day", "Oil prices fall for a third day"),
        ("CORRECTED - U.K. MONEY MARKET GIVEN 152 MLN STG HELP", "U.K. MONEY MARKET GIVEN 152 MLN STG HELP"),
    ],
)
def test_flash_marks_and_labels_are_removed(title, expected):
    assert normalize_title(title) == expected


@pytest.mark.parametrize(
    "title",
    [
        "外媒:第3名加拿大公民疑因签证问题被拘 正安排回国",  # a source before a colon is content
        "深圳:载俩孩子醉驾逆行出车祸 亲爹坑娃",  # so is a place
        "1个月2起!中国籍实习生在日本同一水道死亡",  # an exclamation with figures is content
        "突发!",  # a mark that is the whole title stays
        "Live-action remake tops the box office",  # a word before a hyphen, not a wire prefix
    ],
)
def test_content_before_a_mark_stays(title):
    assert normalize_title(title) == title


def test_a_flash_marked_title_joins_its_plain_form(tmp_path):
    """A real repost pair of the issue: 22 bits apart with the mark, one story."""
    with _open(tmp_path) as dedup:
        first = dedup.check_and_add(PLAIN, "", url="a")
        second = dedup.check_and_add("快讯！" + PLAIN, "", url="b")
    assert first.status == "new"
    assert (second.status, second.tier, second.distance) == ("duplicate", "title", 0)


def test_a_site_label_behind_a_built_in_one(tmp_path):
    """SIMHASH_TITLE_PATTERNS run with the built-in rules, each round: a site's own prefix after a
    built-in label, or a built-in mark after a site's label, both go."""
    patterns = [r"^本台快讯[:：]\s*", r"^\s*\[郑州日报\]\s*"]
    assert normalize_title("[视频]本台快讯：" + PLAIN, patterns) == PLAIN
    assert normalize_title("【郑州日报】快讯！" + PLAIN, patterns) == PLAIN
    with Deduplicator.open(f"sqlite:///{tmp_path / 'p.sqlite3'}", title_patterns=patterns) as dedup:
        dedup.check_and_add(PLAIN, "", url="a")
        second = dedup.check_and_add("[视频]本台快讯：" + PLAIN, "", url="b")
    assert (second.status, second.tier) == ("duplicate", "title")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("六小龄童姓什么", "六小龄童什么时候死的"),  # 六小龄童 outweighed the rest: one fingerprint
        ("今天你的心情怎么样", "和信贷怎么样"),  # two words each, 怎么样 the heavier: one fingerprint
        ("女宝宝好听的小名", "马宝宝好听的小名"),  # the three heavier words outvoted the one that differs
    ],
)
def test_one_word_does_not_decide_a_short_title(a, b):
    fingerprinter = Fingerprinter()
    features = fingerprinter.features
    compiled = fingerprinter.title(a), fingerprinter.title(b)
    pure = tuple(simhash(features.title_features(fingerprinter.clean_title(t))) for t in (a, b))
    assert compiled == pure
    assert (compiled[0] ^ compiled[1]).bit_count() > DEFAULT_TITLE_MAX_DISTANCE


def test_a_short_title_does_not_decide_alone(tmp_path):
    """东营女上門 / 侯马女上門: spam ads over empty bodies, each of two features. The same title twice
    with nothing else to compare is kept; with bodies that agree it is one item."""
    with _open(tmp_path) as dedup:
        fps = dedup.fingerprint("东营女上門", "")
        assert fps.title is not None and fps.title_features < rule.TITLE_ALONE_FEATURES
        verdicts = [dedup.check_and_add(t, "", url=f"u{n}") for n, t in enumerate(["东营女上門", "东营女上門"])]
        assert [v.status for v in verdicts] == ["new", "new"]
        body = "同城上门服务电话"  # too short to fingerprint: the same digest on both sides
        first = dedup.check_and_add("侯马女上門", body, url="x")
        second = dedup.check_and_add("侯马女上門", body, url="y")
    assert first.status == "new"
    assert (second.status, second.tier) == ("duplicate", "title")


def test_a_title_of_enough_features_decides_alone(tmp_path):
    with _open(tmp_path) as dedup:
        assert dedup.fingerprint(PLAIN, "").title_features >= rule.TITLE_ALONE_FEATURES
        dedup.check_and_add(PLAIN, "", url="a")
        assert dedup.check_and_add(PLAIN, "", url="b").status == "duplicate"
