"""How the SQLite band index scales: per check-and-add cost at 10k, 100k and 1M stored entries.

Synthetic fingerprints, two distributions:

* ``random``: every entry has fresh random 64-bit title and body fingerprints;
* ``skewed``: 10% of entries share one title and one body fingerprint (boilerplate pages, empty
  bodies), and 10% of the timed queries carry those fingerprints too (they come back duplicate).

The index is filled with :meth:`SqliteIndex.add` in big transactions, then at each size it times
``--ops`` fresh check-and-adds after a short untimed warm-up (title k=2, then body k=3; the fresh
ones insert), as shipped
(``synchronous=FULL``: one WAL fsync per commit) and again with ``synchronous=OFF`` to show the cost
without the fsync, plus read-only lookups. It reports bytes per entry on disk and the growth
ratio cost@largest / cost@smallest (goal ≤ 2). For comparison, the ``simhash`` PyPI package's
in-memory ``SimhashIndex`` (k=3, body fingerprint only, one tier) is built and queried the same
way at 10k and 100k.

Run: ``python benchmarks/index_scaling.py`` (about 2–4 minutes on 2 cores; ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_simhash.index import IndexParams, Query, open_index
from scrapy_simhash.index.sqlite import SqliteIndex

BOILER_TITLE = 0x5A5A_5A5A_A5A5_A5A5
BOILER_BODY = 0x0F0F_F0F0_0F0F_F0F0
TITLE_K, BODY_K = 2, 3


class Source:
    """Reproducible fingerprints for one distribution."""

    def __init__(self, dist: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.skew = 0.10 if dist == "skewed" else 0.0

    def pair(self) -> tuple[int, int]:
        if self.skew and self.rng.random() < self.skew:
            return BOILER_TITLE, BOILER_BODY
        return self.rng.getrandbits(64), self.rng.getrandbits(64)


def fill(ix: SqliteIndex, src: Source, start: int, stop: int, batch: int = 50_000) -> float:
    """Add entries start..stop-1 in transactions of ``batch``; returns seconds."""
    t0 = time.perf_counter()
    for lo in range(start, stop, batch):
        rows = []
        for i in range(lo, min(stop, lo + batch)):
            t, b = src.pair()
            rows.append((t, b, f"https://news.example.com/2024/{i:08d}.html", f"新闻标题 第{i}条", 1.7e9 + i))
        ix.add(rows)
    return time.perf_counter() - t0


def time_check_and_add(ix: SqliteIndex, queries: list[tuple[int, int]], tag: str) -> tuple[float, int]:
    """µs per check-and-add, and how many were admitted as new."""
    new = 0
    t0 = time.perf_counter()
    for n, (t, b) in enumerate(queries):
        out = ix.check_and_add(
            Query(title_fp=t, body_fp=b, title_k=TITLE_K, body_k=BODY_K, url=f"https://q/{tag}/{n}", title="q")
        )
        new += out.match is None
    return (time.perf_counter() - t0) / len(queries) * 1e6, new


def time_lookup(ix: SqliteIndex, queries: list[tuple[int, int]]) -> float:
    t0 = time.perf_counter()
    for t, b in queries:
        ix.lookup(t, b, title_k=TITLE_K, body_k=BODY_K, limit=1)
    return (time.perf_counter() - t0) / len(queries) * 1e6


def disk_bytes(ix: SqliteIndex) -> int:
    assert ix._conn is not None
    ix._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return os.path.getsize(ix.location)


def bench_sqlite(dist: str, sizes: list[int], ops: int, workdir: Path) -> list[dict[str, Any]]:
    results = []
    src, qsrc = Source(dist, 1), Source(dist, 2)
    with open_index(workdir / f"{dist}.sqlite3", params=IndexParams()) as ix:
        assert isinstance(ix, SqliteIndex) and ix._conn is not None
        stored = 0
        for size in sizes:
            fill_s = fill(ix, src, stored, size)
            fill_rate = (size - stored) / fill_s
            stored = size
            size_bytes = disk_bytes(ix)
            n_entries = ix.count()
            band_rows = ix.stats()["band_rows"]
            # steady state, as in a running crawl: not the minute after a bulk load of the whole file
            time_check_and_add(ix, [qsrc.pair() for _ in range(max(200, ops // 4))], f"{size}-warm")
            full_us, new_full = time_check_and_add(ix, [qsrc.pair() for _ in range(ops)], f"{size}-full")
            ix._conn.execute("PRAGMA synchronous=OFF")
            off_us, _ = time_check_and_add(ix, [qsrc.pair() for _ in range(ops)], f"{size}-off")
            ix._conn.execute("PRAGMA synchronous=FULL")
            lookup_us = time_lookup(ix, [qsrc.pair() for _ in range(ops)])
            stored = ix.count()  # the timed check-and-adds inserted some
            results.append({
                "impl": "sqlite", "dist": dist, "size": size, "fill_per_s": fill_rate,
                "bytes_per_entry": size_bytes / n_entries, "band_rows_per_entry": band_rows / n_entries,
                "lookup_us": lookup_us, "cadd_us": full_us, "cadd_nofsync_us": off_us,
                "new_share": new_full / ops,
            })
            print(f"  sqlite {dist:6} {size:>9,}: check-and-add {full_us:7.0f} µs (no fsync {off_us:5.0f} µs), "
                  f"lookup {lookup_us:5.0f} µs, fill {fill_rate:,.0f}/s", flush=True)
    return results


def bench_simhash_pkg(dist: str, sizes: list[int], ops: int) -> list[dict[str, Any]]:
    try:
        from simhash import Simhash, SimhashIndex
    except ImportError:  # pragma: no cover
        print("  (simhash package not installed: comparison skipped)")
        return []
    logging.getLogger("simhash").setLevel(logging.ERROR)  # it warns on every big bucket
    results = []
    for size in sizes:
        src, qsrc = Source(dist, 1), Source(dist, 2)
        objs = [(str(i), Simhash(src.pair()[1], f=64)) for i in range(size)]
        t0 = time.perf_counter()
        index = SimhashIndex(objs, f=64, k=BODY_K)
        add_us = (time.perf_counter() - t0) / size * 1e6
        queries = [Simhash(qsrc.pair()[1], f=64) for _ in range(ops)]
        t0 = time.perf_counter()
        for n, sh in enumerate(queries):
            if not index.get_near_dups(sh):
                index.add(f"q{n}", sh)
        cadd_us = (time.perf_counter() - t0) / ops * 1e6
        results.append({"impl": "simhash pkg", "dist": dist, "size": size, "fill_per_s": 1e6 / add_us,
                        "cadd_us": cadd_us, "add_us": add_us})
        print(f"  simhash {dist:6} {size:>9,}: get_near_dups+add {cadd_us:7.1f} µs, add {add_us:5.1f} µs", flush=True)
    return results


def table(rows: list[dict[str, Any]]) -> str:
    def f(v: Any, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    out = [
        "| index | data | stored | check-and-add µs | … without fsync µs | lookup µs | bulk fill /s "
        "| bytes/entry | band rows/entry |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['impl']} | {r['dist']} | {r['size']:,} | {f(r['cadd_us'], '.0f')} | "
            f"{f(r.get('cadd_nofsync_us'), '.0f')} | {f(r.get('lookup_us'), '.0f')} | {f(r['fill_per_s'], ',.0f')} | "
            f"{f(r.get('bytes_per_entry'), '.0f')} | {f(r.get('band_rows_per_entry'), '.2f')} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="stored entries to measure at")
    ap.add_argument("--simhash-sizes", default="10000,100000", help="sizes for the simhash package")
    ap.add_argument("--ops", type=int, default=2000, help="timed operations per measurement")
    ap.add_argument("--quick", action="store_true", help="smoke run: 2k/20k entries, 300 ops")
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.simhash_sizes, args.ops = "2000,20000", "2000,20000", 300
    sizes = sorted(int(s) for s in args.sizes.split(","))
    sh_sizes = sorted(int(s) for s in args.simhash_sizes.split(",") if s)
    print(f"$ python {' '.join([Path(sys.argv[0]).as_posix(), *(argv if argv is not None else sys.argv[1:])])}")
    print(f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
          f"{platform.platform()}")
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for dist in ("random", "skewed"):
            rows += bench_sqlite(dist, sizes, args.ops, Path(tmp))
            rows += bench_simhash_pkg(dist, sh_sizes, args.ops)
    print()
    print(table(rows))
    print()
    lo, hi = sizes[0], sizes[-1]
    for dist in ("random", "skewed"):
        by = {r["size"]: r for r in rows if r["impl"] == "sqlite" and r["dist"] == dist}
        ratios = ", ".join(
            f"{label} {by[hi][key] / by[lo][key]:.2f}"
            for label, key in (("check-and-add", "cadd_us"), ("without fsync", "cadd_nofsync_us"),
                               ("lookup", "lookup_us"))
        )
        goal = "ok" if by[hi]["cadd_us"] / by[lo]["cadd_us"] <= 2 else "ABOVE GOAL"
        print(f"ratio cost@{hi:,} / cost@{lo:,} ({dist}): {ratios}  (goal ≤ 2: {goal})")
        sh = {r["size"]: r for r in rows if r["impl"] == "simhash pkg" and r["dist"] == dist}
        if len(sh) >= 2:
            a, b = min(sh), max(sh)
            print(f"  simhash pkg get_near_dups+add@{b:,} / @{a:,} ({dist}): {sh[b]['cadd_us'] / sh[a]['cadd_us']:.2f}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s. check-and-add = one BEGIN IMMEDIATE transaction "
          "(title tier k=2, body tier k=3, insert when new) committed with synchronous=FULL; 'without fsync' = "
          "the same with synchronous=OFF. simhash pkg = in-memory, one fingerprint (body, k=3), no persistence.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
