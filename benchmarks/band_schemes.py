"""Band layouts compared for the body tier (64 bits, k=3): rows stored vs probes vs rows read.

For each scheme: band rows an entry stores, keys a query probes, band bytes an entry costs on disk
(~22 bytes a row in SQLite, measured with dbstat), and the rows a query reads: random data
(expected ``probes · n / 2^width``, exact arithmetic) and clustered data (10 % of entries are one
centre with 6 random distinct bits flipped, 10 % of queries too: counted on ``--entries`` simulated
entries, the mean and p99 over ``--queries`` queries, then scaled to 10M and 100M: bucket sizes grow
linearly with the cluster). Every scheme is exact: the entries within k share a probed key.

Schemes: ``pigeonhole`` (k+1 = 4 bands of 16 bits, probed as stored: multi-index hashing with k+1 parts);
``mih-2`` (2 parts of 32 bits, each probed with its 32 one-bit neighbours: the layout of
:mod:`scrapy_simhash.index.bands`); ``mih-3`` (3 parts of 21–22 bits, one-bit neighbours);
``manku-6/3`` (6 blocks, a table per choice of 3 blocks kept exact: 20 tables); ``mih-1`` (the
whole fingerprint, every value within 3 bits probed: no false candidate, 43,745 probes).

Run: ``python benchmarks/band_schemes.py [--entries 1000000 --queries 2000]`` (about a minute).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter
from itertools import combinations
from math import comb
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapy_simhash.fingerprint.simhash import band_layout
from scrapy_simhash.index.bands import TierBands

BITS, K, FLIPS, SHARE, ROW_BYTES = 64, 3, 6, 0.10, 22


class Manku:
    """Tables keyed on ``keep`` of ``blocks`` blocks (exact), one row per table."""

    def __init__(self, blocks: int, keep: int) -> None:
        self.tables = list(combinations(band_layout(BITS, blocks - 1), keep))
        self.probes = len(self.tables)
        self.width = sum(w for _, w in self.tables[0])

    def store(self, fp: int) -> list[tuple[int, int]]:
        return [(n, tuple((fp >> s) & ((1 << w) - 1) for s, w in table))  # type: ignore[misc]
                for n, table in enumerate(self.tables)]

    probe = store


class Split:
    """``mih-2`` whose dense buckets (``threshold`` fingerprints or more) are split: their entries
    also store rows keyed by (bucket, a 16-bit quarter of the other part), probed with one-bit
    neighbours (the other part is within k - d of the query, and a 2-part MIH of it answers that)."""

    def __init__(self, threshold: int) -> None:
        self.top = TierBands(BITS, K, band_layout(BITS, 1), 1)
        self.sub = TierBands(32, K, band_layout(32, 1), 1)
        self.threshold, self.probes = threshold, self.top.probes
        self.width = 32

    def read(self, cluster: list[int], queries: list[int]) -> tuple[list[int], float]:
        """Rows each query reads, and the rows an entry stores on average."""
        buckets: Counter[tuple[int, int]] = Counter(k for fp in cluster for k in self.top.store(fp))
        dense = {key for key, n in buckets.items() if n >= self.threshold}
        subs: Counter[tuple[tuple[int, int], tuple[int, int]]] = Counter()
        extra = 0
        for fp in cluster:
            for n, value in self.top.store(fp):
                if (n, value) in dense:
                    rest = fp >> 32 if n == 0 else fp & 0xFFFF_FFFF
                    for sub in self.sub.store(rest):
                        subs[(n, value), sub] += 1
                        extra += 1
        read = []
        for q in queries:
            total = 0
            for n, value in set(self.top.probe(q)):
                if (n, value) not in dense:
                    total += buckets.get((n, value), 0)
                    continue
                rest = q >> 32 if n == 0 else q & 0xFFFF_FFFF
                total += sum(subs.get(((n, value), sub), 0) for sub in set(self.sub.probe(rest)))
            read.append(total)
        return read, 2 + extra / len(cluster) * SHARE


def schemes() -> dict[str, object]:
    return {
        "pigeonhole": TierBands(BITS, K, band_layout(BITS, K), 0),
        "mih-2": TierBands(BITS, K, band_layout(BITS, 1), 1),
        "mih-3": TierBands(BITS, K, band_layout(BITS, 2), 1),
        "manku-6/3": Manku(6, 3),
        "mih-1": TierBands(BITS, K, band_layout(BITS, 0), 3),
        "mih-2 + split ≥ 64": Split(64),
    }


def clustered(rng: random.Random, centre: int) -> int:
    for bit in rng.sample(range(BITS), FLIPS):
        centre ^= 1 << bit
    return centre


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=2000)
    args = ap.parse_args()
    rng = random.Random(1)
    centre = rng.getrandbits(BITS)
    cluster = [clustered(rng, centre) for _ in range(int(args.entries * SHARE))]
    queries = [clustered(rng, centre) if rng.random() < SHARE else rng.getrandbits(BITS) for _ in range(args.queries)]
    print(f"$ python benchmarks/band_schemes.py --entries {args.entries} --queries {args.queries}\n")
    print("| scheme | rows stored / entry | band bytes / entry | probes / query | random rows read at 10M / 100M "
          "| clustered rows read at 10M: mean / p99 | at 100M: mean / p99 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, scheme in schemes().items():
        if isinstance(scheme, Split):
            read, stored = scheme.read(cluster, queries)
            tail = sorted(read)[int(0.99 * (len(read) - 1))]
            print(f"| {name} | {stored:.2f} | {stored * ROW_BYTES:.0f} | {scheme.probes} + 34 a dense bucket | "
                  f"as mih-2 | {statistics.fmean(read):,.0f} / {tail:,} (at {args.entries:,}) | not linear: "
                  "simulate with --entries |", flush=True)
            continue
        if isinstance(scheme, TierBands):
            rows, probes = len(scheme.parts), scheme.probes
            per_random = sum(sum(comb(w, r) for r in range(scheme.radius + 1)) / 2**w for _, w in scheme.parts)
        else:
            assert isinstance(scheme, Manku)
            rows, probes = len(scheme.tables), scheme.probes
            per_random = probes / 2**scheme.width
        buckets = Counter(key for fp in cluster for key in set(scheme.store(fp)))  # type: ignore[attr-defined]
        read = [sum(buckets.get(key, 0) for key in set(scheme.probe(q))) for q in queries]  # type: ignore[attr-defined]
        scale = [1e7 / args.entries, 1e8 / args.entries]
        cells = [f"{statistics.fmean(read) * s:,.0f} / {sorted(read)[int(0.99 * (len(read) - 1))] * s:,.0f}"
                 for s in scale]
        print(f"| {name} | {rows} | {rows * ROW_BYTES} | {probes:,} | {per_random * 1e7:,.1f} / "
              f"{per_random * 1e8:,.1f} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
