"""Deduplicator: the tiered rule, verdicts, short texts, actions, TTL, dynamic threshold, options."""

from __future__ import annotations

from pathlib import Path

import pytest

from scrapy_simhash import Deduplicator, Fingerprinter
from scrapy_simhash.engine import required_params
from scrapy_simhash.index import IndexOpenError, ParameterMismatch
from tests.conftest import STORY_EN, STORY_ZH, STORY_ZH_2, repost_with_new_title, repost_with_suffix


@pytest.fixture(scope="module")
def fingerprinter() -> Fingerprinter:
    return Fingerprinter()


@pytest.fixture
def dedup(tmp_path, fingerprinter):
    with Deduplicator.open(str(tmp_path / "i.sqlite3"), fingerprinter=fingerprinter) as d:
        yield d


def test_new_then_title_tier_then_body_tier(dedup):
    first = dedup.check_and_add(STORY_ZH["title"], STORY_ZH["body"], url="http://a/1", seen_at=1000.0)
    assert first.status == "new" and first.entry_id is not None and first.is_new
    copy = repost_with_suffix(STORY_ZH)
    second = dedup.check_and_add(copy["title"], copy["body"], url="http://b/1")
    assert (second.status, second.tier) == ("duplicate", "title")
    assert second.distance <= 2
    assert second.original.url == "http://a/1" and second.original.first_seen == 1000.0
    assert second.original.title  # the normalized title of the original
    renamed = repost_with_new_title(STORY_ZH, "东部科技园区到老城一趟车四十分钟")
    third = dedup.check_and_add(renamed["title"], renamed["body"], url="http://c/1")
    assert (third.status, third.tier) == ("duplicate", "body")
    assert "body tier, distance" in third.summary() and "http://a/1" in third.summary()
    # Different stories stay new; duplicates were not added.
    assert dedup.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "new"
    assert dedup.index.count() == 2


def test_title_only_and_body_only_items(dedup):
    assert dedup.check_and_add(STORY_ZH_2["title"], None).status == "new"
    assert dedup.check_and_add(STORY_ZH_2["title"] + "（转载）", "").tier == "title"
    assert dedup.check_and_add("", STORY_EN["body"]).status == "new"
    assert dedup.check_and_add(None, STORY_EN["body"]).tier == "body"


def test_short_texts_never_match_by_themselves(dedup):
    skipped = dedup.check_and_add("", "短")
    assert skipped.status == "skipped" and skipped.reason == "no_text"
    assert "skipped" in skipped.summary()
    # Two items with the same empty title and tiny body do not make each other duplicates.
    for _ in range(3):
        assert dedup.check_and_add("快讯", "好").status == "skipped"
    assert dedup.index.count() == 0


def test_flag_action_records_and_does_not_add(tmp_path, fingerprinter):
    with Deduplicator.open(str(tmp_path / "f.sqlite3"), fingerprinter=fingerprinter, body_action="flag") as d:
        d.check_and_add(STORY_ZH["title"], STORY_ZH["body"], url="http://a/1")
        renamed = repost_with_new_title(STORY_ZH, "东部科技园区到老城一趟车四十分钟")
        verdict = d.check_and_add(renamed["title"], renamed["body"], url="http://c/1")
        assert (verdict.status, verdict.tier) == ("flagged", "body")
        assert verdict.as_dict()["original"]["url"] == "http://a/1"
        assert d.index.count() == 1
        decision = d.index.explain("http://c/1")
        assert decision is not None and decision.status == "flagged" and decision.tier == "body"


def test_ttl_expired_entries_stop_matching_and_are_purged(tmp_path, fingerprinter):
    with Deduplicator.open(str(tmp_path / "t.sqlite3"), fingerprinter=fingerprinter, ttl_days=1) as d:
        day = 86400.0
        assert d.check_and_add(STORY_ZH["title"], STORY_ZH["body"], seen_at=10 * day).status == "new"
        copy = repost_with_suffix(STORY_ZH)
        assert d.check_and_add(copy["title"], copy["body"], seen_at=10.5 * day).status == "duplicate"
        assert d.check_and_add(copy["title"], copy["body"], seen_at=12 * day).status == "new"
        assert d.purge_expired(now=12.5 * day) == 1
        assert d.index.count() == 1


def test_dynamic_threshold(tmp_path, fingerprinter):
    with Deduplicator.open(str(tmp_path / "d.sqlite3"), fingerprinter=fingerprinter, dynamic_threshold=True) as d:
        assert d.body_distance_for(50) == 5
        assert d.body_distance_for(500) == 3
        assert d.body_distance_for(5000) == 2
        assert d.index.params.body_bands == 6  # the index answers exactly up to 5 bits
    with Deduplicator.open(str(tmp_path / "s.sqlite3"), fingerprinter=fingerprinter) as d:
        assert d.body_distance_for(50) == d.body_distance_for(5000) == 3


def test_required_params():
    assert required_params(64, 2, 3).title_bands == 3
    assert required_params(64, 2, 3).body_bands == 4
    with pytest.raises(ValueError):
        required_params(64, -1, 3)


def test_thresholds_on_an_existing_index(tmp_path, fingerprinter):
    path = str(tmp_path / "p.sqlite3")
    Deduplicator.open(path, fingerprinter=fingerprinter).close()
    # Lower thresholds: the existing layout answers them exactly.
    with Deduplicator.open(path, fingerprinter=fingerprinter, title_max_distance=1, body_max_distance=2) as d:
        assert (d.title_max_distance, d.body_max_distance) == (1, 2)
    # Higher: a clear error naming the file.
    with pytest.raises(IndexOpenError, match=r"p\.sqlite3"):
        Deduplicator.open(path, fingerprinter=fingerprinter, body_max_distance=5)


def test_bad_options(tmp_path, fingerprinter):
    with pytest.raises(ValueError, match="body_action"):
        Deduplicator.open(str(tmp_path / "x.sqlite3"), fingerprinter=fingerprinter, body_action="delete")
    with pytest.raises(ValueError, match="ttl_days"):
        Deduplicator.open(str(tmp_path / "y.sqlite3"), fingerprinter=fingerprinter, ttl_days=-1)
    with pytest.raises(TypeError, match="top_k"):
        Deduplicator.open(str(tmp_path / "z.sqlite3"), fingerprinter=fingerprinter, top_k=5)


def test_options_reach_the_fingerprinter(tmp_path):
    with Deduplicator.open(str(tmp_path / "o.sqlite3"), top_k=16, min_body_chars=10, bits=128) as d:
        assert d.fingerprinter.features.top_k == 16
        assert d.fingerprinter.min_body_chars == 10
        assert d.index.params.bits == 128
        assert d.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "new"


def test_reset(tmp_path, fingerprinter):
    path = str(tmp_path / "r.sqlite3")
    with Deduplicator.open(path, fingerprinter=fingerprinter) as d:
        d.check_and_add(STORY_ZH["title"], STORY_ZH["body"])
    with Deduplicator.open(path, fingerprinter=fingerprinter, reset=True) as d:
        assert d.index.count() == 0
        assert d.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"


def test_url_with_lone_surrogates_is_stored(dedup):
    # A URL from a JSON escape like "\\ud800" cannot be stored as UTF-8: it is kept with a replacement.
    verdict = dedup.check_and_add(STORY_EN["title"], STORY_EN["body"], url="http://x.example/\ud800")
    assert verdict.status == "new"
    assert [e.url for e in dedup.index.entries()] == ["http://x.example/?"]


def test_a_threshold_the_index_cannot_answer_says_what_works(tmp_path: Path) -> None:
    """The README's old remedy (SIMHASH_RESET) kept the layout and failed with "body_bands: index 4 vs
    requested 6": without a reset the message names the settings and the reband command."""
    url = f"sqlite:///{tmp_path / 'i.sqlite3'}"
    Deduplicator.open(url).close()
    for options in ({"dynamic_threshold": True}, {"body_max_distance": 5}):
        with pytest.raises(ParameterMismatch, match=r"SIMHASH_DYNAMIC_THRESHOLD.*scrapy-simhash reband.*SIMHASH_RESET"):
            Deduplicator.open(url, **options)


@pytest.mark.parametrize(
    ("options", "recorded"),
    [({"top_k": 32}, ";top_k=32"), ({"tf": "log"}, ";tf=log"), ({"max_share": 0.2}, ";max_share=0.2"),
     ({"max_share": None}, ";max_share=None")],
)
def test_an_index_of_other_weighting_settings_is_refused(tmp_path: Path, options: dict, recorded: str) -> None:
    """top_k, tf and max_share weigh every body feature, so an index filled with other values holds
    fingerprints ours cannot be compared with: its features version records them, and an open with
    other values (either way round, or a Deduplicator built on the open index) is refused."""
    url = f"sqlite:///{tmp_path / 'i.sqlite3'}"
    with Deduplicator.open(url, **options) as d:
        assert d.index.params.features_version.endswith(recorded)
        assert d.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"
    with pytest.raises(ParameterMismatch, match=f"features_version: index '.*{recorded}'.*open it with the settings"):
        Deduplicator.open(url)
    with Deduplicator.open(url, **options) as d:
        assert d.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "duplicate"
        with pytest.raises(ParameterMismatch, match="open it with the settings it records"):
            Deduplicator(d.index, Fingerprinter())
    plain = f"sqlite:///{tmp_path / 'plain.sqlite3'}"
    Deduplicator.open(plain).close()
    with pytest.raises(ParameterMismatch, match="features_version"):
        Deduplicator.open(plain, **options)


def test_a_redis_index_of_other_weighting_settings_is_refused(url: str) -> None:
    """The same on Redis (the features version is part of the parameters every backend records)."""
    with Deduplicator.open(url, max_share=0.2) as d:
        assert d.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "new"
    with pytest.raises(ParameterMismatch, match=r"features_version: index '.*;max_share=0\.2'"):
        Deduplicator.open(url)
    with Deduplicator.open(url, max_share=0.2) as d:
        assert d.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "duplicate"


def test_default_weighting_keeps_the_plain_features_version(tmp_path: Path) -> None:
    """Defaults spelled out are the defaults: an index made before the settings were recorded opens."""
    from scrapy_simhash.index import FEATURES_VERSION

    fp = Fingerprinter(top_k=64, tf="linear", max_share=0.1)
    assert fp.features_version == FEATURES_VERSION == Fingerprinter().features_version
    with Deduplicator.open(f"sqlite:///{tmp_path / 'i.sqlite3'}", fingerprinter=fp) as d:
        assert d.index.params.features_version == FEATURES_VERSION


def test_reset_rebands_an_index_for_a_wider_threshold(tmp_path: Path) -> None:
    """SIMHASH_RESET with a threshold the index cannot answer empties the namespace and re-bands the
    file; another namespace's entries stay, and the file answers its thresholds as before."""
    url = f"sqlite:///{tmp_path / 'i.sqlite3'}"
    with Deduplicator.open(url, namespace="other") as other:
        assert other.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "new"
    with Deduplicator.open(url) as d:
        assert d.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"
    with Deduplicator.open(url, dynamic_threshold=True, reset=True) as d:
        assert d.index.params.body_bands == 6 and d.index.count() == 0
        assert d.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"
    with Deduplicator.open(url, namespace="other") as other:  # fewer bands requested: accepted
        assert other.index.count() == 1
        assert other.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "duplicate"
