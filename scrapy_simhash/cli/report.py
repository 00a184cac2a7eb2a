"""``report``: the HTML page about the thresholds (:mod:`scrapy_simhash.report`), written from the index."""

from __future__ import annotations

import argparse
import sys

from .common import CliError, describe, open_index_for


def run_report(args: argparse.Namespace) -> int:
    """Gather, render and write the page; the one-line summary goes to stderr."""
    from ..report import write_report

    index = open_index_for(args, readonly=True)
    try:
        summary = write_report(
            index, args.output, recent=args.recent, pairs=args.pairs, decision_files=args.decisions,
            title_max_distance=args.title_max_distance, body_max_distance=args.body_max_distance,
        )
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {describe(exc)}") from exc
    finally:
        index.close()
    print(summary, file=sys.stderr)
    return 0

