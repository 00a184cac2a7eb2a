"""What a crawl leaves to watch: decision latency and dedup rate as stats, and the index's history of
runs (both backends: bounded, newest first, kept by a reset, read without Scrapy, a killed crawl's
start kept), shown by ``scrapy-simhash runs``."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_simhash.index import SimhashIndexError, open_index
from scrapy_simhash.index.runs import RUNS_KEPT, Run, new_run_id
from scrapy_simhash.scrapy.runs import Latency
from tests.conftest import REPO, STORY_EN, STORY_ZH, STORY_ZH_2, crawl_settings, repost_with_suffix, run_crawl
from tests.test_index_protocol import Backend, RedisBackend, make_backend

ITEMS = [{**STORY_ZH, "url": "http://a.example/1"}, {**STORY_ZH_2, "url": "http://a.example/2"},
         {**STORY_EN, "url": "http://a.example/3"}, {**repost_with_suffix(STORY_ZH), "url": "http://b.example/1"}]


# -- the latency estimator --------------------------------------------------------------------------


def test_latency_quantiles_are_within_one_percent_in_bounded_memory() -> None:
    rng = random.Random(37)
    values = [rng.lognormvariate(3, 1.5) for _ in range(50_000)] + [0.0, 1e-6, 5e6]
    latency = Latency()
    for v in values:
        latency.add(v)
    ordered = sorted(values)
    for q in (0.5, 0.95, 0.99):
        exact = ordered[math.ceil(q * len(ordered)) - 1]
        assert latency.quantile(q) == pytest.approx(exact, rel=0.0101), q
    assert latency.max_ms == 5e6 and latency.n == len(values)
    assert len(latency.counts) < 1300  # buckets, not values: 0.001 ms to over an hour
    assert Latency().quantile(0.5) is None and Latency().summary() == {}


# -- the history, on both backends ---------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    b = make_backend(request.param, tmp_path)
    yield b
    b.cleanup()



def test_runs_are_kept_newest_first_bounded_replaced_by_id_and_survive_a_reset(store: Backend) -> None:
    with store.open() as ix:
        assert ix.runs() == []
        started = [Run(id=new_run_id(1_700_000_000 + i), started=1_700_000_000 + i, spider="news")
                   for i in range(RUNS_KEPT + 5)]
        for run in started:
            ix.record_run(run)
        ended = started[-1].ending({"new": 8, "title": 5, "body": 4, "items": 17},
                                   {"p50": 1.5, "p95": 9.0, "max": 12}, at=1_700_000_100)
        ix.record_run(ended)  # replaces its start
        runs = ix.runs()
        assert [r.id for r in runs] == [r.id for r in reversed(started)][:RUNS_KEPT]  # the oldest five went
        assert runs[0] == ended and runs[0].dedup_rate == pytest.approx(9 / 17)
        assert runs[0].counts["items"] == 17 and runs[0].latency_ms == {"p50": 1.5, "p95": 9.0, "max": 12.0}
        assert all(r.ended is None and r.dedup_rate is None for r in runs[1:])
        assert [r.id for r in ix.runs(3)] == [r.id for r in runs[:3]]
        ix.reset()  # the namespace's crawls are not its stories
        assert ix.runs() == runs
    with store.open(readonly=True) as ro:  # read without Scrapy, read-only
        assert ro.runs(1) == [ended]
    with store.open(namespace="other") as other:
        assert other.runs() == []


def _damage(store: Backend, record: str) -> None:
    if isinstance(store, RedisBackend):
        key = f"{store.prefix('index')}:{{default}}:runs"
        store.raw.hset(key, "bad", record)
    else:
        conn = sqlite3.connect(store.location())
        conn.execute("INSERT INTO run(ns, id, started, record) VALUES (1, 'bad', 5, ?)", (record,))
        conn.commit()
        conn.close()


@pytest.mark.parametrize("record", ["not json", "[1]", json.dumps({"id": "bad", "started": "noon"}),
                                    json.dumps({"id": "bad", "started": 5, "counts": {"new": -1}}),
                                    json.dumps({"id": "bad", "started": 5, "latency_ms": {"p95": "slow"}})])
def test_a_damaged_run_record_is_named_and_left_out_or_refused(store: Backend, record: str) -> None:
    with store.open() as ix:
        good = Run(id=new_run_id(), started=10.0, spider="news")
        ix.record_run(good)
        _damage(store, record)
        problems: list[str] = []
        assert ix.runs(damaged=problems.append) == [good]
        assert len(problems) == 1 and "run" in problems[0], problems
        with pytest.raises(SimhashIndexError, match="damaged row"):
            ix.runs()


# -- crawls ----------------------------------------------------------------------------------------


@pytest.fixture
def index_url(store: Backend) -> str:
    return store.url()


@pytest_twisted.ensureDeferred
async def test_a_crawl_sets_latency_and_rate_stats_and_records_its_run(tmp_path: Path, index_url: str) -> None:
    settings = crawl_settings(tmp_path / "unused.sqlite3", SIMHASH_INDEX_URL=index_url, SIMHASH_REDIS_UNSAFE="warn")
    first = await run_crawl(settings, ITEMS)
    stats = first.stats.get_stats()
    assert stats["simhash/latency/items"] == 4
    assert 0 < stats["simhash/latency/p50_ms"] <= stats["simhash/latency/p95_ms"] <= stats["simhash/latency/max_ms"]
    assert stats["simhash/dedup_rate"] == 0.25 and stats["simhash/history/runs"] == 0
    second = await run_crawl({**settings, "SIMHASH_RESET": True}, ITEMS[:2] + ITEMS[:2])
    stats = second.stats.get_stats()
    assert stats["simhash/dedup_rate"] == 0.5
    assert (stats["simhash/history/runs"], stats["simhash/history/dedup_rate_median"]) == (1, 0.25)
    with open_index(index_url, readonly=True) as ix:
        runs = ix.runs()
    assert [r.id for r in runs] == [second.stats.get_value("simhash/run"), first.stats.get_value("simhash/run")]
    assert runs[1].counts == {"items": 4, "new": 3, "title": 1, "body": 0, "sentence": 0, "flagged": 0,
                              "skipped": 0, "index_errors": 0, "unchecked": 0, "workers_died": 0}
    assert runs[1].latency_ms["max"] == pytest.approx(first.stats.get_value("simhash/latency/max_ms"), abs=1e-3)
    assert all(r.spider == "items" and r.ended is not None and r.started < r.ended for r in runs)


SLOW_SPIDER = textwrap.dedent('''
    import asyncio
    import scrapy

    class Slow(scrapy.Spider):
        name = "slow"

        async def start(self):
            yield {"title": "first", "body": "一条新闻的正文，足够长，可以做指纹。" * 20, "url": "http://a.example/1"}
            await asyncio.sleep(600)
''')


def test_a_killed_crawl_leaves_its_start_and_the_next_run_is_recorded(tmp_path: Path) -> None:
    index = tmp_path / "index.sqlite3"
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SPIDER, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "scrapy", "runspider", str(script), "-s", "ADDONS={\"scrapy_simhash.Addon\": 300}",
         "-s", f"SIMHASH_INDEX_URL={index}", "-s", "SIMHASH_WORKERS=0", "-s", "TWISTED_REACTOR="
         "twisted.internet.asyncioreactor.AsyncioSelectorReactor"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if index.exists():
                with open_index(index, readonly=True) as ix:
                    if ix.runs() and ix.count():
                        break
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.2)
        else:
            pytest.fail("the crawl never recorded its run")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
    with open_index(index, readonly=True) as ix:
        (killed,) = ix.runs()
    assert killed.spider == "slow" and killed.ended is None and killed.dedup_rate is None
    listed = subprocess.run([sys.executable, "-m", "scrapy_simhash.cli", "runs", "--index", str(index)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert listed.returncode == 0 and "(running or died)" in listed.stdout and "slow" in listed.stdout, listed


# -- the command line -----------------------------------------------------------------------------------


def test_runs_command_prints_the_history_as_text_and_json(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "scrapy_simhash.cli", "runs", "--index", str(path), *args],
                              capture_output=True, text=True, cwd=REPO, timeout=120)

    with open_index(path) as ix:
        assert "none yet" in cli().stdout
        for i in range(3):
            run = Run(id=new_run_id(1_765_000_000 + i), started=1_765_000_000 + i * 86400, spider="news")
            ix.record_run(run.ending({"new": 8 - i, "title": 5 + i, "body": 4, "items": 17},
                                     {"p50": 30.0, "p95": 600.25, "max": 602.5}, at=run.started + 2))
    text = cli()
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"runs of namespace 'default' in {path}, newest first"
    assert "dedup" in lines[1] and "p95 ms" in lines[1]
    assert lines[2].startswith("2025-12-08T") and "news" in lines[2] and "64.7%" in lines[2] and "600.2" in lines[2]
    assert len(lines) == 5
    data = json.loads(cli("--limit", "2", "--json").stdout)
    assert [d["counts"]["new"] for d in data] == [6, 7] and data[0]["dedup_rate"] == pytest.approx(11 / 17)
    bad = cli("--limit", "0")
    assert bad.returncode == 2 and "must be >= 1" in bad.stderr
