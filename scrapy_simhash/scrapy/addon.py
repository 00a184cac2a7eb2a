"""``ADDONS = {"scrapy_simhash.Addon": 300}``: enables the pipeline (with the end-of-crawl summary and the
backpressure on ``start()``) in one line."""

from __future__ import annotations

from scrapy.settings import BaseSettings

from .backpressure import StartBackpressure
from .delivery import STORED_ORDER, StoredMark
from .pipeline import SimhashPipeline
from .summary import DedupSummary

#: Before the usual storage pipelines (most run at 300 and later): drop first, store after.
PIPELINE_ORDER = 200
#: Any order works for the summary: it only reads the stats when the crawl ends.
SUMMARY_ORDER = 500
#: Next to the engine: the items ``start()`` yields wait there, after every other middleware's work.
BACKPRESSURE_ORDER = 5


class Addon:
    """Adds :class:`SimhashPipeline` (and :class:`.delivery.StoredMark` last) to ``ITEM_PIPELINES``,
    :class:`DedupSummary` to ``EXTENSIONS`` and :class:`~.backpressure.StartBackpressure` to
    ``SPIDER_MIDDLEWARES`` unless they are already there (idempotent); ``SIMHASH_SUMMARY = False``
    keeps the summary quiet."""

    def update_settings(self, settings: BaseSettings) -> None:
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", SimhashPipeline, PIPELINE_ORDER)
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", StoredMark, STORED_ORDER)
        settings.setdefault_in_component_priority_dict("EXTENSIONS", DedupSummary, SUMMARY_ORDER)
        settings.setdefault_in_component_priority_dict("SPIDER_MIDDLEWARES", StartBackpressure, BACKPRESSURE_ORDER)
