"""How long a lone item waits in the crawl's worker pool: its first item, and an item to an idle pool.

Each run is a fresh process that makes the pipeline's :class:`FingerprintPool` (one worker, no
index: fingerprints only), submits one item at once (the crawl's first item: the worker is still
starting) and times its answer; then, once the worker is warm, ``--items`` lone items 50 ms apart
(each finds the worker idle), each timed from submit to answer; then a steady stream of ``--stream``
items ``--gap`` seconds apart submitted from an asyncio loop (the pool on that loop where the tree
can), and the CPU this process spent on it per item, all its threads (what a crawl's process pays
for the pool). ``--base ../main`` runs another
tree's pool too, alternated run by run, so both see the same minutes of a shared machine. Medians
over ``--runs`` runs per tree.

Run: ``python benchmarks/lone_item.py --runs 3 --base ../main``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time
from scrapy_simhash import Fingerprinter
from scrapy_simhash.workers.fingerprints import FingerprintPool

here = Fingerprinter()
title = "北京今日发布暴雨蓝色预警"
body = "北京市气象台今天下午发布暴雨蓝色预警信号，预计夜间有大到暴雨，局地大暴雨。" * 5
pool = FingerprintPool(1, {}, here.fingerprint)
started = time.perf_counter()
pool.submit(title, body).result(120)
first = time.perf_counter() - started
deadline = time.monotonic() + 120
while not getattr(pool, "ready", True) and time.monotonic() < deadline:
    time.sleep(0.01)
pool.submit(title, body).result(120)  # the worker answered once: it is warm
lone = []
for i in range(int(sys.argv[1])):
    time.sleep(0.05)
    sent = time.perf_counter()
    pool.submit(title + str(i), body).result(120)
    lone.append(time.perf_counter() - sent)
pool.shutdown()

import asyncio, inspect, resource


async def stream(count, gap):
    on_loop = {"on_loop": True} if "on_loop" in inspect.signature(FingerprintPool).parameters else {}
    pool = FingerprintPool(1, {}, here.fingerprint, **on_loop)
    await asyncio.wrap_future(pool.submit(title, body))
    before = resource.getrusage(resource.RUSAGE_SELF)
    answers = []
    for i in range(count):
        answers.append(asyncio.wrap_future(pool.submit(title, body + str(i))))
        await asyncio.sleep(gap)
    await asyncio.gather(*answers)
    after = resource.getrusage(resource.RUSAGE_SELF)
    pool.shutdown()
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu / count, getattr(pool, "calls", None)


cpu, calls = asyncio.run(stream(int(sys.argv[2]), float(sys.argv[3])))
print(json.dumps({"first": first, "lone": statistics.median(lone), "stream_cpu": cpu, "calls": calls}))
"""


def run(tree: Path, items: int, stream: int, gap: float) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(items), str(stream), str(gap)], capture_output=True,
                         text=True, check=True,
                         cwd="/", env={**os.environ, "PYTHONPATH": str(tree)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--items", type=int, default=30, help="lone items a run (default 30)")
    ap.add_argument("--stream", type=int, default=1000, help="items of the steady stream (default 1000)")
    ap.add_argument("--gap", type=float, default=0.003, help="seconds between two items of the stream (default 0.003)")
    ap.add_argument("--base", help="another tree whose pool runs too, alternated")
    args = ap.parse_args(argv)
    trees = {"this tree": REPO, **({"base": Path(args.base).resolve()} if args.base else {})}
    print(f"load average at start {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            results[name].append(run(tree, args.items, args.stream, args.gap))
    print(f"\n| tree | first item, ms (worker starting) | lone item to an idle warm pool, ms | stream of {args.stream} "
          f"items {args.gap * 1e3:g} ms apart: this process's CPU, ms an item | items a call |")
    print("|---|---:|---:|---:|---:|")
    for name, rs in results.items():
        calls = [r["calls"] for r in rs if r["calls"]]
        print(f"| {name} | {statistics.median(r['first'] for r in rs) * 1e3:.0f} | "
              f"{statistics.median(r['lone'] for r in rs) * 1e3:.1f} | "
              f"{statistics.median(r['stream_cpu'] for r in rs) * 1e3:.3f} | "
              f"{args.stream / statistics.median(calls) if calls else float('nan'):.2f} |")
    print(f"\nmedians of {args.runs} run(s); load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
