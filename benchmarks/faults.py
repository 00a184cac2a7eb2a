"""Fault injection: SIGKILL real ``scrapy-simhash dedup`` runs and real crawls, race four processes.

Kill
    Real articles from ``../shared/corpus`` (NewsSpider 2016 + inews, Chinese) plus reposts made by
    ``benchmarks/repost.py`` go through either the ``scrapy-simhash dedup`` console script (kept items
    on an unbuffered stdout) or a real ``scrapy runspider`` crawl (the spider yields the items from a
    ``data:`` response; a pipeline after ours appends and flushes each kept item with ``os.write``),
    so the kept file holds exactly what the process managed to pass on. Each run is SIGKILLed at a
    random point (during startup, or a few milliseconds after a random number of items were passed
    on), then the script checks:

    * the index opens (``open_index``) and ``PRAGMA integrity_check`` says ``ok``;
    * every item in the kept file is in the index (by URL);
    * a re-run of the same job on the same index finishes, passes on none of the items the killed
      run passed on, and leaves the index holding exactly the URLs a clean, never-killed run
      admits (so nothing was admitted twice and nothing was lost).

    Items committed by the killed run in the instant before it could write them out are in the
    index but in neither kept file: the at-most-once window of "commit, then pass on"; counted.

Race
    Four processes on one SQLite file, each feeding its own shuffled copy of the same stories
    (several URLs per story, real texts) through ``scrapy-simhash dedup``: exactly one copy per
    story is passed on in total, and the index holds one entry per story.

Files
    Real index files of 200 committed entries (a child process, one fsynced check-and-add each,
    SIGKILLed to leave its WAL pending or closed cleanly; random fingerprints, no corpus needed),
    damaged or tampered with as an attacker or a failing disk would: the WAL replaced by random
    bytes, 64 random bytes in its middle, truncated to its header, the main file truncated with a
    WAL pending, the meta record's band key, bands and layouts changed, namespace ids changed,
    entries deleted under their band rows, the entry id counter lowered or deleted, a damaged WAL
    behind a symbolic link, the WAL emptied or deleted with its -shm intact, planted triggers, a FIFO
    at the index path, an immutable -shm under a real crawl; and SIGKILLs mid-write, which must still open.
    Per scenario: tried (committed entries at stake), survived, lost (admitted again or missing).

Redis forgets
    Per scenario, 1,200 stories stored in a real ``redis-server``, then a fault: ``FLUSHALL`` and
    another writable open, a restart from an older copy of the AOF, an RDB-only server killed and
    restarted from its snapshot, ``appendfsync no``, and keys tampered with (the id counter set back
    or deleted, counters, the record, holders, band buckets, records, the time-bucket list deleted);
    then a crawl that goes on past refused calls feeds other stories and a repost of each stored
    one. Counted: stories stored twice (a repost admitted as new) and reposts matched to another
    story; refused at open, or every call refused, is the safe outcome.

Run::

    python benchmarks/faults.py                   # 20 kills (10 dedup, 10 crawl) + 10 race rounds + files
    python benchmarks/faults.py --kills 6 --race-rounds=2 --articles 120 --seed 7
    python benchmarks/faults.py --kills 0 --race-rounds=0 --crafted-chars 65536   # crafted items only
    python benchmarks/faults.py --files-only      # only the damaged and tampered files (and Redis)
    python benchmarks/faults.py --redis-forgets   # only the Redis scenarios

Crafted
    Items whose title or body is built to make a pattern backtrack (a run of colons before a
    hyphen, runs of spaces left by removed tags, a date followed by thousands of line breaks; the
    regular expressions of ``scrapy_simhash/text/normalize.py`` hold the GIL while they run, so one
    item that made one backtrack would stop the whole crawl for minutes) go, between real articles,
    through a real crawl that ticks a reactor timer every 20 ms. Checked: the crawl finishes, every
    item is counted, the longest gap between two ticks stays under a second; and, in a separate process, the time
    ``Fingerprinter().fingerprint`` takes on each crafted item alone (a page whose one tag holds
    tens of thousands of attributes is there for the record: libxml2 is quadratic in them, but
    parses without the GIL).

Exits 1 if any check fails. ``tests/test_reliability.py`` runs a smaller version in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("SIMHASH_TEST_CORPUS") or REPO.parent / "shared" / "corpus")
SOURCES = ("zh/newsspider-2016.jsonl.gz", "zh/inews-bdci2019.jsonl.gz")
REPOST_RECIPES = ("portal", "title_suffix", "source_line", "date_format")

sys.path.insert(0, str(Path(__file__).resolve().parent))


def corpus_available() -> bool:
    """True when the shared corpus files this script reads are present."""
    return all((CORPUS / s).exists() for s in SOURCES)


def _read(relative: str) -> Iterator[dict[str, Any]]:
    with gzip.open(CORPUS / relative, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def load_articles(n: int) -> list[dict[str, Any]]:
    """``n`` real Chinese articles (half NewsSpider, half inews) with a title and a body of 200+
    characters, distinct URLs (inews records get a stable made-up one from their id)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for k, source in enumerate(SOURCES):
        want = n // 2 if k == 0 else n - len(out)
        taken = 0
        for doc in _read(source):
            if taken >= want:
                break
            title, body = doc.get("title") or "", doc.get("body") or ""
            if len(title) < 6 or len(body) < 200:
                continue
            url = doc.get("url") or f"https://inews.example/{doc['id'].replace(':', '/')}"
            if url in seen or title in seen:
                continue
            seen.update((url, title))
            out.append({"url": url, "title": title, "body": body, "story": doc["id"]})
            taken += 1
    return out


def with_reposts(articles: Sequence[dict[str, Any]], share: float, rng: random.Random) -> list[dict[str, Any]]:
    """The articles plus reposts of a ``share`` of them (``repost.py`` recipes), each repost placed
    somewhere after its original; every repost has its own URL."""
    from repost import Article, make_repost

    items = [dict(a) for a in articles]
    pool = [a["body"][:200] for a in articles]
    for i, a in enumerate(rng.sample(list(articles), int(len(articles) * share))):
        art = Article(a["story"], "zh", a["title"], tuple(p for p in a["body"].split("\n") if p.strip()))
        draft = make_repost(art, rng.choice(REPOST_RECIPES), rng, pool=pool)
        repost = {"url": f"https://repost.example/{i}", "title": draft.title, "body": draft.body,
                  "story": a["story"]}
        at = next(k for k, x in enumerate(items) if x["url"] == a["url"])
        items.insert(rng.randint(at + 1, len(items)), repost)
    return items


def write_jsonl(path: Path, items: Sequence[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")


def read_urls(path: Path) -> list[str]:
    """URLs of the complete lines of a kept file (a line cut by the kill is not an item passed on);
    a gzip file is read as far as it decompresses (a kill leaves it without its end)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = zlib.decompressobj(wbits=31).decompress(data)
    urls = []
    for line in data.split(b"\n"):
        try:
            urls.append(json.loads(line)["url"])
        except (ValueError, KeyError, TypeError):
            continue
    return urls


def index_urls(index: Path) -> list[str]:
    """Every entry URL, with repeats, read through ``open_index`` (which must open the file)."""
    from scrapy_simhash.index import open_index

    with open_index(index, create=False) as ix:
        return [e.url for e in ix.entries() if e.url is not None]


def pending_urls(index: Path) -> set[str]:
    """URLs of the entries whose items were not yet delivered (released at the next open)."""
    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return {url for (url,) in conn.execute(
            "SELECT e.url FROM pending p JOIN entry e ON e.id = p.entry WHERE e.url IS NOT NULL")}
    except sqlite3.OperationalError:  # a file without the table: nothing pending
        return set()
    finally:
        conn.close()


def integrity(index: Path) -> str:
    conn = sqlite3.connect(index)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------
# The two kinds of job
# ------------------------------------------------------------------------------------------------

SPIDER = textwrap.dedent(
    '''
    """A crawl whose kept items land, one flushed line each, in the KEPT_PATH setting's file."""
    import json
    import os

    import scrapy


    class AppendPipeline:
        def __init__(self, path):
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        @classmethod
        def from_crawler(cls, crawler):
            return cls(crawler.settings["KEPT_PATH"])

        def process_item(self, item, spider=None):
            os.write(self.fd, (json.dumps(dict(item), ensure_ascii=False) + "\\n").encode("utf-8"))
            return item

        def close_spider(self, spider=None):
            os.close(self.fd)


    class FeedSpider(scrapy.Spider):
        name = "feed"
        start_urls = ["data:,"]
        custom_settings = {
            "ADDONS": {"scrapy_simhash.Addon": 300},
            "ITEM_PIPELINES": {AppendPipeline: 900},
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
        }

        def parse(self, response):
            with open(self.input, encoding="utf-8") as f:
                for line in f:
                    yield json.loads(line)
    '''
)


def dedup_command(items: Path, index: Path, output: str = "-") -> list[str]:
    """The console script; kept items go to stdout (``-``) or the file ``output`` (``.gz``: compressed)."""
    script = Path(sys.executable).with_name("scrapy-simhash")
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "scrapy_simhash.cli"]
    return [*exe, "dedup", str(items), "--index", str(index), "-o", output, "--quiet", "--no-progress"]


def crawl_command(items: Path, index: Path, kept: Path, workdir: Path) -> list[str]:
    spider = workdir / "feed_spider.py"
    if not spider.exists():
        spider.write_text(SPIDER, encoding="utf-8")
    return [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"input={items}",
            "-s", f"SIMHASH_INDEX_URL=sqlite:///{index}", "-s", f"KEPT_PATH={kept}"]


def start_job(kind: str, items: Path, index: Path, kept: Path, workdir: Path) -> subprocess.Popen[bytes]:
    """Start one job; its kept items end up in ``kept`` as they are passed on."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    if kind == "dedup-gz":  # the command's own gzip output file, synced with each commit
        return subprocess.Popen(dedup_command(items, index, str(kept)), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=workdir, env=env)
    if kind == "dedup":
        out = open(kept, "ab")  # noqa: SIM115 (handed to the child)
        try:
            return subprocess.Popen(dedup_command(items, index), stdout=out, stderr=subprocess.DEVNULL,
                                    cwd=workdir, env=env)
        finally:
            out.close()
    return subprocess.Popen(crawl_command(items, index, kept, workdir), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=workdir, env=env)


def run_job(kind: str, items: Path, index: Path, kept: Path, workdir: Path,
            timeout: float = 300) -> tuple[float, float]:
    """Run one job to its end; returns (seconds until the first kept item appeared, total seconds).
    A failure is an AssertionError."""
    started = time.monotonic()
    proc = start_job(kind, items, index, kept, workdir)
    first = None
    while proc.poll() is None:
        if first is None and kept.exists() and kept.stat().st_size > 0:
            first = time.monotonic() - started
        assert time.monotonic() - started < timeout, f"{kind} run on {index} timed out"
        time.sleep(0.02)
    assert proc.returncode == 0, f"{kind} run on {index} exited with {proc.returncode}"
    total = time.monotonic() - started
    return (total if first is None else first), total


# ------------------------------------------------------------------------------------------------
# Kill
# ------------------------------------------------------------------------------------------------


@dataclass
class KillResult:
    kind: str
    at: float  # seconds after start
    finished_first: bool  # the job ended before the signal
    passed_before_kill: int
    index_after_kill: int
    committed_not_passed: int  # the commit-then-pass-on window
    passed_on_rerun: int
    problems: list[str] = field(default_factory=list)
    redelivered: int = 0  # pending at the kill (committed, delivery not yet recorded): passed on again


def _wait_for_lines(proc: subprocess.Popen[bytes], kept: Path, lines: int) -> None:
    """Return once ``kept`` holds ``lines`` complete lines, or the process has ended."""
    seen, offset = 0, 0
    while proc.poll() is None and seen < lines:
        if kept.suffix == ".gz":
            seen = len(read_urls(kept))
        elif kept.exists():
            with open(kept, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            seen += chunk.count(b"\n")
            offset += len(chunk)
        time.sleep(0.001)


def kill_once(kind: str, items: Path, reference: set[str], workdir: Path, tag: str, at: float,
              after_lines: int = 0) -> KillResult:
    """SIGKILL one job ``at`` seconds after its start, or (``after_lines``) ``at`` seconds after
    its kept file reached that many items (a point in the work, whatever the machine's load);
    check the index, re-run the job, check again."""
    gz = ".gz" if kind == "dedup-gz" else ""
    index, kept, kept2 = workdir / f"{tag}.sqlite3", workdir / f"{tag}.kept{gz}", workdir / f"{tag}.rerun{gz}"
    started = time.monotonic()
    proc = start_job(kind, items, index, kept, workdir)
    if after_lines:
        _wait_for_lines(proc, kept, after_lines)
    try:
        proc.wait(at)
        finished = True
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        finished = False
    at = time.monotonic() - started
    problems: list[str] = []
    passed = read_urls(kept)
    in_index: list[str] = []
    if index.exists():
        try:
            in_index = index_urls(index)
        except Exception as exc:  # any failure to open is the finding
            problems.append(f"index does not open after the kill: {exc}")
        if (check := integrity(index)) != "ok":
            problems.append(f"integrity_check: {check}")
    elif passed:
        problems.append("items were passed on but there is no index file")
    missing = set(passed) - set(in_index)
    if missing:
        problems.append(f"{len(missing)} items passed on as new are not in the index: {sorted(missing)[:3]}")
    pending = pending_urls(index) if index.exists() and not problems else set()
    run_job(kind, items, index, kept2, workdir)
    again = read_urls(kept2)
    final = index_urls(index)
    if integrity(index) != "ok":
        problems.append("integrity_check failed after the re-run")
    both = set(passed) & set(again)
    if both - pending:  # only an entry whose delivery was not yet recorded may be passed on again
        problems.append(f"{len(both - pending)} items passed on by both the killed run and the re-run")
    if never := reference - set(passed) - set(again):
        problems.append(f"{len(never)} items never passed on (lost): {sorted(never)[:3]}")
    if len(final) != len(set(final)):
        problems.append(f"{len(final) - len(set(final))} URLs admitted twice")
    if set(final) != reference:
        problems.append(f"after the re-run the index differs from a clean run: {len(set(final) - reference)} "
                        f"extra, {len(reference - set(final))} missing")
    if (set(passed) | set(again)) - set(final):
        problems.append("an item passed on is not in the final index")
    return KillResult(kind, at, finished, len(passed), len(in_index),
                      len(set(in_index) - set(passed)), len(again), problems, len(both & pending))


def kill_campaign(kills: int, articles: int, seed: int, workdir: Path,
                  kinds: Sequence[str] = ("dedup", "crawl"), log: Any = print,
                  shared_reference: bool = False) -> list[KillResult]:
    """``kills`` SIGKILLs, alternating the job kinds: one in five during startup, the others after a
    random number of items were passed on (plus a random few milliseconds). Each kind's clean run gives the
    reference set of admitted URLs and its timing (``shared_reference``: the first kind's clean run
    serves all kinds, whose items go through the same pipeline in the same order)."""
    rng = random.Random(seed)
    items = with_reposts(load_articles(articles), 0.25, rng)
    path = workdir / "items.jsonl"
    write_jsonl(path, items)
    reference: dict[str, set[str]] = {}
    duration: dict[str, float] = {}
    first: dict[str, float] = {}
    for kind in kinds[:1] if shared_reference else kinds:
        ref_index = workdir / f"reference-{kind}.sqlite3"
        ref_kept = workdir / f"reference-{kind}.kept{'.gz' if kind == 'dedup-gz' else ''}"
        first[kind], duration[kind] = run_job(kind, path, ref_index, ref_kept, workdir)
        urls = index_urls(ref_index)
        assert len(urls) == len(set(urls)), "a clean run admitted a URL twice"
        assert set(read_urls(ref_kept)) == set(urls), "clean run: kept != index"
        reference[kind] = set(urls)
        log(f"clean {kind} run: {len(items)} items, {len(urls)} admitted, first passed on after "
            f"{first[kind]:.1f} s, done in {duration[kind]:.1f} s")
    for kind in kinds:
        if kind not in reference:
            reference[kind], first[kind], duration[kind] = reference[kinds[0]], first[kinds[0]], duration[kinds[0]]
    results = []
    for n in range(kills):
        kind = kinds[n % len(kinds)]
        # One kill in five during startup (imports, index creation), the others at a random point
        # of the work: after a random number of items passed on, plus up to 20 ms.
        if rng.random() < 0.2:
            at, after = rng.uniform(0, first[kind]), 0
        else:
            at, after = rng.uniform(0, 0.02), rng.randint(1, len(reference[kind]) - 1)
        r = kill_once(kind, path, reference[kind], workdir, f"kill{n:02d}-{kind}", at, after_lines=after)
        results.append(r)
        log(f"kill {n + 1:2d} {kind:5s} at {r.at:5.2f} s: "
            + ("finished before the signal; " if r.finished_first else "")
            + f"passed on {r.passed_before_kill}, in index {r.index_after_kill} "
            f"(committed, not yet passed on: {r.committed_not_passed}); re-run passed on {r.passed_on_rerun}"
            + (f" (of them passed on again, pending at the kill: {r.redelivered})" if r.redelivered else "")
            + ("" if not r.problems else f"  PROBLEMS: {r.problems}"))
    return results


# ------------------------------------------------------------------------------------------------
# Race
# ------------------------------------------------------------------------------------------------


def race_inputs(stories: Sequence[dict[str, Any]], copies: int, procs: int, rng: random.Random,
                workdir: Path) -> list[Path]:
    """Per process: every story ``copies`` times under distinct URLs, in its own shuffled order."""
    paths = []
    for p in range(procs):
        lines = [{**s, "url": f"{s['url']}#copy{c}"} for s in stories for c in range(copies)]
        rng.shuffle(lines)
        path = workdir / f"race-input-{p}.jsonl"
        write_jsonl(path, lines)
        paths.append(path)
    return paths


def distinct_stories(articles: Sequence[dict[str, Any]], workdir: Path) -> list[dict[str, Any]]:
    """The articles a clean dedup run admits: no two of them are near-duplicates of each other, so
    in any order each is admitted once (and copies of one are duplicates of it)."""
    path, index = workdir / "race-candidates.jsonl", workdir / "race-candidates.sqlite3"
    write_jsonl(path, articles)
    run_job("dedup", path, index, workdir / "race-candidates.kept", workdir)
    admitted = set(index_urls(index))
    return [a for a in articles if a["url"] in admitted]


def race_round(stories: Sequence[dict[str, Any]], copies: int, procs: int, rng: random.Random,
               workdir: Path, tag: str) -> list[str]:
    """One round: ``procs`` console scripts started together on one new index; returns problems."""
    inputs = race_inputs(stories, copies, procs, rng, workdir)
    index = workdir / f"{tag}.sqlite3"
    kept = [workdir / f"{tag}-{p}.kept" for p in range(procs)]
    running = [start_job("dedup", inputs[p], index, kept[p], workdir) for p in range(procs)]
    codes = [p.wait(300) for p in running]
    problems = [f"process {p} exited with {c}" for p, c in enumerate(codes) if c != 0]
    story_of = {f"{s['url']}#copy{c}": s["story"] for s in stories for c in range(copies)}
    passed = [story_of[u] for k in kept for u in read_urls(k)]
    if sorted(passed) != sorted(s["story"] for s in stories):
        dupes = len(passed) - len(set(passed))
        lost = len({s["story"] for s in stories} - set(passed))
        problems.append(f"{dupes} stories passed on more than once, {lost} never")
    entries = index_urls(index)
    if len(entries) != len(stories) or {story_of[u] for u in entries} != {s["story"] for s in stories}:
        problems.append(f"index holds {len(entries)} entries for {len(stories)} stories")
    if integrity(index) != "ok":
        problems.append("integrity_check failed")
    return problems


# ------------------------------------------------------------------------------------------------
# Crafted items
# ------------------------------------------------------------------------------------------------

TICK_SPIDER = textwrap.dedent(
    '''
    """A crawl of the INPUT items with a reactor timer; the longest gap between ticks and the
    simhash counters go to TICKS_PATH at the end."""
    import json
    import time

    import scrapy
    from scrapy import signals
    from twisted.internet import task


    class TickMonitor:
        def __init__(self, crawler):
            self.crawler, self.last, self.gap, self.ticks = crawler, None, 0.0, 0
            self.loop = task.LoopingCall(self.tick)
            crawler.signals.connect(self.opened, signals.spider_opened)
            crawler.signals.connect(self.closed, signals.spider_closed)

        @classmethod
        def from_crawler(cls, crawler):
            return cls(crawler)

        def tick(self):
            now = time.monotonic()
            if self.last is not None:
                self.gap = max(self.gap, now - self.last)
            self.last, self.ticks = now, self.ticks + 1

        def opened(self, spider):
            self.loop.start(0.02)

        def closed(self, spider, reason):
            self.loop.stop()
            stats = {k: v for k, v in self.crawler.stats.get_stats().items() if k.startswith("simhash/")}
            with open(self.crawler.settings["TICKS_PATH"], "w", encoding="utf-8") as f:
                json.dump({"gap": self.gap, "ticks": self.ticks, "reason": reason, "stats": stats}, f, default=str)


    class TickSpider(scrapy.Spider):
        name = "ticks"
        start_urls = ["data:,"]
        custom_settings = {
            "ADDONS": {"scrapy_simhash.Addon": 300},
            "EXTENSIONS": {TickMonitor: 0},
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
        }

        def parse(self, response):
            with open(self.input, encoding="utf-8") as f:
                for line in f:
                    yield json.loads(line)
    '''
)

TIME_ITEMS = textwrap.dedent(
    '''
    import json, sys, time
    from scrapy_simhash import Fingerprinter
    fp = Fingerprinter()
    fp.fingerprint("江城地铁十二号线今日开通", "江城地铁十二号线正式开通运营，全长38公里，共设车站25座。")
    for line in open(sys.argv[1], encoding="utf-8"):
        item = json.loads(line)
        started = time.perf_counter()
        fp.fingerprint(item["title"], item["body"])
        print(json.dumps({"kind": item["kind"], "seconds": time.perf_counter() - started}), flush=True)
    '''
)


def crafted_items(chars: int, articles: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One item per crafted input of about ``chars`` characters, each with a real text beside it."""
    n = chars
    titles = {
        "title: colons before a hyphen": "x" + ":" * n + "-",
        "title: spaces left by tags": "标题" + "(图)" * (n // 3) + "原创x",
        "title: '::' then tag spaces": "a::b" + "(转)" * (n // 3) + "c",
    }
    bodies = {
        "body: date, line breaks": "2023-01-01" + "\n" * n + "x",
        "body: month date, line breaks": "Jan 1, 2023" + "\n" * n + "at",
        # as many attributes as fit under MAX_INPUT_CHARS (a tag cut before its ">" parses fast)
        "body: one tag, many attributes": "<div " + " ".join(f"a{i}=1" for i in range(min(n * 2, 100_000)))
                                          + ">x</div>",
    }
    out = []
    for k, (kind, title) in enumerate(titles.items()):
        out.append({"url": f"https://crafted.example/t{k}", "kind": kind, "title": title,
                    "body": articles[k]["body"]})
    for k, (kind, body) in enumerate(bodies.items()):
        out.append({"url": f"https://crafted.example/b{k}", "kind": kind, "title": articles[-1 - k]["title"],
                    "body": body})
    return out


def crafted_scenario(chars: int, workdir: Path, log: Any = print) -> tuple[int, int, float, list[str]]:
    """A crawl of crafted items between real articles, and the time of each crafted item alone;
    returns (items tried, items decided, longest reactor gap in seconds, problems)."""
    articles = load_articles(40)
    crafted = crafted_items(chars, articles[:3] + articles[-3:])
    items = [{k: v for k, v in a.items() if k != "story"} for a in articles[3:-3]]
    for k, item in enumerate(crafted):
        items.insert(k * 5, item)
    path, alone = workdir / "crafted.jsonl", workdir / "crafted-alone.jsonl"
    write_jsonl(path, items)
    write_jsonl(alone, crafted)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    spider, ticks = workdir / "tick_spider.py", workdir / "ticks.json"
    spider.write_text(TICK_SPIDER, encoding="utf-8")
    problems = []
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"input={path}",
                           "-s", f"SIMHASH_INDEX_URL=sqlite:///{workdir / 'crafted.sqlite3'}",
                           "-s", f"TICKS_PATH={ticks}"], cwd=workdir, env=env, capture_output=True, timeout=3600)
    took = time.monotonic() - started
    if proc.returncode != 0 or not ticks.exists():
        return len(items), 0, took, [f"crawl exited with {proc.returncode}: {proc.stderr.decode()[-500:]}"]
    report = json.loads(ticks.read_text("utf-8"))
    decided = sum(v for k, v in report["stats"].items()
                  if k in ("simhash/new", "simhash/dropped/title", "simhash/dropped/body", "simhash/dropped/sentence",
                           "simhash/flagged")
                  or k.startswith("simhash/skipped/"))
    lost = len(items) - decided
    log(f"crafted crawl: {len(items)} items ({len(crafted)} crafted, ~{chars} characters each) in {took:.1f} s, "
        f"{decided} decided, {lost} lost; reactor: {report['ticks']} ticks, longest gap {report['gap']:.2f} s")
    if lost:
        problems.append(f"{lost} items not decided")
    if report["gap"] > 1.0:
        problems.append(f"the reactor stood still for {report['gap']:.1f} s")
    timed = subprocess.run([sys.executable, "-c", TIME_ITEMS, str(alone)], env=env, capture_output=True,
                           timeout=3600, check=True)
    for line in timed.stdout.decode().splitlines():
        row = json.loads(line)
        log(f"  alone: {row['kind']:32s} {row['seconds']:8.3f} s")
    return len(items), decided, report["gap"], problems
# Damaged and tampered index files (no corpus needed)
# ------------------------------------------------------------------------------------------------

FILE_ENTRIES = 200

_WRITER = textwrap.dedent(
    """
    import json, os, signal, sys
    from scrapy_simhash.index import Query, open_index
    path, kill_after = sys.argv[1], int(sys.argv[2])
    fps = json.load(sys.stdin)
    ix = open_index(path)
    for n, (tfp, bfp, url) in enumerate(fps):
        if n == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        ix.check_and_add(Query(tfp, bfp, 2, 3, url=url))  # one fsynced commit each
        os.write(1, (url + "\\n").encode())
    if kill_after == len(fps):
        os.kill(os.getpid(), signal.SIGKILL)  # leave the WAL pending, as a crash does
    ix.close()
    """
)


def file_fingerprints(n: int = FILE_ENTRIES, seed: int = 0) -> list[tuple[int, int | None, str]]:
    """``n`` random (title, body) fingerprint pairs, every eighth without a body (too short): no two are
    near each other, so each is new once."""
    rng = random.Random(seed)
    return [(rng.getrandbits(64), None if k % 8 == 7 else rng.getrandbits(64), f"https://f.example/{seed}/{k}")
            for k in range(n)]


def write_index(path: Path, fps: Sequence[tuple[int, int | None, str]], *, kill_after: int | None = None,
                pending: bool = True) -> list[str]:
    """A real index holding ``fps``, one committed check-and-add each, written by a child process
    that is SIGKILLed (``pending``: after the last one, leaving the WAL and ``-shm`` as a crash
    does; ``kill_after``: before that many more, at a random moment of the work) or closes cleanly.
    Returns the URLs the child reported committed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    if kill_after is None:
        kill_after = len(fps) if pending else len(fps) + 1
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(kill_after)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env)
    out, _ = proc.communicate(json.dumps(list(fps)).encode(), timeout=300)
    return out.decode().split()


def readmitted(path: Path, fps: Sequence[tuple[int, int | None, str]]) -> int:
    """How many of ``fps`` the index at ``path`` would admit again (checked, nothing written)."""
    from scrapy_simhash.index import Query, open_index

    with open_index(path, create=False) as ix:
        return sum(ix.peek(Query(t, b, 2, 3)) is None for t, b, _ in fps)


def _copy_index(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")


def _overwrite(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _set_meta(path: Path, change: Any) -> None:
    """Rewrite the meta record through plain sqlite3, as anyone with the file could."""
    conn = sqlite3.connect(path)
    try:
        meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM simhash_meta")}
        change(meta)
        conn.executemany("UPDATE simhash_meta SET value = ? WHERE key = ?",
                         [(json.dumps(v), k) for k, v in meta.items()])
        conn.commit()
    finally:
        conn.close()


def _sql(path: Path, script: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.executescript(script)
    finally:
        conn.close()


TRIGGER_DELETE = "CREATE TRIGGER sink AFTER INSERT ON entry BEGIN DELETE FROM entry WHERE id = new.id; END;"
TRIGGER_COPY = ("CREATE TABLE loot(url TEXT); CREATE TRIGGER leak AFTER INSERT ON entry "
                "BEGIN INSERT INTO loot VALUES (new.url); END;")


def _rebanded(tier: str, bands: int) -> Any:
    """A change of the meta record to ``bands`` bands in ``tier``, with every stored value that
    follows from the parameters (layout, band key packing) changed to match."""
    def change(meta: dict[str, Any]) -> None:
        from scrapy_simhash.index import IndexParams
        from scrapy_simhash.index.bands import records
        from scrapy_simhash.index.sqlite.tables import value_bits

        meta["params"][f"{tier}_bands"] = bands
        params = IndexParams(**meta["params"])
        meta[f"{tier}_layout"] = records(params)[tier]  # type: ignore[index]
        meta["band_key"]["value_bits"] = value_bits(params)

    return change


def _rng_bytes(n: int, seed: int = 5) -> bytes:
    return random.Random(seed).randbytes(n)


def behind_symlink(path: Path) -> Path:
    """Move the index at ``path`` (and its -wal, -shm) into a directory beside it and leave a symbolic
    link at ``path``; returns the real file (SQLite opens it, and the -wal and -shm beside it)."""
    real = path.parent / f"{path.name}.target" / path.name
    real.parent.mkdir()
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            os.replace(f"{path}{suffix}", f"{real}{suffix}")
    path.symlink_to(real)
    return real


def _wal_damaged_behind_symlink(path: Path) -> None:
    wal = Path(f"{behind_symlink(path)}-wal")
    _overwrite(wal, wal.stat().st_size // 2, _rng_bytes(64))


#: name -> (what the index is before the damage: "pending" WAL or "clean" file, the damage).
FILE_DAMAGE: dict[str, tuple[str, Any]] = {
    "wal replaced by random bytes": ("pending", lambda p: Path(f"{p}-wal").write_bytes(
        _rng_bytes(Path(f"{p}-wal").stat().st_size))),
    "wal: 64 random bytes in its middle": ("pending", lambda p: _overwrite(
        Path(f"{p}-wal"), Path(f"{p}-wal").stat().st_size // 2, _rng_bytes(64))),
    "wal truncated to its header": ("pending", lambda p: os.truncate(f"{p}-wal", 32)),
    # to half, in whole pages (a file of an odd number of pages halves inside a page: another damage)
    "main file truncated to half, wal pending": ("pending", lambda p: os.truncate(p, p.stat().st_size // 8192 * 4096)),
    "meta band_key.value_bits 35": ("clean", lambda p: _set_meta(p, lambda m: m["band_key"].update(value_bits=35))),
    "meta band_key.value_bits 16": ("clean", lambda p: _set_meta(p, lambda m: m["band_key"].update(value_bits=16))),
    "meta band_key.value_bits 1000": ("clean", lambda p: _set_meta(
        p, lambda m: m["band_key"].update(value_bits=1000))),
    "meta params.title_bands 5": ("clean", lambda p: _set_meta(p, lambda m: m["params"].update(title_bands=5))),
    "meta title_bands 5, layout and band_key to match": ("clean", lambda p: _set_meta(p, _rebanded("title", 5))),
    "meta body_bands 5, layout to match": ("clean", lambda p: _set_meta(p, _rebanded("body", 5))),
    "namespace id changed": ("clean", lambda p: _sql(p, "UPDATE namespace SET id = 7 WHERE id = 1;")),
    "namespace id changed in every row": ("clean", lambda p: _sql(
        p, "UPDATE namespace SET id = 7 WHERE id = 1; UPDATE entry SET ns = 7 WHERE ns = 1;")),
    "DELETE FROM entry, band rows left": ("clean", lambda p: _sql(p, "DELETE FROM entry;")),
    "7 entries of 8 deleted, band rows left": ("clean", lambda p: _sql(p, "DELETE FROM entry WHERE id % 8 <> 0;")),
    "entry id counter set to 0": ("clean", lambda p: _sql(p, "UPDATE sqlite_sequence SET seq = 0;")),
    "entry id counter deleted": ("clean", lambda p: _sql(p, "DELETE FROM sqlite_sequence;")),
    "wal damaged, opened through a symlink": ("pending", _wal_damaged_behind_symlink),
    "wal emptied, -shm intact": ("pending", lambda p: os.truncate(f"{p}-wal", 0)),
    "wal deleted, -shm intact": ("pending", lambda p: os.unlink(f"{p}-wal")),
}


@dataclass
class FileResult:
    scenario: str
    tried: int  # committed entries at stake
    survived: int
    lost: int  # committed entries admitted again or silently missing
    outcome: str


def _refused_or_counted(name: str, path: Path, fps: Sequence[tuple[int | None, int | None, str]]) -> FileResult:
    from scrapy_simhash.index import SimhashIndexError, open_index

    try:
        open_index(path, create=False).close()
    except SimhashIndexError as exc:
        return FileResult(name, len(fps), len(fps), 0,
                          f"refused at open: {str(exc).replace(str(path), '<index>')[:140]}")
    try:
        lost = readmitted(path, fps)
    except Exception as exc:  # the finding: an index that opens and then fails
        return FileResult(name, len(fps), len(fps), 0, f"opened, then {type(exc).__name__}: {str(exc)[:80]}")
    return FileResult(name, len(fps), len(fps) - lost, lost, "opened without error")


def file_damage_campaign(workdir: Path, n: int = FILE_ENTRIES, seed: int = 0) -> list[FileResult]:
    """Each damage of :data:`FILE_DAMAGE` applied to a real index of ``n`` committed entries, then
    the triggers, a FIFO at the index path and SIGKILLs mid-write (which must still open)."""
    from scrapy_simhash.index import Query, SimhashIndexError, open_index

    fps = file_fingerprints(n, seed)
    sources = {"pending": workdir / "pending.sqlite3", "clean": workdir / "clean.sqlite3"}
    write_index(sources["pending"], fps)
    write_index(sources["clean"], fps, pending=False)
    results = []
    for k, (name, (kind, damage)) in enumerate(FILE_DAMAGE.items()):
        path = workdir / f"damaged{k}.sqlite3"
        _copy_index(sources[kind], path)
        damage(path)
        results.append(_refused_or_counted(name, path, fps))
    for name, trigger in (("trigger deleting each new entry", TRIGGER_DELETE),
                          ("trigger copying each URL elsewhere", TRIGGER_COPY)):
        path = workdir / f"{name.split()[1]}.sqlite3"
        write_index(path, [], pending=False)
        _sql(path, trigger)
        try:
            with open_index(path) as ix:
                for t, b, url in fps:
                    ix.check_and_add(Query(t, b, 2, 3, url=url))
        except SimhashIndexError as exc:
            results.append(FileResult(name, n, n, 0, f"refused: {str(exc).replace(str(path), '<index>')[:150]}"))
            continue
        result = _refused_or_counted(name, path, fps)
        conn = sqlite3.connect(path)
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'loot'").fetchone():
            result.outcome += f"; {conn.execute('SELECT count(*) FROM loot').fetchone()[0]} URLs copied to 'loot'"
        conn.close()
        results.append(result)
    fifo = workdir / "fifo.sqlite3"
    os.mkfifo(fifo)
    probe = subprocess.Popen([sys.executable, "-c", "import sys; from scrapy_simhash.index import open_index\n"
                              "try: open_index(sys.argv[1])\nexcept Exception as e: print(e)", str(fifo)],
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                 filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))})
    try:
        out, _ = probe.communicate(timeout=30)
        results.append(FileResult("FIFO at the index path", 1, 1, 0, f"refused: {out.strip()[:150]}"))
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.wait()
        results.append(FileResult("FIFO at the index path", 1, 0, 1, "open hung for 30 s (killed)"))
    results.append(_immutable_shm(workdir / "immutable", fps, sources["pending"]))
    rng = random.Random(seed)
    tried = survived = 0
    problems = []
    for k in range(5):
        path = workdir / f"killed{k}.sqlite3"
        committed = write_index(path, fps, kill_after=rng.randint(1, n - 1))
        tried += len(committed)
        try:
            with open_index(path, create=False) as ix:
                present = {e.url for e in ix.entries()}
            survived += len(set(committed) & present)
        except SimhashIndexError as exc:
            problems.append(str(exc)[:120])
    results.append(FileResult("SIGKILL mid-write (5 runs): must open", tried, survived, tried - survived,
                              "; ".join(problems) or "opened with every committed entry"))
    return results


def _immutable_shm(workdir: Path, fps: Sequence[tuple[int, int | None, str]], source: Path) -> FileResult:
    """A pending index whose -shm is immutable (``chattr +i``), opened by a real crawl: it must end
    with the index error, not be killed by SIGBUS."""
    name = "-shm immutable (chattr +i), a real crawl"
    workdir.mkdir()
    path = workdir / "i.sqlite3"
    _copy_index(source, path)
    shm = Path(f"{path}-shm")
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(shm)], capture_output=True).returncode:
        return FileResult(name, 0, 0, 0, "skipped: chattr +i is not available here")
    items, kept = workdir / "items.jsonl", workdir / "kept.jsonl"
    write_jsonl(items, [{"title": f"title {k}", "body": f"body {k}", "url": url} for k, (_, _, url) in enumerate(fps)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    try:
        proc = subprocess.run([*crawl_command(items, path, kept, workdir), "-s", "LOG_LEVEL=INFO"],
                              capture_output=True, text=True, cwd=workdir, env=env, timeout=300)
    finally:
        subprocess.run(["chattr", "-i", str(shm)], check=True)
    reason = next((line.split("Closing spider ", 1)[1][:150] for line in proc.stderr.splitlines()
                   if "Closing spider (" in line), "no finish reason logged")
    passed = len(read_urls(kept)) if kept.exists() else 0
    ok = proc.returncode >= 0 and "simhash_index_error" in reason and not passed
    return FileResult(name, len(fps), len(fps) if ok else 0, 0 if ok else len(fps),
                      f"exit {proc.returncode}, {passed} passed on: {reason.replace(str(path), '<index>')}")


def print_file_results(results: Sequence[FileResult]) -> None:
    width = max(len(r.scenario) for r in results)
    print(f"\nFILES: {'scenario':<{width}}  tried  survived  lost  outcome")
    for r in results:
        print(f"       {r.scenario:<{width}}  {r.tried:5d}  {r.survived:8d}  {r.lost:4d}  {r.outcome}")


# ------------------------------------------------------------------------------------------------
# Redis that forgets, a poisoned batch, items that fail after the pipeline
# ------------------------------------------------------------------------------------------------


class _RedisServer:
    """A private redis-server on 127.0.0.1 (a free port, or ``port``) with ``args``; :meth:`stop` ends it."""

    def __init__(self, workdir: Path, *args: str, port: int | None = None) -> None:
        import shutil
        import socket

        import redis

        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server is not installed")
        if port is None:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
        self.port, self.url = port, f"redis://127.0.0.1:{port}/0"
        workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                      "--dir", str(workdir), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(250):
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def item_fault_campaign(workdir: Path, n: int = 32, seed: int = 3) -> list[FileResult]:
    """Redis servers that may forget (allkeys-lru eviction; a restart without persistence under a
    running index), a batch of ``n`` with one poisoned band key: tried / survived / lost (lost: a
    story admitted again, or an item dropped with its neighbours)."""
    from scrapy_simhash.index import IndexOpenError, Query, SimhashIndexError, open_index

    rng = random.Random(seed)
    fps = [rng.getrandbits(64) for _ in range(n)]

    def q(fp: int, url: str) -> Any:
        return Query(title_fp=fp, body_fp=None, title_k=2, body_k=3, url=url)

    results = []
    try:
        server = _RedisServer(workdir / "lru", "--maxmemory-policy", "allkeys-lru", "--appendonly", "yes")
    except (FileNotFoundError, RuntimeError) as exc:
        return [FileResult("redis scenarios", 0, 0, 0, f"skipped: {exc}")]
    try:
        open_index(server.url).close()
        results.append(FileResult("redis: maxmemory-policy allkeys-lru", n, 0, n, "opened: entries may be evicted"))
    except IndexOpenError as exc:
        results.append(FileResult("redis: maxmemory-policy allkeys-lru", n, n, 0, f"refused at open: {exc}"[:150]))
    finally:
        server.stop()
    server = _RedisServer(workdir / "restart", "--appendonly", "no")
    try:
        try:
            open_index(server.url).close()
            refused = "opened"
        except IndexOpenError:
            refused = "refused at open (default)"
        with open_index(server.url, redis_unsafe="warn") as ix:  # a user who chose to run it anyway
            for k, fp in enumerate(fps):
                ix.check_and_add(q(fp, f"u{k}"))
            server.stop()
            server = _RedisServer(workdir / "restart", "--appendonly", "no", port=server.port)  # empty now
            again = 0
            for k, fp in enumerate(fps):
                with contextlib.suppress(SimhashIndexError):  # "lost its keys": never an answer
                    again += ix.check_and_add(q(fp, f"again{k}")).match is None
        results.append(FileResult("redis: restarted without persistence", n, n - again, again,
                                  f"{refused}; with 'warn', every call after the restart failed "
                                  f"('lost its keys'): {again} stories admitted again"))
    finally:
        server.stop()
    server = _RedisServer(workdir / "poison", "--appendonly", "yes")
    try:
        import redis

        with open_index(server.url) as ix:
            bad, raw, k = fps[0] ^ (1 << 63), redis.Redis.from_url(server.url), ix._k  # type: ignore[attr-defined]
            for part, value in k.tiers["title"].store(bad):  # filed in its band buckets, holders unreadable
                key, field = k.bucket("title", part, value)
                raw.hset(key, field, bad.to_bytes(8, "big"))
            key, field = k.holders("title", bad)
            raw.hset(key, field, b"not holders")
            out = ix.check_and_add_many([q(fp, f"b{k}") for k, fp in enumerate(fps[1:])] + [q(bad, "poisoned")])
            decided, stored = sum(o.error is None for o in out), ix.count()
        results.append(FileResult(f"redis: batch of {n}, one poisoned band key", n, decided, n - 1 - stored,
                                  f"{n - decided} item failed alone, {stored} neighbours decided and committed"))
    finally:
        server.stop()
    return results


@dataclass
class ForgetResult:
    scenario: str
    stories: int  # stories stored before the fault
    stored_twice: int  # of them, admitted again after it
    outcome: str
    wrong: int = 0  # reposts matched to another story than their own


def _stories(n: int, seed: int) -> tuple[list[Any], list[Any], list[Any]]:
    """``n`` stories (random title and body fingerprints), a repost of each (title 1 bit away, body
    2: a duplicate by the title tier) and ``n`` other stories."""
    from scrapy_simhash.index import Query

    rng = random.Random(seed)

    def q(t: int, b: int, url: str) -> Any:
        return Query(title_fp=t, body_fp=b, title_k=2, body_k=3, url=url)

    fps = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(2 * n)]
    originals = [q(t, b, f"https://a.example/{k}") for k, (t, b) in enumerate(fps[:n])]
    reposts = [q(t ^ (1 << rng.randrange(64)), b ^ (3 << rng.randrange(62)), f"https://b.example/{k}")
               for k, (t, b) in enumerate(fps[:n])]
    others = [q(t, b, f"https://c.example/{k}") for k, (t, b) in enumerate(fps[n:])]
    return originals, reposts, others


def _feed(ix: Any, queries: Sequence[Any], batch: int = 25, originals: Sequence[Any] = ()
          ) -> tuple[int, int, str]:
    """Feed ``queries`` as a crawl would, going on past failed calls: (admitted, refused, first
    refusal); with ``originals`` (the story each query reposts), the matches naming another story
    are counted in ``_feed.wrong``."""
    from scrapy_simhash.index import SimhashIndexError

    new = refused = 0
    first = ""
    _feed.wrong = 0  # type: ignore[attr-defined]
    for start in range(0, len(queries), batch):
        part = queries[start : start + batch]
        try:
            out = ix.check_and_add_many(part)
        except SimhashIndexError as exc:
            refused += len(part)
            first = first or str(exc)
            continue
        new += sum(o.match is None and o.entry_id is not None for o in out)
        refused += sum(o.error is not None for o in out)
        first = first or next((o.error for o in out if o.error), "")
        for o, original in zip(out, originals[start : start + batch], strict=False):
            if o.match is not None and o.match.entry.url != original.url:
                _feed.wrong += 1  # type: ignore[attr-defined]
    return new, refused, first


def _opened(url: str, **kw: Any) -> tuple[Any, str]:
    from scrapy_simhash.index import SimhashIndexError, open_index

    try:
        return open_index(url, **kw), ""
    except SimhashIndexError as exc:
        return None, str(exc)


def _short(text: str, n: int = 110) -> str:
    text = re.sub(r"\s+", " ", text.replace("redis://127.0.0.1", "").strip())
    return text if len(text) <= n else text[: n - 1] + "…"


def redis_forget_campaign(workdir: Path, n: int = 1200, seed: int = 11) -> list[ForgetResult]:
    """A Redis that forgets, however it forgot, and Redis state tampered with: per scenario, ``n``
    stories stored, the fault, then a crawl that goes on past refused calls feeds a repost of each
    (after ``n`` other stories where the fault bites only when new entries are written): how many
    stories are stored twice. Refused at open or at the first call after the fault is the safe answer."""
    import redis

    from scrapy_simhash.index import open_index

    originals, reposts, others = _stories(n, seed)
    half = n // 2
    out: list[ForgetResult] = []
    try:
        server = _RedisServer(workdir / "aof", "--appendonly", "yes")
    except (FileNotFoundError, RuntimeError) as exc:
        return [ForgetResult("redis forgets", 0, 0, f"skipped: {exc}")]
    admin = redis.Redis.from_url(server.url)
    try:
        # FLUSHALL under a running crawl, then another writable open (a `dedup` of an empty file)
        first = open_index(server.url)
        _feed(first, originals)
        admin.flushall()
        _, _, right_after = _feed(first, others[:1])
        open_index(server.url).close()
        twice, refused, why = _feed(first, reposts)
        first.close()
        out.append(ForgetResult("FLUSHALL, then another writable open", n, twice,
                                f"next call: {_short(right_after, 50)}; after the reopen: "
                                + (f"{refused} calls refused: {_short(why)}" if refused else "answered")))
        # an older copy of the data restored under a running crawl (the AOF copied, more stories, restart)
        admin.flushall()
        first = open_index(server.url)
        _feed(first, originals[:half])
        time.sleep(1.5)  # everysec: on disk
        snapshot = workdir / "aof-copy"
        shutil.copytree(workdir / "aof", snapshot)
        _feed(first, originals[half:])
        server.proc.kill()
        server.proc.wait(10)
        shutil.rmtree(workdir / "aof")
        shutil.copytree(snapshot, workdir / "aof")
        server = _RedisServer(workdir / "aof", "--appendonly", "yes", port=server.port)
        twice, refused, why = _feed(first, reposts)
        first.close()
        out.append(ForgetResult("restart from an older copy of the AOF", n, twice,
                                f"{refused} calls refused: {_short(why)}" if refused else "answered"))
        # state that cannot be right: each on its own prefix, then a new process crawls on
        tamperings: list[tuple[str, Any]] = [
            ("SET …:seq 0", lambda base, pre: admin.set(base + "seq", 0)),
            ("DEL …:seq", lambda base, pre: admin.delete(base + "seq")),
            ("SET …:seq (highest id - 10)", lambda base, pre: admin.decrby(base + "seq", 10)),
            ("DEL <prefix>:meta (record)", lambda base, pre: admin.delete(f"{pre}:meta")),
            ("DEL …:n, …:nbands", lambda base, pre: admin.delete(base + "n", base + "nbands")),
            ("DEL every …:h[tb]:* (holders)", lambda base, pre: _delete_matching(admin, base + "h[tb]:*")),
            ("DEL every …:b* (band buckets)", lambda base, pre: _delete_matching(admin, base + "b*")),
            ("DEL every …:e:* (records)", lambda base, pre: _delete_matching(admin, base + "e:*")),
            ("DEL …:hours", lambda base, pre: admin.delete(base + "hours")),
        ]
        for k, (name, tamper) in enumerate(tamperings):
            prefix = f"t{k}"
            url = f"{server.url}?prefix={prefix}"
            with open_index(url) as ix:
                _feed(ix, originals)
                base = ix._base  # type: ignore[attr-defined]
            tamper(base, prefix)
            later, why = _opened(url)
            if later is None:
                out.append(ForgetResult(name, n, 0, f"refused at open: {_short(why)}"))
                continue
            _feed(later, others)
            twice, refused, why = _feed(later, reposts, originals=originals)
            later.close()
            out.append(ForgetResult(name, n, twice, f"{refused} calls refused: {_short(why)}" if refused
                                    else "answered", _feed.wrong))  # type: ignore[attr-defined]
        # the same tampering under a running crawl
        url = f"{server.url}?prefix=running"
        with open_index(url) as ix:
            _feed(ix, originals)
            admin.set(ix._base + "seq", 0)  # type: ignore[attr-defined]
            _feed(ix, others)
            twice, refused, why = _feed(ix, reposts, originals=originals)
        out.append(ForgetResult("SET …:seq 0 under a running crawl", n, twice,
                                f"{refused} calls refused: {_short(why)}" if refused else "answered",
                                _feed.wrong))  # type: ignore[attr-defined]
    finally:
        server.stop()
    # RDB snapshots only (save 3600 1): SIGKILL and restart from the last snapshot
    rdb = ("--appendonly", "no", "--save", "3600 1")
    server = _RedisServer(workdir / "rdb", *rdb)
    try:
        ix, why = _opened(server.url)
        refused_at_open = ix is None
        if ix is not None:
            ix.close()
        first = open_index(server.url, redis_unsafe="warn")
        _feed(first, originals[:half])
        redis.Redis.from_url(server.url).save()  # the snapshot the server would take on its own
        _feed(first, originals[half:])
        server.proc.kill()
        server.proc.wait(10)
        server = _RedisServer(workdir / "rdb", *rdb, port=server.port)
        twice, refused, why_later = _feed(first, reposts)
        first.close()
        opened = "refused at open" if refused_at_open else "opened by default"
        out.append(ForgetResult("RDB only (save 3600 1), SIGKILL + restart", n, twice,
                                f"{opened}: {_short(why, 60)}; with 'warn', after the restart: "
                                + (f"{refused} calls refused: {_short(why_later, 70)}" if refused else "answered")))
    finally:
        server.stop()
    server = _RedisServer(workdir / "nofsync", "--appendonly", "yes", "--appendfsync", "no")
    try:
        ix, why = _opened(server.url)
        out.append(ForgetResult("appendfsync no", 0, 0, f"refused at open: {_short(why)}" if ix is None
                                else "opened: an OS crash may lose the last ~30 s of acknowledged writes"))
        if ix is not None:
            ix.close()
    finally:
        server.stop()
    return out


def _delete_matching(client: Any, pattern: str) -> None:
    for key in list(client.scan_iter(match=pattern, count=1000)):
        client.delete(key)


def print_forget_results(results: Sequence[ForgetResult]) -> None:
    width = max(len(r.scenario) for r in results)
    print(f"\nREDIS FORGETS  {'scenario':<{width}}  stories  stored twice  wrong original  outcome")
    for r in results:
        print(f"               {r.scenario:<{width}}  {r.stories:7d}  {r.stored_twice:12d}  {r.wrong:14d}  "
              f"{r.outcome}")


# ------------------------------------------------------------------------------------------------
# Delivery: kills of a crawl whose storage fsyncs each item, counted in stories stored twice and lost
# ------------------------------------------------------------------------------------------------

DELIVERY_SPIDER = textwrap.dedent(
    """
    \"\"\"One data: page per item of the ``input`` file; a store after the plugin appends and fsyncs each item.\"\"\"
    import json
    import os

    import scrapy


    class FsyncStore:
        def __init__(self, path):
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        @classmethod
        def from_crawler(cls, crawler):
            return cls(crawler.settings["STORE_PATH"])

        def process_item(self, item, spider=None):
            os.write(self.fd, (json.dumps(dict(item), ensure_ascii=False) + "\\n").encode("utf-8"))
            os.fsync(self.fd)
            return item

        def close_spider(self, spider=None):
            os.close(self.fd)


    class PagesSpider(scrapy.Spider):
        name = "pages"
        custom_settings = {
            "ADDONS": {"scrapy_simhash.Addon": 300},
            "ITEM_PIPELINES": {FsyncStore: 900},
            "LOG_LEVEL": "INFO",
            "TELNETCONSOLE_ENABLED": False,
            "LOGSTATS_INTERVAL": 0,
        }

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            with open(kwargs["input"], encoding="utf-8") as f:
                self.items = [json.loads(line) for line in f]

        async def start(self):
            for n in range(len(self.items)):
                yield scrapy.Request(f"data:,{n}", dont_filter=True)

        def parse(self, response):
            yield dict(self.items[int(response.text)])
    """
)


@dataclass
class DeliveryKill:
    at: float  # seconds after start
    stored_killed: int  # lines the killed crawl stored
    pending: int  # pending entries left by the kill
    stored_rerun: int
    twice: int  # items (by URL) stored by both runs
    stories_twice: int  # stories stored more often than by a clean crawl
    lost: int  # stories a clean crawl stores that neither run stored
    integrity: str
    released_log: str = ""  # what the re-run said about the dead crawl's entries


def _store_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _delivery_crawl(items: Path, index_url: str, store: Path, workdir: Path, log: Path) -> subprocess.Popen[bytes]:
    spider = workdir / "pages_spider.py"
    if not spider.exists():
        spider.write_text(DELIVERY_SPIDER, encoding="utf-8")
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"input={items}",
           "-s", f"SIMHASH_INDEX_URL={index_url}", "-s", f"STORE_PATH={store}", "--logfile", str(log)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=workdir,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _delivery_pending(index_url: str) -> tuple[int, str]:
    """Pending entries left in the index, and its integrity (SQLite: ``integrity_check``; Redis: it
    opens and every pending id names an entry)."""
    path = index_url.removeprefix("sqlite:///")
    if path != index_url:
        if not Path(path).exists():
            return 0, "ok"
        check = integrity(Path(path))
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM pending").fetchone()[0]), check
        except sqlite3.OperationalError:
            return 0, check
        finally:
            conn.close()
    import redis

    client = redis.Redis.from_url(index_url.split("?")[0])
    prefix = index_url.split("prefix=")[1]
    keys = [k for k in client.scan_iter(match=f"{prefix}*pending".encode())]
    return (sum(client.hlen(k) for k in keys), "ok")


def _delivery_cleanup(index_url: str) -> None:
    if index_url.startswith("redis"):
        import redis

        client = redis.Redis.from_url(index_url.split("?")[0])
        prefix = index_url.split("prefix=")[1]
        for key in client.scan_iter(match=f"{prefix}*".encode(), count=1000):
            client.delete(key)


def delivery_campaign(kills: int, pages: int, seed: int, workdir: Path, backend: str = "sqlite",
                      redis_url: str = "redis://127.0.0.1:6379/0", log: Any = print,
                      by_stored: bool = False) -> list[DeliveryKill]:
    """``kills`` SIGKILLs of a real crawl of ``pages`` ``data:`` pages (real articles and 25 % reposts)
    whose store after the plugin appends and fsyncs each item, each at a random moment between its
    first stored item and the end a clean crawl took (``by_stored``: up to 50 ms after a random
    number of items were stored, a moment of the work whatever the machine's load); then a re-run
    on the same index. Counted per kill: items stored by both runs, stories stored more often than
    by a clean crawl, stories a clean crawl stores that neither run stored (lost), the index's
    integrity."""
    rng = random.Random(seed)
    articles = load_articles(int(pages / 1.25) + 1)
    items = with_reposts(articles, 0.25, rng)[:pages]
    path = workdir / "pages.jsonl"
    write_jsonl(path, items)
    story_of = {it["url"]: it["story"] for it in items}

    def index_url(tag: str) -> str:
        if backend == "redis":
            return f"{redis_url}?prefix=dk{seed}{tag}"
        return f"sqlite:///{workdir / (tag + '.sqlite3')}"

    ref_url, ref_store = index_url("ref"), workdir / "ref.store"
    _delivery_cleanup(ref_url)
    started = time.monotonic()
    proc = _delivery_crawl(path, ref_url, ref_store, workdir, workdir / "ref.log")
    first = None
    while proc.poll() is None:
        if first is None and ref_store.exists() and ref_store.stat().st_size:
            first = time.monotonic() - started
        time.sleep(0.01)
    duration = time.monotonic() - started
    assert proc.returncode == 0, f"clean crawl exited with {proc.returncode}; see {workdir / 'ref.log'}"
    clean: dict[str, int] = {}
    for it in _store_lines(ref_store):
        clean[story_of[it["url"]]] = clean.get(story_of[it["url"]], 0) + 1
    _delivery_cleanup(ref_url)
    log(f"clean crawl ({backend}): {len(items)} pages, {sum(clean.values())} stored ({len(clean)} stories), "
        f"first stored after {first or 0:.1f} s, done in {duration:.1f} s")
    results = []
    for n in range(kills):
        tag = f"dk{n:02d}"
        url, store, store2 = index_url(tag), workdir / f"{tag}.store", workdir / f"{tag}.rerun"
        _delivery_cleanup(url)
        at = rng.uniform(first or 0.0, duration)
        t0 = time.monotonic()
        proc = _delivery_crawl(path, url, store, workdir, workdir / f"{tag}.log")
        if by_stored:
            _wait_for_lines(proc, store, rng.randint(1, sum(clean.values()) - 1))
            at = rng.uniform(0, 0.05)
        try:
            proc.wait(at)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        at = time.monotonic() - t0
        pending, check = _delivery_pending(url)
        rerun_log = workdir / f"{tag}.rerun.log"
        proc = _delivery_crawl(path, url, store2, workdir, rerun_log)
        proc.wait(600)
        if proc.returncode != 0:
            check = f"re-run exited with {proc.returncode}"
        _, check2 = _delivery_pending(url)
        if check2 != "ok":
            check = check2
        first_run, second_run = _store_lines(store), _store_lines(store2)
        counts: dict[str, int] = {}
        for it in first_run + second_run:
            counts[story_of[it["url"]]] = counts.get(story_of[it["url"]], 0) + 1
        said = [line.split("scrapy-simhash: ", 1)[-1].strip() for line in
                rerun_log.read_text(encoding="utf-8", errors="replace").splitlines()
                if "entries" in line and ("released" in line or "kept" in line)] if rerun_log.exists() else []
        r = DeliveryKill(at, len(first_run), pending, len(second_run),
                         len({i["url"] for i in first_run} & {i["url"] for i in second_run}),
                         sum(c > clean.get(s, 0) for s, c in counts.items()),
                         sum(s not in counts for s in clean), check, " / ".join(said)[:200])
        results.append(r)
        log(f"kill {n + 1:2d} at {r.at:5.2f} s: stored {r.stored_killed}, pending {r.pending}; re-run stored "
            f"{r.stored_rerun}; stored twice {r.twice} (stories {r.stories_twice}), lost {r.lost}, "
            f"integrity {r.integrity}" + (f"; re-run said: {r.released_log}" if r.released_log else ""))
        _delivery_cleanup(url)
    return results


def delivery_main(args: argparse.Namespace, workdir: Path) -> int:
    """``--delivery-kills``: the delivery campaign on each backend asked for; prints the figures."""
    failed = 0
    for backend in args.backend.split(","):
        results = delivery_campaign(args.delivery_kills, args.pages, args.seed, workdir / backend, backend,
                                    args.redis_url, by_stored=args.kill_by_stored)
        bad = sum(r.integrity != "ok" for r in results)
        failed += bad
        print(f"DELIVERY ({backend}): {len(results)} kills; stored twice: {sum(r.twice for r in results)} items "
              f"({sum(r.stories_twice for r in results)} stories; worst kill "
              f"{max((r.twice for r in results), default=0)}), lost: {sum(r.lost for r in results)} stories, "
              f"integrity ok: {len(results) - bad}/{len(results)}; pending at the kills: "
              f"{sum(r.pending for r in results)}")
    print("command: python benchmarks/faults.py " + " ".join(sys.argv[1:]))
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20,
                    help="SIGKILLs in all, alternating dedup (-o stdout), crawl and dedup (-o file.gz)")
    ap.add_argument("--articles", type=int, default=400, help="real articles (plus 25%% reposts)")
    ap.add_argument("--race-rounds", type=int, default=10)
    ap.add_argument("--race-stories", type=int, default=40)
    ap.add_argument("--crafted-chars", type=int, default=16384,
                    help="length of the crafted titles and bodies (0: no crafted items)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", help="keep the files here (default: a temporary directory)")
    ap.add_argument("--files-only", action="store_true", help="only the damaged and tampered file scenarios")
    ap.add_argument("--redis-forgets", action="store_true",
                    help="only the Redis scenarios: a server that forgets, state tampered with")
    ap.add_argument("--redis-stories", type=int, default=1200, help="stories stored before each Redis fault")
    ap.add_argument("--delivery-kills", type=int, default=0,
                    help="only the delivery campaign: this many SIGKILLs of a crawl with an fsyncing store")
    ap.add_argument("--pages", type=int, default=3000, help="pages of each delivery crawl")
    ap.add_argument("--backend", default="sqlite", help="delivery campaign backends: sqlite, redis or both")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0", help="the delivery campaign's Redis")
    ap.add_argument("--kill-by-stored", action="store_true",
                    help="delivery kills after a random number of stored items (not at a random time)")
    args = ap.parse_args(argv)
    if args.redis_forgets:
        with tempfile.TemporaryDirectory(prefix="simhash-redis-") as tmp:
            forgets = redis_forget_campaign(Path(args.workdir or tmp), args.redis_stories, args.seed)
        print_forget_results(forgets)
        return 1 if any(r.stored_twice or r.wrong for r in forgets) else 0
    if args.delivery_kills:
        with tempfile.TemporaryDirectory(prefix="simhash-delivery-") as tmp:
            where = Path(args.workdir or tmp)
            for backend in args.backend.split(","):
                (where / backend).mkdir(parents=True, exist_ok=True)
            return delivery_main(args, where)
    if args.files_only:
        with tempfile.TemporaryDirectory(prefix="simhash-files-") as tmp:
            where = Path(args.workdir or tmp)
            files = file_damage_campaign(where) + item_fault_campaign(where / "items")
            forgets = redis_forget_campaign(where / "forgets", args.redis_stories, args.seed)
        print_file_results(files)
        print_forget_results(forgets)
        return 1 if any(r.lost for r in files) or any(r.stored_twice or r.wrong for r in forgets) else 0
    if not corpus_available():
        print(f"skipped: needs the shared corpus files {', '.join(SOURCES)} under {CORPUS}")
        return 0
    with tempfile.TemporaryDirectory(prefix="simhash-faults-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        results = kill_campaign(args.kills, args.articles, args.seed, workdir, kinds=("dedup", "crawl", "dedup-gz"))
        killed = [r for r in results if not r.finished_first]
        failed = [r for r in results if r.problems]
        print(f"\nKILL: {len(results)} runs ({sum(r.kind == 'dedup' for r in results)} dedup, "
              f"{sum(r.kind == 'crawl' for r in results)} crawl, {sum(r.kind == 'dedup-gz' for r in results)} "
              f"dedup -o .gz), {len(killed)} killed mid-run; "
              f"{sum(r.passed_before_kill for r in results)} items passed on before the kills, all in the index: "
              f"{'yes' if not any('not in the index' in p for r in results for p in r.problems) else 'NO'}; "
              f"{sum(r.committed_not_passed for r in results)} committed but not yet passed on when killed; "
              f"{sum(r.passed_on_rerun for r in results)} passed on by the re-runs (of them "
              f"{sum(r.redelivered for r in results)} again, pending at the kill); "
              f"integrity ok and re-run == clean run in {len(results) - len(failed)}/{len(results)}")
        rng = random.Random(args.seed + 1)
        stories = distinct_stories(load_articles(args.race_stories), workdir)
        race_failed = 0
        for n in range(args.race_rounds):
            problems = race_round(stories, 3, 4, rng, workdir, f"race{n:02d}")
            race_failed += bool(problems)
            print(f"race round {n + 1:2d}: 4 processes x {len(stories) * 3} lines ({len(stories)} stories x 3 "
                  f"copies): " + ("one admitted per story, none lost" if not problems else f"PROBLEMS {problems}"))
        print(f"RACE: {args.race_rounds - race_failed}/{args.race_rounds} rounds exact "
              f"({len(stories)} stories, 3 copies each, 4 processes)")
        crafted_problems: list[str] = []
        if args.crafted_chars:
            tried, decided, gap, crafted_problems = crafted_scenario(args.crafted_chars, workdir)
            print(f"CRAFTED: tried {tried} items (6 crafted), survived {decided}, lost {tried - decided}; "
                  f"longest reactor gap {gap:.2f} s (limit 1 s)"
                  + (f"  PROBLEMS: {crafted_problems}" if crafted_problems else ""))
        (workdir / "files").mkdir(exist_ok=True)
        files = file_damage_campaign(workdir / "files") + item_fault_campaign(workdir / "items")
        print_file_results(files)
        forgets = redis_forget_campaign(workdir / "forgets", args.redis_stories, args.seed)
        print_forget_results(forgets)
        print(f"total {time.monotonic() - started:.0f} s")
        forgot = any(r.stored_twice or r.wrong for r in forgets)
        return 1 if failed or race_failed or crafted_problems or forgot or any(r.lost for r in files) else 0


if __name__ == "__main__":
    sys.exit(main())
