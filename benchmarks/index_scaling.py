"""How the band index scales: per check-and-add cost from 10k to 10M stored entries.

Three distributions of synthetic 64-bit fingerprints (title and body alike):

* ``random``: fresh random fingerprints;
* ``identical``: 10 % of entries (and of the timed queries) carry one shared title and one shared
  body fingerprint (boilerplate pages, empty bodies);
* ``clustered``: 10 % of entries (and of the queries) are ONE centre fingerprint with 6 random
  distinct bits flipped: distinct entries that share most of their bands, as boilerplate-heavy
  sites make. The hard case for any band index.

Every index (one per distribution and size, SQLite files and, with ``--redis-url``, Redis prefixes)
is built first with the bulk :meth:`add` in big transactions; then all are measured in
interleaved rounds of ``--ops`` check-and-adds each (title k=2, then body k=3, as shipped:
``synchronous=FULL``), so that a slow spell of the shared machine spreads over every size. Per
index: CPU µs and wall µs per check-and-add (medians over rounds; Redis: also the µs the server spent
a check-and-add, ``INFO commandstats``, which a loaded client does not blur; it counts every client's
commands, so the server must serve nothing else during the rounds), band rows read per query (mean,
p99: rows the band probes return to Python, both tiers; SQLite only), bytes per entry (SQLite: file
size after a checkpoint; Redis: ``used_memory`` growth), the process RSS after its rounds, and the
ratios largest ÷ smallest size.

Run: ``python benchmarks/index_scaling.py [--sizes 10000,100000,1000000,10000000]
[--redis-url redis://127.0.0.1:6379/15 --redis-sizes 10000,100000,1000000] [--rounds 5 --ops 200]``
(the Redis database given is flushed). 10k–1M: about 10 minutes on 2 cores; 10M adds a 4 GB file
per distribution and roughly 10 minutes each to build.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_simhash.index import IndexParams, Query, open_index
from scrapy_simhash.index.sqlite import tables as sqlite_tables

DISTS = ("random", "identical", "clustered")
TITLE_K, BODY_K = 2, 3
CENTRES = (0x5A5A_5A5A_A5A5_A5A5, 0x0F0F_F0F0_0F0F_F0F0)  # title, body
SHARE = 0.10
FLIPS = 6


class Source:
    """Reproducible (title, body) fingerprint pairs of one distribution."""

    def __init__(self, dist: str, seed: int) -> None:
        self.dist, self.rng = dist, random.Random(seed)

    def _clustered(self, centre: int) -> int:
        for bit in self.rng.sample(range(64), FLIPS):
            centre ^= 1 << bit
        return centre

    def pair(self) -> tuple[int, int]:
        rng = self.rng
        if self.dist != "random" and rng.random() < SHARE:
            if self.dist == "identical":
                return CENTRES
            return self._clustered(CENTRES[0]), self._clustered(CENTRES[1])
        return rng.getrandbits(64), rng.getrandbits(64)


class RowCounter:
    """Counts the band rows the SQLite tables return to the rule (wraps ``Tables.candidates``)."""

    def __init__(self) -> None:
        self.rows = 0
        original = sqlite_tables.Tables.candidates

        def counted(tables: Any, tier: Any, fp: int) -> Any:
            found = list(original(tables, tier, fp))
            self.rows += len(found)
            return found

        sqlite_tables.Tables.candidates = counted  # type: ignore[method-assign]


def with_prefix(redis_url: str, prefix: str) -> str:
    """The index URL of key prefix ``prefix`` in the Redis database ``redis_url``."""
    return f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}"


def redis_benchmark_args(doc: str) -> argparse.ArgumentParser:
    """The options of a benchmark on one Redis index built of ``--size`` entries (more can be added)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--redis-url", required=True, help="a database of a server that serves nothing else (flushed)")
    ap.add_argument("--size", type=int, default=1_000_000)
    return ap


def flushed(redis_url: str, **options: Any) -> Any:
    """A client of the Redis database ``redis_url``, emptied (a benchmark's own: told so by its ``--redis-url``)."""
    import redis

    client = redis.Redis.from_url(redis_url, **options)
    client.flushdb()
    return client


def build(url: str, dist: str, size: int, batch: int = 100_000) -> float:
    """A fresh index of ``size`` entries; returns entries added per second."""
    src = Source(dist, 1)
    t0 = time.perf_counter()
    with open_index(url, params=IndexParams()) as ix:
        conn = getattr(ix, "_conn", None)
        if conn is not None:  # SQLite: a 1 GiB page cache and no fsync while building (not measured)
            conn.execute("PRAGMA cache_size=-1048576")
            conn.execute("PRAGMA synchronous=OFF")
        for lo in range(0, size, batch):
            rows = []
            for i in range(lo, min(size, lo + batch)):
                t, b = src.pair()
                rows.append((t, b, f"https://news.example.com/2024/{i:08d}.html", f"新闻标题 第{i}条", 1.7e9 + i))
            ix.add(rows)
    return size / (time.perf_counter() - t0)


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Target:
    """One built index and what its rounds measured."""

    def __init__(self, backend: str, dist: str, size: int, url: str, size_of: Callable[[], float]) -> None:
        self.backend, self.dist, self.size, self.url, self.size_of = backend, dist, size, url, size_of
        self.queries = Source(dist, 2)
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.server: list[float] = []  # Redis: µs the server spent a check-and-add (INFO commandstats)
        self.rows: list[int] = []
        self.bytes_per_entry = 0.0
        self.rss = 0.0
        self.fill_rate = 0.0
        self.index: Any = None

    def round(self, ops: int, number: int, counter: RowCounter) -> None:
        if self.index is None:
            self.index = open_index(self.url, params=IndexParams())
        cpu = wall = 0.0
        script = self._script_stats()
        for n in range(ops):
            t, b = self.queries.pair()
            q = Query(title_fp=t, body_fp=b, title_k=TITLE_K, body_k=BODY_K,
                      url=f"https://q/{number}/{n}", title="q", seen_at=2e9)
            before_rows = counter.rows
            c0, w0 = time.process_time(), time.perf_counter()
            self.index.check_and_add(q)
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            if self.backend == "sqlite":
                self.rows.append(counter.rows - before_rows)
        self.cpu.append(cpu / ops * 1e6)
        self.wall.append(wall / ops * 1e6)
        if script is not None:
            calls, usec = (b - a for a, b in zip(script, self._script_stats(), strict=True))  # type: ignore[arg-type]
            self.server.append(usec / max(calls, 1))
        self.rss = rss_mib()

    def _script_stats(self) -> tuple[int, int] | None:
        """Redis: the server's transactions and its µs so far (this target's rounds run alone)."""
        return script_stats(self.index._server.client) if self.backend == "redis" else None


def script_stats(client: Any) -> tuple[int, int]:
    """A Redis server's transactions so far (``EXEC``: one a check-and-add) and the µs it spent in
    all commands (``INFO commandstats``; the µs of a script's own commands count in the script's)."""
    info = client.info("commandstats")
    usec = sum(int(v.get("usec", 0)) for k, v in info.items() if k != "cmdstat_info")
    return int(info.get("cmdstat_exec", {}).get("calls", 0)), usec


def p99(values: list[int]) -> float:
    return sorted(values)[int(0.99 * (len(values) - 1))] if values else float("nan")


def sqlite_size(path: Path) -> Callable[[], float]:
    def measure() -> float:
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            (n,) = conn.execute("SELECT count(*) FROM entry").fetchone()
        finally:
            conn.close()
        return os.path.getsize(path) / n
    return measure


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="SQLite sizes (add 10000000 for 10M)")
    ap.add_argument("--dists", default=",".join(DISTS))
    ap.add_argument("--redis-url", help="a scratch Redis database (flushed); Redis is skipped without it")
    ap.add_argument("--redis-sizes", default="10000,100000,1000000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", type=int, default=200, help="check-and-adds per index and round")
    ap.add_argument("--dir", default="/var/tmp" if os.path.isdir("/var/tmp") else None,
                    help="where the SQLite files are built (a temporary directory inside it)")
    args = ap.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    dists = [d for d in args.dists.split(",") if d]
    shown = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"$ python benchmarks/index_scaling.py {shown}")
    print(f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, "
          f"{platform.platform()}", flush=True)
    counter = RowCounter()
    started = time.perf_counter()
    targets: list[Target] = []
    client = None
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for dist in dists:
            for size in sizes:
                path = Path(tmp) / f"{dist}-{size}.sqlite3"
                target = Target("sqlite", dist, size, str(path), sqlite_size(path))
                target.fill_rate = build(target.url, dist, size)
                target.bytes_per_entry = target.size_of()
                print(f"built sqlite {dist:9} {size:>10,}: {target.fill_rate:,.0f} entries/s, "
                      f"{target.bytes_per_entry:,.0f} bytes/entry", flush=True)
                targets.append(target)
        if args.redis_url:
            client = flushed(args.redis_url, socket_timeout=600)
            for dist in dists:
                for size in sorted(int(s) for s in args.redis_sizes.split(",") if s):
                    before = client.info("memory")["used_memory"]
                    url = with_prefix(args.redis_url, f"scale-{dist}-{size}")
                    target = Target("redis", dist, size, url, lambda: 0.0)
                    target.fill_rate = build(url, dist, size, batch=10_000)
                    target.bytes_per_entry = (client.info("memory")["used_memory"] - before) / size
                    print(f"built redis  {dist:9} {size:>10,}: {target.fill_rate:,.0f} entries/s, "
                          f"{target.bytes_per_entry:,.0f} bytes/entry (used_memory)", flush=True)
                    targets.append(target)
        for number in range(args.rounds):
            for target in targets:
                target.round(args.ops, number, counter)
            print(f"round {number + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)", flush=True)
    print()
    print("| backend | data | entries | CPU µs / check-and-add | wall µs | Redis server µs | rows read / query: mean "
          "| p99 | bytes / entry | RSS MiB | bulk build entries/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in targets:
        mean = f"{statistics.fmean(t.rows):,.1f}" if t.rows else "—"
        tail = f"{p99(t.rows):,.0f}" if t.rows else "—"
        server = f"{statistics.median(t.server):,.0f}" if t.server else "—"
        print(f"| {t.backend} | {t.dist} | {t.size:,} | {statistics.median(t.cpu):,.0f} | "
              f"{statistics.median(t.wall):,.0f} | {server} | {mean} | {tail} | {t.bytes_per_entry:,.0f} | "
              f"{t.rss:,.0f} | {t.fill_rate:,.0f} |")
    print()
    for backend in ("sqlite", "redis"):
        for dist in dists:
            by = {t.size: t for t in targets if t.backend == backend and t.dist == dist}
            if len(by) < 2:
                continue
            lo, hi = by[min(by)], by[max(by)]
            server = (f", server {statistics.median(hi.server) / statistics.median(lo.server):.2f}"
                      if hi.server and lo.server else "")
            print(f"{backend} {dist}: CPU {hi.size:,} ÷ {lo.size:,} = "
                  f"{statistics.median(hi.cpu) / statistics.median(lo.cpu):.2f}, wall "
                  f"{statistics.median(hi.wall) / statistics.median(lo.wall):.2f}{server}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s; {args.rounds} rounds × {args.ops} check-and-adds per "
          "index (medians over rounds); rows read = band rows returned to Python for both tiers of one query; "
          "Redis CPU µs = this client's CPU only.", flush=True)
    for target in targets:
        target.index.close()
    if client is not None:
        client.flushdb(asynchronous=True)
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
