"""A namespace's short history of crawls: one record per run, the last :data:`RUNS_KEPT` kept.

The pipeline writes a run's record when its spider opens (the start: a crawl that is killed leaves
this much) and again when it closes (the end, the counts of what it decided, its decision latency).
With it a crawl can be compared with the crawls before it without any outside store: the monitors
of :mod:`scrapy_simhash.monitoring` take the band of the recent runs' dedup rates from it, and
``scrapy-simhash runs`` prints it. Both backends store a record as one JSON object (never pickle)
and check what they read back with :func:`run_from_json`: a record that is not one of ours is
described to the reader's ``damaged`` callback and left out, or refused.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .damage import shown, time_damage

#: Runs kept per namespace: the oldest record goes when a new one is written beyond this many
#: (docs/decisions/0800-monitor-defaults.md).
RUNS_KEPT = 50
#: What a run counts (the pipeline's ``simhash/*`` stats at the close): every item it saw
#: (``items``), admitted (``new``), dropped by each tier, flagged, passed on unchecked for lack of
#: text or by opt-out (``skipped``), whose check-and-add failed (``index_errors``; of those passed on
#: unchecked: ``unchecked``), and fingerprint workers that died.
COUNTS = ("items", "new", "title", "body", "sentence", "flagged", "skipped", "index_errors", "unchecked",
          "workers_died")
#: The decision latency a run records, in milliseconds.
LATENCIES = ("p50", "p95", "max")


def new_run_id(at: float | None = None) -> str:
    """A run id: its start in microseconds (hex) and 4 random bytes, so ids sort by start."""
    return f"{int((time.time() if at is None else at) * 1e6):014x}{os.urandom(4).hex()}"


@dataclass(frozen=True)
class Run:
    """One crawl of a namespace: when it started and ended (``None``: it is running, or died before
    its end was written), which spider, what it counted (:data:`COUNTS`) and its decision latency
    in ms (:data:`LATENCIES`)."""

    id: str
    started: float
    ended: float | None = None
    spider: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict)
    latency_ms: Mapping[str, float] = field(default_factory=dict)

    @property
    def dropped(self) -> int:
        """Items the three tiers dropped."""
        return sum(int(self.counts.get(tier, 0)) for tier in ("title", "body", "sentence"))

    @property
    def checked(self) -> int:
        """Items decided against the index: admitted, dropped or flagged."""
        return int(self.counts.get("new", 0)) + self.dropped + int(self.counts.get("flagged", 0))

    @property
    def dedup_rate(self) -> float | None:
        """Share of the checked items decided as duplicates (dropped or flagged); None when the run
        checked none or has not ended."""
        checked = self.checked
        if self.ended is None or not checked:
            return None
        return (checked - int(self.counts.get("new", 0))) / checked

    def ending(self, counts: Mapping[str, int], latency_ms: Mapping[str, float], at: float | None = None) -> Run:
        """This run, ended now (or ``at``) with these counts and latencies."""
        return replace(self, ended=time.time() if at is None else at,
                       counts={k: int(counts.get(k, 0)) for k in COUNTS},
                       latency_ms={k: float(latency_ms[k]) for k in LATENCIES if k in latency_ms})

    def to_json(self) -> str:
        """The stored record."""
        return json.dumps({"id": self.id, "started": self.started, "ended": self.ended, "spider": self.spider,
                           "counts": dict(self.counts), "latency_ms": dict(self.latency_ms)},
                          sort_keys=True, ensure_ascii=False)

    def as_dict(self) -> dict[str, Any]:
        """The record with its derived values (``dropped``, ``checked``, ``dedup_rate``), for JSON output."""
        return {**json.loads(self.to_json()), "dropped": self.dropped, "checked": self.checked,
                "dedup_rate": self.dedup_rate}


def run_from_json(raw: Any) -> Run:
    """The run a stored record holds; :class:`ValueError` naming the first value the index never
    writes (a record of another tool, a damaged file or server)."""
    try:
        data = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        raise ValueError(f"run record {shown(raw)} is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"run record {shown(data)} is not an object")
    ident = data.get("id")
    if not isinstance(ident, str) or not ident or len(ident) > 64:
        raise ValueError(f"run record: id {shown(ident)} is not a run id")
    for key in ("started", "ended"):
        value = data.get(key)
        problem = None if key == "ended" and value is None else time_damage(value)
        if problem:
            raise ValueError(f"run {ident}: {key} {problem}")
    spider = data.get("spider")
    if spider is not None and not isinstance(spider, str):
        raise ValueError(f"run {ident}: spider is {shown(spider)}, not text")
    counts, latency = data.get("counts", {}), data.get("latency_ms", {})
    if not isinstance(counts, dict) or not all(
            k in COUNTS and type(v) is int and v >= 0 for k, v in counts.items()):
        raise ValueError(f"run {ident}: counts {shown(counts)} are not counts of ours")
    if not isinstance(latency, dict) or not all(
            k in LATENCIES and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            for k, v in latency.items()):
        raise ValueError(f"run {ident}: latency_ms {shown(latency)} are not latencies of ours")
    return Run(id=ident, started=float(data["started"]),
               ended=None if data.get("ended") is None else float(data["ended"]), spider=spider,
               counts=counts, latency_ms={k: float(v) for k, v in latency.items()})


def newest_first(runs: list[Run]) -> list[Run]:
    """``runs`` by start, newest first (ids break ties: they sort by start too)."""
    return sorted(runs, key=lambda r: (r.started, r.id), reverse=True)
