"""``ADDONS = {"scrapy_simhash.Addon": 300}``: enables the pipeline (and the end-of-crawl summary) in one line."""

from __future__ import annotations

from scrapy.settings import BaseSettings

from .delivery import STORED_ORDER, StoredMark
from .pipeline import SimhashPipeline
from .summary import DedupSummary

#: Before the usual storage pipelines (most run at 300 and later): drop first, store after.
PIPELINE_ORDER = 200
#: Any order works for the summary: it only reads the stats when the crawl ends.
SUMMARY_ORDER = 500


class Addon:
    """Adds :class:`SimhashPipeline` (and :class:`.delivery.StoredMark` last) to ``ITEM_PIPELINES``
    and :class:`DedupSummary` to ``EXTENSIONS`` unless they are already there (idempotent);
    ``SIMHASH_SUMMARY = False`` keeps the summary quiet."""

    def update_settings(self, settings: BaseSettings) -> None:
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", SimhashPipeline, PIPELINE_ORDER)
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", StoredMark, STORED_ORDER)
        settings.setdefault_in_component_priority_dict("EXTENSIONS", DedupSummary, SUMMARY_ORDER)
