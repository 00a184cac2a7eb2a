"""Where does a 64-bit body fingerprint stop being reliable, and what does a character check add?

On real Chinese articles (NewsSpider 2016, inews 2019; the ``tune`` half of :func:`accuracy.split_of`)
cut to short texts of ``L`` characters, for each length:

* **near copies**: a shifted excerpt (the same article cut 10 % later), and the excerpt edited by
  :mod:`repost`'s ``edit@10%`` and ``source_line`` recipes;
* **reordered**: the excerpt's first sentence with two of its words swapped (another statement);
* **different**: each excerpt against the excerpt of another article nearest to it by body
  fingerprint (the hardest negative the body tier meets).

Printed per length: the share of near copies within the body threshold (3 bits), their median
distance, and for a character-similarity threshold the share of near copies above it and of
different texts above it. Real flashes (whole bodies under 200 characters) are reported apart.

Run: ``python benchmarks/short_lengths.py`` (``--limit`` articles per corpus, default 600).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import CORPUS, split_of
from rapidfuzz.distance import Levenshtein
from repost import Article, make_repost, split_sentences

from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
from scrapy_simhash.text.normalize import normalize_body
from scrapy_simhash.text.similarity import char_key, similarity

LENGTHS = (60, 100, 150, 200, 300, 400)
THRESHOLDS = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9)


def load(limit: int) -> list[tuple[str, str]]:
    docs = []
    for name in ("newsspider-2016.jsonl.gz", "inews-bdci2019.jsonl.gz"):
        n = 0
        with gzip.open(CORPUS / "zh" / name, "rt", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                body = normalize_body(d.get("body") or "")
                if split_of(d["id"]) != "tune" or len(body) < 150:
                    continue
                docs.append((d["id"], body))
                n += 1
                if n >= limit:
                    break
    return docs


def flashes(limit: int) -> list[str]:
    out = []
    with gzip.open(CORPUS / "zh" / "newsspider-2016.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            body = normalize_body(d.get("body") or "")
            if split_of(d["id"]) == "tune" and 40 <= len(body) < 200:
                out.append(body)
                if len(out) >= limit:
                    break
    return out


def swap_words(sentence: str, rng: random.Random) -> str | None:
    import jieba

    words = jieba.lcut(sentence)
    spots = [i for i, w in enumerate(words) if len(w) >= 2 and w.isalnum()]
    if len(spots) < 2:
        return None
    i, j = rng.sample(spots, 2)
    if words[i] == words[j]:
        return None
    words[i], words[j] = words[j], words[i]
    return "".join(words)


def grams(key: str, n: int = 3) -> set[str]:
    return {key[i : i + n] for i in range(max(1, len(key) - n + 1))}


MEASURES = {
    "indel": similarity,
    "levenshtein": lambda a, b: float(Levenshtein.normalized_similarity(a, b)),
    "3gram-dice": lambda a, b: 2 * len(grams(a) & grams(b)) / (len(grams(a)) + len(grams(b))),
}
MEASURE = "indel"


def sim(a: str, b: str) -> float:
    ka, kb = char_key(a, 10**9), char_key(b, 10**9)
    return 0.0 if ka is None or kb is None else MEASURES[MEASURE](ka, kb)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--measure", choices=sorted(MEASURES), default="indel",
                    help="the character similarity (default: the engine's, rapidfuzz Indel)")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    args = ap.parse_args()
    global MEASURE
    MEASURE = args.measure
    rng = random.Random(args.seed)
    fp = Fingerprinter()
    docs = load(args.limit)
    pool = [s for _, body in docs[:200] for s in split_sentences(body, "zh")]
    print(f"{len(docs)} articles (tune half)")
    print("L    kind      n    within3  median_d  " + "  ".join(f"sim>={t}" for t in THRESHOLDS))

    def row(length: int, kind: str, pairs: list[tuple[str, str]]) -> None:
        ds, ss = [], []
        for a, b in pairs:
            fa, fb = fp.body(a), fp.body(b)
            if fa is None or fb is None:
                continue
            ds.append((fa ^ fb).bit_count())
            ss.append(sim(a, b))
        if not ds:
            return
        within = sum(d <= 3 for d in ds) / len(ds)
        above = "  ".join(f"{sum(s >= t for s in ss) / len(ss):8.3f}" for t in THRESHOLDS)
        print(f"{length:<4d} {kind:<9s} {len(ds):<4d} {within:7.3f}  {statistics.median(ds):8.1f}  {above}")

    for length in map(int, args.lengths.split(",")):
        excerpts = [(i, body[:length]) for i, body in docs if len(body) >= length * 1.2]
        shifted = [(body[: length], body[length // 10 : length // 10 + length]) for _, body in docs
                   if len(body) >= length * 1.2]
        edited = []
        for i, text in excerpts:
            art = Article(i, "zh", "t", tuple(p for p in text.split("\n") if p))
            for recipe in ("edit@10%", "source_line"):
                d = make_repost(art, recipe, rng, pool)
                edited.append((text, "\n".join(d.paragraphs)))
        reordered = []
        for _, text in excerpts:
            first = split_sentences(text, "zh")[0] if split_sentences(text, "zh") else ""
            swapped = swap_words(first, rng) if len(first) >= 8 else None
            if swapped and swapped != first:
                reordered.append((first, swapped))
        # the nearest other excerpt by body fingerprint
        fps = [(fp.body(t), t) for _, t in excerpts]
        fps = [(f, t) for f, t in fps if f is not None]
        different = []
        for k, (f, t) in enumerate(fps):
            best = min(((f ^ g).bit_count(), u) for m, (g, u) in enumerate(fps) if m != k)
            different.append((t, best[1]))
        row(length, "shifted", shifted)
        row(length, "edited", edited)
        row(length, "reordered", reordered)
        row(length, "different", different)
    fl = flashes(args.limit)
    fls = [(f, g) for f, g in ((fp.body(t), t) for t in fl) if f is not None]
    nearest = []
    for k, (f, t) in enumerate(fls):
        best = min(((f ^ g).bit_count(), u) for m, (g, u) in enumerate(fls) if m != k)
        nearest.append((t, best[1]))
    row(0, "flashes", nearest)
    cut = [(t, t[len(t) // 10 :]) for _, t in fls]
    row(0, "flashcut", cut)


if __name__ == "__main__":
    main()
