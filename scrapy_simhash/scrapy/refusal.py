"""A crawl that cannot start because of a ``SIMHASH_*`` setting: said in one line, then refused.

The component raises :class:`~scrapy_simhash.settings.SettingError` while the crawler is built, so
that ``scrapy crawl`` exits non-zero. Scrapy then also hands the exception to its event loop, which
reports it again with a long traceback ("Task exception was never retrieved") after the one line
that says what is wrong: reports that carry this exception are filtered out of the ``asyncio`` and
``twisted`` loggers, nothing else. (Scrapy 2.13's Twisted crawler process also prints the failure as
text, which no filter can tell apart from other errors: there, the traceback follows the line.)
"""

from __future__ import annotations

import logging

from ..settings import SettingError

logger = logging.getLogger(__name__)


class _SaidAlready(logging.Filter):
    """Drops the event loop's report of a :class:`SettingError` that :func:`refuse_to_start` logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], SettingError))


_SAID_ALREADY = _SaidAlready()


def refuse_to_start(exc: SettingError) -> SettingError:
    """Log ``exc`` in one line and return it, to be raised by the caller."""
    logger.error("scrapy-simhash: bad setting, the crawl cannot start: %s", exc)
    for name in ("asyncio", "twisted"):
        logging.getLogger(name).addFilter(_SAID_ALREADY)  # once: filters are a set
    return exc
