"""Bytes per stored entry: SQLite on disk and Redis in memory, with and without sentence samples.

Synthetic entries as the engine stores them (random 64-bit title and body fingerprints, a URL, a
20-character title, a number signature; by default 30 sentence hashes per item of which the index
keeps its sample of ``rule.SENTENCES_STORED``; without, items too short for a sentence signature)
are added through ``check_and_add_many`` in batches of
100, as the pipeline does. SQLite: main file + WAL after close, divided by the entries. Redis:
``used_memory`` growth of a scratch database (flushed before and after; request tokens of the last
two minutes included, as in a running crawl: this fill writes them at ~600 a second; and without
them, the index's own size, what an index of N entries keeps once its tokens expired).

Run: ``python benchmarks/index_size.py [--redis-url redis://127.0.0.1:6379/15] [--split] [--keys]
[--url-length 46]`` (Redis is skipped without a URL; the database given is flushed; ``--split``: where the
SQLite bytes go, per table and index, from SQLite's ``dbstat``, and what a ``VACUUM`` would leave;
``--keys``: where the Redis bytes go, ``MEMORY USAGE`` summed per kind of key). About 20 s for 20,000
entries.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_simhash.index import IndexParams, Query, open_index

#: A crawl's clock (2026-12-01): sub-second POSIX times, as the pipeline stores them.
START = 1_764_547_200.0


def queries(n: int, sentences: bool, url_length: int = 0) -> Iterator[Query]:
    rng = random.Random(2)
    for i in range(n):
        hashes = tuple(sorted(f"{rng.getrandbits(64):016x}" for _ in range(30))) if sentences else ()
        url = f"https://news.example/{i}"  # padded to url_length: real URLs are longer
        url = url[:21] + "x" * (url_length - len(url)) + url[21:]
        yield Query(title_fp=rng.getrandbits(64), body_fp=rng.getrandbits(64), title_k=2, body_k=3,
                    url=url, title="标题" * 10, seen_at=START + i * 0.37,  # sub-second, as time.time()
                    numbers="0000000a 0000000b 0000000c", sentences=hashes, sentences_shared=50 if sentences else 0)


def fill(url: str, n: int, sentences: bool, url_length: int = 0) -> None:
    ix = open_index(url, params=IndexParams())
    try:
        batch: list[Query] = []
        for q in queries(n, sentences, url_length):
            batch.append(q)
            if len(batch) == 100:
                ix.check_and_add_many(batch)
                batch = []
        if batch:
            ix.check_and_add_many(batch)
    finally:
        ix.close()


def split(path: Path, n: int) -> None:
    """Bytes an entry per table and index (pages, of which payload and free space), then after VACUUM."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.execute("SELECT name, sum(pgsize), sum(payload), sum(unused) FROM dbstat GROUP BY name"
                            " HAVING sum(pgsize) > ? ORDER BY 2 DESC", (n,)).fetchall()
        for name, pages, payload, unused in rows:
            print(f"|   {name} | pages (payload, free) | {pages / n:,.1f} ({payload / n:,.1f}, {unused / n:,.1f}) |")
        conn.execute("VACUUM")
    finally:
        conn.close()
    print(f"|   after VACUUM | file | {path.stat().st_size / n:,.0f} |")


def key_kinds(client: Any, entries: int) -> None:
    """Bytes an entry per kind of key (``e``, ``sh``, ``Zth``…: a key name without its prefix and numbers)."""
    kinds: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    for key in client.scan_iter(count=1000):
        name = key.decode("latin-1")
        kind = re.sub(r"^.*\}:", "", name) if "}:" in name else name
        kind = re.match(r"[A-Za-z]*", kind).group() or kind  # type: ignore[union-attr]
        kinds[kind] += client.memory_usage(key, samples=0) or 0
        counts[kind] += 1
    print("\n| keys (with sentence samples) | keys | bytes an entry (`MEMORY USAGE`) |\n|---|---:|---:|")
    for kind, size in kinds.most_common():
        print(f"| `{kind}` | {counts[kind]:,} | {size / entries:,.1f} |")
    print(f"| all | {sum(counts.values()):,} | {sum(kinds.values()) / entries:,.1f} |\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=20_000)
    ap.add_argument("--redis-url", default=None, help="a scratch Redis database (it is flushed)")
    ap.add_argument("--split", action="store_true", help="SQLite bytes per table and index (dbstat)")
    ap.add_argument("--keys", action="store_true", help="Redis: bytes an entry per kind of key")
    ap.add_argument("--url-length", type=int, default=0, help="pad the URLs to this many characters "
                    "(default: as short as news.example/N; a real crawl's are longer: newsspider-2016's average 46)")
    args = ap.parse_args()
    shown = (f" --entries {args.entries}" + (f" --redis-url {args.redis_url}" if args.redis_url else "")
             + (" --split" if args.split else "") + (" --keys" if args.keys else "")
             + (f" --url-length {args.url_length}" if args.url_length else ""))
    print(f"$ python benchmarks/index_size.py{shown}\n")
    print("| index | tiers | bytes per entry | without request tokens |")
    print("|---|---|---:|---:|")
    for sentences in (False, True):
        tiers = "default (title + body + sentence sample)" if sentences else "no sentence signatures"
        with tempfile.TemporaryDirectory(dir="/var/tmp" if os.path.isdir("/var/tmp") else None) as tmp:
            path = Path(tmp) / "index.sqlite3"
            fill(f"sqlite:///{path}", args.entries, sentences, args.url_length)
            size = sum(p.stat().st_size for p in Path(tmp).iterdir())
            print(f"| SQLite (file) | {tiers} | {size / args.entries:,.0f} | |")
            if args.split:
                split(path, args.entries)
        if args.redis_url:
            import redis

            client = redis.Redis.from_url(args.redis_url)
            client.flushdb()
            before = client.info("memory")["used_memory"]
            fill(args.redis_url, args.entries, sentences, args.url_length)
            grown = client.info("memory")["used_memory"] - before
            tokens = sum(client.memory_usage(k, samples=0) or 0 for k in client.scan_iter(match="*}:r:*", count=1000))
            if args.keys and sentences:
                key_kinds(client, args.entries)
            client.flushdb()
            client.close()
            print(f"| Redis (used_memory) | {tiers} | {grown / args.entries:,.0f} "
                  f"| {(grown - tokens) / args.entries:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
