"""The number and sentence signatures of a normalized body, and their formats.

Both are short texts that the index stores with an entry and the tier rule
(:mod:`scrapy_simhash.index.rule`) compares: a *number signature* guards the title tier against a
recurring templated headline over a report with other figures; a *sentence signature* serves the
sentence tier, which catches edited reposts whose body fingerprints drifted past the body threshold.
This module is a leaf: the fingerprinter makes signatures, the index compares them, neither imports
the other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from hashlib import blake2b

from .._compiled import _signatures_c
from ..text.hints import H_DATE_TIME, H_EXACT, compiled, remembered

#: At most this many number hashes make an entry's number signature (the smallest ones): a bottom-k
#: sample, so that a long table's signature stays short (docs/decisions/0010-number-guard.md).
NUMBERS_MAX = 16
#: An item is checked with up to this many of its sentence hashes (the smallest), which bounds the
#: lookups of a very long body (docs/decisions/0012-sentence-signature.md).
SENTENCES_CHECKED = 64

# "\d\d*" is "\d+": a pattern that starts with a character class lets a search skip from digit to digit.
_NUMBER = re.compile(r"\d\d*(?:[.,]\d+)*")
# Dates (ISO after normalization) and clock times are metadata a repost adds or rewrites, not figures.
# \d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b, from the first digit on (a
# search skips from digit to digit; "\b" before a digit is "(?<!\w)")
_DATE_TIME = re.compile(r"\d(?:\d{3}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?|(?<!\w\d)\d?:\d{2}(?::\d{2})?\b)")
# What any match of it holds: a search that skips from digit to digit, where _DATE_TIME (its "\b"
# branch) tries every position; texts without one are left as they are.
_DATE_TIME_HINT = re.compile(r"\d[-:]\d")


_last_without_dates = ("", "")  # the last text and its result: the two signatures of a body ask for it


def _without_dates(text: str) -> str:
    """``text`` with its dates and clock times replaced by a space."""
    global _last_without_dates
    last = _last_without_dates
    if last[0] is text:
        return last[1]
    flags = remembered(text)  # the normalization's answer, when this is the body it just normalized
    hinted = ("-" in text or ":" in text) and (  # the hint needs one of them
        flags & H_DATE_TIME if flags & H_EXACT else _DATE_TIME_HINT.search(text))
    result = _DATE_TIME.sub(" ", text) if hinted else text
    _last_without_dates = (text, result)
    return result


_last_numbers: tuple[str, list[str]] = ("", [])  # the same for the numbers: both signatures need them


def _numbers(text: str) -> list[str]:
    """The numbers of ``text`` that are not part of a date or a clock time, in order."""
    global _last_numbers
    last = _last_numbers
    if last[0] is text:
        return last[1]
    c = compiled()
    result = (_NUMBER.findall if c is None else c.numbers)(_without_dates(text))
    _last_numbers = (text, result)
    return result


#: Sentence ends in normalized text (。 stays full width; ！？； are ASCII by then); a period ends a
#: sentence only before a space or the end (closing quotes and brackets between), so decimals stay
#: whole. A line break ends a piece too, but a piece it ends is a line, not a sentence (below).
_SENTENCE_END = re.compile(r"[。!?;]+|\.(?=[\"'”’)\]」』]*(?:\s|$))")
_SPACE = re.compile(r"\s+")
#: A line's hash has its top bit set, a sentence's clear: a sample by smallest hash takes sentences
#: first and lines (table rows, headlines of related links, site chrome) only to fill up
#: (docs/decisions/0004-lines-after-sentences.md).
_LINE_BIT = 1 << 63
_HEX = "0123456789abcdef"
#: A hash's first hex digit with its top bit cleared (a sentence's) or set (a line's).
_AS_SENTENCE = {c: _HEX[i & 7] for i, c in enumerate(_HEX)}
_AS_LINE = {c: _HEX[i | 8] for i, c in enumerate(_HEX)}
#: Shorter sentences are too common ("Reuters", "记者 张三") to identify a story
#: (docs/decisions/0012-sentence-signature.md).
MIN_SENTENCE_CHARS = 20
#: A body at least this share of whose characters are figures is a table of figures (an earnings
#: report "Shr 17 cts vs 15 cts, Net …"): its words are a template, only the figures tell it apart
#: (docs/decisions/0011-figure-heavy-share.md).
FIGURE_HEAVY_SHARE = 0.15
#: A body too short for a fingerprint still tells two answers under one question title apart (a
#: digest of its text, :func:`short_body_digest`) from this many characters on; below, it counts as none.
MIN_SHORT_BODY_CHARS = 5


def sentence_signature(text: str) -> tuple[str, ...]:
    """Hashes of the distinct sentences of a normalized text, smallest first, at most
    :data:`SENTENCES_CHECKED`.

    The text is cut at sentence marks and line breaks. A piece that a sentence mark ends is a
    sentence; one that a line break (or the end) ends is a line: a table row, a headline in a box
    of related links, a line of site chrome. Each is lower-cased with all whitespace removed and
    must have at least :data:`MIN_SENTENCE_CHARS` characters and no ``=`` (markup or code left in a
    scraped text: ``style="margin-bottom: 10px; …"`` is no sentence, whatever its semicolons);
    each is hashed to 64 bits (BLAKE2b), the top bit set for a line and clear for a sentence, so
    that the smallest hashes are sentences (a page's chrome and links change from site to site, its
    sentences do not), and written as 16 lowercase hex digits. Fewer than 2 → ``()`` (no
    signature). An item is checked with all of these; the index keeps only the
    :data:`~.index.rule.SENTENCES_STORED` smallest, a sample of the story's sentences chosen by
    hash, so the sample of an original and the text of its repost agree on which sentences count,
    however the repost was cut, padded or reordered.
    """
    hashes = _sentence_hashes(text, MIN_SENTENCE_CHARS)
    hashes.sort()
    return tuple(hashes[:SENTENCES_CHECKED]) if len(hashes) >= 2 else ()


def _sentence_hashes_python(text: str, min_chars: int) -> list[str]:
    """The hashes of :func:`sentence_signature`, unsorted."""
    # the digest's hex digits with the first one's top bit set (a line) or cleared (a sentence): equal
    # lengths of lowercase hex sort as the numbers do, so no conversion to int and back
    hashes = []
    for x, bit in _pieces(text).items():
        if len(x) >= min_chars and "=" not in x:
            h = blake2b(x.encode("utf-8"), digest_size=8).hexdigest()
            hashes.append((_AS_LINE if bit else _AS_SENTENCE)[h[0]] + h[1:])
    return hashes


def _pieces_python(text: str) -> dict[str, int]:
    """The pieces of a text (whitespace removed, lower-cased) → 0 for a sentence, ``_LINE_BIT``
    for a line (see :func:`sentence_signature`)."""
    found: dict[str, int] = {}
    for line in text.split("\n"):
        *ended, rest = (_SPACE.sub("", part).lower() for part in _SENTENCE_END.split(line))
        found.update(dict.fromkeys(ended, 0))
        found.setdefault(rest, _LINE_BIT)
    return found


def _non_space_python(text: str) -> int:
    return len(_SPACE.sub("", text))


def _number_hashes_python(numbers: Iterable[str]) -> list[str]:
    """The hash of each number of :func:`number_signature`, as 8 hex digits."""
    return [blake2b(n.encode("ascii", "replace"), digest_size=4).hexdigest() for n in numbers]


# the compiled scans and hashes (the same pieces and hashes, tests/test_compiled_engine.py); a module
# built from an older source, without the hashes, leaves them to Python
_pieces = _pieces_python if _signatures_c is None else _signatures_c.sentence_pieces
_non_space = _non_space_python if _signatures_c is None else _signatures_c.non_space
_sentence_hashes: Callable[[str, int], list[str]] = getattr(_signatures_c, "sentence_hashes", _sentence_hashes_python)
_number_hashes: Callable[[Iterable[str]], list[str]] = getattr(_signatures_c, "number_hashes", _number_hashes_python)


def is_line(digest: str) -> bool:
    """Is this hash of a :func:`sentence_signature` a line's (top bit set), not a sentence's?"""
    return digest[0] >= "8"


def figure_share(text: str) -> float:
    """The share of a normalized text's characters (whitespace, dates and clock times left out)
    that are figures; bodies at or above :data:`FIGURE_HEAVY_SHARE` are figure-heavy."""
    chars = _non_space(_without_dates(text))
    return sum(map(len, _numbers(text))) / chars if chars else 0.0


def short_body_digest(text: str) -> str | None:
    """A body too short to fingerprint, as 16 hex digits (BLAKE2b of its text lower-cased without
    whitespace), or None under :data:`MIN_SHORT_BODY_CHARS` characters (no body to speak of)."""
    key = _SPACE.sub("", text).lower()
    return blake2b(key.encode("utf-8"), digest_size=8).hexdigest() if len(key) >= MIN_SHORT_BODY_CHARS else None


def number_signature(text: str) -> str:
    """The numbers of a normalized text as a short, comparable signature.

    Dates and clock times are left out (a repost adds or reformats them). Each distinct number
    (thousands commas removed, so ``1,234`` = ``1234``) is hashed to 32 bits
    (BLAKE2b); the :data:`NUMBERS_MAX` smallest hashes, as 8 lowercase hex digits,
    sorted and space-separated, are the signature (``""``: no numbers). A bottom-k sample, so two
    signatures estimate how far the number sets overlap (:func:`~.index.rule.numbers_agree`).
    """
    found = {n.replace(",", "") for n in _numbers(text)}
    # 8 lowercase hex digits each: sorted as strings, sorted as the numbers are
    hashes = sorted(_number_hashes(found))
    return " ".join(hashes[:NUMBERS_MAX])
