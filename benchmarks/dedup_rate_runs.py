"""How much a crawl's dedup rate moves from run to run when nothing is wrong: the band the dedup-rate monitor
(``scrapy_simhash.monitoring``) needs (docs/decisions/0800-monitor-defaults.md).

A real crawl (``../shared/corpus/zh/newsspider-2016.jsonl.gz``: 163, toutiao and qq, 2016), in its published
order, is cut into ``--runs`` consecutive runs of one index with the default settings; each run's dedup rate
(duplicates over items checked) is printed, then the largest distance of a run from the median of the runs
before it (the last ``--band`` of them, once ``--min-runs`` exist), i.e. the tolerance that run would have
needed.

    python benchmarks/dedup_rate_runs.py --runs 12 --index /tmp/runs.sqlite3
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

from scrapy_simhash import Deduplicator

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "zh" / "newsspider-2016.jsonl.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--band", type=int, default=10, help="SIMHASH_MONITOR_RUNS")
    parser.add_argument("--min-runs", type=int, default=3, help="SIMHASH_MONITOR_MIN_RUNS")
    parser.add_argument("--index", required=True, help="a new index file")
    args = parser.parse_args()
    with gzip.open(args.corpus, "rt", encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    items.sort(key=lambda item: str(item.get("published") or ""))
    size = -(-len(items) // args.runs)
    rates: list[float] = []
    worst = 0.0
    with Deduplicator.open(args.index) as dedup:
        for run in range(args.runs):
            chunk = items[run * size : (run + 1) * size]
            verdicts = [dedup.check_and_add(item.get("title"), item.get("body"), url=item.get("url")) for item in chunk]
            checked = [v for v in verdicts if v.status in ("new", "duplicate", "flagged")]
            rate = sum(v.status != "new" for v in checked) / len(checked)
            band = rates[-args.band :]
            off = abs(rate - statistics.median(band)) if len(band) >= args.min_runs else None
            if off is not None:
                worst = max(worst, off)
            print(f"run {run + 1:>2}: {len(chunk):>4} items, dedup rate {rate:6.1%}"
                  + (f", {off:5.1%} from the median of the {len(band)} runs before" if off is not None else ""))
            rates.append(rate)
    print(f"largest distance from the band's median: {worst:.1%}")


if __name__ == "__main__":
    main()
