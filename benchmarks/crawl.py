"""What the pipeline costs a real crawl: the same crawl with it on and off.

Per language (``zh``: inews BDCI 2019, ``en``: Reuters-21578 bodies that are not empty, picked as
``throughput.py`` picks them), ``--limit`` articles become HTML pages (an ``h1`` title, the body's
paragraphs in ``div.content``, a little page chrome: navigation, a sidebar, a footer) served by a
threaded ``http.server`` on 127.0.0.1 from this process. Each crawl is a fresh subprocess with a
fresh SQLite index on a real disk: one spider requests every page (``CONCURRENT_REQUESTS=16``, and
16 per domain, since every page is on one host) and yields ``{"url", "title": h1 text, "body":
div.content HTML}``, the pipeline enabled through ``ADDONS = {"scrapy_simhash.Addon": 300}``, or the
same crawl with ``SIMHASH_ENABLED = False`` (Scrapy's own cost).

Measured in the crawl process: items/s from ``spider_opened`` to the last item leaving the pipelines
(scraped or dropped); CPU seconds of the crawl process itself and of its children, the fingerprint
workers (``getrusage``, self from ``spider_opened``, children over their lives: they are joined when the
spider closes, before the reactor stops);
and the reactor's responsiveness: a ``LoopingCall`` every 10 ms records the gaps between its calls
during the crawl, reported as p99 and max. Also: the CPU of the page server (the threads of the
benchmark's own process, over each crawl) and how idle the machine's CPUs were from ``spider_opened`` to
the last item (near 0 %: the crawl is bound by all the CPU it takes, not by one process). Rounds
interleave the crawls (on/off order shuffled per round and language, ``--seed``); the tables give
medians over rounds and the on/off ratios.

``--workers auto,0`` crawls with the pipeline once per value of ``SIMHASH_WORKERS`` (``auto``: its
default, the cores minus one), each compared with the crawl without it. ``--base ../main`` also crawls
with another tree's pipeline (``SIMHASH_WORKERS`` auto), interleaved, as ``base on``: a change
measured against its base in one run. ``--memory`` serves the pages from memory (a handler that
writes bytes held in a dict) instead of from files, so the server's share of the two cores is small.
``--threads`` adds where the crawl process's CPU went: per thread (``/proc/self/task``, sampled every
0.1 s and at the end, by thread name), from ``spider_opened`` to the end of the crawl.

Run: ``python benchmarks/crawl.py`` (2,200 pages per language, 3 rounds; ``--limit 300 --rounds=1``
for a smoke run). Short crawls, where the start-up counts: ``--limit 2000 --memory`` and ``--limit 800
--memory``.
"""

from __future__ import annotations

import argparse
import html
import http.server
import json
import os
import platform
import random
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from throughput import SOURCES, fs_type, load_docs, serve  # noqa: E402

TICK = 0.010
CONCURRENCY = 16

PAGE = """<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title} | Example News</title></head>
<body>
<nav class="menu"><a href="/">Home</a> <a href="/world">World</a> <a href="/business">Business</a>
<a href="/sport">Sport</a> <a href="/tech">Tech</a></nav>
<main>
<h1>{title}</h1>
<p class="byline">Example News, staff reporter</p>
<div class="content">
{paragraphs}
</div>
</main>
<aside class="related"><h2>Most read</h2><ul><li><a href="/a">Markets close higher</a></li>
<li><a href="/b">Weather warning issued</a></li><li><a href="/c">New stadium opens</a></li></ul></aside>
<footer>© Example News. All rights reserved. <a href="/privacy">Privacy</a> <a href="/contact">Contact</a></footer>
</body></html>
"""


def write_pages(docs: list[dict[str, str]], lang: str, directory: Path) -> list[str]:
    """One HTML page per article under ``directory/lang``; returns their paths relative to it."""
    (directory / lang).mkdir(parents=True, exist_ok=True)
    names = []
    for i, d in enumerate(docs):
        paras = [p.strip() for p in d["body"].splitlines() if p.strip()]
        page = PAGE.format(lang=lang, title=html.escape(d["title"] or f"Article {i}"),
                           paragraphs="\n".join(f"<p>{html.escape(p)}</p>" for p in paras))
        name = f"{lang}/{i:05d}.html"
        (directory / name).write_text(page, "utf-8")
        names.append(name)
    return names


class _Pages(http.server.BaseHTTPRequestHandler):
    """Serves the pages of :func:`serve_memory`'s dict (``self.server.pages``), 404 for any other path."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = self.server.pages.get(self.path)  # type: ignore[attr-defined]
        self.send_response(200 if body is not None else 404)
        body = body if body is not None else b"not found"
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def serve_memory(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A 127.0.0.1 HTTP server (daemon thread) of every ``*.html`` under ``directory``, read into memory now."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    server.daemon_threads = True
    server.pages = {"/" + str(p.relative_to(directory)): p.read_bytes()  # type: ignore[attr-defined]
                    for p in directory.rglob("*.html")}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each live thread of this process, by native thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


class ThreadSampler:
    """The CPU each thread of this process used since :meth:`start`, summed by thread name (digits
    dropped: one pool's threads count together); threads that ended count up to their last sample."""

    def __init__(self) -> None:
        import threading

        self._threading = threading
        self._seen: dict[int, tuple[str, float]] = {}
        self._base: dict[int, float] = {}
        self._stop = threading.Event()

    def _sample(self) -> None:
        names = {t.native_id: t.name for t in self._threading.enumerate()}
        for tid, cpu in thread_cpu().items():
            name = names.get(tid) or self._seen.get(tid, ("?", 0.0))[0]
            self._seen[tid] = ("".join(c for c in name.split("(")[0] if not c.isdigit()).strip("_-"), cpu)

    def start(self) -> None:
        self._base = thread_cpu()
        self._sample()

        def run() -> None:
            while not self._stop.wait(0.1):
                self._sample()

        self._threading.Thread(target=run, name="bench-sampler", daemon=True).start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._sample()
        total: dict[str, float] = {}
        for tid, (name, cpu) in self._seen.items():
            total[name] = total.get(name, 0.0) + cpu - self._base.get(tid, 0.0)
        return total


def machine_ticks() -> tuple[int, int]:
    """(idle, total) clock ticks of every CPU of the machine since boot (``/proc/stat``)."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return values[3] + values[4], sum(values[:8])


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds of this process (or of its waited-for children)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------------------------------------
# the crawl subprocess
# ------------------------------------------------------------------------------------------------


def crawl_child(urls_file: str, index_url: str, workers: str | None, threads: bool = False) -> None:
    """Entry point of one crawl: prints one JSON line with its figures."""
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from twisted.internet import task

    urls = Path(urls_file).read_text("utf-8").split()
    marks: dict[str, float] = {}
    gaps: list[float] = []
    tick: dict[str, Any] = {}
    sampler = ThreadSampler() if threads else None

    class PagesSpider(scrapy.Spider):
        name = "crawlbench"
        start_urls = urls

        def parse(self, response: Any) -> Any:
            yield {"url": response.url, "title": response.css("h1::text").get(),
                   "body": response.css("div.content").get()}

    def on_tick() -> None:
        now = time.perf_counter()
        if "last" in tick:
            gaps.append(now - tick["last"])
        tick["last"] = now

    def opened(*args: Any, **kwargs: Any) -> None:
        marks["start"], marks["cpu0"] = time.perf_counter(), cpu_seconds()
        tick["machine0"] = machine_ticks()
        if sampler is not None:
            sampler.start()
        tick["loop"] = task.LoopingCall(on_tick)
        tick["loop"].start(TICK, now=True)

    def item_done(*args: Any, **kwargs: Any) -> None:
        marks["last"] = time.perf_counter()
        marks["gaps_at_last"] = len(gaps)
        tick["machine1"] = machine_ticks()

    def closed(*args: Any, **kwargs: Any) -> None:
        if sampler is not None:
            tick["threads"] = sampler.stop()
        if tick["loop"].running:
            tick["loop"].stop()

    process = CrawlerProcess({
        "ADDONS": {"scrapy_simhash.Addon": 300},
        "SIMHASH_ENABLED": workers is not None,
        **({"SIMHASH_WORKERS": workers} if workers not in (None, "auto") else {}),
        "SIMHASH_INDEX_URL": index_url,
        "CONCURRENT_REQUESTS": CONCURRENCY,
        "CONCURRENT_REQUESTS_PER_DOMAIN": CONCURRENCY,
        "LOG_LEVEL": "ERROR",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
    })
    crawler = process.create_crawler(PagesSpider)
    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    for sig in (signals.item_scraped, signals.item_dropped):
        crawler.signals.connect(item_done, signal=sig)
    process.crawl(crawler)
    process.start()
    cpu, workers_cpu = cpu_seconds() - marks["cpu0"], cpu_seconds(resource.RUSAGE_CHILDREN)
    crawl_gaps = sorted(gaps[:marks.get("gaps_at_last", len(gaps))]) or [0.0]
    stats = crawler.stats.get_stats()
    print(json.dumps({
        "self_matches": self_matches(index_url) if workers is not None else 0,
        "seconds": marks["last"] - marks["start"],
        "cpu_s": cpu + workers_cpu,
        "crawl_cpu_s": cpu,
        "workers_cpu_s": workers_cpu,
        "scraped": stats.get("item_scraped_count", 0),
        "dropped": stats.get("item_dropped_count", 0),
        "errors": stats.get("log_count/ERROR", 0),
        "responses": stats.get("response_received_count", 0),
        "gap_p99": crawl_gaps[min(len(crawl_gaps) - 1, int(0.99 * len(crawl_gaps)))],
        "gap_max": crawl_gaps[-1],
        "threads": tick.get("threads", {}),
        "idle": (tick["machine1"][0] - tick["machine0"][0]) / max(1, tick["machine1"][1] - tick["machine0"][1]),
    }))


def self_matches(index_url: str) -> int:
    """Items dropped as duplicates of their own entry (every page has its own URL): an item checked twice."""
    import sqlite3

    conn = sqlite3.connect(f"file:{index_url.removeprefix('sqlite:///')}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM decision d JOIN entry e ON e.id = d.original"
                            " WHERE d.url = e.url").fetchone()[0]
    finally:
        conn.close()


def run_crawl(urls_file: Path, root: Path, workers: str | None, threads: bool = False,
              tree: Path = REPO) -> dict[str, Any]:
    """One crawl in a fresh process: without the pipeline (``workers`` None), or with it and that
    ``SIMHASH_WORKERS``; the package imported from ``tree``."""
    served = cpu_seconds()  # this process serves the pages (its server threads) while the crawl runs
    with tempfile.TemporaryDirectory(prefix="crawl-index-", dir=root) as tmp:
        index_url = f"sqlite:///{Path(tmp) / 'index.sqlite3'}"
        proc = subprocess.run(
            [sys.executable, __file__, "--_crawl", str(urls_file), index_url, "off" if workers is None else workers,
             "threads" if threads else "-"],
            capture_output=True, text=True, cwd=str(tree), env={**os.environ, "PYTHONPATH": str(tree)},
        )
    if proc.returncode:
        raise RuntimeError(f"crawl ({label(workers)}) failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "server_cpu_s": cpu_seconds() - served}


# ------------------------------------------------------------------------------------------------
# parent
# ------------------------------------------------------------------------------------------------


BASE = "base"  #: the mode of ``--base``: the other tree's pipeline, SIMHASH_WORKERS auto


def label(workers: str | None) -> str:
    if workers == BASE:
        return "base on"
    return "off" if workers is None else "on" if workers == "auto" else f"on, {workers} workers"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def commit(tree: Path = REPO) -> str:
    out = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or "?"


def print_threads(results: dict[tuple[str, str | None], list[dict[str, Any]]], langs: list[str],
                  modes: list[str | None]) -> None:
    """The crawl process's CPU seconds per thread name (medians over rounds), one column per crawl kind."""
    columns = [(lang, mode) for lang in langs for mode in modes]
    names = sorted({name for c in columns for r in results[c] for name in r["threads"]},
                   key=lambda n: -max(statistics.median(r["threads"].get(n, 0.0) for r in results[c]) for c in columns))
    print("\ncrawl process CPU s per thread (medians; MainThread = the reactor)\n")
    print("| thread | " + " | ".join(f"{lang} {label(mode)}" for lang, mode in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in names:
        cells = [statistics.median(r["threads"].get(name, 0.0) for r in results[c]) for c in columns]
        if max(cells) >= 0.01:
            print(f"| {name} | " + " | ".join(f"{x:.2f}" for x in cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=2200, help="pages per language (default 2200)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are printed (default 3)")
    ap.add_argument("--langs", default="zh,en")
    ap.add_argument("--seed", type=int, default=18, help="seed of the per-round on/off order")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="parent of the work directory (a real disk)")
    ap.add_argument("--workers", default="auto",
                    help="SIMHASH_WORKERS values to crawl with, comma-separated (default auto: its default)")
    ap.add_argument("--threads", action="store_true", help="report the crawl process's CPU per thread")
    ap.add_argument("--base", help="another tree (e.g. ../main) whose pipeline also crawls, interleaved, as 'base on'")
    ap.add_argument("--memory", action="store_true", help="serve the pages from memory instead of from files")
    ap.add_argument("--_crawl", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._crawl:
        sys.path.insert(0, os.getcwd())  # the tree measured (run_crawl's cwd): its package, not this script's
        crawl_child(args._crawl[0], args._crawl[1], None if args._crawl[2] == "off" else args._crawl[2],
                    args._crawl[3] == "threads")
        return 0
    print("$ " + shlex.join(["python", "benchmarks/crawl.py", *(sys.argv[1:] if argv is None else argv)]))
    langs = [x for x in args.langs.split(",") if x]
    for lang in langs:
        if not SOURCES[lang].is_file():
            print(f"corpus file missing: {SOURCES[lang]} (needs ../shared/corpus next to the repo)")
            return 2
    root = Path(args.dir)
    kind = fs_type(root)
    if kind.startswith(("tmpfs", "ramfs")):
        print(f"--dir {root} is on {kind}: the index must be on a real disk (pass --dir)")
        return 2
    print(f"commit {commit()}, python {platform.python_version()}, {os.cpu_count()} CPUs; index under {root} on "
          f"{kind}; {args.limit} pages per language, {args.rounds} round(s), CONCURRENT_REQUESTS={CONCURRENCY}, "
          f"SIMHASH_WORKERS {args.workers}")
    print(f"load average at start {loadavg()}", flush=True)
    rng = random.Random(args.seed)
    modes: list[str | None] = [None, *args.workers.split(","), *([BASE] if args.base else [])]
    if args.base:
        print(f"base on = the pipeline of {args.base} (commit {commit(Path(args.base))}), SIMHASH_WORKERS auto")
    results: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="crawl-pages-", dir=root) as tmp:
        work = Path(tmp)
        names_of = {lang: write_pages(load_docs(lang, args.limit), lang, work) for lang in langs}
        server, base = (serve_memory if args.memory else serve)(work)
        url_files = {}
        for lang in langs:
            names = names_of[lang]
            url_files[lang] = work / f"{lang}-urls.txt"
            url_files[lang].write_text("\n".join(f"{base}/{n}" for n in names), "utf-8")
        try:
            for rnd in range(args.rounds):
                for lang in langs:
                    order = list(modes)
                    rng.shuffle(order)
                    for mode in order:
                        tree = Path(args.base).resolve() if mode == BASE else REPO
                        result = run_crawl(url_files[lang], root, "auto" if mode == BASE else mode, args.threads,
                                           tree)
                        results.setdefault((lang, mode), []).append(result)
                print(f"  round {rnd + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s, "
                      f"load {loadavg()})", flush=True)
        finally:
            server.shutdown()
    end_load = loadavg()
    print(f"\nmedians of {args.rounds} round(s); CPU = crawl process + workers; tick gaps of a 10 ms LoopingCall; "
          "server = the page server (this process); machine idle: all CPUs, during the crawl\n")
    print("| lang | pipeline | items/s | CPU s | crawl CPU s | workers CPU s | CPU ms/item | tick gap p99 ms "
          "| tick gap max ms | dropped | server CPU s | machine idle |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    for lang in langs:
        med: dict[str | None, dict[str, float]] = {}
        for mode in modes:
            rs = results[(lang, mode)]
            n = rs[0]["scraped"] + rs[0]["dropped"]
            bad = [r for r in rs if r["responses"] != args.limit or r["scraped"] + r["dropped"] != r["responses"]]
            if bad:
                print(f"WARNING {lang} pipeline {label(mode)}: {len(bad)} crawl(s) did not turn "
                      f"every page into an item: {bad[0]}")
            if any(r["self_matches"] for r in rs):
                print(f"WARNING {lang} pipeline {label(mode)}: items dropped as their own duplicates "
                      f"(checked twice): {[r['self_matches'] for r in rs]}")
            m = {k: statistics.median(r[k] for r in rs)
                 for k in ("seconds", "cpu_s", "crawl_cpu_s", "workers_cpu_s", "gap_p99", "gap_max", "server_cpu_s",
                           "idle")}
            m["items_s"] = statistics.median(n / r["seconds"] for r in rs)
            med[mode] = m
            dropped = "/".join(map(str, sorted({r["dropped"] for r in rs})))
            print(f"| {lang} | {label(mode)} | {m['items_s']:.0f} | {m['cpu_s']:.2f} | {m['crawl_cpu_s']:.2f} | "
                  f"{m['workers_cpu_s']:.2f} | {m['cpu_s'] / n * 1e3:.2f} | {m['gap_p99'] * 1e3:.0f} | "
                  f"{m['gap_max'] * 1e3:.0f} | {dropped} | {m['server_cpu_s']:.2f} | {m['idle']:.0%} |")
        for mode in modes[1:]:
            extra = (med[mode]["crawl_cpu_s"] - med[None]["crawl_cpu_s"]) / n * 1e3
            summary.append(f"{lang} {label(mode)}/off items/s {med[mode]['items_s'] / med[None]['items_s']:.2f}×, "
                           f"CPU {med[mode]['cpu_s'] / med[None]['cpu_s']:.2f}×, crawl process {extra:+.2f} ms/item")
    print("\nratios (pipeline on / off, medians): " + "; ".join(summary) + " (target: items/s ≥ 0.9×)")
    if args.threads:
        print_threads(results, langs, modes)
    print(f"\ntotal {time.perf_counter() - started:.0f} s; load average at end {end_load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
