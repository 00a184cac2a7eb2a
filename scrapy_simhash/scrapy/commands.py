"""``scrapy simhash <subcommand> …``: the standalone command line, inside a Scrapy project.

Registered through the ``scrapy.commands`` entry point. It runs the very parser and code of
:mod:`scrapy_simhash.cli` (``scrapy-simhash``); only the defaults differ: ``--index`` and the tier
options come from the project's settings (``SIMHASH_INDEX_URL``, else the pipeline's default
``.scrapy/simhash/index.sqlite3``; ``SIMHASH_NAMESPACE``, ``SIMHASH_TITLE_MAX_DISTANCE`` …, as
:func:`scrapy_simhash.settings.cli_defaults` reads them), so
``scrapy simhash stats`` looks at the index the crawls use. ``-s NAME=VALUE`` before the subcommand
overrides a setting, as for any Scrapy command.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand

from .. import cli
from ..settings import cli_defaults


class SimhashCommand(ScrapyCommand):
    """``scrapy simhash``: dedup JSONL, inspect and maintain the project's near-duplicate index."""

    requires_project = True
    requires_crawler_process = False  # no crawl, no reactor
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<subcommand> [options]"

    def short_desc(self) -> str:
        return "Near-duplicate index: dedup JSONL, stats, check, explain, purge, reset, reband, forget, report"

    def long_desc(self) -> str:
        return (
            "Run a scrapy-simhash subcommand on the project's index (SIMHASH_INDEX_URL, else "
            ".scrapy/simhash/index.sqlite3) with the project's SIMHASH_* settings as defaults. "
            f"Subcommands: {', '.join(cli.COMMANDS)}. "
            "Run 'scrapy simhash <subcommand> --help' for the options of each."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("simhash_args", nargs=argparse.REMAINDER, metavar="SUBCOMMAND ...",
                            help="a scrapy-simhash subcommand and its options")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        argv = [*opts.simhash_args, *args]
        self.exitcode = cli.main(argv, prog="scrapy simhash", defaults=cli_defaults(self.settings))
