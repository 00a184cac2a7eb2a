"""A crawl that cannot start: said in one line, then refused.

A bad ``SIMHASH_*`` setting (:class:`~scrapy_simhash.settings.SettingError`) or an index that cannot
be opened (:class:`IndexCannotOpen`) is raised while the crawler is built, so that ``scrapy crawl``
exits non-zero; a finish reason alone would leave the exit status 0. Scrapy then also hands the
exception to its event loop, which reports it again with a long traceback ("Task exception was never
retrieved") after the one line that says what is wrong: reports that carry these exceptions are
filtered out of the ``asyncio`` and ``twisted`` loggers, nothing else. (Scrapy 2.13's Twisted crawler
process also prints the failure as text, which no filter can tell apart from other errors: there,
the traceback follows the line.)
"""

from __future__ import annotations

import logging

from ..settings import SettingError

logger = logging.getLogger(__name__)


class IndexCannotOpen(RuntimeError):
    """The index could not be opened; the message starts with the finish reason ``simhash_index_error:``."""


class _SaidAlready(logging.Filter):
    """Drops the event loop's report of an exception that :func:`refuse_to_start` logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], (SettingError, IndexCannotOpen)))


_SAID_ALREADY = _SaidAlready()


def refuse_to_start(exc: SettingError | IndexCannotOpen) -> SettingError | IndexCannotOpen:
    """Log ``exc`` in one line (an :class:`IndexCannotOpen` has been logged by who raised it) and
    return it, to be raised by the caller."""
    if isinstance(exc, SettingError):
        logger.error("scrapy-simhash: bad setting, the crawl cannot start: %s", exc)
    for name in ("asyncio", "twisted"):
        logging.getLogger(name).addFilter(_SAID_ALREADY)  # once: filters are a set
    return exc
