"""Peak memory of a crawl whose items come faster than their verdicts, with the pipeline and without.

A spider yields ``--items`` distinct items from ``start()`` as fast as it can (no request, no pacing):
each a title and an HTML body of ``--paragraphs`` paragraphs drawn from real articles (``--corpus``,
Chinese, else filler text), numbered so that no two items are alike as strings. Each crawl is a fresh
subprocess with a fresh SQLite index; the pipeline is enabled through ``ADDONS`` (with
``SIMHASH_WORKERS`` auto and 0), or the same crawl runs with ``SIMHASH_ENABLED = False``.

Measured in the crawl process when the engine stops: its own peak RSS (``getrusage(RUSAGE_SELF)``),
the largest peak RSS of its children (``RUSAGE_CHILDREN``: the fingerprint workers, joined by then),
the most items the
item pipelines held at once (Scrapy's scraper count, sampled at each item's entry into the first
pipeline) and the items out of the pipelines. The table gives each crawl's figures and its peak RSS
over the crawl without the plugin.

Run: ``python benchmarks/memory_crawl.py`` (1,000 and 5,000 items: the peak with the plugin should not
grow with the count; ``--items 500 --workers 0`` for a smoke run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

SPIDER = textwrap.dedent(
    """
    import json
    import resource
    import sys

    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess


    class Count:
        def __init__(self, crawler):
            self.crawler = crawler
            self.most = 0

        @classmethod
        def from_crawler(cls, crawler):
            return cls(crawler)

        def process_item(self, item, spider=None):
            self.most = max(self.most, self.crawler.engine.scraper.slot.itemproc_size)
            return item


    class Unpaced(scrapy.Spider):
        name = "unpaced"

        def __init__(self, paragraphs="", items="0", per_item="8", **kwargs):
            super().__init__(**kwargs)
            with open(paragraphs, encoding="utf-8") as f:
                self.paragraphs = json.load(f)
            self.count, self.per_item = int(items), int(per_item)

        async def start(self):
            p, k = self.paragraphs, self.per_item
            for n in range(self.count):
                body = "".join(f"<p>{p[(n * 7 + j * 13) % len(p)]}</p>" for j in range(k))
                yield {"url": f"https://t.example/{n}", "title": f"{p[n % len(p)][:24]} {n}",
                       "body": f"<p>第{n}号</p>{body}"}


    def report(crawler, path):
        def write():
            stats = crawler.stats.get_stats()
            count = next(p for p in crawler.engine.scraper.itemproc.middlewares if isinstance(p, Count))
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                           "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                           "most_held": count.most,
                           "out": stats.get("item_scraped_count", 0) + stats.get("item_dropped_count", 0)}, f)
        return write


    settings = dict(arg.split("=", 1) for arg in sys.argv[4:])
    settings.update({"ITEM_PIPELINES": {Count: 100}, "ADDONS": {"scrapy_simhash.Addon": 300},
                     "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False,
                     "SIMHASH_SUMMARY": False})
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Unpaced)
    write_report = report(crawler, sys.argv[3])  # (signals hold their receivers weakly)
    crawler.signals.connect(write_report, signals.engine_stopped)
    process.crawl(crawler, paragraphs=sys.argv[1], items=sys.argv[2])
    process.start()
    """
)


def load_paragraphs(corpus: Path, most: int) -> list[str]:
    """Paragraphs of real Chinese articles (the corpus's ``zh/*.jsonl.gz``), else filler sentences."""
    out: list[str] = []
    for path in sorted((corpus / "zh").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                body = json.loads(line).get("body") or ""
                out += [p.strip() for p in body.split("\n") if len(p.strip()) >= 40]
                if len(out) >= most:
                    return out[:most]
    if out:
        return out
    import random

    rng = random.Random(0)
    return ["".join(chr(rng.randrange(0x4E00, 0x9000)) for _ in range(120)) + "。" for _ in range(most)]


def crawl(workdir: Path, paragraphs: Path, items: int, settings: dict[str, str]) -> dict[str, Any]:
    index = workdir / f"index-{time.monotonic_ns()}.sqlite3"
    out = workdir / "report.json"
    script = workdir / "spider.py"
    script.write_text(SPIDER, "utf-8")
    args = [f"{k}={v}" for k, v in {"SIMHASH_INDEX_URL": f"sqlite:///{index}", **settings}.items()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    started = time.monotonic()
    subprocess.run([sys.executable, str(script), str(paragraphs), str(items), str(out), *args],
                   cwd=workdir, env=env, check=True)
    report = json.loads(out.read_text("utf-8"))
    report["seconds"] = time.monotonic() - started
    out.unlink()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default="1000,5000",
                        help="items per crawl, comma-separated: each count is crawled with and without the plugin")
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    parser.add_argument("--workers", default="auto,0", help="SIMHASH_WORKERS values to crawl with (comma-separated)")
    parser.add_argument("--max-awaiting", default="", help="SIMHASH_MAX_AWAITING for the crawls with the plugin")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="simhash-memory-") as tmp:
        workdir = Path(tmp)
        paragraphs = workdir / "paragraphs.json"
        paragraphs.write_text(json.dumps(load_paragraphs(args.corpus, 4000), ensure_ascii=False), "utf-8")
        extra = {"SIMHASH_MAX_AWAITING": args.max_awaiting} if args.max_awaiting else {}
        runs = [("off", {"SIMHASH_ENABLED": "False"})] + [
            (f"on, workers {w}", {"SIMHASH_WORKERS": "" if w == "auto" else w, **extra})
            for w in args.workers.split(",")]
        counts = [int(n) for n in args.items.split(",")]
        results = {(n, name): crawl(workdir, paragraphs, n, settings) for n in counts for name, settings in runs}
    print("Items yielded by start() unpaced; peak RSS of the crawl process in MB (ratio to the crawl of as many "
          f"items without the plugin), of its largest child (a worker); SIMHASH_MAX_AWAITING "
          f"{args.max_awaiting or 'default'}")
    print(f"{'items':>7} {'crawl':<16} {'crawl process':>20} {'largest child':>14} {'most held':>10} "
          f"{'items out':>10} {'seconds':>8}")
    for (n, name), r in results.items():
        base = results[n, "off"]["self_kb"]
        print(f"{n:>7,} {name:<16} {r['self_kb'] / 1024:>10.0f} ({r['self_kb'] / base:>5.2f}x) "
              f"{r['children_kb'] / 1024:>14.0f} {r['most_held']:>10,} {r['out']:>10,} {r['seconds']:>8.1f}")


if __name__ == "__main__":
    main()
