"""The plugin's drops (Scrapy ``DropItem`` subclasses) and the filter that logs each in one short line."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import DropItem

if TYPE_CHECKING:
    from ..engine import Verdict

__all__ = ["SHORT_DROP_LINE", "IndexUnavailable", "NearDuplicate", "SimhashDrop"]


class SimhashDrop(DropItem):
    """Base of this plugin's drops: logged in one short line, at ``log_level`` (Scrapy reads it)."""

    def __init__(self, message: str, log_level: str | None = None) -> None:
        super().__init__(message)
        self.log_level = log_level


class IndexUnavailable(SimhashDrop):
    """Raised (``SIMHASH_ON_INDEX_ERROR = "drop"`` or ``"close"``) for an item whose check-and-add
    could not be committed after the retries: it is dropped rather than passed on as new without
    being indexed."""

    def __init__(self, message: str, log_level: str | None = "ERROR") -> None:
        super().__init__(message, log_level)


class NearDuplicate(SimhashDrop):
    """Raised for an item whose story is already in the index; ``verdict`` says which and how close,
    ``url`` is this item's URL (None if it has none)."""

    def __init__(self, verdict: Verdict, log_level: str | None = None, url: str | None = None) -> None:
        super().__init__(f"near-duplicate {url or '(no URL)'}: {verdict.summary()}", log_level)
        self.verdict = verdict
        self.url = url


class _ShortDropLine(logging.Filter):
    """Scrapy logs a drop as ``"Dropped: %(exception)s" + os.linesep + "%(item)s"`` (``LogFormatter.
    dropped``, Scrapy 2.13 to 2.19): the whole item, page bodies included, for every repost. This
    filter, on Scrapy's ``scrapy.core.scraper`` logger, keeps only the first line for the drops of
    this plugin (a :class:`SimhashDrop` in the record's arguments) and leaves every other record
    alone, so a project's own ``LOG_FORMATTER`` still formats its other drops (and the level it
    gives ours, ``SIMHASH_DROP_LOG_LEVEL`` through ``DropItem.log_level``, is kept)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, dict) and isinstance(args.get("exception"), SimhashDrop):
            record.msg = "Dropped: %(exception)s"
        return True


SHORT_DROP_LINE = _ShortDropLine()
