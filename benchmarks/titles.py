"""Titles alone: does a title match join a labelled pair of titles, and only the right ones?

A pairwise benchmark, kept apart from ``accuracy.py`` because its unit differs: ``accuracy.py``
streams whole articles (title and body) through one index, where the body tiers and the title
tier's body check decide most items; here each labelled pair of *titles* goes through the engine
alone, without bodies, so that only the title tier can join it. Each pair is decided by the real
engine (``Deduplicator`` with its default settings and Fingerprinter, its ``decide`` on the first
title then on the second) over an index that holds only the pair's first item (the rule of
:mod:`scrapy_simhash.index.rule` over a one-pair in-memory store, emptied between pairs): the
second item joined (a title-tier duplicate) or not.

The labelled pairs (real titles of ``../shared/corpus``: zh NewsSpider 2016 and inews BDCI 2019,
en Reuters-21578 and BBC 2225; an article belongs to the ``tune`` or ``report`` half by the same
hash of its id as in ``accuracy.py``, ``--split``; a pair is in a half when both its articles are):

Same title (positives)
  ``label``: a real title next to the same title with a flash mark, a bracketed label or a
  site suffix added the way portals add them (:data:`MARKS`, assigned by a hash of the id), e.g.
  ``快讯！侯红当选郑州市市长`` / ``侯红当选郑州市市长``, ``UPDATE 2-…`` / ``…``. Titles of 6
  characters or more (zh), 3 words or more (en).
  ``natural``: titles of two articles whose bodies are one text (character 5-gram containment
  ≥ 0.9 of the smaller, bodies of 200 characters or more: a repost, ``audit.py``'s measure) and
  whose titles differ once normalized: a benchmark, not a target (a portal rewrites a headline; a
  rewritten headline is for the body tiers to join).
Different titles (negatives): the two bodies are different texts (containment < 0.15, both of
200 characters or more) — or, for ``one-apart``, neither article has such a body — and the two
titles differ once case, width, spaces and a site suffix are ignored (identical headlines over
different texts, such as recurring wire headlines, are the number guard's and the body check's
to tell apart, not a title's):
  ``heavy-word``: the two titles share their heaviest word (the engine's TF-IDF weights);
  ``template``: the two titles carry the same site suffix or leading label (``…_百度贴吧``,
  ``投诉主题：…``);
  ``one-apart``: the titles differ only in their first one to three characters (a place, a
  name): ``东营女上門`` / ``侯马女上門``, spam ads over empty bodies (bodies of under 200
  characters count as different unless their letters and digits are equal: one ad posted for two
  cities is left out).
  At most :data:`PER_GROUP` pairs per shared word, suffix or tail, so that one topic does not
  fill a category.

Printed per category: pairs, joined (count and share), for the new default (this tree), the
previous default (``--base DIR``: another tree's package, run in a subprocess on the same pairs)
and a MinHash baseline (datasketch ``MinHash``, 128 permutations, over character bigrams (zh) or
lower-cased words (en) of the NFKC title; joined when the estimated Jaccard ≥ 0.5). Targets
(report split): joined ≤ 0.5 % of the different titles, ≥ 0.95 of the ``label`` pairs. Every
joined different pair is listed.

Run: ``python benchmarks/titles.py`` (report split), ``--split tune``, ``--base ../main``,
``--option KEY=VALUE`` (a ``Deduplicator.open``/Fingerprinter keyword, as in ``accuracy.py``),
``--json FILE``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from options import parse_options  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
SOURCES = (
    ("zh", "newsspider", "zh/newsspider-2016.jsonl.gz"), ("zh", "inews", "zh/inews-bdci2019.jsonl.gz"),
    ("en", "reuters", "en/reuters21578.jsonl.gz"), ("en", "bbc", "en/bbc-2225.jsonl.gz"),
)
POSITIVE = ("label", "natural")
NEGATIVE = ("heavy-word", "template", "one-apart")
TARGETS = {"different_joined": 0.005, "label_joined": 0.95}
PER_GROUP = 3
MIN_BODY = 200
SAME_TEXT = 0.9
OTHER_TEXT = 0.15
#: Marks added to a plain title for the ``label`` pairs: the flash marks and labels found leading
#: real titles of the corpora (突发！ 震惊！ 【关注】 …), the wire-service prefixes, and site suffixes.
MARKS = {
    "zh": (
        "快讯！{}", "重磅！{}", "突发！{}", "突发：{}", "【独家】{}", "[视频]{}", "【图】{}", "【关注】{}",
        "震惊！{}", "曝光！{}", "刚刚！{}", "紧急提醒！{}", "【快讯】{}", "【突发】{}", "独家：{}",
        "{}（组图）", "{}_网易新闻", "{} - 新浪新闻", "最新：{}", "痛心！{}", "【提醒】{}", "注意！{}",
    ),
    "en": (
        "BREAKING: {}", "UPDATE 2-{}", "EXCLUSIVE-{}", "CORRECTED-{}", "REFILE-{}", "WRAPUP 1-{}",
        "Breaking news: {}", "[Video] {}", "LIVE: {}", "{} - BBC News", "UPDATE 1-{}", "Exclusive: {}",
    ),
}
_WS = re.compile(r"\s+")
_TAG = re.compile(r"<[^>]*>")
_HAN_RUN = re.compile(r"[\u3400-\u9fff]+")
_WORD = re.compile(r"\w+")
_NON_WORD = re.compile(r"[\W_]+")
_SUFFIX = re.compile(r"(?:_|\||\s-\s)\s*([^_|]{2,16})$")
_LEADING_LABEL = re.compile(r"^(?:【[^】]{1,8}】|\[[^\]]{1,8}\]|[^\s:：!！]{2,6}[:：])")


def split_of(doc_id: str) -> str:
    """``tune`` or ``report``: the hash split of ``accuracy.py``."""
    return "tune" if hashlib.sha1(doc_id.encode()).digest()[0] % 2 == 0 else "report"


def _h(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "big")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def body_text(body: Any) -> str:
    if isinstance(body, list):
        body = "".join(x for x in body if isinstance(x, str))
    return _WS.sub("", _TAG.sub("", body)) if isinstance(body, str) else ""


def grams(text: str, n: int = 5) -> set[str]:
    return {text[i : i + n] for i in range(len(text) - n + 1)}


def containment(a: set[str], b: set[str]) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def title_key(title: str) -> str:
    """A title without case, width, spaces and a trailing site suffix (equality only)."""
    t = unicodedata.normalize("NFKC", title).strip()
    t2 = _SUFFIX.sub("", t)
    return _WS.sub("", t2 if len(t2) >= 4 else t).lower()


class Doc:
    __slots__ = ("body", "grams", "id", "key", "lang", "sentences", "title")

    def __init__(self, doc_id: str, lang: str, title: str, body: str) -> None:
        self.id, self.lang, self.title, self.body = doc_id, lang, title, body
        self.key = title_key(title)
        self.grams: set[str] | None = None
        self.sentences = {s for s in re.split(r"[。！？!?.\n]", body) if len(s) >= 12}

    def five(self) -> set[str]:
        if self.grams is None:
            self.grams = grams(self.body)
        return self.grams


def load(split: str, corpus: Path = CORPUS) -> list[Doc]:
    docs = []
    for lang, _, rel in SOURCES:
        path = corpus / rel
        if not path.exists():
            print(f"corpus not found: {path} (skipped)", file=sys.stderr)
            continue
        for r in read_jsonl(path):
            title = r.get("title")
            if isinstance(title, str) and title.strip() and split_of(str(r["id"])) == split:
                docs.append(Doc(str(r["id"]), lang, title.strip(), body_text(r.get("body"))))
    return docs


# ---------------------------------------------------------------------------------------------
# Labelled pairs
# ---------------------------------------------------------------------------------------------


def label_pairs(docs: Sequence[Doc]) -> list[tuple[str, str, str, str]]:
    """``(category, id, first title, second title)`` with a mark added to one side."""
    out, seen = [], set()
    for d in docs:
        plain = d.title
        if (d.lang == "zh" and len(plain) < 6) or (d.lang == "en" and len(_WORD.findall(plain)) < 3):
            continue
        if d.key in seen or _LEADING_LABEL.match(plain) or _SUFFIX.search(plain):
            continue  # one pair per headline, and plain titles only
        seen.add(d.key)
        marks = MARKS[d.lang]
        marked = marks[_h(d.id) % len(marks)].format(plain)
        first, second = (plain, marked) if _h("order" + d.id) % 2 else (marked, plain)
        out.append(("label", d.id, first, second))
    return out


def natural_pairs(docs: Sequence[Doc]) -> list[tuple[str, str, str, str]]:
    """Reposts found by their bodies (a shared long sentence, then containment ≥ SAME_TEXT)."""
    by_sentence: dict[str, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        if len(d.body) >= MIN_BODY:
            for s in d.sentences:
                by_sentence[s].append(i)
    tried, out, keys = set(), [], set()
    for holders in by_sentence.values():
        if len(holders) > 20:
            continue  # boilerplate
        for x in range(len(holders)):
            for y in range(x + 1, len(holders)):
                i, j = holders[x], holders[y]
                if (i, j) in tried:
                    continue
                tried.add((i, j))
                a, b = docs[i], docs[j]
                if a.key == b.key or (a.key, b.key) in keys:
                    continue
                if containment(a.five(), b.five()) >= SAME_TEXT:
                    keys.add((a.key, b.key))
                    out.append(("natural", f"{a.id}|{b.id}", a.title, b.title))
    return out


def _different(a: Doc, b: Doc) -> bool:
    if a.key == b.key or a.key in b.key or b.key in a.key:
        return False
    if len(a.body) < MIN_BODY or len(b.body) < MIN_BODY:
        return False
    return containment(a.five(), b.five()) < OTHER_TEXT


def _group_pairs(category: str, groups: dict[str, list[Doc]], test: Any) -> list[tuple[str, str, str, str]]:
    out = []
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda d: _h(category + d.id))
        found = 0
        for x in range(len(members)):
            for y in range(x + 1, min(len(members), x + 6)):
                a, b = members[x], members[y]
                if found < PER_GROUP and test(a, b):
                    out.append((category, f"{a.id}|{b.id}", a.title, b.title))
                    found += 1
    return out


def heavy_word_pairs(docs: Sequence[Doc], fingerprinter: Any) -> list[tuple[str, str, str, str]]:
    groups: dict[str, list[Doc]] = defaultdict(list)
    for d in docs:
        weights = fingerprinter.features.weights(fingerprinter.clean_title(d.title))
        if len(weights) >= 2:
            groups[d.lang + ":" + max(sorted(weights), key=weights.__getitem__)].append(d)
    return _group_pairs("heavy-word", groups, _different)


def template_pairs(docs: Sequence[Doc]) -> list[tuple[str, str, str, str]]:
    groups: dict[str, list[Doc]] = defaultdict(list)
    for d in docs:
        t = unicodedata.normalize("NFKC", d.title)
        suffix, label = _SUFFIX.search(t), _LEADING_LABEL.match(t)
        if suffix:
            groups["suffix:" + suffix.group(1).strip()].append(d)
        if label:
            groups["label:" + label.group(0)].append(d)
    return _group_pairs("template", groups, _different)


def one_apart_pairs(docs: Sequence[Doc]) -> list[tuple[str, str, str, str]]:
    """Titles equal but for their first 1-3 characters, bodies not one text."""
    out = []
    for cut in (1, 2, 3):
        groups: dict[str, list[Doc]] = defaultdict(list)
        for d in docs:
            if d.lang == "zh" and len(d.key) - cut >= 3:
                groups[d.key[cut:]].append(d)

        def apart(a: Doc, b: Doc, cut: int = cut) -> bool:
            if a.key == b.key or not (_HAN_RUN.fullmatch(a.key[:cut]) and _HAN_RUN.fullmatch(b.key[:cut])):
                return False
            if a.key[cut - 1] == b.key[cut - 1] or a.key[0] == b.key[0]:
                return False  # a difference at both ends of the cut: that cut's pair, no other's
            if len(a.body) >= MIN_BODY and len(b.body) >= MIN_BODY:
                return containment(a.five(), b.five()) < OTHER_TEXT
            # a short or empty body: one ad posted for two cities when the words are equal (left out)
            words_a, words_b = _NON_WORD.sub("", a.body), _NON_WORD.sub("", b.body)
            return not (words_a and words_a == words_b)
        out += _group_pairs("one-apart", groups, apart)
    return out


def build_pairs(split: str, fingerprinter: Any) -> list[tuple[str, str, str, str]]:
    docs = load(split)
    pairs = label_pairs(docs) + natural_pairs(docs)
    pairs += heavy_word_pairs(docs, fingerprinter) + template_pairs(docs) + one_apart_pairs(docs)
    return pairs


# ---------------------------------------------------------------------------------------------
# Systems
# ---------------------------------------------------------------------------------------------


class PairStore:
    """The rule's Store holding the entries of one pair (a handful): plain lists."""

    def __init__(self) -> None:
        self.entries: list[Any] = []

    def candidates(self, tier: str, fp: int) -> Iterable[int]:
        return [fp2 for e in self.entries if (fp2 := getattr(e, tier + "_fp")) is not None]

    def holders(self, tier: str, fp: int, not_before: float, limit: int | None, offset: int = 0) -> list[Any]:
        found = [e for e in self.entries if getattr(e, tier + "_fp") == fp and e.first_seen >= not_before]
        return found[offset:] if limit is None else found[offset : offset + limit]

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[Any]:
        return []

    def insert(self, query: Any, seen_at: float) -> int:
        from scrapy_simhash.index import Entry

        entry = Entry(len(self.entries) + 1, "default", query.url, query.title, seen_at, query.title_fp,
                      query.body_fp, query.numbers, (), query.short_body)
        self.entries.append(entry)
        return entry.id

    def record(self, query: Any, match: Any, status: str, seen_at: float) -> None:
        pass


class PairIndex:
    """What the Deduplicator needs of an index, over a :class:`PairStore` emptied per pair."""

    location = "memory"

    def __init__(self, params: Any) -> None:
        self.params = params
        self.store = PairStore()

    def clear(self) -> None:
        self.store = PairStore()

    def check_and_add_many(self, queries: Sequence[Any], flagged: Any = ()) -> list[Any]:
        from scrapy_simhash.index import rule

        return [rule.check_and_add(self.store, q, flagged) for q in queries]


def engine_joins(pairs: Sequence[tuple[str, str, str, str]], options: dict[str, Any]) -> list[bool]:
    """Whether the engine (default settings, ``options``) drops each pair's second title."""
    from scrapy_simhash.engine import Deduplicator, required_params
    from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter

    mine = ("title_action", "body_action", "ttl_days", "title_numbers", "sentences_shared")
    own = {k: options.pop(k) for k in mine if k in options}
    fingerprinter = Fingerprinter(**options)
    params = required_params(fingerprinter.bits, 2, 3, False, fingerprinter.features_version)
    index = PairIndex(params)
    dedup = Deduplicator(index, fingerprinter, **own)  # type: ignore[arg-type]
    joined = []
    for _, _, first, second in pairs:
        index.clear()
        dedup.decide(dedup.fingerprint(first, None), url="a", seen_at=1.0)
        verdict = dedup.decide(dedup.fingerprint(second, None), url="b", seen_at=2.0)
        joined.append(verdict.status != "new" and verdict.status != "skipped")
    return joined


def minhash_joins(pairs: Sequence[tuple[str, str, str, str]], threshold: float = 0.5) -> list[bool] | None:
    try:
        from datasketch import MinHash  # type: ignore[import-untyped]
    except ImportError:
        print("datasketch not installed: MinHash baseline skipped", file=sys.stderr)
        return None

    def sketch(title: str) -> MinHash:
        t = unicodedata.normalize("NFKC", title).lower()
        if _HAN_RUN.search(t):
            t = _WS.sub("", t)
            tokens = {t[i : i + 2] for i in range(len(t) - 1)} or {t}
        else:
            tokens = set(_WORD.findall(t)) or {t}
        m = MinHash(num_perm=128, seed=1)
        m.update_batch([x.encode() for x in tokens])
        return m

    return [sketch(a).jaccard(sketch(b)) >= threshold for _, _, a, b in pairs]


def base_joins(base: Path, pairs_file: Path, options: list[str]) -> list[bool]:
    """The engine of another tree (its package, this script) on the same pairs, in a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(base.resolve())}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--pairs", str(pairs_file), "--joins-only"]
    for o in options:
        cmd += ["--option", o]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------


def summary(pairs: Sequence[tuple[str, str, str, str]], joins: dict[str, list[bool]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for system, joined in joins.items():
        row: dict[str, Any] = {}
        for cat in POSITIVE + NEGATIVE:
            idx = [i for i, p in enumerate(pairs) if p[0] == cat]
            row[cat] = (sum(joined[i] for i in idx), len(idx))
        neg = [i for i, p in enumerate(pairs) if p[0] in NEGATIVE]
        row["different"] = (sum(joined[i] for i in neg), len(neg))
        out[system] = row
    return out


def render(split: str, pairs: Sequence[tuple[str, str, str, str]], joins: dict[str, list[bool]]) -> str:
    s = summary(pairs, joins)
    cols = POSITIVE + NEGATIVE + ("different",)
    lines = [f"titles alone, {split}: pairs joined (count, share)", ""]
    lines.append("| system | " + " | ".join(cols) + " |")
    lines.append("|---|" + "---|" * len(cols))
    for system, row in s.items():
        cells = [f"{j}/{n} ({j / n:.3f})" if n else "-" for j, n in (row[c] for c in cols)]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"targets: different joined ≤ {TARGETS['different_joined']:.3f}, "
                 f"label joined ≥ {TARGETS['label_joined']:.2f}")
    for system in ("scrapy-simhash",):
        joined = joins.get(system)
        if joined is None:
            continue
        wrong = [p for p, j in zip(pairs, joined, strict=True) if j and p[0] in NEGATIVE]
        lines.append(f"\n{system}: different titles joined ({len(wrong)})")
        lines += [f"  {cat} {ids}: {a!r} / {b!r}" for cat, ids, a, b in wrong]
        missed = [p for p, j in zip(pairs, joined, strict=True) if not j and p[0] == "label"]
        lines.append(f"{system}: label pairs not joined ({len(missed)})")
        lines += [f"  {ids}: {a!r} / {b!r}" for _, ids, a, b in missed[:40]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--split", choices=("tune", "report"), default="report")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--base", type=Path, help="another tree whose package is the previous default")
    p.add_argument("--json", type=Path)
    p.add_argument("--pairs", type=Path, help=argparse.SUPPRESS)  # the pairs, for --base's subprocess
    p.add_argument("--joins-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dump-pairs", type=Path, help="write the labelled pairs (JSON lines) here")
    args = p.parse_args(argv)
    options = parse_options(args.option)
    if args.pairs:
        pairs = [tuple(json.loads(line)) for line in args.pairs.read_text("utf-8").splitlines()]
        if args.joins_only:
            print(json.dumps(engine_joins(pairs, options)))
            return 0
    else:
        from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter

        pairs = build_pairs(args.split, Fingerprinter())
    if args.dump_pairs:
        args.dump_pairs.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), "utf-8")
    joins: dict[str, list[bool]] = {"scrapy-simhash": engine_joins(pairs, dict(options))}
    if args.base:
        import tempfile

        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8", delete=False) as f:
            f.write("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
        try:
            joins["previous"] = base_joins(args.base, Path(f.name), args.option)
        finally:
            os.unlink(f.name)
    mh = minhash_joins(pairs)
    if mh is not None:
        joins["minhash@0.5"] = mh
    print(render(f"pairs of {args.pairs}" if args.pairs else f"{args.split} split", pairs, joins))
    if args.json:
        args.json.write_text(json.dumps(summary(pairs, joins), indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
