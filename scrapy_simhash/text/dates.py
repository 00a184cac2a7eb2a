"""Dates and times in one form: ``2023年1月1日``, ``1/1/2023``, ``Jan 1, 2023``, ``下午8:30`` → ISO 8601.

Reposts rewrite a story's date in their own house style; :func:`normalize_dates` (called by
:func:`~.normalize.normalize_text`) writes every one the same way. Each pattern runs only when a cheap
necessary condition (a year, a month name's letters, a 12-hour marker) is in the text.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping

from .hints import H_AP, H_CN_TIME, H_DATE0, H_DATE1, H_DATE2, H_DATE3, H_DATE4, H_EXACT, H_MONTHS, H_YEAR, hint_flags

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_RE = (
    r"(?P<mon>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_AM_WORDS = {"上午", "早上", "早晨", "凌晨", "清晨"}
_PM_WORDS = {"下午", "晚上", "傍晚", "中午", "晚间", "夜间"}
# "\s*(?:,\s*)?" rather than "\s*,?\s*": the same texts in the same order of preference, but a long
# run of whitespace after a date that no time follows is tried once per split point, not once per
# pair of them (which is quadratic in the run's length: tests/test_linear_time.py).
_TIME_RE = (
    r"(?:\s*(?:,\s*)?(?:at\s+)?|T)"
    r"(?:(?P<cnap>上午|下午|早上|早晨|凌晨|清晨|晚上|傍晚|中午|晚间|夜间)\s*)?"
    r"(?:(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?|(?P<ch>\d{1,2})[时點点](?P<cmi>\d{1,2})分(?:(?P<cs>\d{1,2})秒)?)"
    r"(?:\s*(?P<ap>[AaPp])\.?\s?[Mm]\.?(?![A-Za-z]))?"
)
_YEAR = r"(?P<y>(?:1[89]|20|21)\d\d)"


def _year_not_after(before: str) -> str:
    """``(?<!{before}){_YEAR}`` with the lookbehind after the year's first digit: the pattern then
    starts with "1" or "2", so that a search skips to them."""
    return rf"(?P<y>(?:1(?<!{before}1)[89]|2(?<!{before}2)[01])\d\d)"


_YEAR_NOT_AFTER_DIGIT = _year_not_after(r"\d")
_YEAR_NOT_AFTER_NUMBER = _year_not_after(r"[\d.]")
_M = r"(?P<m>\d{1,2})"
_D = r"(?P<d>\d{1,2})"
_DATE_PATTERNS = [
    # 2023年1月1日 / 2023 年 01 月 01 日 / 2023年1月1号
    rf"{_YEAR_NOT_AFTER_DIGIT}\s*年\s*{_M}\s*月\s*{_D}\s*[日号]",
    # 2023-1-1, 2023/1/1, 2023.01.01 (the same separator twice)
    rf"{_YEAR_NOT_AFTER_NUMBER}(?P<sep>[-/.]){_M}(?P=sep){_D}(?!\d|\.\d)",
    # 01/01/2023 (US order: month/day/year)
    rf"(?<![\d/.]){_M}/{_D}/{_YEAR}(?![\d/])",
    # 1 January 2023, 1st Jan. 2023, 1 Jan 2023
    rf"(?<![\dA-Za-z]){_D}(?:st|nd|rd|th)?\s+{_MONTH_RE}\.?,?\s+{_YEAR}(?!\d)",
    # January 1, 2023, Jan. 1, 2023, Jan 1 2023
    rf"(?<![A-Za-z]){_MONTH_RE}\.?\s+{_D}(?:st|nd|rd|th)?,?\s+{_YEAR}(?!\d)",
]
_DATE_RES = [re.compile(rf"{p}(?P<time>{_TIME_RE})?", re.IGNORECASE) for p in _DATE_PATTERNS]
# A time on its own with a 12-hour marker: "8:30 PM", "下午8:30".
_LONE_TIME_RE = re.compile(
    r"(?<![\d:])(?:(?P<cnap>上午|下午|早上|早晨|凌晨|清晨|晚上|傍晚|中午|晚间|夜间)\s*)?"
    r"(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?(?![\d:])"
    r"(?:\s*(?P<ap>[AaPp])\.?\s?[Mm]\.?(?![A-Za-z]))?"
)


def _to_24h(hour: int, cn: str | None, ap: str | None) -> int | None:
    """Hour on a 24-hour clock given a 12-hour marker, or ``None`` if inconsistent."""
    pm = (ap or "").lower() == "p" or cn in _PM_WORDS
    am = (ap or "").lower() == "a" or cn in _AM_WORDS
    if not (am or pm):
        return hour if hour < 24 else None
    if hour > 12:
        return hour if pm and hour < 24 else None
    if cn == "中午" and hour >= 11:
        return hour  # 中午11:30 is still late morning, 中午12:10 is noon
    if pm:
        return hour if hour == 12 else hour + 12
    return 0 if hour == 12 else hour


def _format_time(g: Mapping[str, str | None]) -> str | None:
    """``HH:MM`` or ``HH:MM:SS`` from a time match, ``None`` when absent or invalid."""
    h, mi, s = g.get("h"), g.get("mi"), g.get("s")
    if h is None:
        h, mi, s = g.get("ch"), g.get("cmi"), g.get("cs")
    if h is None or mi is None:
        return None
    hour = _to_24h(int(h), g.get("cnap"), g.get("ap"))
    if hour is None or int(mi) > 59 or (s is not None and int(s) > 59):
        return None
    out = f"{hour:02d}:{int(mi):02d}"
    return f"{out}:{int(s):02d}" if s is not None else out


def _date_sub(m: re.Match[str]) -> str:
    g = m.groupdict()
    month = _MONTHS[g["mon"][:3].lower()] if g.get("mon") else int(g["m"])
    try:
        iso = datetime.date(int(g["y"]), month, int(g["d"])).isoformat()
    except ValueError:
        return m.group(0)  # not a real date (month 13, 30 February): leave it alone
    if g["time"] is None:
        return iso
    time = _format_time(g)
    # An impossible time (25:70) is left as written after the converted date.
    return f"{iso} {time}" if time is not None else iso + g["time"]


def _lone_time_sub(m: re.Match[str]) -> str:
    if not (m.group("ap") or m.group("cnap")):
        return m.group(0)
    time = _format_time(m.groupdict())
    return m.group(0) if time is None else time


# Necessary conditions, checked once on the input: every date pattern needs a year, the last two
# need a month name, a lone time needs a colon (each regex scan costs a pass over the whole text).
_YEAR_HINT_RE = re.compile(r"(?:1[89]|2[01])\d\d")
# The last two need the first three letters of a month's name, in any case: looked for in the text's
# ASCII characters lower-cased (the others dropped: that can only join letters, so no text that has
# a month is skipped): a few substring scans, where a pattern of 12 alternatives would try them all
# at every position.
_MONTH_PREFIXES = tuple(m.encode() for m in _MONTHS if len(m) == 3)


# What a match of each date pattern holds (in the text as it is when that one runs), without their
# lookarounds: patterns that begin with a digit, so that a search skips from digit to digit instead
# of trying the whole pattern at every position. The last two run whenever a month's name was seen,
# which is most English texts ("mar", "may" or "dec" in most paragraphs), so they too must skip.
_DATE_HINT_RES = (
    re.compile(r"\d\s*年\s*\d{1,2}\s*月\s*\d{1,2}\s*[日号]"),
    re.compile(r"\d([-/.])\d{1,2}\1\d"),
    re.compile(r"\d/\d{1,2}/\d"),
    # 1 January 2023: the day's last digit, its suffix, spaces and the start of the month's name
    re.compile(r"\d(?:st|nd|rd|th)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.IGNORECASE),
    # January 1, 2023: the day's last digit, its suffix, a comma, spaces and the year
    re.compile(r"\d(?:st|nd|rd|th)?,?\s+(?:1[89]|2[01])\d\d", re.IGNORECASE),
)
# Characters a hint cannot match without, looked for first (a substring test costs a fraction of a
# regex scan, which tests every character for a digit): 年 and 月; a separator; a slash.
_DATE_NEEDS = (
    lambda t: "年" in t and "月" in t,
    lambda t: "-" in t or "/" in t or "." in t,
    lambda t: "/" in t,
    None,
    None,
)
# A lone time changes only with a 12-hour marker: a Chinese one, or a/p + m after the minutes' digit.
_AP_HINT_RE = re.compile(r"\d\s*[AaPp]\.?\s?[Mm]")
# A Chinese marker changes a lone time only right before its hour, as _LONE_TIME_RE takes it.
_CN_TIME_HINT_RE = re.compile(rf"(?:{'|'.join((*_AM_WORDS, *_PM_WORDS))})\s*\d{{1,2}}:\d{{2}}")


def normalize_dates(text: str) -> str:
    """Dates and 12-hour times written any of the usual ways, in ISO 8601 / 24-hour form."""
    return normalize_dates_flags(text, hint_flags(text))[0]


_DATE_HINT_FLAGS = (H_DATE0, H_DATE1, H_DATE2, H_DATE3, H_DATE4)


def has_month_letters(text: str) -> bool:
    """Does ``text`` hold the first three letters of a month's name (the last two date patterns' need)?"""
    ascii_lower = text.encode("ascii", "ignore").lower()
    return any(m in ascii_lower for m in _MONTH_PREFIXES)


def normalize_dates_flags(text: str, flags: int) -> tuple[str, int]:
    """:func:`normalize_dates` of a text whose :func:`~.hints.hint_flags` are ``flags``; the result
    and its flags. Exact flags answer the hints; others (``H_ALL``) leave them to their patterns."""
    exact = flags & H_EXACT
    if flags & H_YEAR and (exact or _YEAR_HINT_RE.search(text)):
        months = flags & H_MONTHS if exact else has_month_letters(text)
        for i, rx in enumerate(_DATE_RES):
            if i >= 3 and not months:
                break
            if exact:
                hinted = bool(flags & _DATE_HINT_FLAGS[i])
            else:
                need = _DATE_NEEDS[i]
                hinted = (need is None or need(text)) and _DATE_HINT_RES[i].search(text) is not None
            if hinted:
                changed = rx.sub(_date_sub, text)
                if changed != text:
                    text = changed
                    flags = hint_flags(text)
                    exact = flags & H_EXACT
    if ":" in text and (
        (flags & (H_AP | H_CN_TIME)) if exact else (_AP_HINT_RE.search(text) or _CN_TIME_HINT_RE.search(text))
    ):
        changed = _LONE_TIME_RE.sub(_lone_time_sub, text)
        if changed != text:
            text = changed
            flags = hint_flags(text)
    return text, flags
