"""``stopwords``: words present in a large share of the user's own items (site chrome, disclaimers),
proposed as additions to a ``SIMHASH_STOP_WORDS`` file; the index is never modified."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..labels import now_iso
from .common import CliError, Damage, describe, fingerprinter_options, make_fingerprinter, open_index_for, pick, shown
from .labelled import read_items


def run_stopwords(args: argparse.Namespace) -> int:
    """Words in a large share of the items (of the namespace's entries, with --index): site chrome."""
    try:
        fingerprinter = make_fingerprinter(fingerprinter_options(args))
    except (OSError, ValueError) as exc:
        raise CliError(describe(exc)) from exc
    urls: set[str] | None = None
    if args.index:
        index = open_index_for(args, readonly=True)
        damage = Damage()
        try:
            urls = {e.url for e in index.entries(damaged=damage) if e.url}
        finally:
            index.close()
        damage.warn("stopwords", args.index)
    features = fingerprinter.features
    frequency: Counter[str] = Counter()
    counted = 0
    for item in read_items(args.input, args.max_line_bytes):
        _, url = pick(item, args.url_field)
        if urls is not None and url not in urls:
            continue
        _, body = pick(item, args.body_field)
        try:
            text = fingerprinter.clean_body(body) if body is not None else ""
        except (TypeError, ValueError):
            continue
        if not text:
            continue
        counted += 1
        frequency.update(set(features.words(text)))
    scope = f"entries of namespace {args.namespace!r} in {args.input}" if urls is not None else f"items of {args.input}"
    if counted < args.min_items:
        print(f"stopwords: {counted:,} {scope} with a body, fewer than --min-items {args.min_items:,}: too few to "
              "tell a site's chrome from its news", file=sys.stderr)
        return 1
    proposed = sorted(
        ((n, w) for w, n in frequency.items()
         if n >= args.min_share * counted and not any(c.isdigit() for c in w)
         and n / counted >= args.min_lift * _general_share(features, w)),
        key=lambda t: (-t[0], t[1]),
    )[: args.top]
    print(f"{len(proposed):,} words in at least {args.min_share:.0%} of {counted:,} {scope} and at least "
          f"{args.min_lift:g} times as common as in general text (already stop words and numbers left out):")
    if proposed:
        print(f"  {'share':>6}  {'items':>7}  {'general':>7}  word")
    for n, w in proposed:
        print(f"  {n / counted:6.1%}  {n:>7,}  {_general_share(features, w):7.2%}  {w}")
    if args.output and proposed:
        added = _write_stop_words(Path(args.output), [w for _, w in proposed], args, counted)
        print(f"stopwords: {added:,} new words written to {args.output}", file=sys.stderr)
    print("stopwords: fingerprints change with the stop words, and the index does not record them (its "
          "features_version stays the same): entries fingerprinted with the old list would be compared with "
          "items fingerprinted with the new one. Re-index with the new list, e.g. 'scrapy-simhash import "
          f"EXPORT --index {shown(args.index) if args.index else 'PATH_OR_URL'} --reset --stop-words FILE', or "
          "crawl with -s SIMHASH_RESET=1 and SIMHASH_STOP_WORDS = FILE in settings.py.", file=sys.stderr)
    return 0


def _general_share(features: Any, word: str) -> float:
    """The share of general text documents holding ``word`` that its IDF stands for (jieba's table is
    ln(N / df); a word the table lacks weighs as its median does, so it counts as that rare)."""
    return math.exp(-features.idf.get(word, features.median_idf))


def _write_stop_words(path: Path, words: Sequence[str], args: argparse.Namespace, counted: int) -> int:
    """Append the words the file does not hold yet (one a line, a ``#`` comment saying where they came
    from), in the format SIMHASH_STOP_WORDS reads; returns how many were added."""
    from ..fingerprint.features import load_stop_words

    try:
        existing = load_stop_words(path) if path.exists() else frozenset()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {describe(exc)}") from exc
    new = [w for w in words if w not in existing]
    if not new:
        return 0
    try:
        ends_with_newline = not path.exists() or path.stat().st_size == 0 or path.read_bytes()[-1:] == b"\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(("" if ends_with_newline else "\n")
                    + f"# scrapy-simhash stopwords {now_iso()}: in at least {args.min_share:.0%} of {counted:,} "
                    f"items of {os.path.basename(args.input)}\n" + "".join(f"{w}\n" for w in new))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {describe(exc)}") from exc
    return len(new)



__all__ = ["run_stopwords"]
