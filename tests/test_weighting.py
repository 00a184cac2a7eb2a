"""No single word may decide a fingerprint: the share cap (on by default, 0.1) and sublinear tf (an option).

With linear term frequency a word repeated twenty times carries a fifth of an article's weight
(issue 15): 疫苗 in three different vaccine-scandal articles of the NewsSpider crawl, "vr" in a
Youku and a Meizu article. Their bodies share almost no text, yet land within the body threshold.
"""

from __future__ import annotations

import math
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash import Deduplicator
from scrapy_simhash.engine import DEFAULT_BODY_MAX_DISTANCE
from scrapy_simhash.fingerprint.features import TITLE_MAX_SHARE, FeatureExtractor, cap_shares
from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter

from .conftest import read_jsonl

#: The weighting the default settings use (docs/decisions/0503-max-share.md).
RECOMMENDED = {"max_share": 0.1}

VACCINE = ("媒体:山东问题疫苗案", "中科院院士:不能因不法分子行为怀疑国产疫苗", "疾控中心:疫苗事件是犯罪")
VR = ("解读优酷的VR战略", "魅族也要推出VR")


@pytest.fixture(scope="module")
def newsspider() -> dict[str, dict]:
    """The NewsSpider articles whose titles start with one of the prefixes above (first of each)."""
    found: dict[str, dict] = {}
    for doc in read_jsonl("zh/newsspider-2016.jsonl.gz"):
        for prefix in (*VACCINE, *VR):
            if doc["title"].startswith(prefix) and prefix not in found:
                found[prefix] = doc
    assert len(found) == len(VACCINE) + len(VR), f"articles missing from the corpus: {set(VACCINE + VR) - set(found)}"
    return found


def _pairs(docs: dict[str, dict]) -> list[tuple[dict, dict]]:
    return [(docs[a], docs[b]) for a, b in combinations(VACCINE, 2)] + [(docs[VR[0]], docs[VR[1]])]


def _distance(fp: Fingerprinter, a: dict, b: dict) -> int:
    x, y = fp.body(a["body"]), fp.body(b["body"])
    assert x is not None and y is not None
    return (x ^ y).bit_count()


def _top_share(fp: Fingerprinter, doc: dict) -> float:
    weights = fp.features.body_features(fp.clean_body(doc["body"]))
    return max(weights.values()) / sum(weights.values())


def test_uncapped_weights_let_one_word_decide(newsspider):
    """The previous default (linear tf, no cap): one word holds ≥ 15 % of each body and the
    different stories land within the body threshold (except one vaccine pair at 4 bits)."""
    fp = Fingerprinter(max_share=None)
    assert all(_top_share(fp, doc) >= 0.15 for doc in newsspider.values())
    distances = [_distance(fp, a, b) for a, b in _pairs(newsspider)]
    assert sum(d <= DEFAULT_BODY_MAX_DISTANCE for d in distances) >= 3, distances
    assert min(distances) <= DEFAULT_BODY_MAX_DISTANCE


@pytest.mark.parametrize("options", [{}, RECOMMENDED, {"tf": "log"}, {"tf": "sqrt"}], ids=str)
def test_bounded_weights_keep_the_stories_apart(newsspider, options):
    fp = Fingerprinter(**options)
    for a, b in _pairs(newsspider):
        assert _distance(fp, a, b) > DEFAULT_BODY_MAX_DISTANCE, (a["title"], b["title"])


def test_the_option_reaches_the_rule(newsspider, tmp_path):
    """Through ``Deduplicator.open`` (as the pipeline, the command line and the benchmarks open
    it): the vaccine articles, in crawl order, are one story without the cap and three by default."""
    docs = sorted((newsspider[p] for p in VACCINE), key=lambda d: d["id"])  # file order
    verdicts = {}
    for name, options in (("uncapped", {"max_share": None}), ("default", {})):
        with Deduplicator.open(f"sqlite:///{tmp_path / name}.sqlite3", **options) as dedup:
            verdicts[name] = [dedup.check_and_add(d["title"], d["body"], url=d["url"]) for d in docs]
    assert [v.status for v in verdicts["uncapped"]].count("duplicate") >= 1
    assert any(v.tier == "body" for v in verdicts["uncapped"])
    assert [v.status for v in verdicts["default"]] == ["new"] * 3


def test_default_is_linear_tf_with_the_recommended_cap():
    assert FeatureExtractor().tf == "linear" and FeatureExtractor().max_share == RECOMMENDED["max_share"]
    fx = FeatureExtractor(max_share=None)
    text = "疫苗 " * 20 + "山东 问题 案件 嫌疑人 失联 警方 调查"
    once = fx.weights("疫苗")["疫苗"]
    assert fx.body_features(text)["疫苗"] == pytest.approx(20 * once)


@pytest.mark.parametrize(("mode", "tf"), [("log", 1 + math.log(20)), ("sqrt", math.sqrt(20))])
def test_sublinear_tf(mode, tf):
    fx = FeatureExtractor(tf=mode)
    once = fx.weights("疫苗")["疫苗"]
    assert fx.weights("疫苗 " * 20)["疫苗"] == pytest.approx(tf * once)


def test_max_share_applies_to_bodies_titles_have_their_own_cap():
    fx = FeatureExtractor(max_share=0.05)
    text = "疫苗 " * 20 + " ".join(f"词{i}" for i in range(40))
    body = fx.body_features(text)
    assert max(body.values()) <= 0.05 * sum(body.values()) * (1 + 1e-9)
    assert fx.title_features("疫苗 疫苗 疫苗 山东") == FeatureExtractor().title_features("疫苗 疫苗 疫苗 山东")
    title = FeatureExtractor().title_features("疫苗 疫苗 疫苗 山东 " + " ".join(f"词{i}" for i in range(10)))
    assert max(title.values()) <= TITLE_MAX_SHARE * sum(title.values()) * (1 + 1e-9)
    assert len(set(FeatureExtractor().title_features("疫苗 疫苗 疫苗 山东").values())) == 1  # too few words: all equal


@pytest.mark.parametrize("bad", [{"tf": "cubic"}, {"max_share": 0}, {"max_share": 1.5}])
def test_bad_options(bad):
    with pytest.raises(ValueError):
        FeatureExtractor(**bad)


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.floats(0.01, 1000), min_size=1, max_size=80),
       st.sampled_from([0.02, 0.05, 0.1, 0.3, 1.0]))
def test_cap_shares(weights, share):
    capped = cap_shares(weights, share)
    total = sum(capped.values())
    assert capped.keys() == weights.keys()
    assert all(capped[f] <= weights[f] for f in weights)  # only lowered
    if len(weights) * share >= 1:
        assert max(capped.values()) <= share * total * (1 + 1e-9)
    else:  # too few features for the cap: all weigh the same
        assert len(set(capped.values())) == 1
    # The order of the weights is kept (ties may form at the cap, never inversions).
    for f, g in combinations(weights, 2):
        if weights[f] < weights[g]:
            assert capped[f] <= capped[g]
    if max(weights.values()) <= share * sum(weights.values()):
        assert capped == weights  # nothing above the cap: untouched
