"""``runs``: the namespace's recent crawls from the index's history (:mod:`scrapy_simhash.index.runs`)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import Damage, iso, open_index_for, print_json

#: The table's columns: heading, width, and the value of a run's ``as_dict()``.
_COUNTS = (("items", "items"), ("new", "new"), ("title", "title"), ("body", "body"), ("sent.", "sentence"),
           ("flag.", "flagged"), ("skip.", "skipped"), ("unch.", "unchecked"), ("errors", "index_errors"),
           ("died", "workers_died"))


def run_runs(args: argparse.Namespace) -> int:
    """Print the ``--limit`` most recent runs, newest first: start, end (none: running, or killed),
    spider, counts, dedup rate and decision latency."""
    index = open_index_for(args, readonly=True)
    damage = Damage()
    try:
        runs = index.runs(args.limit, damaged=damage)
        location, namespace = index.location, index.namespace
    finally:
        index.close()
    if args.json:
        print_json([run.as_dict() for run in runs])
        damage.warn("runs", args.index)
        return 0
    print(f"runs of namespace {namespace!r} in {location}, newest first")
    if not runs:
        print("(none yet: a crawl's run is recorded when its spider opens)")
    else:
        print(f"{'started':<20}  {'ended':<20}  {'spider':<12} "
              + " ".join(f"{h:>{max(len(h), 5)}}" for h, _ in _COUNTS) + "   dedup  p50 ms  p95 ms  max ms")
        for run in runs:
            data: dict[str, Any] = run.as_dict()
            ended = iso(run.ended) if run.ended is not None else "(running or died)"
            counts = " ".join(f"{data['counts'].get(key, 0):>{max(len(h), 5)}}" for h, key in _COUNTS)
            rate = "-" if run.dedup_rate is None else f"{run.dedup_rate:.1%}"
            lat = "".join(f"{run.latency_ms[k]:>8.1f}" if k in run.latency_ms else f"{'-':>8}"
                          for k in ("p50", "p95", "max"))
            print(f"{iso(run.started):<20}  {ended:<20}  {(run.spider or '-')[:12]:<12} {counts} {rate:>7}{lat}")
    damage.warn("runs", args.index)
    return 0
