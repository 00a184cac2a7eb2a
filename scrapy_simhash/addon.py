"""``ADDONS = {"scrapy_simhash.Addon": 300}``: enables the pipeline in one line."""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from .pipeline import SimhashPipeline

#: Before the usual storage pipelines (most run at 300 and later): drop first, store after.
PIPELINE_ORDER = 200


class Addon:
    """Adds :class:`SimhashPipeline` to ``ITEM_PIPELINES`` unless it is already there (idempotent)."""

    def update_settings(self, settings: BaseSettings) -> None:
        if hasattr(settings, "setdefault_in_component_priority_dict"):  # Scrapy >= 2.13
            settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", SimhashPipeline, PIPELINE_ORDER)
            return
        pipelines = settings.getdict("ITEM_PIPELINES")
        if not any(load_object(key) is SimhashPipeline for key in pipelines):
            pipelines[SimhashPipeline] = PIPELINE_ORDER
            settings.set("ITEM_PIPELINES", pipelines, settings.getpriority("ITEM_PIPELINES") or 0)
