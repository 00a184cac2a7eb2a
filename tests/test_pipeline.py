"""The pipeline and add-on in real offline crawls: tiers, flags, stats, logs, persistence, settings."""

from __future__ import annotations

import dataclasses
import logging
import re
import sqlite3

import attrs
import pytest
import pytest_twisted
import scrapy
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.logformatter import LogFormatter
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_simhash import Addon, NearDuplicate, SimhashPipeline
from scrapy_simhash.scrapy.delivery import StoredMark
from tests.conftest import (
    REPO,
    STORY_EN,
    STORY_ZH,
    STORY_ZH_2,
    CollectorPipeline,
    ItemsSpider,
    crawl_settings,
    refused_crawl,
    repost_with_new_title,
    repost_with_suffix,
    run_crawl,
)


def with_url(item: dict, url: str) -> dict:
    return {**item, "url": url}


ORIGINALS = [
    with_url(STORY_ZH, "http://a.example/zh1"),
    with_url(STORY_ZH_2, "http://a.example/zh2"),
    with_url(STORY_EN, "http://a.example/en1"),
]
TITLE_REPOST = with_url(repost_with_suffix(STORY_ZH), "http://b.example/zh1-copy")
BODY_REPOST = with_url(
    repost_with_new_title(STORY_ZH, "东部科技园区到老城一趟车四十分钟：十二号线来了"), "http://c.example/zh1-new-title"
)


def stat(crawler, key):
    return crawler.stats.get_value(key)


@pytest_twisted.ensureDeferred
async def test_title_and_body_tiers_drop_reposts(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), [*ORIGINALS, TITLE_REPOST, BODY_REPOST])
    urls = [item["url"] for item in crawler.spider.collected]
    assert urls == [o["url"] for o in ORIGINALS]
    assert stat(crawler, "simhash/new") == 3
    assert stat(crawler, "simhash/dropped/title") == 1
    assert stat(crawler, "simhash/dropped/body") == 1
    assert stat(crawler, "simhash/initial") == 0
    assert stat(crawler, "item_dropped_reasons_count/NearDuplicate") == 2
    # The drop log says tier, distance and the original, at INFO (not WARNING).
    drops = [r for r in caplog.records if "near-duplicate" in r.getMessage()]
    assert len(drops) == 2
    assert all(r.levelno == logging.INFO for r in drops)
    messages = " ".join(r.getMessage() for r in drops)
    assert "title tier, distance" in messages and "body tier, distance" in messages
    assert "original http://a.example/zh1" in messages
    # One INFO line at open with location, size and parameters.
    opening = [r.getMessage() for r in caplog.records if r.getMessage().startswith("scrapy-simhash: index")]
    assert len(opening) == 1
    assert "i.sqlite3" in opening[0] and "0 entries" in opening[0] and "title <= 2" in opening[0]


@pytest_twisted.ensureDeferred
async def test_body_flag_passes_item_with_verdict(tmp_path):
    class NewsItem(scrapy.Item):  # does not declare the flag field
        title = scrapy.Field()
        body = scrapy.Field()
        url = scrapy.Field()

    settings = crawl_settings(tmp_path / "i.sqlite3", SIMHASH_BODY_ACTION="flag")
    crawler = await run_crawl(settings, [NewsItem(**ORIGINALS[0]), NewsItem(**BODY_REPOST)])
    assert len(crawler.spider.collected) == 2
    flagged = crawler.spider.collected[1]
    assert isinstance(flagged, NewsItem)
    verdict = flagged["simhash"]
    assert verdict["status"] == "flagged" and verdict["tier"] == "body"
    assert verdict["original"]["url"] == "http://a.example/zh1"
    assert 0 <= verdict["distance"] <= 3
    assert stat(crawler, "simhash/flagged") == 1
    assert stat(crawler, "simhash/dropped/body") == 0
    # Flagged items are not added: the index still holds only the original.
    assert stat(crawler, "simhash/final") == 1


@pytest_twisted.ensureDeferred
async def test_second_crawl_drops_everything_and_reset_starts_fresh(tmp_path):
    index = tmp_path / "i.sqlite3"
    first = await run_crawl(crawl_settings(index), ORIGINALS)
    assert stat(first, "simhash/new") == 3
    second = await run_crawl(crawl_settings(index), ORIGINALS)
    assert second.spider.collected == []
    assert stat(second, "simhash/initial") == 3
    assert stat(second, "simhash/dropped/title") == 3
    # -a simhash_reset=0 must not reset (deltafetch #30) ...
    third = await run_crawl(crawl_settings(index), ORIGINALS, simhash_reset="0")
    assert third.spider.collected == []
    # ... while SIMHASH_RESET / -a simhash_reset=1 does.
    fourth = await run_crawl(crawl_settings(index, SIMHASH_RESET=True), ORIGINALS)
    assert len(fourth.spider.collected) == 3
    fifth = await run_crawl(crawl_settings(index), ORIGINALS, simhash_reset="1")
    assert len(fifth.spider.collected) == 3


@pytest_twisted.ensureDeferred
async def test_two_spiders_share_the_project_index(tmp_path):
    class PortalA(ItemsSpider):
        name = "portal_a"

    class PortalB(ItemsSpider):
        name = "portal_b"

    index = tmp_path / "shared.sqlite3"
    a = await run_crawl(crawl_settings(index), ORIGINALS[:1], spidercls=PortalA)
    b = await run_crawl(crawl_settings(index), [TITLE_REPOST, ORIGINALS[1]], spidercls=PortalB)
    assert len(a.spider.collected) == 1
    assert [i["url"] for i in b.spider.collected] == [ORIGINALS[1]["url"]]
    # A namespace isolates when wanted.
    c = await run_crawl(crawl_settings(index, SIMHASH_NAMESPACE="other"), [TITLE_REPOST], spidercls=PortalB)
    assert len(c.spider.collected) == 1


@pytest_twisted.ensureDeferred
async def test_default_index_lives_in_project_data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = crawl_settings("unused")
    del settings["SIMHASH_INDEX_URL"]
    crawler = await run_crawl(settings, ORIGINALS[:1])
    location = stat(crawler, "simhash/index")
    assert (tmp_path / ".scrapy" / "simhash" / "index.sqlite3").exists()
    assert location.endswith("index.sqlite3")


def test_disabled_raises_not_configured():
    crawler = get_crawler(ItemsSpider, {"SIMHASH_ENABLED": False})
    with pytest.raises(NotConfigured):
        SimhashPipeline.from_crawler(crawler)


@pytest_twisted.ensureDeferred
async def test_disabled_crawl_passes_everything(tmp_path):
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3", SIMHASH_ENABLED=False), ORIGINALS * 2)
    assert len(crawler.spider.collected) == 6
    assert not (tmp_path / "i.sqlite3").exists()
    # Per spider, too: -a simhash_enabled=false
    crawler = await run_crawl(crawl_settings(tmp_path / "j.sqlite3"), ORIGINALS * 2, simhash_enabled="false")
    assert len(crawler.spider.collected) == 6


@dataclasses.dataclass
class DataclassItem:
    title: str | None = None
    body: object = None
    url: str | None = None


@attrs.define
class AttrsItem:
    title: str | None = None
    body: object = None
    url: str | None = None


class ScrapyItem(scrapy.Item):
    title = scrapy.Field()
    content = scrapy.Field()  # found through the candidate body fields
    url = scrapy.Field()


@pytest_twisted.ensureDeferred
async def test_every_item_kind(tmp_path):
    items = [
        dict(ORIGINALS[0]),
        ScrapyItem(title=TITLE_REPOST["title"], content=TITLE_REPOST["body"], url=TITLE_REPOST["url"]),
        DataclassItem(**ORIGINALS[1]),
        AttrsItem(**repost_with_suffix(STORY_ZH_2, "_凤凰网"), url="http://d.example/zh2"),
        AttrsItem(**ORIGINALS[2]),
    ]
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), items)
    kept = crawler.spider.collected
    assert [type(i) for i in kept] == [dict, DataclassItem, AttrsItem]
    assert stat(crawler, "simhash/dropped/title") == 2


@pytest_twisted.ensureDeferred
async def test_bad_fields_never_crash_the_crawl(tmp_path):
    items = [
        {"title": None, "body": None},
        {"url": "http://x.example/none"},
        {"title": 12345, "body": 6.5},
        {"title": ["a", ["nested", ["deep"]]], "body": {"not": "text"}},
        {"title": b"\xff\xfe\x00bad", "body": b"\xc3\x28 invalid utf-8 \xa0\xa1"},
        {"title": "\ud800 lone surrogate", "body": "\udfff" * 50},
        {"title": "!!!???", "body": "。。。，，，！！！" * 20},
        {"title": STORY_EN["title"], "body": ["<p>paragraph one of a list</p>", "paragraph two", None]},
        dict(ORIGINALS[0]),
        {"title": "x" * 10, "body": "<p>" + "很长的正文。" * 200_000 + "</p>"},
    ]
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), items)
    assert len(crawler.spider.collected) == len(items)  # nothing dropped, nothing lost
    counted = sum(
        stat(crawler, k) or 0
        for k in ("simhash/new", "simhash/skipped/no_text", "simhash/skipped/bad_input", "simhash/dropped/title",
                  "simhash/dropped/body")
    )
    assert counted == len(items)
    assert stat(crawler, "simhash/skipped/no_text") >= 3
    assert stat(crawler, "log_count/ERROR") is None
    assert stat(crawler, "finish_reason") == "finished"


@pytest_twisted.ensureDeferred
async def test_per_item_opt_out(tmp_path):
    items = [dict(ORIGINALS[0]), {**TITLE_REPOST, "simhash_skip": True}]
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), items)
    assert len(crawler.spider.collected) == 2
    assert stat(crawler, "simhash/skipped/opt_out") == 1


@pytest_twisted.ensureDeferred
async def test_index_that_cannot_be_opened_stops_the_spider(tmp_path, caplog):
    bad = tmp_path / "not-an-index.sqlite3"
    bad.write_bytes(b"this is not a database" * 100)
    await refused_crawl(crawl_settings(bad), ORIGINALS)
    assert "not-an-index.sqlite3" in caplog.text
    assert bad.read_bytes() == b"this is not a database" * 100  # untouched


@pytest_twisted.ensureDeferred
async def test_drop_log_level_setting(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    settings = crawl_settings(tmp_path / "i.sqlite3", SIMHASH_DROP_LOG_LEVEL="DEBUG")
    await run_crawl(settings, [ORIGINALS[0], TITLE_REPOST])
    drops = [r for r in caplog.records if "near-duplicate" in r.getMessage()]
    assert [r.levelno for r in drops] == [logging.DEBUG]


@pytest_twisted.ensureDeferred
async def test_new_items_are_committed_before_they_are_passed_on(tmp_path):
    index = tmp_path / "i.sqlite3"

    class Checker:
        """A later pipeline that reads the index file with its own connection."""

        seen: list[int] = []

        @classmethod
        def from_crawler(cls, crawler):
            return cls()

        def process_item(self, item, spider=None):
            with sqlite3.connect(index) as conn:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                table = "entry" if "entry" in tables else "entries"
                Checker.seen.append(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
            return item

    settings = crawl_settings(index, ITEM_PIPELINES={Checker: 800})
    await run_crawl(settings, ORIGINALS)
    # Items are processed concurrently, so a later one may be committed before an earlier one reaches
    # the next pipeline; what must hold: the i-th item passed on finds at least i entries committed.
    assert len(Checker.seen) == 3
    assert all(seen >= i for i, seen in enumerate(Checker.seen, start=1)), Checker.seen


def test_addon_adds_pipeline_once():
    settings = Settings({"ITEM_PIPELINES": {"tests.conftest.CollectorPipeline": 300}})
    Addon().update_settings(settings)
    Addon().update_settings(settings)
    pipelines = settings.getdict("ITEM_PIPELINES")
    ours = [k for k in pipelines if k in (SimhashPipeline, "scrapy_simhash.SimhashPipeline")]
    assert len(ours) == 1
    assert pipelines[ours[0]] < pipelines["tests.conftest.CollectorPipeline"]
    # Already listed by its import path: left alone.
    settings = Settings({"ITEM_PIPELINES": {"scrapy_simhash.SimhashPipeline": 100}})
    Addon().update_settings(settings)
    pipelines = settings.getdict("ITEM_PIPELINES")
    assert [k for k in pipelines if k in (SimhashPipeline, "scrapy_simhash.SimhashPipeline")] == [
        "scrapy_simhash.SimhashPipeline"]
    assert max(pipelines.values()) == pipelines[StoredMark]  # the delivery mark comes last


def test_near_duplicate_is_drop_item():
    from scrapy.exceptions import DropItem

    assert issubclass(NearDuplicate, DropItem)


# -- what a user sees in the log ----------------------------------------------------------------


class CountingFormatter(LogFormatter):
    """A project's own LOG_FORMATTER: the plugin must not replace it."""

    calls = 0

    def dropped(self, item, exception, response, spider):
        CountingFormatter.calls += 1
        return super().dropped(item, exception, response, spider)


class OtherDropper:
    """A project pipeline that drops for its own reasons: its drops keep Scrapy's full message."""

    def process_item(self, item, spider=None):
        if item.get("other_drop"):
            raise DropItem("not wanted")
        return item


@pytest_twisted.ensureDeferred
async def test_each_drop_is_one_short_line_and_other_drops_are_untouched(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    reposts = [TITLE_REPOST, BODY_REPOST, with_url(repost_with_suffix(STORY_ZH, " _新浪网"), "http://e.example/3")]
    settings = crawl_settings(tmp_path / "i.sqlite3", LOG_FORMATTER=CountingFormatter,
                              ITEM_PIPELINES={CollectorPipeline: 900, OtherDropper: 100})
    CountingFormatter.calls = 0
    other = {"title": "a project drop", "body": "x", "other_drop": True}
    crawler = await run_crawl(settings, [*ORIGINALS, *reposts, other])
    drops = stat(crawler, "simhash/dropped/title") + stat(crawler, "simhash/dropped/body")
    assert drops == len(reposts)
    ours = [r for r in caplog.records if r.name == "scrapy.core.scraper" and "near-duplicate" in r.getMessage()]
    assert len(ours) == drops
    for record, repost in zip(ours, reposts, strict=True):
        message = record.getMessage()
        assert "\n" not in message and len(message) < 300, message  # no item dump
        assert message.startswith(f"Dropped: near-duplicate {repost['url']}: ")
        assert "tier, distance" in message and "original http://a.example/zh1" in message
        assert repost["body"][:40] not in caplog.text  # the body is nowhere in the log
    theirs = [r.getMessage() for r in caplog.records if "not wanted" in r.getMessage()]
    assert len(theirs) == 1 and "a project drop" in theirs[0]  # Scrapy's message, item included
    assert CountingFormatter.calls == drops + 1  # the project's formatter still formats every drop


@pytest_twisted.ensureDeferred
async def test_flagged_items_get_a_line_and_an_iso_first_seen(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    settings = crawl_settings(tmp_path / "i.sqlite3", SIMHASH_TITLE_ACTION="flag")
    crawler = await run_crawl(settings, [ORIGINALS[0], TITLE_REPOST])
    flagged = crawler.spider.collected[1]["simhash"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", flagged["original"]["first_seen"]), flagged
    lines = [r for r in caplog.records if r.getMessage().startswith("Flagged: near-duplicate")]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert TITLE_REPOST["url"] in lines[0].getMessage() and "original http://a.example/zh1" in lines[0].getMessage()


@pytest_twisted.ensureDeferred
async def test_documented_stats_are_zero_from_the_start(tmp_path):
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), [ORIGINALS[0]])
    quickstart = (REPO / "docs" / "quickstart.md").read_text("utf-8")
    documented = re.findall(r"^'(simhash/[a-z_/]+)': \d+", quickstart, re.M)
    assert len(documented) > 10
    missing = [key for key in documented if stat(crawler, key) is None]
    assert not missing, f"stats documented in docs/quickstart.md but absent after a crawl: {missing}"


@pytest_twisted.ensureDeferred
async def test_fields_that_never_match_warn_once_with_what_the_item_has(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    settings = crawl_settings(tmp_path / "i.sqlite3", SIMHASH_TITLE_FIELD="headline", SIMHASH_BODY_FIELD="text")
    crawler = await run_crawl(settings, ORIGINALS)
    assert stat(crawler, "simhash/skipped/no_text") == len(ORIGINALS)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "none of the fields" in
                r.getMessage()]
    assert len(warnings) == 2, warnings  # once per setting, not once per item
    assert "SIMHASH_TITLE_FIELD" in warnings[0] and "headline" in warnings[0]
    assert "SIMHASH_BODY_FIELD" in warnings[1] and "text" in warnings[1]
    assert all("title, body, url" in w for w in warnings)  # the fields the item has


@pytest_twisted.ensureDeferred
async def test_misspelled_setting_warns_with_the_closest_name(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    await run_crawl(crawl_settings(tmp_path / "i.sqlite3", SIMHASH_TITLE_MAX_DISTANSE=5), ORIGINALS[:1])
    [warning] = [r.getMessage() for r in caplog.records if "SIMHASH_TITLE_MAX_DISTANSE" in r.getMessage()]
    assert "did you mean SIMHASH_TITLE_MAX_DISTANCE?" in warning


@pytest_twisted.ensureDeferred
async def test_a_new_index_directory_is_said_at_info(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    index = tmp_path / "typo-dir" / "deeper" / "i.sqlite3"
    await run_crawl(crawl_settings(index), ORIGINALS[:1])
    assert index.exists()
    [line] = [r for r in caplog.records if "did not exist" in r.getMessage()]
    assert line.levelno == logging.INFO and str(index.parent) in line.getMessage()
    caplog.clear()
    await run_crawl(crawl_settings(index), ORIGINALS[:1])  # it exists now: nothing to say
    assert "did not exist" not in caplog.text


def raising_paragraphs():
    yield "<p>a first paragraph that reads fine</p>"
    raise RuntimeError("the generator broke")


@pytest_twisted.ensureDeferred
async def test_unreadable_fields_are_counted_skips_naming_field_and_url(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    items = [
        {"title": STORY_EN["title"], "body": raising_paragraphs(), "url": "http://g.example/gen"},
        {"title": {"a": "dict"}, "body": STORY_ZH["body"], "url": "http://g.example/dict-title"},
        dict(ORIGINALS[0]),
    ]
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), items)
    assert len(crawler.spider.collected) == len(items)
    assert stat(crawler, "simhash/skipped/bad_input") == 2
    assert stat(crawler, "simhash/new") == 1
    assert stat(crawler, "log_count/ERROR") is None and stat(crawler, "finish_reason") == "finished"
    warnings = [r.getMessage() for r in caplog.records if "cannot read" in r.getMessage()]
    assert any("'body'" in w and "http://g.example/gen" in w and "RuntimeError" in w for w in warnings), warnings
    assert any("'title'" in w and "http://g.example/dict-title" in w for w in warnings), warnings
