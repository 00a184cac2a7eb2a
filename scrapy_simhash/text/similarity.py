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
#: The short profile keeps the key of texts up to this many characters: there every match is confirmed
#: by characters, a 32-bit fingerprint alone being no proof (docs/decisions/0531-short-profile.md).
SHORT_PROFILE_CHARS = 1000
#: A text whose characters are, in order, at least this share of a shorter one's…
MIN_CONTAINMENT = 0.9
#: … and at most 1/this times longer holds it: a copy with a phrase added, cut at a clause, doubled
#: (docs/decisions/0530-short-text-check.md).
MAX_LENGTH_RATIO = 2.2
#: Character keys shorter than this take no part (a body of a few characters says too little).
MIN_KEY_CHARS = 4
#: Keys shorter than this are one statement: the same characters in another order are another
#: statement ("张三从北京调到上海", "张三从上海调到北京"), never a copy
#: (docs/decisions/0530-short-text-check.md).
STATEMENT_CHARS = 60

_DROP = re.compile(r"[\W_]+")  # whitespace, punctuation, symbols: not what a text says
#: The ASCII bytes :data:`_DROP` removes (every one but letters and digits): an ASCII text is its own
#: NFKC form, so its key is its letters and digits, lower-cased.
_ASCII_DROPPED = bytes(b for b in range(128) if not chr(b).isalnum())


def char_key(text: str, limit: int = SHORT_TEXT_CHARS, least: int = MIN_KEY_CHARS) -> str | None:
    """The comparable characters of a normalized text: lower-cased (NFKC), without whitespace,
    punctuation or symbols, so that a symbol stuffed anywhere ("好-用-推-荐") or a changed punctuation
    mark makes no difference; None when it is shorter than ``least`` characters, or ``limit`` or more
    (not a short text)."""
    if len(text) >= 4 * limit:  # not short, whatever its spaces and punctuation (a fast answer for articles)
        return None
    if len(text) >= limit and text.isascii() and len(text.encode("ascii").translate(None, _ASCII_DROPPED)) >= limit:
        return None  # its letters and digits alone are too many: the key's length, counted without building it
    key = _DROP.sub("", unicodedata.normalize("NFKC", text).lower())
    if len(key) < least or len(key) >= limit:
        return None
    return key


def similarity(a: str, b: str) -> float:
    """How alike two character keys are, from 0 (nothing in common) to 1 (equal): the normalized
    Indel similarity (shared characters in order, twice, over both lengths)."""
    return float(Indel.normalized_similarity(a, b))


def reordered(a: str, b: str) -> bool:
    """Are two keys one statement's characters in another order (both under :data:`STATEMENT_CHARS`)?"""
    return a != b and len(a) == len(b) and len(a) < STATEMENT_CHARS and sorted(a) == sorted(b)


def containment(a: str, b: str) -> float:
    """The share of the shorter key's characters that the longer holds in the same order (their
    longest common subsequence over the shorter length)."""
    short = min(len(a), len(b))
    if not short:
        return 0.0
    common = (len(a) + len(b) - Indel.distance(a, b)) / 2
    return common / short


def same_text(a: str, b: str, min_similarity: float = MIN_SIMILARITY) -> tuple[bool, float]:
    """Are two character keys copies of one text, and the score that says so: their
    :func:`similarity` when it reaches ``min_similarity``; else, when one is at most
    :data:`MAX_LENGTH_RATIO` times the other's length, their :func:`containment` when it reaches
    :data:`MIN_CONTAINMENT` (a copy with a phrase added, cut, doubled); else the similarity (not
    the same). One statement reordered (:func:`reordered`) is never the same."""
    score = similarity(a, b)
    if reordered(a, b):
        return False, score
    if score >= min_similarity:
        return True, score
    short, long = sorted((len(a), len(b)))
    if short and long <= MAX_LENGTH_RATIO * short and short >= MIN_KEY_CHARS * 2:
        held = containment(a, b)
        if held >= MIN_CONTAINMENT:
            return True, held
    return False, score
