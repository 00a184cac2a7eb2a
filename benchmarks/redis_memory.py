"""Redis ``used_memory`` per entry at large sizes, realistic entries, filled fast.

Entries as ``benchmarks/index_size.py`` makes them (random title and body fingerprints, a URL of
``--url-length`` characters, a 20-character title, a number signature, 30 sentence hashes of which
the index keeps its sample of ``rule.SENTENCES_STORED``) are stored the way a check-and-add that
found them new stores them (:meth:`scrapy_simhash.index.redis.store.View.insert`), ``--batch`` a
write, without deciding them first (a fill, not a check: a million check-and-adds take an hour on a
shared machine) and without request tokens (they expire after two minutes). ``used_memory`` grown,
divided by the entries, is printed at each of ``--marks``.

``--dist clustered`` takes the title and body fingerprints from ``benchmarks/index_scaling.py``'s
clustered distribution (10 % of them 6 bits from one centre); ``--check N`` then times N
check-and-adds of that distribution's queries on the full index, one at a time (median wall and CPU µs).

Run: ``python benchmarks/redis_memory.py --redis-url redis://127.0.0.1:6379/15 [--entries 1000000]
[--dist clustered] [--check 1000]`` (the database given is flushed before and after).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import statistics
from dataclasses import replace

from index_scaling import BODY_K, TITLE_K, Source
from index_size import queries

from scrapy_simhash.index import IndexParams, Query, open_index
from scrapy_simhash.index.redis.store import View


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis-url", required=True, help="a scratch Redis database (it is flushed)")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--marks", default="10000,100000,250000,500000,1000000")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--url-length", type=int, default=46)
    ap.add_argument("--dist", default="random", choices=("random", "clustered"))
    ap.add_argument("--check", type=int, default=0, help="check-and-adds timed on the full index")
    args = ap.parse_args()
    import redis

    client = redis.Redis.from_url(args.redis_url)
    client.flushdb()
    before = client.info("memory")["used_memory"]
    marks = {int(m) for m in args.marks.split(",")} | {args.entries}
    ix = open_index(args.redis_url, params=IndexParams())
    started, done, batch = time.monotonic(), 0, []
    print("| entries | used_memory / entry | fill s |\n|---:|---:|---:|")
    source = Source(args.dist, 1)
    for query in queries(args.entries, True, args.url_length):
        title_fp, body_fp = source.pair()
        batch.append(replace(query, title_fp=title_fp, body_fp=body_fp))
        if len(batch) == args.batch or done + len(batch) in marks:
            view = View(ix._k, ix._server.link(), watch=False)
            view.reserve = len(batch)
            k = view.k
            pairs = [k.url(q.url) for q in batch if q.url is not None]
            pairs += [p for q in batch for h in sorted(set(q.sentences))[:12] for p in (k.sentence(h),)]
            for tier in ("title", "body"):
                fps = [q.title_fp if tier == "title" else q.body_fp for q in batch]
                pairs += [k.holders(tier, fp) for fp in fps if fp is not None]  # type: ignore[arg-type]
                pairs += [k.bucket(tier, n, v) for fp in fps if fp is not None  # type: ignore[arg-type]
                          for n, v in k.tiers[tier].store(fp)]  # type: ignore[index]
            view.read(pairs)  # one round trip for what the inserts read
            for q in batch:
                view.insert(q, q.seen_at)
            view.commit()
            done, batch = done + len(batch), []
            if done in marks:
                grown = client.info("memory")["used_memory"] - before
                print(f"| {done:,} | {grown / done:,.0f} | {time.monotonic() - started:,.0f} |", flush=True)
    if args.check:
        probe, walls, cpus = Source(args.dist, 2), [], []
        for n in range(args.check):
            t, b = probe.pair()
            q = Query(title_fp=t, body_fp=b, title_k=TITLE_K, body_k=BODY_K, url=f"https://q/{n}", title="q",
                      seen_at=2e9)
            c0, w0 = time.process_time(), time.perf_counter()
            ix.check_and_add(q)
            cpus.append(time.process_time() - c0)
            walls.append(time.perf_counter() - w0)
        print(f"\n{args.check:,} check-and-adds ({args.dist}) at {done:,} entries: wall median "
              f"{1e6 * statistics.median(walls):,.0f} µs (p90 {1e6 * sorted(walls)[int(0.9 * len(walls))]:,.0f}), "
              f"CPU median {1e6 * statistics.median(cpus):,.0f} µs")
    ix.close()
    client.flushdb()
    return 0


if __name__ == "__main__":
    sys.exit(main())
