"""What the band probes would cost held in memory instead of in SQLite's B-trees (a stand-in).

``benchmarks/sqlite_pages.py`` (``bare``) shows that what an add appends to SQLite (the entry by
id and by time) costs the same at 10M entries as at 10k, and that what grows is the lookups by
fingerprint and URL kept in B-trees keyed by random values. This measures the
other half of a layout that keeps those lookups in memory: a Python ``set`` of random 64-bit keys
(a stand-in for a compact band table: same hashing, same cache misses, more bytes a key), probed as
a multi-index check probes the body tier (two 32-bit parts, each value and its 32 one-bit
neighbours: 66 probes). Nothing here is shipped; it tells how much of the 1.5 the lookups would use,
and what memory a process would pay.

Run: ``python benchmarks/memory_lookup.py [--sizes 10000,20000000] [--queries 20000] [--rounds 5]``
(20M keys: ~1.4 GB of RSS, about a minute).
"""

from __future__ import annotations

import argparse
import random
import resource


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def probe_cost(keys: set[int], queries: list[int], rounds: int) -> float:
    """CPU µs a query (66 probes), the best of ``rounds``."""
    masks = [1 << b for b in range(32)]
    best = float("inf")
    for _ in range(rounds):
        started, hits = cpu(), 0
        for q in queries:
            for part in (q & 0xFFFF_FFFF, q >> 32):
                hits += part in keys
                for m in masks:
                    hits += (part ^ m) in keys
        best = min(best, (cpu() - started) / len(queries) * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,20000000")
    parser.add_argument("--queries", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(1)
    costs = []
    for n in (int(s) for s in args.sizes.split(",")):
        keys = {rng.getrandbits(64) for _ in range(n)}
        queries = [rng.getrandbits(64) for _ in range(args.queries)]
        costs.append(probe_cost(keys, queries, args.rounds))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{n:>12,} keys: {costs[-1]:.1f} µs CPU a query (66 probes), peak RSS {rss:,.0f} MiB", flush=True)
        del keys
    print(f"largest ÷ smallest: {costs[-1] / costs[0]:.2f}")


if __name__ == "__main__":
    main()
