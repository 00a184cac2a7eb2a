"""What a crowd of near fingerprints costs the Redis index: check-and-adds near the crowd vs random ones.

Builds a Redis index of ``--size`` entries with ``index_scaling.py``'s ``clustered`` data (10 % of the
entries within 6 bits of one centre, the rest random), then times alternated blocks of ``--ops``
check-and-adds of random fingerprints and of fingerprints near the centre: the server's µs a script
call (``INFO commandstats``: run it against a server that serves nothing else) and the client's wall
µs a call (median, p90, max). ``index_scaling.py`` reports the mix (10 % near the crowd); this says
what each kind costs.

Run: ``python benchmarks/redis_crowd.py --redis-url redis://127.0.0.1:6379/14 --size 1000000`` (the
database given is flushed first).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import index_scaling

from scrapy_simhash.index import IndexParams, Query, open_index


def main(argv: list[str] | None = None) -> int:
    ap = index_scaling.redis_benchmark_args(__doc__)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    url = index_scaling.with_prefix(args.redis_url, "crowd")
    index_scaling.flushed(args.redis_url)
    print(f"load at start {os.getloadavg()}", flush=True)
    rate = index_scaling.build(url, "clustered", args.size)
    print(f"built {args.size:,} clustered entries: {rate:,.0f} entries/s", flush=True)
    near, rng = index_scaling.Source("clustered", 7), random.Random(9)
    with open_index(url, params=IndexParams()) as ix:
        client = ix._server.client  # type: ignore[attr-defined]
        print("\n| kind | server µs a call | wall µs median | p90 | max |\n|---|---:|---:|---:|---:|")
        for number in range(args.rounds):
            for kind in ("random", "near the crowd"):
                walls, before = [], index_scaling.script_stats(client)
                for n in range(args.ops):
                    if kind == "random":
                        t, b = rng.getrandbits(64), rng.getrandbits(64)
                    else:
                        t, b = near._clustered(index_scaling.CENTRES[0]), near._clustered(index_scaling.CENTRES[1])
                    q = Query(title_fp=t, body_fp=b, title_k=index_scaling.TITLE_K, body_k=index_scaling.BODY_K,
                              url=f"https://q/{number}/{kind}/{n}", title="q", seen_at=2e9)
                    w0 = time.perf_counter()
                    ix.check_and_add(q)
                    walls.append((time.perf_counter() - w0) * 1e6)
                calls, usec = (y - x for x, y in zip(before, index_scaling.script_stats(client), strict=True))
                walls.sort()
                print(f"| {kind} | {usec / max(calls, 1):,.0f} | {statistics.median(walls):,.0f} | "
                      f"{walls[int(len(walls) * 0.9)]:,.0f} | {walls[-1]:,.0f} |", flush=True)
    print(f"\nload at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
