"""``review`` (a person labels decisions and near misses as same story or not), ``tune`` (the labels
replayed under other settings) and ``stopwords`` (stop words proposed from the user's own items).

``review`` is a terminal dialogue: it runs where the index is (a crawler's server over SSH as well as
a laptop), needs no browser, no open port and no download to move, and writes each label to the
labels file the moment it is given (docs/decisions/0810-review-in-the-terminal.md). Answers are read
from stdin line by line, so a list of answers can be piped in too.

None of the three writes to the index (it is opened read-only); ``review`` appends to the labels file,
``stopwords -o FILE`` writes the stop words file, ``tune`` writes nothing.
"""

from __future__ import annotations

import argparse
import getpass
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..labels import (
    Judgement,
    Label,
    LabelsError,
    Pair,
    Side,
    append_label,
    decision_pair,
    default_labels_path,
    entry_pair,
    nearest_earlier,
    now_iso,
    read_labels,
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
from .input import Input, Reader

if TYPE_CHECKING:
    from ..fingerprint.fingerprinter import Fingerprinter
    from ..index import BandIndex
    from ..tune import Score, Setting

#: Entries kept in memory for the near-miss search (the most recent ones).
NEAR_MISS_WINDOW = 20_000
#: Characters of each body ``review --items`` shows.
SNIPPET_CHARS = 160


def labels_path(args: argparse.Namespace) -> Path:
    """``--labels``, else the file next to a SQLite index; a Redis index needs ``--labels``."""
    if getattr(args, "labels", None):
        return Path(args.labels)
    path = default_labels_path(args.index) if args.index else None
    if path is None:
        raise CliError("a Redis index has no directory to keep labels in: give --labels PATH")
    return path


def _read_labels(path: Path, namespace: str | None, command: str) -> list[Label]:
    bad: list[tuple[int, str]] = []
    try:
        labels = read_labels(path, namespace, bad=lambda n, why: bad.append((n, why)))
    except LabelsError as exc:
        raise CliError(str(exc)) from exc
    if bad:
        n, why = bad[0]
        print(f"scrapy-simhash {command}: skipped {len(bad):,} line(s) of {path} that are not labels; "
              f"the first, line {n}: {why}", file=sys.stderr)
    return labels


# ------------------------------------------------------------------------------------------------
# Items given with --items: the decided items' own fingerprints
# ------------------------------------------------------------------------------------------------


def _item_sides(args: argparse.Namespace, fingerprinter: Fingerprinter, fingerprint: set[str],
                text: set[str]) -> tuple[dict[str, Side], dict[str, str]]:
    """From the items of ``--items``: the fingerprints and signatures of those whose URL is in
    ``fingerprint``, and the start of the cleaned body of those in ``text`` (what the person reads)."""
    sides: dict[str, Side] = {}
    snippets: dict[str, str] = {}
    for item in _items(args.items, args.max_line_bytes):
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


def _items(name: str, max_bytes: int) -> Iterator[dict[str, Any]]:
    """The JSON objects of an export (lines that are not objects are passed over)."""
    source = Input(name)
    try:
        for _, raw in Reader(source, max_bytes=max_bytes):
            if isinstance(raw, str):
                continue
            try:
                item = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(item, dict):
                yield item
    finally:
        source.close()


def _title_fp(fingerprinter: Fingerprinter, index: BandIndex, entries: Sequence[Any]) -> Any:
    """A function giving a stored (normalized) title's fingerprint again, or None when the stored
    titles of ``entries`` do not give their own fingerprints back (other title options, a cut title)."""
    sample = [e for e in entries if e.title and e.title_fp is not None][:20]
    if not sample or any(fingerprinter.title(e.title) != e.title_fp for e in sample):
        return None
    return fingerprinter.title


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
    title_fp = _title_fp(fingerprinter, index, [d.original for d in decisions if d.original] or entries)
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
    done = {lb.pair.key for lb in _read_labels(path, args.namespace, "review")}
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


# ------------------------------------------------------------------------------------------------
# tune
# ------------------------------------------------------------------------------------------------


def run_tune(args: argparse.Namespace) -> int:
    """Replay the labels (and the index's decisions) under candidate settings; print, write nothing."""
    from ..tune import Setting, candidates, ranked, score

    path = Path(args.labels_file)
    if not path.is_file():
        raise CliError(f"cannot read {path}: no such file")
    labels = _read_labels(path, args.namespace, "tune")
    if not labels:
        raise CliError(f"{path} holds no labels of namespace {args.namespace!r}: label pairs with "
                       "'scrapy-simhash review' first")
    current = Setting(args.title_max_distance, args.body_max_distance, args.title_numbers, args.sentences_shared)
    decisions: list[Pair] = []
    answers = None
    if args.index:
        index = open_index_for(args, readonly=True)
        damage = Damage()
        try:
            answers = (index.params.max_title_distance, index.params.max_body_distance)
            recorded = index.decisions(args.recent, damaged=damage)
            title_fp = None
            if recorded:
                try:
                    fingerprinter = make_fingerprinter({**fingerprinter_options(args), "bits": index.params.bits})
                except (OSError, ValueError) as exc:
                    raise CliError(describe(exc)) from exc
                title_fp = _title_fp(fingerprinter, index, [d.original for d in recorded if d.original])
            decisions = [p for d in recorded if (p := decision_pair(d, bits=index.params.bits, title_fp=title_fp))]
        finally:
            index.close()
        damage.warn("tune", args.index)
    scores = score(labels, candidates(current, args.title_up_to, args.body_up_to), decisions)
    best = ranked(scores, current)
    now = next(sc for sc in scores if sc.setting == current)
    suggested = best[0]
    same = sum(lb.same for lb in labels)
    notes = _tune_notes(labels, same)
    reband = _reband(suggested.setting, answers, args.index)
    if args.apply:
        print(f"# scrapy-simhash tune: suggested by {len(labels)} labels of {path} "
              f"(precision {_pct(suggested.precision)}, recall {_pct(suggested.recall)}); paste into settings.py")
        for name, value in suggested.setting.as_settings().items():
            print(f"{name} = {value}")
        for line in [*notes, *reband]:
            print(f"tune: {line}", file=sys.stderr)
        return 0
    if args.json:
        print(json.dumps({
            "labels": len(labels), "same": same, "different": len(labels) - same, "decisions": len(decisions),
            "current": now.as_dict(), "suggested": suggested.as_dict(),
            "candidates": [sc.as_dict() for sc in best[: args.top]], "notes": notes, "reband": reband,
        }, ensure_ascii=False, indent=2))
        return 0
    print(f"{len(labels):,} labels in {path} (same story {same:,}, different {len(labels) - same:,}), "
          f"namespace {args.namespace!r}" + (f"; {len(decisions):,} recorded decisions of {shown(args.index)} "
                                             "replayed" if args.index else ""))
    rows = [(now, "current"), *((sc, "") for sc in best[: args.top] if sc is not now)]
    rows = [(sc, "suggested" if sc is suggested else mark) for sc, mark in rows]
    if suggested is now:
        rows[0] = (now, "current, suggested")
    print(_table(rows, bool(decisions)))
    print("\nTP/FP: pairs the setting calls duplicates, labelled same/different; FN/TN: pairs it admits; ?: outcome "
          "unknown (counted as a mistake in the ranking); [95% Wilson interval]")
    print(f"suggested: {_settings_line(suggested.setting)}")
    print(_margins(scores, suggested))
    for line in [*notes, *reband]:
        print(line)
    return 0


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _interval(x: float | None, iv: tuple[float, float] | None) -> str:
    return "-" if x is None or iv is None else f"{x:.2f} [{iv[0]:.2f}-{iv[1]:.2f}]"


def _settings_line(s: Setting) -> str:
    return ", ".join(f"{k} = {v}" for k, v in s.as_settings().items())


def _table(rows: Sequence[tuple[Score, str]], decisions: bool) -> str:
    head = ["title", "body", "numbers", "sentences", "TP", "FP", "FN", "TN", "?", "precision [95%]",
            "recall [95%]", "F1"]
    if decisions:
        head.append("decisions kept")
    lines = []
    for sc, mark in rows:
        s = sc.setting
        row = [str(s.title_max_distance), str(s.body_max_distance), str(s.title_numbers), str(s.sentences_shared),
               str(sc.tp), str(sc.fp), str(sc.fn), str(sc.tn), str(sc.unknown),
               _interval(sc.precision, sc.precision_interval), _interval(sc.recall, sc.recall_interval),
               f"{sc.pessimistic_f1:.2f}"]
        if decisions:
            row.append(f"{sc.decisions_kept}/{sc.decisions}" + (f" (+{sc.decisions_unknown}?)"
                                                                if sc.decisions_unknown else ""))
        lines.append((row, mark))
    widths = [max(len(h), *(len(r[i]) for r, _ in lines)) for i, h in enumerate(head)]
    out = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + (f"  ← {m}" if m else "") for r, m in lines]
    return "\n".join(out)


def _margins(scores: Sequence[Score], best: Score) -> str:
    """How far each threshold can move from the suggestion, the other held, and score as well."""
    by_setting = {sc.setting: sc.pessimistic_f1 for sc in scores}
    s = best.setting

    def run(field: str) -> str:
        value = getattr(s, field)
        ok = [v for v in range(0, 129)
              if by_setting.get(replace(s, **{field: v})) == best.pessimistic_f1]
        low = high = value
        while low - 1 in ok:
            low -= 1
        while high + 1 in ok:
            high += 1
        return f"{low}-{high}" if low != high else str(low)

    return (f"as good on these labels: title max distance {run('title_max_distance')} (body {s.body_max_distance}), "
            f"body max distance {run('body_max_distance')} (title {s.title_max_distance})")


def _tune_notes(labels: Sequence[Label], same: int) -> list[str]:
    notes = []
    if same == 0 or same == len(labels):
        kind = "same story" if same else "different stories"
        notes.append(f"every label says {kind}: nothing bounds the thresholds on the other side; label pairs "
                     "of both kinds (decisions and near misses) before trusting a suggestion")
    elif len(labels) < 30:
        notes.append(f"{len(labels)} labels: the intervals are wide; a setting is only clearly better when its "
                     "interval does not overlap the current one's")
    return notes


def _reband(s: Setting, answers: tuple[int, int] | None, location: str | None) -> list[str]:
    """What an index needs for the suggested thresholds."""
    command = (f"scrapy-simhash reband {shown(location) if location else 'PATH_OR_URL'} "
               f"--title-max-distance {s.title_max_distance} --body-max-distance {s.body_max_distance}")
    if answers is None:
        return [f"an index answers the distances it was banded for (scrapy-simhash stats shows them); one that "
                f"answers less than title {s.title_max_distance} / body {s.body_max_distance} needs: {command}"]
    if s.title_max_distance <= answers[0] and s.body_max_distance <= answers[1]:
        return [f"no re-band needed: the index answers title distances up to {answers[0]} and body up to "
                f"{answers[1]}"]
    return [f"re-band first (the index answers title up to {answers[0]}, body up to {answers[1]}): {command}"]


# ------------------------------------------------------------------------------------------------
# stopwords
# ------------------------------------------------------------------------------------------------


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
    for item in _items(args.input, args.max_line_bytes):
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


__all__ = ["gather_pairs", "labels_path", "run_review", "run_stopwords", "run_tune"]
