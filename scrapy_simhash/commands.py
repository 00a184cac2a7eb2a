"""``scrapy simhash <subcommand> …``: the standalone command line, inside a Scrapy project.

Registered through the ``scrapy.commands`` entry point. It runs the very parser and code of
:mod:`scrapy_simhash.cli` (``scrapy-simhash``); only the defaults differ: ``--index`` and the tier
options come from the project's settings (``SIMHASH_INDEX_URL``, else the pipeline's default
``.scrapy/simhash/index.sqlite3``; ``SIMHASH_NAMESPACE``, ``SIMHASH_TITLE_MAX_DISTANCE`` …), so
``scrapy simhash stats`` looks at the index the crawls use. ``-s NAME=VALUE`` before the subcommand
overrides a setting, as for any Scrapy command.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.settings import BaseSettings

from . import cli


def settings_defaults(settings: BaseSettings) -> dict[str, Any]:
    """Command-line option defaults (option dest → value) from a project's ``SIMHASH_*`` settings."""
    from .index.redis import index_url_from_settings
    from .pipeline import _optional_float, default_index_url, effective_settings

    s = effective_settings(settings, None)

    def fields(name: str) -> str:
        value = s.get(name)
        return value if isinstance(value, str) else ",".join(str(v) for v in value or ())

    return {
        "index": index_url_from_settings(s) or default_index_url(),
        "namespace": s.get("SIMHASH_NAMESPACE"),
        "title_field": fields("SIMHASH_TITLE_FIELD"),
        "body_field": fields("SIMHASH_BODY_FIELD"),
        "url_field": fields("SIMHASH_URL_FIELD"),
        "title_max_distance": s.getint("SIMHASH_TITLE_MAX_DISTANCE"),
        "body_max_distance": s.getint("SIMHASH_BODY_MAX_DISTANCE"),
        "title_action": s.get("SIMHASH_TITLE_ACTION"),
        "body_action": s.get("SIMHASH_BODY_ACTION"),
        "ttl_days": _optional_float(s, "SIMHASH_TTL_DAYS"),
        "bits": s.getint("SIMHASH_BITS"),
        "top_k": s.getint("SIMHASH_TOP_K"),
        "dynamic_threshold": s.getbool("SIMHASH_DYNAMIC_THRESHOLD"),
        "stop_words": s.get("SIMHASH_STOP_WORDS"),
        "user_dict": s.get("SIMHASH_USER_DICT"),
        "main_content": s.getbool("SIMHASH_MAIN_CONTENT"),
        "title_pattern": s.getlist("SIMHASH_TITLE_PATTERNS"),
        "title_numbers": s.getint("SIMHASH_TITLE_NUMBERS"),
        "sentences_shared": s.getint("SIMHASH_SENTENCES_SHARED"),
    }


class SimhashCommand(ScrapyCommand):
    """``scrapy simhash``: dedup JSONL, inspect and maintain the project's near-duplicate index."""

    requires_project = True
    requires_crawler_process = False  # no crawl, no reactor
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<subcommand> [options]"

    def short_desc(self) -> str:
        return "Near-duplicate index: dedup JSONL, stats, check, explain, purge, reset, forget, report"

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
        self.exitcode = cli.main(argv, prog="scrapy simhash", defaults=settings_defaults(self.settings))
