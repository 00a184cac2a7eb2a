"""HTML or text in, clean comparable text out.

Two reposts of one story rarely carry the same bytes: one site wraps the article in another page
template, writes ``２０２３年１月１日`` where the other writes ``2023-01-01``, uses full-width
punctuation, appends ``_网易新闻`` to the headline or marks it ``（转载）``. Everything here removes
such differences *before* features are taken, so that the fingerprints only see the story.

- :func:`to_text` turns ``str`` / ``bytes`` / a list of paragraphs into plain text; HTML, page bytes
  and a page's main text are :mod:`.html_text`'s (its names are re-exported here).
- :func:`normalize_text` applies the character-level rules (width, punctuation, zero-width and
  control characters, whitespace, dates → ISO 8601 (:mod:`.dates`), symbols stuffed into CJK words).
- :func:`normalize_body` / :func:`normalize_title` are what the fingerprinter calls.

Case is preserved; the feature step lower-cases Latin words.
"""

from __future__ import annotations

import functools
import html as html_lib
import re
import time
from collections.abc import Iterable, Mapping

from .._compiled import _text_c
from .dates import normalize_dates_flags
from .hints import (
    ADVERSARIAL_SYMBOLS,
    CJK,
    H_ADVERSARIAL,
    H_ALL,
    H_DATE_TIME,
    H_EXACT,
    H_SPACE_NL,
    H_SPACE_RUN,
    compiled,
    hint_flags,
    remember,
)
from .html import (
    MAX_INPUT_CHARS,
    decode_html_bytes,
    has_entity,
    html_to_text,
    looks_like_html,
    looks_like_page,
    main_text,
)

__all__ = [
    "MAX_INPUT_CHARS",
    "decode_html_bytes",
    "html_to_text",
    "looks_like_html",
    "looks_like_page",
    "main_text",
    "normalize_body",
    "normalize_text",
    "normalize_title",
    "to_text",
]


# --------------------------------------------------------------------------------------------------
# Input coercion
# --------------------------------------------------------------------------------------------------

#: Most parts of one field read (paragraphs and ``None`` alike): a field with more (an endless
#: iterator) is refused. An article has hundreds of paragraphs at most. See
#: docs/decisions/0412-field-parts.md.
MAX_PARTS = 100_000
#: Seconds reading the parts of one field may take (an iterator that yields slowly) before it is
#: refused. See docs/decisions/0412-field-parts.md.
MAX_READ_SECONDS = 10.0


def _str_to_text(text: str, drop_link_blocks: bool = False) -> str:
    text = text[:MAX_INPUT_CHARS]
    if looks_like_html(text):
        return html_to_text(text, drop_link_blocks)
    if has_entity(text):
        return html_lib.unescape(text)
    return text


def to_text(raw: str | bytes | Iterable[str] | None, drop_link_blocks: bool = False) -> str:
    """Plain text of an item field, whatever form the spider produced.

    ``str``: HTML goes through :func:`html_to_text`, plain text stays as is (entities decoded);
    ``bytes``: decoded with :func:`decode_html_bytes`, then the same; a list/tuple (or other
    iterable) of paragraphs: each converted, joined with newlines; ``None``: ``""``. Input is cut
    at :data:`MAX_INPUT_CHARS` characters. Any other type raises :class:`TypeError`; an iterable of
    more than :data:`MAX_PARTS` parts, or whose parts take more than :data:`MAX_READ_SECONDS` to
    read, raises :class:`ValueError` (whatever the parts are: ``None`` counts too).
    ``drop_link_blocks``: see :func:`html_to_text` (bodies, not titles).
    """
    if raw is None:
        return ""
    if isinstance(raw, str):
        return _str_to_text(raw, drop_link_blocks)
    if isinstance(raw, (bytes, bytearray, memoryview)):
        data = bytes(raw[: MAX_INPUT_CHARS * 4])
        return _str_to_text(decode_html_bytes(data), drop_link_blocks)
    if isinstance(raw, Iterable) and not isinstance(raw, (Mapping, set, frozenset)):
        parts: list[str] = []
        budget = MAX_INPUT_CHARS
        deadline = time.monotonic() + MAX_READ_SECONDS
        for i, item in enumerate(raw):
            if budget <= 0:
                break
            if i >= MAX_PARTS:
                raise ValueError(f"more than {MAX_PARTS:,} parts (an endless iterator?)")
            if time.monotonic() > deadline:
                raise ValueError(f"its parts took more than {MAX_READ_SECONDS:g} s to read")
            if item is None:
                continue
            if not isinstance(item, (str, bytes, bytearray)):
                raise TypeError(f"to_text() expects paragraphs of str or bytes, got {type(item).__name__} at index {i}")
            text = to_text(item, drop_link_blocks)[:budget]
            budget -= len(text) + 1
            parts.append(text)
        return "\n".join(parts)[:MAX_INPUT_CHARS]
    raise TypeError(f"to_text() expects str, bytes, a list of paragraphs or None, got {type(raw).__name__}")


# --------------------------------------------------------------------------------------------------
# Character-level normalization
# --------------------------------------------------------------------------------------------------


def _build_char_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    # Full-width ASCII block → ASCII, ideographic space → space.
    for cp in range(0xFF01, 0xFF5F):
        table[cp] = chr(cp - 0xFEE0)
    table[0x3000] = " "
    # Half-width CJK punctuation → the usual CJK forms.
    table.update({0xFF61: "。", 0xFF62: '"', 0xFF63: '"', 0xFF64: "、", 0xFF65: "·"})
    # Lone surrogates (from broken decoders or JSON "\\ud800") cannot be encoded anywhere: drop them.
    for cp in range(0xD800, 0xE000):
        table[cp] = None
    # Zero-width characters and soft hyphen vanish.
    for cp in (*range(0x200B, 0x2010), 0x2060, 0xFEFF, 0x00AD, 0x180E):
        table[cp] = None
    # Control characters vanish, except tab (→ space) and the line breaks (→ \n).
    for cp in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)):
        table[cp] = None
    table.update({0x09: " ", 0x0A: "\n", 0x0D: "\n", 0x0B: " ", 0x0C: " ", 0x85: "\n"})
    table.update({0x2028: "\n", 0x2029: "\n"})
    # C1 controls that are really cp1252 punctuation read as latin-1 (a common mojibake).
    table.update({0x85: "…", 0x91: "'", 0x92: "'", 0x93: '"', 0x94: '"', 0x96: "-", 0x97: "-"})
    # Other spaces → space.
    for cp in (0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F):
        table[cp] = " "
    # Quotes → " and '.
    for ch in "“”„‟「」『』〝〞〟″«»":
        table[ord(ch)] = '"'
    for ch in "‘’‚‛′‹›":
        table[ord(ch)] = "'"
    # Brackets.
    table.update({ord("【"): "[", ord("】"): "]", ord("〖"): "[", ord("〗"): "]", ord("〔"): "[", ord("〕"): "]"})
    table.update({ord("〈"): "《", ord("〉"): "》", ord("︿"): "《", ord("﹀"): "》"})
    # Dashes and minus → "-" (runs are collapsed later); middle dots → "·".
    for ch in "‐‑‒–—―─━⸺⸻﹘﹣−":
        table[ord(ch)] = "-"
    for ch in "・•‧∙⋅":
        table[ord(ch)] = "·"
    table.update({ord("⋯"): "…", ord("﹐"): ",", ord("﹑"): "、", ord("﹒"): ".", ord("﹔"): ";"})
    table.update({ord("﹕"): ":", ord("﹖"): "?", ord("﹗"): "!", ord("﹙"): "(", ord("﹚"): ")"})
    return table


_CHAR_TABLE = _build_char_table()


def _char_class(codepoints: Iterable[int]) -> str:
    """A regex character class of these code points, as ranges of ``\\UXXXXXXXX`` escapes."""
    cps = sorted(codepoints)
    parts, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        parts.append(f"\\U{cps[i]:08x}" + (f"-\\U{cps[j]:08x}" if j > i else ""))
        i = j + 1
    return "[" + "".join(parts) + "]"


# The characters _CHAR_TABLE changes (identities left out). ``str.translate`` looks every character
# up in the table; a news text holds a handful of distinct ones to change, found by
# one C-speed regex scan and replaced one by one: the same text, because no replacement contains a
# character that the table changes.
_CHAR_CHANGES = {chr(k): v or "" for k, v in _CHAR_TABLE.items() if v != chr(k)}
assert not any(c in _CHAR_CHANGES for v in _CHAR_CHANGES.values() for c in v)
_CHAR_CHANGE_RE = re.compile(_char_class(map(ord, _CHAR_CHANGES)))


def _char_bitmap(chars: Iterable[str]) -> bytes:
    """The BMP characters ``chars`` as :func:`._text_c.chars_in` takes them."""
    bits = bytearray(8192)
    for c in map(ord, chars):
        bits[c >> 3] |= 1 << (c & 7)
    return bytes(bits)


def _changed_chars_python(text: str) -> set[str]:
    return set(_CHAR_CHANGE_RE.findall(text))


assert max(map(ord, _CHAR_CHANGES)) < 0x10000
if _text_c is None:
    _changed_chars = _changed_chars_python
else:  # the same set, found by a compiled loop (sre tests a class of 2,200 code points slowly per character)
    _changed_chars = functools.partial(_text_c.chars_in, bitmap=_char_bitmap(_CHAR_CHANGES))


def _translate_chars(text: str) -> str:
    """``text.translate(_CHAR_TABLE)``: the same text, one replace per distinct character to change."""
    for ch in _changed_chars(text):
        text = text.replace(ch, _CHAR_CHANGES[ch])
    return text


_CRLF_RE = re.compile(r"\r\n?")
_DASH_RUN_RE = re.compile(r"-{2,}")
# Every pattern below that scans a whole text starts with a character class (or one of a few
# characters), so that the regex engine skips to where a match can start instead of trying the
# pattern at every position (a lookbehind, a repeat or a group of repeats first prevents that, and
# costs a pass that tests every position). Each is written so that it matches exactly what the
# plainer pattern in its comment matches (tests/test_linear_time.py holds them to it).
# (?:…|\.{3,}|。{3,})+
_ELLIPSIS_RE = re.compile(r"(?:…|\.\.\.+|。。。+)(?:…|\.{3,}|。{3,})*")
# Runs of spaces other than line breaks → " ". Only the runs this changes match (two or more, or one
# that is not " "): the same result as replacing every run "[^\S\n]+", without a replacement per
# single space of an English text. [^\S\n]{2,}|[^\S\n ]
_SPACE_RUN_RE = re.compile(r"[^\S\n](?:[^\S\n]+|(?<! ))")
# " *\n\s*", starting only where a run of spaces starts ("(?<! )" after its first character), so a
# long run without a line break is scanned once, not once per space (the match is the same: it
# would take the whole run anyway).
_SPACE_NL_RE = re.compile(r"(?: (?<!  ) *\n|\n(?<! \n))\s*")

_CJK = CJK
# A short run of symbols stuffed between two CJK characters to dodge keyword filters.
_ADVERSARIAL_SYMBOLS = ADVERSARIAL_SYMBOLS
_SYM_CHAR = f"[{re.escape(_ADVERSARIAL_SYMBOLS)}]"
_SYM = f"{_SYM_CHAR}{{1,3}}"
_SYM_OR_SPACE = f"[ {re.escape(_ADVERSARIAL_SYMBOLS)}]"
# Either glued to both neighbours ("购*买") or spaced on both sides ("延伸 · 推荐"), never one-sided
# ("揭晓 @某某" is a mention): (?<=[CJK])(?:SYM{1,3}| SYM{1,3} )(?=[CJK]), from its first character.
_ADVERSARIAL_RE = re.compile(
    rf"{_SYM_OR_SPACE}(?<=[{_CJK}]{_SYM_OR_SPACE})(?:(?<={_SYM_CHAR}){_SYM_CHAR}{{0,2}}|(?<= ){_SYM} )(?=[{_CJK}])"
)
# Its necessary condition, a symbol after a CJK character or a space ([CJK ]SYM), from the symbol.
_ADVERSARIAL_HINT_RE = re.compile(rf"{_SYM_CHAR}(?<=[{_CJK} ]{_SYM_CHAR})")


def _collapse_spaces(text: str) -> str:
    """``_SPACE_RUN_RE.sub(" ", text)`` (compiled where built)."""
    c = compiled()
    return _SPACE_RUN_RE.sub(" ", text) if c is None else c.collapse_spaces(text)


def _tidy_line_breaks(text: str) -> str:
    """``_SPACE_NL_RE.sub("\n", text)`` (compiled where built)."""
    c = compiled()
    return _SPACE_NL_RE.sub("\n", text) if c is None else c.tidy_line_breaks(text)


def _normalize_chars(text: str) -> str:
    """Width, punctuation, invisible characters, dates and whitespace; no symbol stripping."""
    return _normalize_chars_flags(text)[0]


def _normalize_chars_flags(text: str) -> tuple[str, int]:
    """:func:`_normalize_chars`, and the hints (:mod:`.hints`) of a text of which the result is the
    ``strip()``: a symbol the stripping could need to remove is among them."""
    # Each rule runs only when the text holds a character its pattern cannot match without, or when
    # the compiled pass of hints (one scan for all of them; asked again after a rule changed the text)
    # says the pattern has something to do.
    if "\r" in text:
        text = _CRLF_RE.sub("\n", text)
    text = _translate_chars(text)
    if "--" in text:
        text = _DASH_RUN_RE.sub("-", text)
    if "…" in text or "..." in text or "。。。" in text:
        text = _ELLIPSIS_RE.sub("…", text)
    flags = hint_flags(text)
    if flags & H_SPACE_RUN:  # a match always changes the text
        text = _collapse_spaces(text)
        flags = hint_flags(text)
    text, flags = normalize_dates_flags(text, flags)
    # " *\n\s*" → "\n" puts a line break next to what it keeps: no symbol gets a CJK character or a
    # space before it, so the flags still hold every symbol the stripping needs
    if flags & H_SPACE_NL:
        text = _tidy_line_breaks(text)
    return text.strip(), flags


def _strip_adversarial(text: str, flags: int = H_ALL) -> str:
    if flags & H_ADVERSARIAL and (flags & H_EXACT or _ADVERSARIAL_HINT_RE.search(text)):
        return _ADVERSARIAL_RE.sub("", text)
    return text


def normalize_text(text: str) -> str:
    """Character-level normalization of plain text, so that trivially different copies compare equal.

    Full-width digits, letters, punctuation and U+3000 → ASCII; Chinese quotes, brackets, dashes,
    ellipses and middle dots unified (“”「」『』 → ``"``, ‘’ → ``'``, 【】 → ``[]``, ——/– → ``-``,
    ……/... → ``…``; 。 and 、 stay as they are: 。→ . would glue numbers into decimals);
    zero-width and control characters removed; ``\\r\\n``, ``\\r`` → ``\\n``; U+00A0 and other
    spaces → space; runs of spaces → one; blank lines collapsed; dates → ISO 8601
    (``2023年1月1日 下午8:30`` → ``2023-01-01 20:30``; invalid dates untouched); symbols stuffed
    between CJK characters (``购*买``) removed; ends stripped. Case is preserved.
    """
    if not text:
        return ""
    text, flags = _normalize_chars_flags(text)
    text = _strip_adversarial(text, flags)
    # the stripping removes symbols between CJK characters: no digit, "-" or ":" comes or goes
    remember(text, flags & (H_DATE_TIME | H_EXACT))
    return text


def normalize_body(raw: str | bytes | Iterable[str] | None, drop_link_blocks: bool = False) -> str:
    """Clean text of an item body: :func:`to_text` then :func:`normalize_text`."""
    return normalize_text(to_text(raw, drop_link_blocks))


# --------------------------------------------------------------------------------------------------
# Titles
# --------------------------------------------------------------------------------------------------

_TAG_WORDS = (
    r"转载|转帖|转|原创|独家|图|组图|多图|高清|高清组图|视频|附视频|图文|快讯|更新|热|荐|推荐|"
    r"置顶|精|精华|新|最新|直播|专题|滚动|今日关注|评论|Photos?|Video|Watch|Update[sd]?|Breaking"
)
# Repost marks and bracketed tags anywhere in a title: （转载） 【转】 [原创] (组图) …
# Removing adjacent tags leaves runs of spaces. "(?!(?<=\s)\s)": no match starts inside such a run
# (one from its start takes the same text), so it is scanned once, not once per space.
_TITLE_TAG_RE = re.compile(rf"(?!(?<=\s)\s)\s*[\[(]\s*(?:{_TAG_WORDS})\s*[\])]\s*", re.IGNORECASE)
# Any short bracketed tag at the very start: 【独家】 [快讯] [北京] …
_LEADING_BRACKET_RE = re.compile(r"^\s*\[[^\[\]]{1,8}\]\s*")
# "转：" / "转载：" / "原创：" prefixes and a bare trailing " 原创".
_TITLE_PREFIX_RE = re.compile(r"^\s*(?:(?:转载|转帖|转|原创|独家)\s*[:：]|(?:转载|原创|独家)\s)\s*")
_TITLE_TRAILING_MARK_RE = re.compile(r"(?<!\s)\s+(?:原创|转载)\s*$")  # from the start of a run, as above
# Leading flash marks: an exclamation of one to four Han characters ("快讯！", "突发!", "重磅！",
# "震惊！", "死刑！": emphasis whose story the rest of the title tells), a flash or media label
# before a colon ("突发：", "快讯:", "视频："), and the wire services' and portals' English prefixes
# ("BREAKING:", "UPDATE 2-", "EXCLUSIVE-", "CORRECTED - ", "Analysis: "). A colon after other words
# is content ("外媒：", "深圳：" name a source or a place) and stays; so does an exclamation with
# digits ("1个月2起！"). Several marks in a row go at once, so that a title with one mark more
# than its repost ends the same; only when at least 6 characters remain: a mark that is the title stays.
_WIRE_WORDS = (
    r"BREAKING(?:\s+NEWS)?|UPDATE(?:\s+\d{1,2})?|(?:CORRECTED|REFILE|RPT)(?:\s*-\s*UPDATE(?:\s+\d{1,2})?)?|"
    r"EXCLUSIVE|WRAPUP(?:\s+\d{1,2})?|FACTBOX|ANALYSIS|INSIGHT|EXPLAINER|LIVE|WATCH|VIDEO|PHOTOS?|URGENT|FLASH|"
    r"ALERT|JUST\s+IN|DEVELOPING|SPECIAL\s+REPORT"
)
_FLASH_RE = re.compile(
    r"^\s*(?:(?:[\u3400-\u9fff]{1,4}\s*[!！]+"
    r"|(?:快讯|快报|速报|突发|重磅|最新|刚刚|紧急|紧急提醒|提醒|注意|关注|头条|热点|滚动|直播|更新|视频|图文|组图|"
    r"现场|辟谣|官宣|独家|原创|转载|转发|扩散|分享)\s*[:：]"
    # "Breaking: " in any case; with a hyphen only in capitals, the wire style ("UPDATE 2-", "EXCLUSIVE-"),
    # so that "Live-action …" keeps its word
    rf"|(?i:{_WIRE_WORDS})\s*[:|]|(?:{_WIRE_WORDS})\s*-)\s*)+(?=\S.{{5}})"
)
_SITE_WORDS_RE = re.compile(
    r"网|新闻|报|频道|在线|日报|时报|晚报|客户端|门户|资讯|电视|广播|传媒|媒体|杂志|周刊|论坛|社区|"
    r"\.com|\.cn|\.net|\.org|"
    r"\b(?:News|Times|Post|Online|Daily|Herald|Journal|Tribune|Reuters|BBC|CNN|AP|AFP|Guardian)\b",
    re.IGNORECASE,
)
_DIGIT_RE = re.compile(r"\d")
_SEPARATOR_CHARS = "-_|»"  # a site suffix follows one of these or "::"
_MAX_SUFFIX_CHARS = 12
_MAX_SUFFIX_LATIN_CHARS = 30


def _split_suffix(text: str) -> tuple[str, str, str] | None:
    """``(head, sep, seg)``: the title cut before its last separator, or ``None``.

    The same split as ``re.match(r"(?P<head>.*\\S)(?P<sep>\\s*(?:-|_|\\||::|»)\\s*)(?P<seg>[^-_|»]+?)\\s*$",
    text, re.S)``, in linear time: that regex backtracks through every way of cutting a run of
    colons before a hyphen (``"x" + ":" * 65536 + "-"``: quadratic in the run). The segment holds none of
    ``-_|»``, so the separator is the last of them or a ``::`` after it; the one furthest right with
    text after it wins, provided something other than whitespace precedes it.
    """
    last = max(text.rfind(c) for c in _SEPARATOR_CHARS)
    end = len(text)
    sep_at = text.rfind("::", last + 1)
    if sep_at == end - 2:  # nothing after this "::": an earlier one (":::" at the end) may do
        sep_at = text.rfind("::", last + 1, end - 1)
    if sep_at >= 0:
        after = sep_at + 2
    elif last >= 0 and last < end - 1:
        sep_at, after = last, last + 1
    else:
        return None
    head_end = len(text[:sep_at].rstrip())  # \s is str.isspace(): the head ends with a non-space
    if head_end == 0:
        return None
    seg_start = len(text) - len(text[after:].lstrip())
    seg_end = len(text.rstrip())
    if seg_start == end:  # only whitespace after the separator: the regex keeps its last character
        seg_start, seg_end = end - 1, end
    return text[:head_end], text[head_end:seg_start], text[seg_start:seg_end]


def _is_site_suffix(head: str, sep: str, seg: str) -> bool:
    """Whether ``seg`` (after ``sep`` at the end of a title) is a site or section name."""
    if len(head) < 4 or len(seg) > len(head):
        return False
    named = _SITE_WORDS_RE.search(seg) is not None
    if seg.isascii():
        short = len(seg) <= _MAX_SUFFIX_LATIN_CHARS and len(seg.split()) <= 4
    else:
        short = len(seg) <= (_MAX_SUFFIX_CHARS * 2 if named else _MAX_SUFFIX_CHARS)
    if not short:
        return False
    if named:
        return True
    hyphen = sep.strip() == "-"
    # Figures after a hyphen are content ("LONDON GOLD 1500 FIX - OCT 20 - 464.30 DLRS"): two such
    # reports are different news and must keep their titles apart.
    if hyphen and _DIGIT_RE.search(seg):
        return False
    # Any other short segment after "_", "|" or a spaced " - " is a site or section name; after a
    # bare "-" only a segment that names a site is ("COVID-19", "Spider-Man" keep their hyphen).
    return not hyphen or (sep[0].isspace() and sep[-1].isspace())


def normalize_title(
    raw: str | bytes | Iterable[str] | None, extra_patterns: Iterable[str | re.Pattern[str]] = ()
) -> str:
    """Clean headline: :func:`normalize_text` plus removal of site suffixes, repost marks, flash marks
    and labels.

    Removed: a trailing ``_网易新闻``, `` - 新浪新闻``, ``|凤凰网``, `` - BBC News``, `` | Reuters`` …
    (a short segment after ``_``, ``|`` or a spaced `` - ``; after a bare ``-`` only when it names a
    site, e.g. contains 网/新闻/报/频道/.com), repeated while one remains; repost marks and tags
    such as ``（转载）``, ``【转】``, ``[原创]``, ``(组图)``, ``【独家】`` and a ``转：`` prefix; leading
    flash marks such as ``快讯！``, ``突发：``, ``BREAKING:``, ``UPDATE 2-``; and every match of
    ``extra_patterns`` (regexes applied to the width/punctuation-normalized title, first in each
    round of the built-in rules, so that a site's label behind a built-in one goes too).
    """
    text = _normalize_chars(to_text(raw).replace("\n", " "))
    patterns = tuple(extra_patterns)
    for _ in range(4):
        before = text
        for pattern in patterns:
            text = re.sub(pattern, "", text).strip()
        text = _FLASH_RE.sub("", text)
        # each pattern only where the text holds a character it cannot match without: a bracket (the
        # tags, the leading bracket), 转, 原 or 独 (the prefixes 转载 转帖 转 原创 独家, the trailing marks)
        brackets = "[" in text or "(" in text
        marks = "转" in text or "原" in text or "独" in text
        text = (_TITLE_TAG_RE.sub(" ", text) if brackets else text).strip()
        if brackets:
            text = _LEADING_BRACKET_RE.sub("", text)
        if marks:
            text = _TITLE_PREFIX_RE.sub("", text)
            text = _TITLE_TRAILING_MARK_RE.sub("", text)
        split = _split_suffix(text)
        if split and _is_site_suffix(*split):
            text = split[0].rstrip(" -_|")
        if text == before:
            break
    return _strip_adversarial(_collapse_spaces(text).strip())
