"""Character-level similarity of short texts: the second check where a fingerprint is not enough.

Below :data:`SHORT_TEXT_CHARS` normalized characters, a 64-bit body fingerprint is decided by a few
words and ignores their order: a news flash cut at another sentence, with a caption dropped or an
attribution added, moves 6–11 bits, while two statements with the same words in another order
("A moved from X to Y", "A moved from Y to X") sit 0–2 bits apart. For such texts the rule
(:mod:`scrapy_simhash.index.rule`) also compares the texts themselves: every index entry of a short
body keeps its :func:`char_key` (at most :data:`SHORT_TEXT_CHARS` characters), and a body match is
taken only when :func:`similarity` reaches :data:`MIN_SIMILARITY`; an entry further than the body
threshold but among the fingerprint's candidates is taken when it does (a near-miss found).

:func:`similarity` is rapidfuzz's normalized Indel similarity (``1 - indel(a, b) / (len a + len b)``,
i.e. twice the longest common subsequence over the total length): it is order-sensitive (a swap of
two words costs both of them) and tolerant of a cut or an added phrase. The measurements behind
the two constants, and the alternatives tried, are in docs/decisions/0530-short-text-check.md.
"""

from __future__ import annotations

import re
import unicodedata

from rapidfuzz.distance import Indel

#: Bodies shorter than this (normalized characters) are short: their entries keep a character key
#: and their body matches are confirmed by characters (docs/decisions/0530-short-text-check.md).
SHORT_TEXT_CHARS = 200
#: The least :func:`similarity` that makes two short bodies copies of one text
#: (docs/decisions/0530-short-text-check.md).
MIN_SIMILARITY = 0.8
#: Character keys shorter than this take no part (a body of a few characters says too little).
MIN_KEY_CHARS = 4
#: Keys shorter than this are one statement: the same characters in another order are another
#: statement ("张三从北京调到上海", "张三从上海调到北京"), never a copy
#: (docs/decisions/0530-short-text-check.md).
STATEMENT_CHARS = 60

_DROP = re.compile(r"[\W_]+")  # whitespace, punctuation, symbols: not what a text says


def char_key(text: str, limit: int = SHORT_TEXT_CHARS) -> str | None:
    """The comparable characters of a normalized text: lower-cased (NFKC), without whitespace,
    punctuation or symbols, so that a symbol stuffed anywhere ("好-用-推-荐") or a changed punctuation
    mark makes no difference; None when it is :data:`MIN_KEY_CHARS` characters or fewer, or
    ``limit`` or more (not a short text)."""
    key = _DROP.sub("", unicodedata.normalize("NFKC", text).lower())
    if len(key) < MIN_KEY_CHARS or len(key) >= limit:
        return None
    return key


def similarity(a: str, b: str) -> float:
    """How alike two character keys are, from 0 (nothing in common) to 1 (equal): the normalized
    Indel similarity (shared characters in order, twice, over both lengths)."""
    return float(Indel.normalized_similarity(a, b))


def reordered(a: str, b: str) -> bool:
    """Are two keys one statement's characters in another order (both under :data:`STATEMENT_CHARS`)?"""
    return a != b and len(a) == len(b) and len(a) < STATEMENT_CHARS and sorted(a) == sorted(b)


def same_text(a: str, b: str, min_similarity: float = MIN_SIMILARITY) -> tuple[bool, float]:
    """Are two character keys copies of one text, and their :func:`similarity`: similar enough,
    and not one statement reordered (:func:`reordered`, which scores as it is but never matches)."""
    score = similarity(a, b)
    return score >= min_similarity and not reordered(a, b), score
