"""``scrapy-simhash``: dedup a JSONL export and inspect or maintain the index, without writing Python.

The same parser and implementation serve ``scrapy simhash …`` inside a Scrapy project
(:mod:`scrapy_simhash.scrapy.commands`), which only changes the option defaults (``--index`` and the
tier options come from the project's ``SIMHASH_*`` settings).

Subcommands: ``dedup`` (JSONL in → kept items and one decision per line out) and ``import`` (warm an
index, summary only), both in :mod:`.dedup`; ``check`` (verdict for one item without adding it, plus its nearest
entries), ``explain`` (why a URL was dropped), ``stats``, ``runs`` (the recent crawls), ``export``,
``purge``, ``reset``, ``reband`` (rebuild an index's band rows for other thresholds), ``forget``, ``report``
(a self-contained HTML page about the thresholds), ``review`` (label pairs as same story or not), ``tune``
(the labels replayed under other settings) and ``stopwords`` (stop words from your items).

Exit status: 0 on success (bad input lines are reported, counted and skipped, they do not fail a
run); 1 when ``explain``/``forget`` find nothing, or when the input or the index broke off in the
middle of a run; 2 when the run cannot start (bad usage, unreadable input, an index that cannot be
opened). Errors are one line on stderr, never a traceback (an error no case foresaw too, with
status 1); a closed stdout (``… | head``) ends the command quietly with status 1. Rows of the
index that hold values scrapy-simhash never writes (:mod:`scrapy_simhash.index.damage`) are
skipped, counted and the first named on stderr (``export`` then exits 2, a damaged index's status:
its output is not the whole index); a damaged counter of a Redis index, or a damaged decision
``explain`` is asked about, stops the command with one line and status 2.

The standard library only (argparse, gzip, multiprocessing): the command line must start fast and
add no dependency to a Scrapy project.

Modules: :mod:`.parser` (every option), :mod:`.dedup` (``dedup``, ``import``), :mod:`.inspect`
(``check``, ``explain``, ``report``), :mod:`.maintain` (``stats``, ``export``, ``purge``, ``reset``,
``reband``, ``forget``), :mod:`.review`, :mod:`.tune` and :mod:`.stopwords` (one command each, sharing
:mod:`.labelled`), :mod:`.runs` (``runs``) and :mod:`.common` (what they share). Each imports only
:mod:`.common` (and :mod:`.labelled`) and the engine, never another subcommand's module.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .common import PROG, CliError, describe, silence_stdout
from .dedup import run_dedup
from .inspect import run_check, run_explain, run_report
from .maintain import index_stats, run_export, run_forget, run_purge, run_reband, run_reset, run_stats
from .parser import BUILTIN_DEFAULTS, build_parser
from .review import run_review
from .runs import run_runs
from .stopwords import run_stopwords
from .tune import run_tune

__all__ = [
    "BUILTIN_DEFAULTS",
    "COMMANDS",
    "PROG",
    "CliError",
    "build_parser",
    "index_stats",
    "main",
    "run_check",
    "run_dedup",
    "run_explain",
    "run_export",
    "run_forget",
    "run_purge",
    "run_reband",
    "run_report",
    "run_reset",
    "run_review",
    "run_runs",
    "run_stats",
    "run_stopwords",
    "run_tune",
]

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "dedup": run_dedup,
    "import": lambda args: run_dedup(args, outputs=False),
    "check": run_check,
    "explain": run_explain,
    "stats": run_stats,
    "runs": run_runs,
    "export": run_export,
    "purge": run_purge,
    "reset": run_reset,
    "reband": run_reband,
    "forget": run_forget,
    "report": run_report,
    "review": run_review,
    "tune": run_tune,
    "stopwords": run_stopwords,
}


def main(argv: Sequence[str] | None = None, *, prog: str = PROG,
         defaults: Mapping[str, Any] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    from ..index import SimhashIndexError

    parser = build_parser(prog, defaults)
    args = parser.parse_args(argv)
    try:
        status = COMMANDS[args.command](args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return status
    except CliError as exc:
        print(f"{prog} {args.command}: error: {exc}", file=sys.stderr)
        return exc.status
    except SimhashIndexError as exc:  # e.g. a corrupt or tampered index met halfway through a command
        print(f"{prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog} {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `… | head` stopped reading: end quietly, like other Unix tools
        silence_stdout()
        return 1
    except Exception as exc:
        print(f"{prog} {args.command}: error: {type(exc).__name__}: {describe(exc)} (unexpected: please report it)",
              file=sys.stderr)
        return 1

