"""HTML in, text out: telling HTML from text, decoding page bytes, visible text, and a page's main text.

- :func:`looks_like_html` / :func:`looks_like_page`: is a field markup, and a whole page (a document,
  page chrome, many links) rather than an article's body?
- :func:`decode_html_bytes`: bytes decoded the way Scrapy/w3lib do, except that bytes which are valid
  UTF-8 are read as UTF-8 even when a ``<meta charset>`` claims otherwise (a common mislabel on Chinese
  sites).
- :func:`html_to_text`: the visible text, through a real parser (lxml), never a regex.
- :func:`main_text`: page boilerplate (navigation, related links, footers) dropped with a small
  text-density / link-density heuristic in the spirit of GeneralNewsExtractor.

Every pattern here runs in time linear in its input (``tests/test_linear_time.py``).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from w3lib.encoding import html_body_declared_encoding, read_bom, resolve_encoding

#: Longer input is cut to this many characters before parsing. It bounds the time and memory one
#: hostile or broken item can cost (a news article is a few thousand characters; a full page with
#: its template rarely exceeds a few hundred thousand; docs/decisions/0016-input-cut.md).
MAX_INPUT_CHARS: int = 1_000_000

if TYPE_CHECKING:
    import lxml.html


# --------------------------------------------------------------------------------------------------
# HTML detection and decoding
# --------------------------------------------------------------------------------------------------

_HTML_TAG_NAMES = (
    "a|abbr|address|area|article|aside|audio|b|base|bdi|bdo|blockquote|body|br|button|canvas|caption|"
    "center|cite|code|col|colgroup|dd|del|details|dfn|dialog|div|dl|dt|em|embed|fieldset|figcaption|"
    "figure|font|footer|form|frame|frameset|h[1-6]|head|header|hgroup|hr|html|i|iframe|img|input|ins|"
    "kbd|label|legend|li|link|main|map|mark|menu|meta|meter|nav|noscript|object|ol|optgroup|option|"
    "output|p|param|picture|pre|progress|q|s|samp|script|section|select|small|source|span|strike|"
    "strong|style|sub|summary|sup|svg|table|tbody|td|template|textarea|tfoot|th|thead|time|title|tr|"
    "track|tt|u|ul|var|video|wbr"
)
# Markup that plain text does not contain: a doctype, a comment, a closing tag of a known element,
# an opening tag with an attribute, or a bare lower-case opening tag. Upper-case bare "tags" are
# left out on purpose: Reuters writes tickers as <U>, <DD>, <S>, <P>, <VAR> and company names as
# <Video Shopping Mall Inc>, even <em>; and "a < b > c" has a space after "<".
_HTML_RE = re.compile(
    rf"<!doctype\s|<!--|</(?:{_HTML_TAG_NAMES})\s*>|<(?:{_HTML_TAG_NAMES})\s+[a-zA-Z_:][-\w:.]*\s*=|"
    rf"<br\s*/?>",
    re.IGNORECASE,
)
_LOWER_TAG_RE = re.compile(rf"<(?:{_HTML_TAG_NAMES})\s*/?>")
_ENTITY_RE = re.compile(r"&(?:[a-zA-Z][a-zA-Z0-9]{1,31}|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")


def looks_like_html(text: str) -> bool:
    """Whether ``text`` contains HTML markup (a known tag, a doctype or a comment).

    Detection only, so that plain text is never fed to an HTML parser, which would delete
    ticker symbols such as ``STANDARD OIL <SRD> TO FORM`` or text like ``a < b > c``.
    """
    if _HTML_RE.search(text):
        return True
    # Two bare lower-case tags: one alone may be a ticker ("Entertainment Marketing Inc <em>").
    bare = _LOWER_TAG_RE.finditer(text)
    return next(bare, None) is not None and next(bare, None) is not None


_PAGE_RE = re.compile(r"<(?:!doctype|html|body|nav|header|footer)\b", re.IGNORECASE)
_LINK_RE = re.compile(r"<a\s", re.IGNORECASE)
#: A body with this many links is link-dense (a related-links box, a menu): a page, not an article
#: (docs/decisions/0014-main-text.md).
PAGE_LINKS = 20


def looks_like_page(raw: str | bytes) -> bool:
    """Whether a body is a whole page rather than an extracted article: a document (``<html>``,
    ``<body>``, a doctype), page chrome (``<nav>``, ``<header>``, ``<footer>``) or at least
    :data:`PAGE_LINKS` links. Cheap: two linear scans, no parse."""
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    if _PAGE_RE.search(text):
        return True
    links = _LINK_RE.finditer(text)
    return sum(1 for _ in zip(range(PAGE_LINKS), links, strict=False)) >= PAGE_LINKS


def _is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8.

    A multi-byte sequence cut at the very end (input capped at a byte count) is tolerated only
    when the bytes before it already hold valid non-ASCII UTF-8: a lone ``caf\\xe9`` is latin-1.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data" or exc.start < len(data) - 3:
            return False
        head = data[: exc.start]
        return not head.isascii() and _is_utf8(head)
    return True


def _strict_decode(data: bytes, encoding: str) -> str | None:
    """``data`` decoded strictly, or ``None``; a sequence cut at the very end is tolerated as above."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        head = data[: exc.start]
        if exc.start >= len(data) - 3 and not head.isascii():
            return _strict_decode(head, encoding)
        return None
    except LookupError:
        return None


def decode_html_bytes(data: bytes, declared_encoding: str | None = None) -> str:
    """Decode the bytes of a page (or a text) to ``str``.

    Order: byte-order mark; valid UTF-8 (checked strictly, and preferred over any declaration,
    because Chinese sites often declare ``gb2312`` on UTF-8 pages and a wrong guess there turns the
    whole text into mojibake); ``declared_encoding`` (e.g. from the HTTP ``Content-Type``); the
    ``<meta charset>`` of the body; GB18030 (a superset of GBK/GB2312); finally cp1252 with
    replacement characters. Encoding names are resolved the way w3lib does (``gb2312`` → GB18030).
    """
    bom_encoding, bom = read_bom(data)
    if bom_encoding and bom is not None:
        return data[len(bom) :].decode(bom_encoding, errors="replace")
    if _is_utf8(data):
        return data.decode("utf-8", errors="replace")
    candidates: list[str] = []
    for name in (declared_encoding, html_body_declared_encoding(data[:4096]), "gb18030", "cp1252"):
        if name:
            resolved = resolve_encoding(name)
            if resolved and resolved not in candidates:
                candidates.append(resolved)
    for enc in candidates:
        text = _strict_decode(data, enc)
        if text is not None:
            return data.decode(enc, errors="replace")
    # Nothing decodes strictly: take the first plausible candidate with replacement characters.
    return data.decode(candidates[0], errors="replace")


# --------------------------------------------------------------------------------------------------
# HTML → text
# --------------------------------------------------------------------------------------------------

# Elements whose content is never visible article text.
_DROP_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "iframe",
        "svg",
        "head",
        "object",
        "embed",
        "canvas",
        "select",
        "textarea",
        "button",
        "input",
        "math",
    }
)
_BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "frame",
        "frameset",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "ul",
    ]
)
_HTML_SPACE_RE = re.compile(r"[ \t\n\r\f]+")
_HTML_PARSER: Any = None  # lxml's, made at the first parse


def _parse_html(html: str | bytes) -> lxml.html.HtmlElement | None:
    """Parse ``html`` into an lxml tree (``None`` for an empty document). lxml is imported here, at
    the first HTML parsed: a process that only reads plain text (most ``dedup`` runs) does not pay
    for its import at start."""
    global _HTML_PARSER
    import lxml.etree
    import lxml.html

    if _HTML_PARSER is None:
        _HTML_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=False, remove_pis=True)
    text = decode_html_bytes(html[: MAX_INPUT_CHARS * 4]) if isinstance(html, bytes) else html
    text = text[:MAX_INPUT_CHARS]
    if not text.strip():
        return None
    # Feed UTF-8 bytes with an explicit parser encoding: str input with an XML declaration is
    # refused by lxml, and an explicit encoding stops a <meta charset> from re-decoding the text.
    try:
        return lxml.html.document_fromstring(text.encode("utf-8", errors="replace"), parser=_HTML_PARSER)
    except (lxml.etree.ParserError, ValueError):
        return None


def _tag(el: Any) -> str | None:
    """Lower-case tag name, or ``None`` for comments, processing instructions and entities."""
    tag = el.tag
    return tag.lower() if isinstance(tag, str) else None


def _emit(el: Any, parts: list[str], pre: bool = False) -> None:
    """Append the visible text of ``el`` (not its tail) to ``parts``; blocks become newlines."""
    tag = _tag(el)
    if tag is None or tag in _DROP_TAGS:
        return
    if tag == "br":
        parts.append("\n")
        return
    block = tag in _BLOCK_TAGS
    pre = pre or tag in ("pre", "textarea", "listing", "plaintext")
    if block:
        parts.append("\n")
    if el.text:
        parts.append(el.text if pre else _HTML_SPACE_RE.sub(" ", el.text))
    for child in el:
        _emit(child, parts, pre)
        if child.tail:
            parts.append(child.tail if pre else _HTML_SPACE_RE.sub(" ", child.tail))
    if block:
        parts.append("\n")


def _clean_lines(text: str) -> str:
    lines = (line.strip(" \t") for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _element_text(el: Any) -> str:
    parts: list[str] = []
    _emit(el, parts)
    return _clean_lines("".join(parts))


def html_to_text(html: str | bytes, drop_link_blocks: bool = False) -> str:
    """Visible text of an HTML page or fragment, parsed with lxml.

    ``script``, ``style``, ``noscript``, ``template``, ``iframe``, ``svg``, ``head``, form controls and
    comments are dropped; entities are decoded; block elements and ``<br>`` become line breaks;
    inline whitespace collapses as a browser would show it (``<pre>`` keeps its line breaks).
    ``drop_link_blocks``: link-heavy blocks inside the fragment (a "related links" box a portal
    puts in its content ``div``) are left out too, unless nothing else is left: their headlines
    change by the hour and are shared by unrelated articles of one site.
    """
    root = _parse_html(html)
    if root is None:
        return ""
    if drop_link_blocks and (not isinstance(html, str) or _LINK_RE.search(html)):
        stats: dict[Any, _Stats] = {}
        _collect(root, False, stats)
        for body in root:  # <head>, <body>: a fragment's blocks are below the <body> lxml adds
            _prune_links(body, stats, FRAGMENT_LINK_SHARE)
        return _element_text(root) or html_to_text(html)
    return _element_text(root)


# --------------------------------------------------------------------------------------------------
# Boilerplate removal (main text of a full page)
# --------------------------------------------------------------------------------------------------

_PUNCT_RE = re.compile(r"[，。！？；：、“”‘’（）《》,.!?;:\"'()…—]")
_NON_SPACE_RE = re.compile(r"\S")
_FOOTER_RE = re.compile(r"©|copyright|all rights reserved|版权所有|ICP[备证]|举报电话|违法和不良信息", re.IGNORECASE)
# Containers that may hold the article; inline elements and single paragraphs are not candidates.
_CANDIDATE_TAGS = frozenset({"div", "article", "section", "main", "td", "body", "font", "center", "span"})


#: Tags added to a container's count in its text density (:func:`_score`).
_DENSITY_SMOOTHING = 10


class _Stats:
    __slots__ = ("footer", "link_tags", "link_text", "p", "punct", "tags", "text")

    def __init__(self) -> None:
        self.text = 0  # visible non-space characters in the subtree
        self.link_text = 0  # of which inside <a>
        self.tags = 1  # elements in the subtree, itself included
        self.link_tags = 0
        self.p = 0  # paragraph-like children: <p> and <br>
        self.punct = 0  # punctuation outside links
        self.footer = 0  # copyright / licence-number markers of a site footer


def _count(s: str | None, in_link: bool, st: _Stats) -> None:
    if not s:
        return
    n = len(_NON_SPACE_RE.findall(s))
    st.text += n
    if in_link:
        st.link_text += n
    else:
        st.punct += len(_PUNCT_RE.findall(s))
    st.footer += len(_FOOTER_RE.findall(s))


def _collect(el: Any, in_link: bool, stats: dict[Any, _Stats]) -> _Stats:
    """Post-order pass filling ``stats`` for every kept element; returns the stats of ``el``."""
    st = _Stats()
    tag = _tag(el)
    in_link = in_link or tag == "a"
    if tag == "a":
        st.link_tags = 1
    elif tag in ("p", "br"):
        st.p = 1
    _count(el.text, in_link, st)
    for child in el:
        ctag = _tag(child)
        if ctag is not None and ctag not in _DROP_TAGS:
            cs = _collect(child, in_link, stats)
            st.text += cs.text
            st.link_text += cs.link_text
            st.tags += cs.tags
            st.link_tags += cs.link_tags
            st.p += cs.p
            st.punct += cs.punct
            st.footer += cs.footer
        _count(child.tail, in_link, st)
    stats[el] = st
    return st


def _score(st: _Stats) -> float:
    """GNE-style score: non-link text density × size × paragraphs × punctuation × (1 - link ratio)².

    The density is smoothed (``+ _DENSITY_SMOOTHING`` tags) so that one long comment or caption
    in a single tag does not beat the article container, which holds more text in a few more tags.
    """
    plain = st.text - st.link_text
    if plain <= 0:
        return 0.0
    density = plain / (st.tags - st.link_tags + _DENSITY_SMOOTHING)
    link_ratio = st.link_text / st.text
    # A short block carrying footer markers is the site footer, not a short article.
    penalty = 0.1 if plain < 200 * st.footer else 1.0
    return penalty * (
        density * math.log(1 + plain) * math.log10(st.p + 2) * math.log(st.punct + 2) * (1 - link_ratio) ** 2
    )


#: Share of link text above which a block holding 2+ links is dropped: inside a page's chosen
#: container, and (higher) inside a fragment body, where the block may be the article's own
#: container around a short text and a big box (docs/decisions/0014-main-text.md).
PAGE_LINK_SHARE, FRAGMENT_LINK_SHARE = 0.5, 0.8


def _prune_links(el: Any, stats: dict[Any, _Stats], share: float = PAGE_LINK_SHARE) -> None:
    """Drop link-heavy blocks (related links, tag clouds, share bars) inside ``el``."""
    for child in list(el):
        st = stats.get(child)
        if st is None:
            continue
        if st.text and st.link_tags >= 2 and st.link_text > share * st.text:
            child.drop_tree()
        else:
            _prune_links(child, stats, share)


def main_text(html: str | bytes) -> str:
    """Main article text of a full page: navigation, link lists, footers and ads left out.

    Picks the container with the best balance of text density (non-link characters per tag),
    size, paragraph count and punctuation, the signals GeneralNewsExtractor uses, then drops
    link-heavy blocks inside it. Falls back to the whole visible text when no container stands
    out. Meant for whole pages; for an already extracted body use :func:`html_to_text`.
    """
    root = _parse_html(html)
    if root is None:
        return ""
    stats: dict[Any, _Stats] = {}
    _collect(root, False, stats)
    best, best_score = None, 0.0
    for el, st in stats.items():
        if _tag(el) in _CANDIDATE_TAGS:
            score = _score(st)
            if score > best_score:
                best, best_score = el, score
    if best is None:
        return _element_text(root)
    _prune_links(best, stats)
    return _element_text(best)


def has_entity(text: str) -> bool:
    """Whether plain text holds an HTML character reference (``&amp;``, ``&#21271;``) to decode."""
    return _ENTITY_RE.search(text) is not None
