"""Check-and-adds per second: a local Redis server against a local SQLite file, in one run.

Both indexes get the same synthetic stream: ``--prefill`` entries added in bulk (untimed), a short
untimed warm-up, then ``--ops`` timed check-and-adds of which ``--dup-rate`` are near-duplicates of
prefilled entries (half caught by the title tier at 1–2 bits, half by the body tier at 3 bits
under a fresh title) and the rest new (inserted). Each backend is timed with 1 process and with
``--procs`` processes splitting the same stream (the scale-out case: SQLite serializes writers on
one file lock, Redis serializes scripts on one server thread). Verdict counts are compared: both
backends must give the same number of duplicates per tier.

SQLite runs as shipped (WAL, ``synchronous=FULL``: an fsync per commit); Redis runs as the server
is configured (``.ci/run`` and the line below: no persistence). Say which when quoting numbers.

Run: ``python benchmarks/redis_vs_sqlite.py [--redis-url redis://127.0.0.1:6379/0]`` (about a
minute; ``--quick`` for a smoke run). The server URL defaults to ``$SIMHASH_TEST_REDIS_URL``.

``--scaling 10000,100000,1000000``: Redis alone, the cost of one check-and-add (1 process, one
per call, as above) as the index grows: for each size a fresh index is prefilled in bulk, then
``--ops`` check-and-adds are timed one by one (wall µs on loopback: mean, p99; and the server's
own µs per ``EVALSHA`` from ``INFO commandstats``) and the server's ``used_memory`` growth is
divided by the entries.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_simhash.index import Query, open_index

TITLE_K, BODY_K = 2, 3


def script_calls(client: Any) -> dict[str, int]:
    """The server's transactions so far (``EXEC``: one a check-and-add) and the µs it spent in all
    commands."""
    info = client.info("commandstats")
    usec = sum(int(v.get("usec", 0)) for k, v in info.items() if k != "cmdstat_info")
    return {"calls": int(info.get("cmdstat_exec", {}).get("calls", 0)), "usec": usec}

def flip(fp: int, rng: random.Random, n: int) -> int:
    for p in rng.sample(range(64), n):
        fp ^= 1 << p
    return fp


def make_stream(prefill: int, ops: int, dup_rate: float, seed: int) -> tuple[list[tuple[int, int]], list[Query]]:
    """Prefilled (title, body) pairs and the timed queries (the same for every backend)."""
    rng = random.Random(seed)
    stored = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(prefill)]
    queries = []
    for i in range(ops):
        if stored and rng.random() < dup_rate:
            t, b = rng.choice(stored)
            if rng.random() < 0.5:
                t, b = flip(t, rng, rng.randint(1, 2)), rng.getrandbits(64)  # title tier
            else:
                t, b = rng.getrandbits(64), flip(b, rng, 3)  # body tier
        else:
            t, b = rng.getrandbits(64), rng.getrandbits(64)
        queries.append(Query(title_fp=t, body_fp=b, title_k=TITLE_K, body_k=BODY_K, url=f"https://bench/{i}",
                             title="benchmark item", seen_at=1e9 + i))
    return stored, queries


def run_part(location: str, queries: list[Query], batch: int = 1) -> tuple[float, dict[str, int]]:
    """Check-and-add every query on a fresh connection, ``batch`` per ``check_and_add_many`` call
    (as the pipeline's group commit does): (seconds, verdicts per tier)."""
    counts = {"new": 0, "title": 0, "body": 0}
    with open_index(location) as ix:
        start = time.perf_counter()
        for i in range(0, len(queries), batch):
            for out in ix.check_and_add_many(queries[i : i + batch]):
                counts["new" if out.match is None else out.match.tier] += 1
        return time.perf_counter() - start, counts


def _part(args: tuple[str, list[Query], Any, int]) -> tuple[float, dict[str, int]]:
    location, queries, barrier, batch = args
    barrier.wait()
    return run_part(location, queries, batch)


def bench(location: str, stored: list[tuple[int, int]], queries: list[Query], procs: int,
          batch: int = 1) -> dict[str, Any]:
    """Fresh index at ``location``: bulk prefill, warm-up, then timed check-and-adds."""
    with open_index(location) as ix:
        ix.reset()
        for i in range(0, len(stored), 20_000):
            ix.add([(t, b, None, None, 1.0) for t, b in stored[i : i + 20_000]])
        warm = random.Random(5)
        for _ in range(200):  # untimed: caches, connection, script
            ix.lookup(warm.getrandbits(64), warm.getrandbits(64), title_k=TITLE_K, body_k=BODY_K)
    if procs == 1:
        seconds, counts = run_part(location, queries, batch)
    else:
        ctx = multiprocessing.get_context("fork")
        with ctx.Manager() as manager:
            barrier = manager.Barrier(procs)
            with ctx.Pool(procs) as pool:
                start = time.perf_counter()
                parts = pool.map(_part, [(location, queries[i::procs], barrier, batch) for i in range(procs)])
                seconds = time.perf_counter() - start
        counts = {k: sum(c[k] for _, c in parts) for k in ("new", "title", "body")}
    with open_index(location) as ix:
        entries = ix.count()
        ix.reset()
    return {"ops_per_s": len(queries) / seconds, "seconds": seconds, "counts": counts, "entries": entries}


def scaling(redis_url: str, sizes: list[int], ops: int, dup_rate: float) -> None:
    """Wall µs per check-and-add and used_memory per entry at each index size (see the module)."""
    import redis

    client = redis.Redis.from_url(redis_url.split("?")[0])
    print("| entries | µs per check-and-add (mean) | p99 | server µs per call | used_memory per entry | verdicts |")
    print("|---:|---:|---:|---:|---:|---|")
    first = None
    for size in sizes:
        stored, queries = make_stream(size, ops, dup_rate, seed=42)
        with open_index(redis_url) as ix:
            ix.reset()
            before = client.info("memory")["used_memory"]
            for i in range(0, len(stored), 20_000):
                ix.add([(t, b, f"https://bench/p{i + j}", "prefilled item", 1.0 + i + j)
                        for j, (t, b) in enumerate(stored[i : i + 20_000])])
            per_entry = (client.info("memory")["used_memory"] - before) / size
            for q in queries[:200]:  # untimed warm-up on other items
                ix.peek(q)
            counts = {"new": 0, "title": 0, "body": 0}
            times = []
            calls = script_calls(client)
            for q in queries:
                start = time.perf_counter()
                out = ix.check_and_add(q)
                times.append(time.perf_counter() - start)
                counts["new" if out.match is None else out.match.tier] += 1
            done = script_calls(client)
            server = (done["usec"] - calls["usec"]) / (done["calls"] - calls["calls"])
            ix.reset()
        times.sort()
        mean = 1e6 * sum(times) / len(times)
        first = first or mean
        print(f"| {size:,} | {mean:,.0f} ({mean / first:.2f}× the first) | {1e6 * times[int(0.99 * len(times))]:,.0f} "
              f"| {server:,.0f} | {per_entry:,.0f} | {counts} |")
    client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default=os.environ.get("SIMHASH_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0")
    parser.add_argument("--prefill", type=int, default=100_000)
    parser.add_argument("--ops", type=int, default=4000)
    parser.add_argument("--dup-rate", type=float, default=0.2)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1,
                        help="queries per check_and_add_many call (the pipeline batches what queues up, up to 100)")
    parser.add_argument("--quick", action="store_true", help="10k entries, 1,000 ops")
    parser.add_argument("--scaling", default=None, metavar="N,N,...",
                        help="Redis only: µs per check-and-add and bytes per entry at these index sizes")
    args = parser.parse_args(argv)
    if args.scaling:
        prefix = f"bench-{uuid.uuid4().hex[:8]}"
        url = f"{args.redis_url}{'&' if '?' in args.redis_url else '?'}prefix={prefix}"
        print(f"$ python benchmarks/redis_vs_sqlite.py --redis-url {args.redis_url} --scaling {args.scaling} "
              f"--ops {args.ops} --dup-rate {args.dup_rate}\n")
        scaling(url, [int(n) for n in args.scaling.split(",")], args.ops, args.dup_rate)
        import redis

        client = redis.Redis.from_url(args.redis_url)
        client.delete(f"{prefix}:meta", f"{prefix}:namespaces")
        client.close()
        return 0
    if args.quick:
        args.prefill, args.ops = 10_000, 1000
    stored, queries = make_stream(args.prefill, args.ops, args.dup_rate, seed=42)
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    redis_url = f"{args.redis_url}{'&' if '?' in args.redis_url else '?'}prefix={prefix}"
    results: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="redis-vs-sqlite-") as tmp:
        sqlite_path = str(Path(tmp) / "bench.sqlite3")
        for procs in sorted({1, args.procs}):
            results["sqlite", procs] = bench(sqlite_path, stored, queries, procs, args.batch)
            results["redis", procs] = bench(redis_url, stored, queries, procs, args.batch)
    with open_index(redis_url) as ix:
        server = ix.stats()
        ix.reset()
    import redis

    client = redis.Redis.from_url(args.redis_url)
    client.delete(f"{prefix}:meta", f"{prefix}:namespaces")
    persistence = client.config_get("save").get("save") or "off"
    aof = client.config_get("appendonly").get("appendonly")
    client.close()
    for (backend, procs), r in sorted(results.items()):
        print(f"  {backend:6} {procs} proc: {r['ops_per_s']:8,.0f} check-and-add/s  ({r['seconds']:.2f} s, "
              f"verdicts {r['counts']}, {r['entries']:,} entries after)")
    same = {tuple(sorted(r["counts"].items())) for r in results.values()}
    print(f"  same verdict counts on both backends and process counts: {len(same) == 1}")
    line = (
        f"check-and-add/s at {args.prefill:,} entries, {args.ops:,} ops, {args.dup_rate:.0%} near-duplicates, "
        f"{args.batch} per call: "
        + "; ".join(
            f"{procs} proc SQLite {results['sqlite', procs]['ops_per_s']:,.0f} "
            f"vs Redis {results['redis', procs]['ops_per_s']:,.0f}"
            for procs in sorted({1, args.procs})
        )
        + f"  [Redis {server['redis_version']} local, save={persistence!r} appendonly={aof}; SQLite WAL "
        f"synchronous=FULL on local disk; {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs]"
    )
    print(line)
    return 0 if len(same) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
