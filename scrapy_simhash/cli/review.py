"""``review``: a person labels decisions and near misses as same story or not (``tune`` replays the
labels, :mod:`.tune`; ``stopwords`` proposes stop words from the same items, :mod:`.stopwords`).

``review`` is a terminal dialogue: it runs where the index is (a crawler's server over SSH as well as
a laptop), needs no browser, no open port and no download to move, and writes each label to the
labels file the moment it is given (docs/decisions/0810-review-in-the-terminal.md). Answers are read
from stdin line by line, so a list of answers can be piped in too.

The index is opened read-only; ``review`` appends to the labels file, nothing else.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections import Counter
from typing import TYPE_CHECKING, Literal

from ..labels import (
    Judgement,
    Label,
    LabelsError,
    Pair,
    Side,
    append_label,
    decision_pair,
    entry_pair,
    nearest_earlier,
    now_iso,
)
from .common import (
    CliError,
    Damage,
    describe,
    fingerprinter_options,
    make_fingerprinter,
    open_index_for,
    pick,
    shown,
)
from .labelled import labels_path, read_items, read_labels_for, refingerprinting

if TYPE_CHECKING:
    from ..fingerprint.fingerprinter import Fingerprinter
    from ..index import BandIndex

#: Entries kept in memory for the near-miss search (the most recent ones).
NEAR_MISS_WINDOW = 20_000
#: Characters of each body ``review --items`` shows.
SNIPPET_CHARS = 160


# ------------------------------------------------------------------------------------------------
# Items given with --items: the decided items' own fingerprints
# ------------------------------------------------------------------------------------------------


def _item_sides(args: argparse.Namespace, fingerprinter: Fingerprinter, fingerprint: set[str],
                text: set[str]) -> tuple[dict[str, Side], dict[str, str]]:
    """From the items of ``--items``: the fingerprints and signatures of those whose URL is in
    ``fingerprint``, and the start of the cleaned body of those in ``text`` (what the person reads)."""
    sides: dict[str, Side] = {}
    snippets: dict[str, str] = {}
    for item in read_items(args.items, args.max_line_bytes):
        _, url = pick(item, args.url_field)
        if not isinstance(url, str) or url in snippets or (url not in fingerprint and url not in text):
            continue
        _, title = pick(item, args.title_field)
        _, body = pick(item, args.body_field)
        try:
            snippets[url] = fingerprinter.clean_body(body)[:SNIPPET_CHARS] if body is not None else ""
            if url in fingerprint:
                fps = fingerprinter.fingerprint(title, body)
                sides[url] = Side(url, None, fps.title_text or None, fps.title, fps.body, fps.numbers, fps.sentences,
                                  fps.short_body, fps.figures)
        except (TypeError, ValueError):
            continue
    return sides, snippets


# ------------------------------------------------------------------------------------------------
# review
# ------------------------------------------------------------------------------------------------


def gather_pairs(args: argparse.Namespace, index: BandIndex, fingerprinter: Fingerprinter,
                 damage: Damage) -> tuple[list[Pair], dict[str, str]]:
    """Recent decisions (newest first), then the closest near misses of each tier; with ``--items``,
    the start of each pair's bodies by URL."""
    bits = index.params.bits
    decisions = [d for d in index.decisions(args.recent, damaged=damage) if d.original is not None]
    entries = list(index.entries(latest=NEAR_MISS_WINDOW, damaged=damage))
    thresholds = {"title": args.title_max_distance, "body": args.body_max_distance}
    near: list[Pair] = []
    start = max(1, len(entries) - args.recent)
    for tier in ("title", "body"):
        found = sorted(nearest_earlier(entries, start, tier), key=lambda t: (t[2] <= thresholds[tier], t[2]))
        # the closest over the threshold first (admitted, yet close), then any within it (kept by a guard)
        near += [entry_pair(entries[i], entries[j], tier, bits=bits) for i, j, _ in found[: args.near]]
    items: dict[str, Side] = {}
    snippets: dict[str, str] = {}
    if args.items:
        decided = {d.url for d in decisions if d.url}
        shown_urls = decided | {d.original.url for d in decisions if d.original and d.original.url}
        shown_urls |= {u for p in near for u in (p.later.url, p.earlier.url) if u}
        items, snippets = _item_sides(args, fingerprinter, decided, shown_urls)
    title_fp = refingerprinting(fingerprinter, index, [d.original for d in decisions if d.original] or entries)
    pairs = [p for d in decisions
             if (p := decision_pair(d, bits=bits, item=items.get(d.url or ""), title_fp=title_fp)) is not None]
    seen: set[tuple[str, str]] = set()
    unique = []
    for p in [*pairs, *near]:
        if p.key not in seen:
            seen.add(p.key)
            unique.append(p)
    return unique, snippets


def _describe(pair: Pair, thresholds: dict[str, int], snippets: dict[str, str]) -> str:
    if pair.kind == "decision":
        what = "dropped" if pair.status == "duplicate" else pair.status
        head = f"{what} by the {pair.tier} tier, distance {pair.distance}"
    else:
        side = ">" if pair.distance > thresholds[pair.tier] else "<="
        head = (f"near miss: admitted as new, its nearest earlier entry by {pair.tier} at distance {pair.distance} "
                f"({side} threshold {thresholds[pair.tier]})")
    lines = [head]
    for name, s in (("later", pair.later), ("earlier", pair.earlier)):
        ref = f"entry #{s.entry}" if s.entry is not None else "not stored"
        lines.append(f"  {name + ':':9}{s.title or '(no title stored)'}")
        lines.append(f"  {'':9}{s.url or '(no URL)'}  ({ref})")
        if s.url in snippets:
            lines.append(f"  {'':9}“{' '.join(snippets[s.url].split())}…”")
    parts = []
    for tier, d in (("title", pair.title_distance), ("body", pair.body_distance)):
        parts.append(f"{tier} {'unknown' if tier in pair.unknown else ('-' if d is None else d)}")
    lines.append("  distances: " + ", ".join(parts))
    return "\n".join(lines)


ANSWERS: dict[str, Judgement | Literal["quit"] | None] = {
    "s": "same", "same": "same", "d": "different", "different": "different", "k": None, "skip": None, "": None,
    "q": "quit", "quit": "quit",
}


def run_review(args: argparse.Namespace) -> int:
    """Show unlabelled pairs one by one and append each answer to the labels file."""
    path = labels_path(args)
    done = {lb.pair.key for lb in read_labels_for(path, args.namespace, "review")}
    index = open_index_for(args, readonly=True)
    damage = Damage()
    try:
        try:
            fingerprinter = make_fingerprinter({**fingerprinter_options(args), "bits": index.params.bits})
        except (OSError, ValueError) as exc:
            raise CliError(describe(exc)) from exc
        pairs, snippets = gather_pairs(args, index, fingerprinter, damage)
    finally:
        index.close()
    damage.warn("review", args.index)
    todo = [p for p in pairs if p.key not in done]
    labelled_before = len(pairs) - len(todo)
    if args.limit is not None:
        todo = todo[: args.limit]
    thresholds = {"title": args.title_max_distance, "body": args.body_max_distance}
    who = args.by or _user()
    counts: Counter[str] = Counter()
    print(f"{len(todo):,} pairs to review ({labelled_before:,} of {len(pairs):,} already labelled in {path})")
    for n, pair in enumerate(todo, 1):
        print(f"\n[{n}/{len(todo)}] {_describe(pair, thresholds, snippets)}")
        answer = _ask()
        if answer == "quit":
            break
        if answer is None:
            counts["skipped"] += 1
            continue
        try:
            append_label(path, Label(pair, answer, now_iso(), who))
        except LabelsError as exc:
            raise CliError(str(exc)) from exc
        counts[answer] += 1
    labelled = counts["same"] + counts["different"]
    print(f"\nreview: {labelled:,} labelled (same story {counts['same']:,}, different {counts['different']:,}), "
          f"{counts['skipped']:,} skipped; labels in {path}", file=sys.stderr)
    if labelled:
        print(f"next: scrapy-simhash tune {path} --index {shown(args.index)}", file=sys.stderr)
    return 0


def _ask() -> Judgement | Literal["quit"] | None:
    """One answer from stdin: "same", "different", None (skip) or "quit" (also at the end of input)."""
    while True:
        print("same story? [s]ame / [d]ifferent / [k] skip / [q] quit: ", end="", flush=True)
        line = sys.stdin.readline()
        if not line:
            print()
            return "quit"
        answer = line.strip().lower()
        if answer in ANSWERS:
            return ANSWERS[answer]
        print(f"  {answer!r}: answer s, d, k or q")


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment or the password database
        return "unknown"


__all__ = ["gather_pairs", "run_review"]
