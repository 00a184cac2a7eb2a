"""What re-banding a Redis index costs: time, the server's time a script call, and memory before, at the peak, after.

Builds a Redis index of ``--size`` entries with ``index_scaling.py``'s data (``--dist``), then re-bands it
with :func:`scrapy_simhash.index.redis.reband.reband` to ``--title-bands``/``--body-bands``, sampling the
server's ``used_memory`` at each progress call. Prints entries a second, the server's µs a script call
and an entry (``INFO commandstats``: run it against a server that serves nothing else) and
``used_memory`` before, at its highest, and after (the old tables deleted).

Run: ``python benchmarks/redis_reband.py --redis-url redis://127.0.0.1:6379/14 --size 1000000 --title-bands 4``
(the database given is flushed first).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import index_scaling

from scrapy_simhash.index import open_index
from scrapy_simhash.index.redis.reband import BATCH, reband


def main(argv: list[str] | None = None) -> int:
    ap = index_scaling.redis_benchmark_args(__doc__)
    ap.add_argument("--dist", default="random", choices=("random", "identical", "clustered"))
    ap.add_argument("--title-bands", type=int)
    ap.add_argument("--body-bands", type=int)
    args = ap.parse_args(argv)
    url = index_scaling.with_prefix(args.redis_url, "reband")
    server = index_scaling.flushed(args.redis_url)
    print(f"load at start {os.getloadavg()}", flush=True)
    print(f"built {args.size:,} {args.dist} entries: {index_scaling.build(url, args.dist, args.size):,.0f} entries/s",
          flush=True)

    def used() -> int:
        return int(server.info("memory")["used_memory"])

    before, peak = used(), 0

    def progress(done: int, total: int) -> None:
        nonlocal peak
        if done % (20 * BATCH) == 0 or done == total:
            peak = max(peak, used())

    calls0, usec0 = index_scaling.script_stats(server)
    with open_index(url) as ix:
        done = reband(ix, title_bands=args.title_bands, body_bands=args.body_bands, progress=progress)
    calls, usec = (b - a for a, b in zip((calls0, usec0), index_scaling.script_stats(server), strict=True))
    after = used()
    old, new = done["previous"], done["params"]
    print(f"\nre-banded {done['entries']:,} entries (title bands {old['title_bands']} -> {new['title_bands']}, body "
          f"{old['body_bands']} -> {new['body_bands']}) in {done['seconds']:.1f} s: "
          f"{done['entries'] / done['seconds']:,.0f} entries/s, {done['band_rows']:,} band rows")
    print(f"server: {calls:,} script calls of {BATCH} entries, {usec / max(calls, 1) / 1000:.1f} ms a call, "
          f"{usec / max(done['entries'], 1):.0f} µs an entry")
    print(f"used_memory: {before / 2**20:,.0f} MiB before, {peak / 2**20:,.0f} MiB at the highest sample, "
          f"{after / 2**20:,.0f} MiB after")
    print(f"load at end {os.getloadavg()} ({time.strftime('%H:%M')})")
    server.flushdb()
    return 0


if __name__ == "__main__":
    sys.exit(main())
