"""Reliability with real processes and real SQLite files: SIGKILL, races, full disks, held locks.

* kill: ``benchmarks/faults.py`` (fewer kills here) SIGKILLs real ``scrapy-simhash dedup`` runs and
  real ``scrapy runspider`` crawls; the index must open, pass ``integrity_check``, hold every item
  passed on, and a re-run must end where a clean run ends; crawls whose store fsyncs each item
  lose no story and store again only what was pending at the kill.
* race: four processes on one file, shuffled copies of the same real stories, ten rounds.
* a check-and-add that cannot commit (another process holds the write lock past the busy timeout;
  a full disk: a tiny tmpfs, or ``PRAGMA max_page_count``) never passes an item on as new; it is
  retried, then dropped or passed on unchecked per ``SIMHASH_ON_INDEX_ERROR``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy import signals

from scrapy_simhash import Deduplicator
from scrapy_simhash.scrapy.pipeline import IndexUnavailable, SimhashPipeline
from tests.conftest import REPO, STORY_EN, STORY_ZH, STORY_ZH_2, ItemsSpider, crawl_settings, run_crawl

sys.path.insert(0, str(REPO / "benchmarks"))
import faults

needs_corpus = pytest.mark.skipif(
    not faults.corpus_available(), reason=f"needs the shared corpus files {faults.SOURCES} under {faults.CORPUS}"
)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}


# -- kill -------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_corpus
def test_sigkill_dedup_runs_and_crawls_lose_nothing_and_rerun_finishes(tmp_path: Path) -> None:
    lines: list[str] = []
    results = faults.kill_campaign(5, 30, seed=11, workdir=tmp_path, log=lines.append, shared_reference=True)
    report = "\n".join(lines)
    assert [r.kind for r in results] == ["dedup", "crawl", "dedup", "crawl", "dedup"]
    assert all(r.problems == [] for r in results), report
    assert sum(not r.finished_first for r in results) >= 3, report  # the kills did land mid-run
    assert sum(r.passed_before_kill for r in results) > 0, report  # and some after items were passed on


@pytest.mark.slow
@needs_corpus
def test_sigkill_of_dedup_writing_gzip_loses_nothing(tmp_path: Path) -> None:
    """The kept file of a killed run decompresses up to its last commit, and every item a kill
    left undelivered is passed on by the re-run (84 lines were lost, and the file truncated)."""
    lines: list[str] = []
    results = faults.kill_campaign(3, 30, seed=5, workdir=tmp_path, kinds=("dedup-gz",), log=lines.append)
    report = "\n".join(lines)
    assert all(r.problems == [] for r in results), report
    assert sum(r.passed_before_kill for r in results) > 0, report


@pytest.mark.slow
@needs_corpus
def test_sigkill_of_a_crawl_with_an_fsyncing_store_loses_nothing_and_stores_again_only_pending_items(
        tmp_path: Path) -> None:
    """The delivery campaign, smaller: a crawl whose store fsyncs each item, killed at random moments,
    then run again. No story is lost, the index passes ``integrity_check``, and an item is stored by
    both runs only if its entry was still pending at the kill (its delivery not yet written)."""
    lines: list[str] = []
    results = faults.delivery_campaign(3, 300, seed=4, workdir=tmp_path, log=lines.append)
    report = "\n".join(lines)
    assert all(r.integrity == "ok" and r.lost == 0 for r in results), report
    assert all(r.twice <= r.pending for r in results), report
    assert sum(r.stored_killed for r in results) > 0, report


# -- race -------------------------------------------------------------------------------------------

_RACER = textwrap.dedent(
    """
    import json, os, sys, time
    from scrapy_simhash import Deduplicator
    cache = {}
    for line in sys.stdin:
        job = json.loads(line)
        with Deduplicator.open(job["index"]) as dedup:
            work = []
            for item in job["items"]:  # fingerprint first, so the check-and-adds collide
                key = (item["title"], item["body"])
                if key not in cache:
                    cache[key] = dedup.fingerprint(*key)
                work.append((item["url"], cache[key]))
            print("ready", flush=True)
            while not os.path.exists(job["go"]):
                time.sleep(0.0005)
            admitted = [url for url, fps in work if dedup.decide(fps, url).status == "new"]
        print(json.dumps(admitted), flush=True)
    """
)


@pytest.fixture(scope="module")
def race_stories() -> list[dict[str, Any]]:
    """Real stories no two of which are near-duplicates (the corpus), else the three test stories."""
    if not faults.corpus_available():
        return [{**s, "url": f"https://race.example/{n}", "story": str(n)}
                for n, s in enumerate((STORY_ZH, STORY_ZH_2, STORY_EN))]
    articles = faults.load_articles(24)
    with tempfile.TemporaryDirectory() as tmp:
        return faults.distinct_stories(articles, Path(tmp))


@pytest.mark.slow
def test_four_processes_admit_exactly_one_copy_per_story_ten_rounds(
    tmp_path: Path, race_stories: list[dict[str, Any]]
) -> None:
    stories = race_stories[:12]
    copies = 3
    story_of = {f"{s['url']}#copy{c}": s["story"] for s in stories for c in range(copies)}
    rng = random.Random(5)
    # On tmpfs when there is one: real files and real locks, without ~1,400 fsyncs of a slow disk
    # (durability is the kill test's subject, atomicity this one's).
    shm = Path("/dev/shm")
    workdir = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path
    racers = [subprocess.Popen([sys.executable, "-c", _RACER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=child_env(), cwd=tmp_path) for _ in range(4)]
    try:
        for round_ in range(10):
            index, go = workdir / f"race{round_}.sqlite3", workdir / f"go{round_}"
            Deduplicator.open(f"sqlite:///{index}").close()  # the file exists: the race is on check-and-add
            for racer in racers:
                items = [{**s, "url": url} for url, story in story_of.items() for s in stories
                         if s["story"] == story]
                rng.shuffle(items)
                assert racer.stdin is not None
                racer.stdin.write(json.dumps({"index": str(index), "go": str(go), "items": items}) + "\n")
                racer.stdin.flush()
            assert all(r.stdout is not None and r.stdout.readline().strip() == "ready" for r in racers)
            go.touch()
            admitted = [url for r in racers for url in json.loads(r.stdout.readline())]  # type: ignore[union-attr]
            assert sorted(story_of[u] for u in admitted) == sorted(s["story"] for s in stories), round_
            with Deduplicator.open(f"sqlite:///{index}") as dedup:
                assert sorted(e.url for e in dedup.index.entries()) == sorted(admitted)
    finally:
        for racer in racers:
            racer.stdin.close()  # type: ignore[union-attr]
            racer.wait(30)
        if workdir != tmp_path:
            shutil.rmtree(workdir, ignore_errors=True)
    assert all(r.returncode == 0 for r in racers)


@pytest.mark.slow
@needs_corpus
def test_four_console_scripts_on_one_index(tmp_path: Path, race_stories: list[dict[str, Any]]) -> None:
    assert len(race_stories) >= 15
    assert faults.race_round(race_stories, 3, 4, random.Random(3), tmp_path, "race") == []


# -- a check-and-add that cannot commit -----------------------------------------------------------

ITEMS = [{**s, "url": f"https://a.example/{n}"} for n, s in enumerate((STORY_ZH, STORY_ZH_2, STORY_EN))]

_LOCKER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("ROLLBACK")
    """
)


@contextlib.contextmanager
def write_lock_held(index: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holds the index's write lock for ``seconds``."""
    proc = subprocess.Popen([sys.executable, "-c", _LOCKER, str(index), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def fast_retries(index: Path, **extra: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"SIMHASH_BUSY_TIMEOUT": 0.2, "SIMHASH_INDEX_RETRIES": 2,
                               "SIMHASH_INDEX_RETRY_DELAY": 0.05}
    return crawl_settings(index, **{**options, **extra})


def entry_urls(index: Path) -> list[str]:
    with Deduplicator.open(f"sqlite:///{index}") as dedup:
        return [e.url for e in dedup.index.entries()]


def stat(crawler: Any, key: str) -> Any:
    return crawler.stats.get_value(key)


@pytest_twisted.ensureDeferred
async def test_lock_held_past_busy_timeout_drops_items_unchecked(tmp_path: Path, caplog: Any) -> None:
    index = tmp_path / "i.sqlite3"
    Deduplicator.open(f"sqlite:///{index}").close()
    with write_lock_held(index, 60):
        started = time.monotonic()
        crawler = await run_crawl(fast_retries(index), ITEMS)
        elapsed = time.monotonic() - started
    assert crawler.spider.collected == []  # nothing passed on as new
    assert stat(crawler, "simhash/index_error") == len(ITEMS)
    assert stat(crawler, "simhash/index_retries") == 2 * len(ITEMS)
    assert stat(crawler, "item_dropped_reasons_count/IndexUnavailable") == len(ITEMS)
    assert stat(crawler, "simhash/new") == 0
    assert stat(crawler, "finish_reason") == "finished"
    assert "could not get the write lock" in caplog.text and "SIMHASH_ON_INDEX_ERROR='drop'" in caplog.text
    # 3 items x (3 attempts x 0.2 s busy wait + 0.05 + 0.1 s back-off): bounded by the settings.
    assert elapsed < 3 * (3 * 0.2 + 0.15) + 5
    assert entry_urls(index) == []


@pytest_twisted.ensureDeferred
async def test_lock_held_with_pass_passes_items_on_marked_unchecked(tmp_path: Path) -> None:
    index = tmp_path / "i.sqlite3"
    Deduplicator.open(f"sqlite:///{index}").close()
    with write_lock_held(index, 60):
        crawler = await run_crawl(fast_retries(index, SIMHASH_ON_INDEX_ERROR="pass"), ITEMS)
    assert [i["url"] for i in crawler.spider.collected] == [i["url"] for i in ITEMS]
    assert all(i["simhash"]["status"] == "unchecked" and "write lock" in i["simhash"]["reason"]
               for i in crawler.spider.collected)
    assert stat(crawler, "simhash/unchecked") == stat(crawler, "simhash/index_error") == len(ITEMS)
    assert stat(crawler, "simhash/new") == 0
    assert entry_urls(index) == []  # unchecked items are not in the index


class ManyPagesSpider(ItemsSpider):
    """One item per page, page after page: a crawl that goes on after the index fails."""

    name = "pages"
    custom_settings = {"CONCURRENT_REQUESTS": 1, "DOWNLOAD_DELAY": 0.4}

    async def start(self):
        for n in range(len(self.items_to_yield)):
            yield scrapy.Request(f"data:,{n}", cb_kwargs={"n": n})

    def parse(self, response, n=0):
        yield self.items_to_yield[n]


@pytest_twisted.ensureDeferred
async def test_lock_held_with_close_stops_the_crawl(tmp_path: Path, caplog: Any) -> None:
    index = tmp_path / "i.sqlite3"
    Deduplicator.open(f"sqlite:///{index}").close()
    items = _many_items(12)  # 12 pages 0.4 s apart: ~5 s if the crawl went on
    with write_lock_held(index, 60):
        crawler = await run_crawl(fast_retries(index, SIMHASH_ON_INDEX_ERROR="close"), items, ManyPagesSpider)
    assert crawler.spider.collected == []
    assert stat(crawler, "finish_reason").startswith("simhash_index_error: ")
    assert 1 <= stat(crawler, "simhash/index_error") < len(items)  # the rest of the crawl was not run unchecked
    assert stat(crawler, "item_dropped_reasons_count/IndexUnavailable") == stat(crawler, "simhash/index_error")


@pytest_twisted.ensureDeferred
async def test_lock_released_during_the_retries_admits_the_items(tmp_path: Path) -> None:
    index = tmp_path / "i.sqlite3"
    Deduplicator.open(f"sqlite:///{index}").close()
    with write_lock_held(index, 0.6):
        settings = crawl_settings(index, SIMHASH_BUSY_TIMEOUT=0.1, SIMHASH_INDEX_RETRIES=6,
                                  SIMHASH_INDEX_RETRY_DELAY=0.1)
        crawler = await run_crawl(settings, ITEMS)
    assert [i["url"] for i in crawler.spider.collected] == [i["url"] for i in ITEMS]
    assert stat(crawler, "simhash/index_retries") >= 1
    assert stat(crawler, "simhash/index_error") == 0
    assert stat(crawler, "simhash/new") == len(ITEMS)
    assert sorted(entry_urls(index)) == sorted(i["url"] for i in ITEMS)


def test_on_index_error_setting_is_validated(tmp_path: Path) -> None:
    from scrapy.utils.test import get_crawler

    from tests.conftest import ItemsSpider

    crawler = get_crawler(ItemsSpider, crawl_settings(tmp_path / "i.sqlite3", SIMHASH_ON_INDEX_ERROR="ignore"))
    crawler.spider = crawler._create_spider()
    with pytest.raises(ValueError, match="SIMHASH_ON_INDEX_ERROR = 'ignore' is not allowed: \"drop\", \"pass\" or"):
        SimhashPipeline.from_crawler(crawler)  # when the crawler is built, not at open
    assert issubclass(IndexUnavailable, __import__("scrapy").exceptions.DropItem)


def _many_items(n: int) -> list[dict[str, str]]:
    """Distinct stories: real corpus articles when present, else variations of the test stories."""
    if faults.corpus_available():
        return [{k: a[k] for k in ("url", "title", "body")} for a in faults.load_articles(n)]
    return [{"url": f"https://m.example/{i}", "title": f"{STORY_EN['title']} part {i} of {n} {i * 7919}",
             "body": STORY_EN["body"] + f"<p>Update {i}: {' '.join(str(i * k) for k in range(1, 40))}</p>"}
            for i in range(n)]


@pytest_twisted.ensureDeferred
async def test_full_database_max_page_count_never_passes_an_uncommitted_item(tmp_path: Path) -> None:
    """SQLITE_FULL from ``PRAGMA max_page_count`` on the pipeline's own connection: every item passed
    on is in the index, every other one was counted and dropped."""
    index = tmp_path / "i.sqlite3"
    Deduplicator.open(f"sqlite:///{index}").close()
    items = _many_items(60)
    settings = fast_retries(index, SIMHASH_INDEX_RETRY_DELAY=0.0)
    from scrapy.utils.test import get_crawler

    from tests.conftest import ItemsSpider

    crawler = get_crawler(ItemsSpider, settings)

    def cap(spider: Any) -> None:
        for mw in crawler.engine.scraper.itemproc.middlewares:  # type: ignore[union-attr]
            if isinstance(mw, SimhashPipeline):
                conn = mw.dedup.index._conn  # type: ignore[union-attr, attr-defined]
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                conn.execute(f"PRAGMA max_page_count = {pages + 3}")

    crawler.signals.connect(cap, signals.spider_opened)
    await crawler.crawl(items=items)
    passed = [i["url"] for i in crawler.spider.collected]
    errors = stat(crawler, "simhash/index_error") or 0
    assert errors > 0 and passed  # some fit, then the file was full
    assert sorted(entry_urls(index)) == sorted(passed)
    dropped = sum(stat(crawler, f"simhash/dropped/{tier}") or 0 for tier in ("title", "body", "sentence"))
    assert len(passed) + errors + dropped == len(items)
    conn = sqlite3.connect(index)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    return filler


def stored_rows(index: Path) -> list[str]:
    """What the index file holds (read as it lies on disk, without a lock or a write), checked whole,
    as SQL: every schema object and row but the history of runs, which a crawl writes when it opens."""
    conn = sqlite3.connect(f"{index.absolute().as_uri()}?immutable=1", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return [line for line in conn.iterdump() if not line.startswith('INSERT INTO "run"')]
    finally:
        conn.close()


@pytest_twisted.ensureDeferred
async def test_full_disk_on_a_tiny_tmpfs(tmp_path: Path) -> None:
    """A real full file system (a 1 MiB tmpfs) filled during the crawl: no item is passed on as new,
    each is counted, what the index file holds is untouched (but the run's start, written at open);
    once space is freed, the same items are admitted."""
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root and mount); the max_page_count test covers SQLITE_FULL")
    try:
        from scrapy.utils.test import get_crawler

        from tests.conftest import ItemsSpider

        index = mnt / "i.sqlite3"
        Deduplicator.open(f"sqlite:///{index}").close()
        before = stored_rows(index)
        # Full during the crawl: the pipeline has opened the index, then the disk fills up.
        crawler = get_crawler(ItemsSpider, fast_retries(index, SIMHASH_INDEX_RETRY_DELAY=0.0))
        def fill(spider: Any) -> None:  # a named function: signal receivers are weak references
            _fill(mnt)

        crawler.signals.connect(fill, signals.spider_opened)
        await crawler.crawl(items=ITEMS)
        assert crawler.spider.collected == []
        assert stat(crawler, "simhash/index_error") == len(ITEMS)
        assert stat(crawler, "finish_reason") == "finished"
        assert stored_rows(index) == before
        # Still full when the next crawl starts: whether SQLite can still open the file there (its
        # -shm may or may not need new space) or not, nothing is passed on and the file is untouched.
        crawler = await run_crawl(fast_retries(index, SIMHASH_INDEX_RETRY_DELAY=0.0), ITEMS)
        assert crawler.spider.collected == []
        assert (str(stat(crawler, "finish_reason")).startswith("simhash_index_error")
                or stat(crawler, "simhash/index_error") == len(ITEMS))
        assert stored_rows(index) == before
        (mnt / "filler").unlink()
        crawler = await run_crawl(crawl_settings(index), ITEMS)
        assert stat(crawler, "simhash/new") == len(ITEMS)
        assert sorted(entry_urls(index)) == sorted(i["url"] for i in ITEMS)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_cli_dedup_on_a_disk_that_fills_up_writes_out_only_committed_lines(tmp_path: Path) -> None:
    """``dedup`` on a 1 MiB tmpfs that fills up mid-run: exit 1 naming the lines not decided, every
    line written to ``-o`` is in the index, and the index is intact."""
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "1m"):
        pytest.skip("cannot mount a tmpfs here (needs root and mount)")
    try:
        rnd = random.Random(5)
        words = [f"w{n}x" for n in range(5000)]
        items = tmp_path / "in.jsonl"
        with items.open("w") as f:
            for i in range(4000):
                f.write(json.dumps({"url": f"https://f.example/{i}", "title": " ".join(rnd.sample(words, 8)),
                                    "body": " ".join(rnd.sample(words, 60))}) + "\n")
        index, kept = mnt / "i.sqlite3", tmp_path / "kept.jsonl"
        proc = subprocess.run([str(Path(sys.executable).parent / "scrapy-simhash"), "dedup", str(items),
                               "--index", str(index), "-o", str(kept)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert "index write failed at line" in proc.stderr and "not decided" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        written = [json.loads(line)["url"] for line in kept.read_text().splitlines()]
        assert 100 < len(written) < 4000  # some fitted, then the disk was full
        assert sorted(entry_urls(index)) == sorted(written)
        conn = sqlite3.connect(index)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
