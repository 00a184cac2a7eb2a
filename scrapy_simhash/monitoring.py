"""Spidermon monitors over what scrapy-simhash counted in a crawl: one line turns them on.

.. code-block:: python

    # settings.py (Spidermon enabled as its documentation says)
    SPIDERMON_SPIDER_CLOSE_MONITORS = ("scrapy_simhash.monitoring.SimhashMonitorSuite",)

:class:`SimhashMonitorSuite` runs, when the spider closes, over the crawl's stats (those of the pipeline,
set before Scrapy's ``spider_closed`` signal, :mod:`scrapy_simhash.scrapy.runs`):

* :class:`DedupRateMonitor`, the fluctuation alert: the run's dedup rate (``simhash/dedup_rate``,
  duplicates over items checked) within ``SIMHASH_MONITOR_DEDUP_TOLERANCE`` of the median of the last
  ``SIMHASH_MONITOR_RUNS`` finished runs of the same spider (``simhash/history/*``, from the index's own
  history of runs). With fewer than ``SIMHASH_MONITOR_MIN_RUNS`` earlier runs it passes: no band yet.
  A site that changed its template so that every page looks alike, or a feed that repeats itself,
  makes the rate jump; a broken extraction that makes every page different makes it fall.
* :class:`IndexErrorMonitor`: check-and-adds that failed after their retries (``simhash/index_error``)
  at most ``SIMHASH_MONITOR_MAX_INDEX_ERRORS``.
* :class:`UncheckedMonitor`: items passed on unchecked (``simhash/unchecked``) at most
  ``SIMHASH_MONITOR_MAX_UNCHECKED``.
* :class:`LatencyMonitor`: the decision latency's 95th percentile (``simhash/latency/p95_ms``) at
  most ``SIMHASH_MONITOR_LATENCY_P95_MS``.
* :class:`WorkersMonitor`: fingerprint workers that died (``simhash/workers_died``) at most
  ``SIMHASH_MONITOR_MAX_WORKERS_DIED``.

Each monitor passes with nothing to say (the pipeline did not open an index in this crawl: no stats).
Take the monitors one by one into a suite of your own to pick some, or to add Spidermon's actions
(Slack, e-mail, Sentry) to them. Spidermon is imported here only: ``pip install
'scrapy-simhash[monitoring]'``.
"""

from __future__ import annotations

from typing import Any

try:
    from spidermon import Monitor, MonitorSuite, monitors
except ImportError as exc:  # pragma: no cover - the test environment has it
    raise ImportError(
        "scrapy_simhash.monitoring needs Spidermon, which is not installed: pip install 'scrapy-simhash[monitoring]'"
    ) from exc

from .scrapy.short import own_key
from .settings import effective_settings, value

__all__ = [
    "DedupRateMonitor",
    "IndexErrorMonitor",
    "LatencyMonitor",
    "SimhashMonitorSuite",
    "UncheckedMonitor",
    "WorkersMonitor",
]


class _SimhashMonitor(Monitor):
    """What the monitors share: the crawl's settings as the plugin reads them, its stats."""

    def setting(self, name: str) -> Any:
        crawler = self.data.crawler
        return value(effective_settings(crawler.settings, getattr(crawler, "spider", None)), name)

    def stat(self, key: str, default: Any = 0) -> Any:
        return self.data.stats.get(own_key(self.data.stats, key), default)

    def ran(self) -> bool:
        """Did the pipeline run with an index in this crawl?"""
        return self.stat("simhash/index", None) is not None

    def at_most(self, key: str, setting: str, what: str) -> None:
        if not self.ran():
            return
        found, limit = self.stat(key), self.setting(setting)
        if found > limit:
            self.fail(f"{found} {what} ({key}), more than {setting} = {limit}")


@monitors.name("scrapy-simhash dedup rate")
class DedupRateMonitor(_SimhashMonitor):
    """The run's dedup rate stays in the band of its recent runs."""

    @monitors.name("dedup rate within the band of recent runs")
    def test_dedup_rate_in_band(self) -> None:
        """The dedup rate is within SIMHASH_MONITOR_DEDUP_TOLERANCE of the median of recent runs."""
        if not self.ran() or self.stat("simhash/dedup_rate", None) is None:
            return  # nothing checked against the index
        runs, needed = int(self.stat("simhash/history/runs")), self.setting("SIMHASH_MONITOR_MIN_RUNS")
        if runs < needed:
            return  # no band yet
        rate = float(self.stat("simhash/dedup_rate"))
        median = float(self.stat("simhash/history/dedup_rate_median"))
        tolerance = self.setting("SIMHASH_MONITOR_DEDUP_TOLERANCE")
        low, high = max(0.0, median - tolerance), min(1.0, median + tolerance)
        if not low <= rate <= high:
            self.fail(
                f"dedup rate {rate:.1%} is outside the band of the last {runs} runs of this spider: median "
                f"{median:.1%} ± {tolerance:.1%} (SIMHASH_MONITOR_DEDUP_TOLERANCE), lowest "
                f"{float(self.stat('simhash/history/dedup_rate_min')):.1%}, highest "
                f"{float(self.stat('simhash/history/dedup_rate_max')):.1%}. A jump: pages that look alike (a "
                "changed template, a body selector that now catches boilerplate); a fall: text that is no "
                "longer the article's"
            )


@monitors.name("scrapy-simhash index errors")
class IndexErrorMonitor(_SimhashMonitor):
    """Check-and-adds that failed after their retries stay within the limit."""

    @monitors.name("index errors")
    def test_index_errors(self) -> None:
        """At most SIMHASH_MONITOR_MAX_INDEX_ERRORS check-and-adds failed."""
        self.at_most("simhash/index_error", "SIMHASH_MONITOR_MAX_INDEX_ERRORS", "check-and-adds failed")


@monitors.name("scrapy-simhash unchecked items")
class UncheckedMonitor(_SimhashMonitor):
    """Items passed on unchecked stay within the limit."""

    @monitors.name("unchecked items")
    def test_unchecked(self) -> None:
        """At most SIMHASH_MONITOR_MAX_UNCHECKED items were passed on unchecked."""
        self.at_most("simhash/unchecked", "SIMHASH_MONITOR_MAX_UNCHECKED", "items passed on unchecked")


@monitors.name("scrapy-simhash decision latency")
class LatencyMonitor(_SimhashMonitor):
    """The decision latency's 95th percentile stays within the limit."""

    @monitors.name("decision latency p95")
    def test_latency_p95(self) -> None:
        """The 95th percentile of the decision latency is at most SIMHASH_MONITOR_LATENCY_P95_MS."""
        if not self.ran() or self.stat("simhash/latency/p95_ms", None) is None:
            return  # no item checked
        self.at_most("simhash/latency/p95_ms", "SIMHASH_MONITOR_LATENCY_P95_MS", "ms at the 95th percentile")


@monitors.name("scrapy-simhash workers")
class WorkersMonitor(_SimhashMonitor):
    """Fingerprint workers that died stay within the limit."""

    @monitors.name("workers died")
    def test_workers_died(self) -> None:
        """At most SIMHASH_MONITOR_MAX_WORKERS_DIED fingerprint workers died."""
        self.at_most("simhash/workers_died", "SIMHASH_MONITOR_MAX_WORKERS_DIED", "fingerprint workers died")


class SimhashMonitorSuite(MonitorSuite):
    """Every scrapy-simhash monitor: add it to ``SPIDERMON_SPIDER_CLOSE_MONITORS``."""

    monitors = [DedupRateMonitor, IndexErrorMonitor, UncheckedMonitor, LatencyMonitor, WorkersMonitor]
