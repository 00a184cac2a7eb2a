"""What a crawl leaves to watch: its decision latency, its dedup rate, and its record in the index's
history of runs (:mod:`scrapy_simhash.index.runs`), with the band of the runs before it.

The pipeline starts a :class:`RunRecorder` when its spider opens (the run's start is written to the
index then: a crawl that is killed leaves at least that), tells it how long each decision took, and
finishes it when the spider closes, before Scrapy's ``spider_closed`` signal, so that the stats
below are there for Spidermon's close monitors (:mod:`scrapy_simhash.monitoring`) and the stats dump:

``simhash/latency/p50_ms``, ``simhash/latency/p95_ms``, ``simhash/latency/max_ms``
    Milliseconds from an item entering the pipeline (its wait for a place included) to its verdict,
    over the items checked against the index (:class:`Latency`: the quantiles within 1 %, the
    maximum exact). ``simhash/latency/items``: how many that is.
``simhash/dedup_rate``
    Share of the items checked against the index that were duplicates (dropped or flagged), 0 to 1.
``simhash/history/runs``, ``simhash/history/dedup_rate_median`` (``_min``, ``_max``)
    The dedup rates of the last ``SIMHASH_MONITOR_RUNS`` finished runs of the same spider in this
    namespace, before this one: how many there were, their median, lowest and highest.
``simhash/run``
    This run's id in the index's history (``scrapy-simhash runs``).

Writing the history never fails a crawl: an index that cannot take a run's record is a warning.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Mapping
from typing import Any

from ..index import BandIndex
from ..index.runs import Run, new_run_id
from .short import own_key

logger = logging.getLogger(__name__)


class Latency:
    """Latencies in bounded memory: counts in logarithmic buckets, each :data:`GROWTH` times as wide as
    the one below (the idea of HdrHistogram and DDSketch), so a quantile is known within 1 % of its
    value and at most about 1,300 buckets exist (up to a day) however many items come; the maximum
    is kept exactly."""

    #: Each bucket's upper bound over the one below: ``sqrt(GROWTH) - 1`` is the largest relative error
    #: (docs/decisions/0800-monitor-defaults.md).
    GROWTH = 1.02
    #: Milliseconds at or below which every latency shares the first bucket.
    FLOOR_MS = 0.001

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.max_ms = 0.0
        self._log_growth = math.log(self.GROWTH)

    def add(self, ms: float) -> None:
        """Count one latency of ``ms`` milliseconds."""
        # (NaN, and all at or below the floor, in the first bucket)
        bucket = math.ceil(math.log(ms / self.FLOOR_MS) / self._log_growth) if ms > self.FLOOR_MS else 0
        self.counts[bucket] = self.counts.get(bucket, 0) + 1
        self.n += 1
        if ms > self.max_ms:
            self.max_ms = ms

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0 < q <= 1) in ms: the geometric middle of the bucket that holds it, at most
        the maximum; None before any latency."""
        if not self.n:
            return None
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                if bucket == 0:
                    return min(self.max_ms, self.FLOOR_MS)
                return min(self.max_ms, self.FLOOR_MS * self.GROWTH ** (bucket - 0.5))
        return self.max_ms  # pragma: no cover - the counts sum to n

    def summary(self) -> dict[str, float]:
        """``{"p50": …, "p95": …, "max": …}`` in ms (empty before any latency)."""
        if not self.n:
            return {}
        return {"p50": self.quantile(0.5) or 0.0, "p95": self.quantile(0.95) or 0.0, "max": self.max_ms}


def run_counts(stats: Mapping[str, Any]) -> dict[str, int]:
    """A run's counts (:data:`~scrapy_simhash.index.runs.COUNTS`) from the pipeline's stats."""

    def n(key: str) -> int:
        value = stats.get(own_key(stats, key)) or 0
        return int(value) if isinstance(value, int | float) else 0

    counts = {"new": n("simhash/new"), "title": n("simhash/dropped/title"), "body": n("simhash/dropped/body"),
              "sentence": n("simhash/dropped/sentence"), "flagged": n("simhash/flagged"),
              "skipped": sum(int(stats[k] or 0) for k in stats if k.startswith(own_key(stats, "simhash/skipped/"))),
              "index_errors": n("simhash/index_error"), "unchecked": n("simhash/unchecked"),
              "workers_died": n("simhash/workers_died")}
    counts["items"] = sum(counts[k] for k in ("new", "title", "body", "sentence", "flagged", "skipped",
                                              "index_errors"))
    return counts


class RunRecorder:
    """One crawl's latency, rate and record in the index (see the module docstring)."""

    def __init__(self, index: BandIndex, spider: str | None, stats: Any, history: int) -> None:
        self.index, self.stats, self.history = index, stats, history
        self.run = Run(id=new_run_id(), started=time.time(), spider=spider)
        self.latency = Latency()

    @classmethod
    def start(cls, index: BandIndex, spider: str | None, stats: Any, history: int) -> RunRecorder:
        """Write the run's start to the index's history and begin counting."""
        recorder = cls(index, spider, stats, history)
        stats.set_value("simhash/run", recorder.run.id)
        recorder._write(recorder.run, "start")
        return recorder

    def decided(self, seconds: float) -> None:
        """One item got its verdict ``seconds`` after it entered the pipeline."""
        self.latency.add(seconds * 1000.0)

    def finish(self) -> None:
        """Set the latency, rate and history stats, and write the run's end to the index."""
        latency = self.latency.summary()
        for key, ms in latency.items():
            self.stats.set_value(f"simhash/latency/{key}_ms", round(ms, 3))
        self.stats.set_value("simhash/latency/items", self.latency.n)
        run = self.run.ending(run_counts(self.stats.get_stats()), latency)
        rate = run.dedup_rate
        if rate is not None:
            self.stats.set_value("simhash/dedup_rate", round(rate, 4))
        self._history()
        self._write(run, "end")

    def _history(self) -> None:
        """The band of the dedup rates of this spider's finished runs before this one."""
        try:
            runs = self.index.runs(damaged=lambda problem: logger.warning(
                "scrapy-simhash: a run record of the index is damaged and left out: %s", problem))
        except Exception as exc:  # a key or table of the wrong type too: the crawl goes on
            logger.warning("scrapy-simhash: could not read the history of runs (%s)", exc)
            return
        rates = [r.dedup_rate for r in runs if r.id != self.run.id and r.spider == self.run.spider]
        recent = [rate for rate in rates if rate is not None][: self.history]
        self.stats.set_value("simhash/history/runs", len(recent))
        if recent:
            self.stats.set_value("simhash/history/dedup_rate_median", round(statistics.median(recent), 4))
            self.stats.set_value("simhash/history/dedup_rate_min", round(min(recent), 4))
            self.stats.set_value("simhash/history/dedup_rate_max", round(max(recent), 4))

    def _write(self, run: Run, which: str) -> None:
        try:
            self.index.record_run(run)
        except Exception as exc:  # (see _history)
            logger.warning("scrapy-simhash: could not write the %s of this run to the index's history (%s)",
                           which, exc)
