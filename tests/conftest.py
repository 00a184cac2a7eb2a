"""Shared test helpers: offline crawls with real Scrapy crawlers, the corpus location, small texts."""

from __future__ import annotations

import faulthandler
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

REPO = Path(__file__).resolve().parents[1]
# ../shared/corpus next to the repository, or where SIMHASH_TEST_CORPUS says (a worktree elsewhere)
CORPUS = Path(os.environ.get("SIMHASH_TEST_CORPUS") or REPO.parent / "shared" / "corpus")

#: Seconds the interpreter may take to exit once the session is over.
EXIT_WATCHDOG = 120


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """If the interpreter has not exited :data:`EXIT_WATCHDOG` seconds after the session ended (a thread
    or process left behind that its exit waits for), print every thread's stack and exit with 1: a
    failed run that names the culprit, not one that hangs until CI's time limit."""
    faulthandler.dump_traceback_later(EXIT_WATCHDOG, exit=True, file=sys.__stderr__)


def corpus_path(relative: str) -> Path:
    """A file of ../shared/corpus, or a clear skip where the shared folder is absent."""
    path = CORPUS / relative
    if not path.exists():
        pytest.skip(f"needs the shared corpus file {path} (absent on this machine; CI always has it)")
    return path


def read_jsonl(relative: str) -> Iterator[dict[str, Any]]:
    with gzip.open(corpus_path(relative), "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


# Three short stories written for these tests (no third-party text), Chinese and English.
STORY_ZH = {
    "title": "江城地铁十二号线今日开通 全长三十八公里设站二十五座",
    "body": (
        "<div class='article'><p>本报讯 2023年6月18日上午9时，江城地铁十二号线正式开通运营。"
        "该线路全长38公里，共设车站25座，其中换乘站9座，串联起城市东部的科技园区和西部的老城片区。</p>"
        "<p>据江城轨道交通集团介绍，十二号线采用全自动无人驾驶系统，最高运行速度每小时100公里，"
        "高峰时段行车间隔缩短至2分30秒。开通初期每日运营时间为早6时至晚11时。</p>"
        "<p>沿线居民表示，过去从东湖新城到老城区需要换乘两次、耗时一个多小时，如今一趟车40分钟即可到达。"
        "交通部门预计，十二号线日均客流将在开通一年内达到45万人次。</p></div>"
    ),
}
STORY_ZH_2 = {
    "title": "南山茶园春茶开采 茶农采用无人机巡园防治病虫害",
    "body": (
        "<p>清明前后，南山茶园迎来春茶开采季。今年当地茶农首次大面积使用无人机巡园，"
        "通过多光谱相机识别病虫害早期症状，农药使用量比去年减少三成。</p>"
        "<p>茶园负责人说，受早春低温影响，今年头茶的采摘比往年推迟了一周，但芽叶更加肥厚，"
        "预计明前茶产量约为1.2万斤，价格与去年基本持平。</p>"
        "<p>县农业农村局表示，将继续推广智慧茶园建设，计划三年内覆盖全县八成以上的茶园面积。</p>"
    ),
}
STORY_EN = {
    "title": "Harbour city opens tidal energy plant, the first of its kind in the region",
    "body": (
        "<p>The harbour city of Westmouth switched on a tidal energy plant on Monday, the first in the "
        "region to feed the grid from the twice-daily rise and fall of the sea.</p>"
        "<p>The plant's 14 underwater turbines can produce up to 32 megawatts, enough for about 20,000 "
        "homes, according to the operator. Construction took three years and cost 180 million pounds.</p>"
        "<p>Local fishermen had opposed the project at first, fearing for fish stocks, but the operator "
        "agreed to monitor marine life for ten years and to pause the turbines during spawning season.</p>"
    ),
}


def repost_with_suffix(story: dict[str, str], suffix: str = " - 网易新闻") -> dict[str, str]:
    """Same story, another portal: title suffix, source line, another date format, an ad in the body."""
    body = story["body"].replace("2023年6月18日", "2023-06-18")
    body = "<div class='wrap'><p>来源：新华社</p>" + body + "<div class='ad'>广告</div></div>"
    return {"title": story["title"] + suffix, "body": body}


def repost_with_new_title(story: dict[str, str], title: str) -> dict[str, str]:
    """Same body under a rewritten headline: only the body tier can catch it."""
    return {"title": title, "body": "<p>责任编辑：王明</p>" + story["body"]}


class ItemsSpider(Spider):
    """Yields the items it is given from one offline ``data:`` response."""

    name = "items"
    start_urls = ["data:,"]

    def __init__(self, items: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.items_to_yield = list(items or [])
        self.collected: list[Any] = []

    def parse(self, response: Any) -> Iterator[Any]:
        # plain dicts as copies: the fields the pipeline sets stay out of the tests' shared constants
        yield from (dict(i) if type(i) is dict else i for i in self.items_to_yield)


class CollectorPipeline:
    """Runs after the simhash pipeline and records what reached it."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> CollectorPipeline:
        return cls(crawler)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        self.crawler.spider.collected.append(item)
        return item


#: Fingerprint worker processes of the suite's crawls: none (``SIMHASH_WORKERS = 0``, on a thread of
#: the crawl process), as each crawl would otherwise spawn and warm one (~1 s of CPU);
#: ``tests/test_workers.py`` crawls with the pool. ``SIMHASH_TEST_WORKERS=1`` runs the suite with it.
TEST_WORKERS = int(os.environ.get("SIMHASH_TEST_WORKERS", "0"))


def crawl_settings(index: Path | str, **extra: Any) -> dict[str, Any]:
    return {
        "ADDONS": {"scrapy_simhash.Addon": 300},
        "ITEM_PIPELINES": {CollectorPipeline: 900},
        "SIMHASH_INDEX_URL": f"sqlite:///{index}",
        "SIMHASH_WORKERS": TEST_WORKERS,
        "LOG_LEVEL": "INFO",
        **extra,
    }


async def run_crawl(settings: dict[str, Any], items: list[Any], spidercls: type[Spider] = ItemsSpider,
                    **spider_kwargs: Any) -> Any:
    """One real crawl in this process; returns the crawler (stats, spider.collected)."""
    crawler = get_crawler(spidercls, settings)
    await crawler.crawl(items=items, **spider_kwargs)
    return crawler


async def refused_crawl(settings: dict[str, Any], items: list[Any], spidercls: type[Spider] = ItemsSpider) -> str:
    """A crawl whose index cannot be opened: refused while the crawler is built (so ``scrapy crawl``
    exits 1), before any item; returns the refusal (``simhash_index_error: …``)."""
    from scrapy_simhash.scrapy.refusal import IndexCannotOpen

    crawler = get_crawler(spidercls, settings)
    with pytest.raises(IndexCannotOpen) as excinfo:
        await crawler.crawl(items=items)
    assert crawler.spider.collected == []
    reason = str(excinfo.value)
    assert reason.startswith("simhash_index_error: "), reason
    return reason


@pytest.fixture
def url() -> Iterator[str]:
    """A fresh prefix on the shared test server; its keys are deleted afterwards."""
    from tests.test_index_protocol import raw_redis, redis_server_url, with_prefix

    server = redis_server_url()
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    yield with_prefix(server, prefix)
    client = raw_redis(server)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.unlink(*keys)
    client.close()


def kill_mid_reband(path: Path, script: str) -> None:
    """Run a re-banding or converting ``script`` on ``path`` (it prints a count while its transaction
    is open) and SIGKILL it then."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # rows are being written: the transaction is open
    assert line.strip().isdigit(), line
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
