"""Which of the normalization's and the signatures' regex hints a text holds, in one compiled pass.

A normalized body goes through a dozen regex scans (:mod:`.normalize`, :mod:`.dates`,
:mod:`.signatures`); most only tell whether a rule has anything to do, and each one costs a pass
that tests every character. :func:`hint_flags` answers all of those
questions at once: a set of ``H_*`` bits, each set exactly when the regex it stands for would find
a match (``H_SPACE_NL``: when the substitution would change the text; ``tests/test_hints.py`` holds
each to its regex), plus ``H_EXACT``. Without the compiled extension, or for a text with a character
outside the BMP or one that a case-insensitive ASCII letter matches (ſ, K), it answers every hint
without ``H_EXACT``: "maybe", and the caller runs its regex. The answers hold for the text
they were computed on: after a rule changes the text, the caller asks again.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import NamedTuple

from .._compiled import _text_c

H_SPACE_RUN = 1  # normalize._SPACE_RUN_RE matches (runs of spaces to collapse)
H_YEAR = 2  # dates._YEAR_HINT_RE
H_DATE0 = 4  # dates._DATE_HINT_RES[0] (2023年1月1日)
H_DATE1 = 8  # dates._DATE_HINT_RES[1] (2023-1-1, 2023/1/1, 2023.1.1)
H_DATE2 = 16  # dates._DATE_HINT_RES[2] (1/1/2023)
H_AP = 32  # dates._AP_HINT_RE (a 12-hour marker after a digit)
H_CN_TIME = 64  # dates._CN_TIME_HINT_RE (下午8:30)
H_SPACE_NL = 128  # normalize._SPACE_NL_RE.sub("\n", text) != text
H_ADVERSARIAL = 256  # normalize._ADVERSARIAL_HINT_RE (a symbol after a CJK character or a space)
H_DATE_TIME = 512  # signatures._DATE_TIME_HINT (\d[-:]\d)
H_DATE3 = 1024  # dates._DATE_HINT_RES[3] (1 January 2023)
H_DATE4 = 2048  # dates._DATE_HINT_RES[4] (January 1, 2023)
H_MONTHS = 4096  # the first three letters of a month's name among the text's ASCII characters (dates)
H_ALL = 8191
H_EXACT = 8192  # the bits above are the regexes' answers, not "maybe"

#: The CJK characters and the symbols that normalization strips from between them (normalize._ADVERSARIAL_RE).
CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
ADVERSARIAL_SYMBOLS = r"*#~·|^`_=+@\\/★☆※●○◆◇■□▲△▼▽♥♡♦♠♣♪◎¤§"

# the class bits of a BMP character in the compiled pass's table; _FOLD: a character other than ASCII
# that a case-insensitive ASCII letter matches (the pass gives no answer for a text with one)
_DIGIT, _SPACE, _SYM, _CJK, _FOLD = 1, 2, 4, 8, 16


@functools.lru_cache(maxsize=1)
def _class_table() -> bytes:
    """A byte per BMP code point: which of ``\\d``, ``\\s``, the adversarial symbols and the CJK
    characters of :mod:`.normalize` it is, as ``re`` itself matches them (so by construction the same)."""
    bmp = "".join(map(chr, range(0x10000)))
    table = 0
    symbols = f"[{re.escape(ADVERSARIAL_SYMBOLS)}]"
    classes = ((_DIGIT, r"\d"), (_SPACE, r"\s"), (_SYM, symbols), (_CJK, f"[{CJK}]"), (_FOLD, "(?i:[a-z])"))
    for bit, pattern in classes:
        column = bytearray(0x10000)
        for m in re.finditer(f"{pattern}+", bmp[128:] if bit == _FOLD else bmp):  # runs of them: a slice each
            start, end = (m.start() + 128, m.end() + 128) if bit == _FOLD else m.span()
            column[start:end] = bytes([bit]) * (end - start)
        table |= int.from_bytes(column, "big")
    return table.to_bytes(0x10000, "big")


def _maybe(text: str) -> int:
    return H_ALL


class Compiled(NamedTuple):
    """The compiled pass and the compiled rewrites that share its class table."""

    hint_flags: Callable[[str], int]
    collapse_spaces: Callable[[str], str]  # normalize._SPACE_RUN_RE.sub(" ", text)
    tidy_line_breaks: Callable[[str], str]  # normalize._SPACE_NL_RE.sub("\n", text)
    numbers: Callable[[str], list[str]]  # signatures._NUMBER.findall(text)


@functools.lru_cache(maxsize=1)
def compiled() -> Compiled | None:
    """The compiled functions on the class table (built on first use), or None without the extension."""
    if _text_c is None:
        return None
    table = _class_table()
    c = _text_c
    return Compiled(*(functools.partial(f, classes=table)
                      for f in (c.hint_flags, c.collapse_spaces, c.tidy_line_breaks, c.numbers)))


def _compiled() -> Callable[[str], int]:
    c = compiled()
    return _maybe if c is None else c.hint_flags


def hint_flags(text: str) -> int:
    """The ``H_*`` bits of ``text`` (each: does the regex named where it is defined match?): exact (with
    ``H_EXACT``) from the compiled pass, else ``H_ALL``."""
    return _compiled()(text)


_remembered: tuple[str, int] = ("", H_ALL)


def remember(text: str, flags: int) -> None:
    """Keep the flags of ``text`` (the last normalized body) for :func:`remembered`."""
    global _remembered
    _remembered = (text, flags)


def remembered(text: str) -> int:
    """The flags :func:`remember` kept, if it was given this very text, else ``H_ALL``."""
    last = _remembered
    return last[1] if last[0] is text else H_ALL
