"""Realistic reposts of a real article, the way news portals make them.

A portal that republishes a story rarely copies its bytes: it wraps the text in its own page
template (navigation, an ad block and a "related news" box inside the article region), adds a
source/editor line, appends its site name to the headline or rewrites it, writes dates its own way,
sometimes uses full-width characters, reorders or drops a paragraph, and edits a few sentences.
Each of those is one named transformation here, driven by a seeded :class:`random.Random`, so a
benchmark (or a test, or the example site) can build the same labelled stream every time.

Usage::

    rng = random.Random(42)
    art = Article("a1", "zh", "标题", ("第一段。", "第二段。"))
    repost = make_repost(art, "portal", rng)       # a named recipe (see RECIPES)
    repost.title, repost.body, repost.steps         # body is text, or HTML after `template`

Transformations work on a :class:`Draft` (title + paragraphs, or HTML once templated) and return a
new one; ``template`` must come last because it turns the paragraphs into HTML.
"""

from __future__ import annotations

import html
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

__all__ = [
    "PORTALS",
    "RECIPES",
    "Article",
    "Draft",
    "Portal",
    "date_format",
    "edit_sentences",
    "fullwidth",
    "join_sentences",
    "make_repost",
    "paragraph_order",
    "portal_repost",
    "render_page",
    "source_line",
    "split_sentences",
    "template",
    "title_rewrite",
    "title_suffix",
    "truncate",
]


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Article:
    """A real article: id, language (``"zh"`` or ``"en"``), title and body paragraphs."""

    id: str
    lang: str
    title: str
    paragraphs: tuple[str, ...]

    @property
    def body(self) -> str:
        return "\n".join(self.paragraphs)


@dataclass(frozen=True)
class Draft:
    """A repost being made: title, paragraphs, and the HTML body once :func:`template` ran.

    ``pool`` holds sentences of *other* articles (edits insert them) and ``headlines`` their titles
    (the related-links box lists them; a repost never links to itself there).
    """

    lang: str
    title: str
    paragraphs: tuple[str, ...]
    steps: tuple[str, ...] = ()
    html: str | None = None
    edit_rate: float = 0.0  # fraction of sentences actually edited
    pool: tuple[str, ...] = field(default=(), repr=False)
    headlines: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, article: Article, pool: Sequence[str] = (), headlines: Sequence[str] = ()) -> Draft:
        return cls(article.lang, article.title, tuple(article.paragraphs), pool=tuple(pool), headlines=tuple(headlines))

    @property
    def body(self) -> str:
        """What a spider would put in the body field: the HTML region, or the paragraphs as text."""
        return self.html if self.html is not None else "\n".join(self.paragraphs)

    def step(self, name: str, **changes: object) -> Draft:
        if self.html is not None:
            raise ValueError(f"{name}: the draft is already templated; template() must come last")
        return replace(self, steps=(*self.steps, name), **changes)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------

_ZH_SENT = re.compile(r"[^。！？!?；]*[。！？!?；]+[”\"』」）)]*|[^。！？!?；]+$")
_EN_ABBREV = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "jr",
        "sr",
        "inc",
        "corp",
        "co",
        "ltd",
        "u.s",
        "u.k",
        "u.n",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "no",
        "vs",
        "e.g",
        "i.e",
        "gov",
        "gen",
        "sen",
        "rep",
        "rev",
        "prof",
    ]
)
_EN_BOUNDARY = re.compile(r"(?<=[.!?])([\"')\]]?)\s+(?=[\"'(]?[A-Z0-9])")


def split_sentences(text: str, lang: str) -> list[str]:
    """Sentences of one paragraph (Chinese: after 。！？；; English: after . ! ? before a capital)."""
    text = text.strip()
    if not text:
        return []
    if lang == "zh":
        return [s.strip() for s in _ZH_SENT.findall(text) if s.strip()]
    out: list[str] = []
    start = 0
    for m in _EN_BOUNDARY.finditer(text):
        end = m.start() + len(m.group(1))
        head = text[start:end]
        last = head.rsplit(None, 1)[-1].rstrip(".!?\"')]").lower() if head.split() else ""
        if last in _EN_ABBREV or (len(last) == 1 and last.isalpha()):
            continue  # "Mr. Smith", "U.S. officials", "J. Smith"
        out.append(head.strip())
        start = m.end()
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def join_sentences(sentences: Sequence[str], lang: str) -> str:
    return ("" if lang == "zh" else " ").join(sentences)


# ---------------------------------------------------------------------------------------------
# Portals (templates, suffixes, source lines)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Portal:
    """One republishing site: its page template pieces, headline suffix and house lines."""

    key: str
    lang: str
    name: str
    suffix: str
    nav: tuple[str, ...]
    ad: str
    related: str
    footer: str
    body_class: str


PORTALS: tuple[Portal, ...] = (
    Portal(
        "163",
        "zh",
        "网易新闻",
        "_网易新闻",
        ("首页", "新闻", "体育", "娱乐", "财经", "汽车", "科技", "手机"),
        "网易新闻客户端，看新闻也能领红包，点击立即下载",
        "相关新闻",
        "网易公司版权所有 ©1997-2016 About NetEase",
        "post_text",
    ),
    Portal(
        "ifeng",
        "zh",
        "凤凰网",
        "_凤凰资讯",
        ("凤凰首页", "资讯", "财经", "娱乐", "时尚", "汽车", "房产", "视频"),
        "【广告】凤凰新闻APP，独家视频抢先看，扫码下载有惊喜",
        "相关阅读",
        "凤凰新媒体 版权所有 Copyright © 2016 Phoenix New Media",
        "main_content",
    ),
    Portal(
        "sina",
        "zh",
        "新浪新闻",
        " - 新浪新闻",
        ("新浪首页", "新闻", "体育", "财经", "娱乐", "科技", "博客", "视频"),
        "新浪新闻客户端：每日精选，热点快报，下载立领福利",
        "相关报道",
        "新浪公司 版权所有 Copyright © 1996-2016 SINA Corporation",
        "article",
    ),
    Portal(
        "qq",
        "zh",
        "腾讯新闻",
        "_腾讯新闻",
        ("腾讯网", "新闻", "视频", "图片", "军事", "体育", "NBA", "娱乐"),
        "腾讯新闻APP，事实派的新闻客户端，广告推广",
        "延伸阅读",
        "Copyright © 1998 - 2016 Tencent. All Rights Reserved 腾讯公司 版权所有",
        "Cnt-Main-Article-QQ",
    ),
    Portal(
        "sohu",
        "zh",
        "搜狐",
        "（转载）",
        ("搜狐首页", "新闻", "体育", "汽车", "房产", "旅游", "教育", "时尚"),
        "搜狐新闻客户端 新闻资讯随时看 精彩推荐 点击下载",
        "推荐阅读",
        "Copyright © 2016 Sohu.com Inc. All Rights Reserved. 搜狐公司 版权所有",
        "article-text",
    ),
    Portal(
        "reuters",
        "en",
        "Reuters",
        " | Reuters",
        ("World", "Business", "Markets", "Politics", "Tech", "Breakingviews"),
        "Advertisement - Subscribe to our newsletter for the day's top stories",
        "Related Coverage",
        "All quotes delayed a minimum of 15 minutes. © 2016 Reuters. All Rights Reserved.",
        "StandardArticleBody",
    ),
    Portal(
        "bbc",
        "en",
        "BBC News",
        " - BBC News",
        ("Home", "UK", "World", "Business", "Politics", "Tech", "Science", "Health"),
        "Advertisement: Get the BBC News app for breaking news alerts",
        "Related Topics",
        "Copyright © 2016 BBC. The BBC is not responsible for the content of external sites.",
        "story-body",
    ),
    Portal(
        "herald",
        "en",
        "The Daily Herald",
        " - The Daily Herald",
        ("News", "Local", "Sports", "Business", "Opinion", "Obituaries"),
        "ADVERTISEMENT Subscribe today: unlimited digital access for 99 cents",
        "More from the Herald",
        "© 2016 The Daily Herald. All rights reserved. Privacy Policy | Terms of Use",
        "article-content",
    ),
    Portal(
        "wirehub",
        "en",
        "WireHub Online",
        " | WireHub Online",
        ("Top Stories", "Money", "World", "Tech", "Lifestyle"),
        "Sponsored: Compare mortgage rates in your area - see offers",
        "You may also like",
        "WireHub Online is not responsible for the content of wire stories. © 2016",
        "entry-content",
    ),
)
_TITLE_MARKS = {"zh": ("【转】", "（转载）", "（组图）", "(图)"), "en": ()}


def portals(lang: str) -> tuple[Portal, ...]:
    return tuple(p for p in PORTALS if p.lang == lang)


def _pick_portal(lang: str, rng: random.Random, portal: str | None) -> Portal:
    if portal is not None:
        for p in PORTALS:
            if p.key == portal:
                return p
        raise KeyError(f"unknown portal {portal!r}")
    return rng.choice(portals(lang))


# ---------------------------------------------------------------------------------------------
# Transformations
# ---------------------------------------------------------------------------------------------

_ZH_NAMES = ("张三", "李明", "王芳", "刘洋", "陈静", "赵磊", "孙悦", "周涛")
_ZH_AGENCIES = ("新华社", "中国新闻网", "人民日报", "北京青年报", "澎湃新闻", "中央电视台", "新京报")
_EN_NAMES = ("John Smith", "Sarah Jones", "David Brown", "Emma Wilson", "Michael Green", "Laura Clarke")
_EN_CITIES = ("LONDON", "NEW YORK", "WASHINGTON", "TOKYO", "FRANKFURT", "SYDNEY")


def source_line(d: Draft, rng: random.Random) -> Draft:
    """Add the portal's house lines: ``来源：新华社`` … ``责任编辑：张三``, or ``LONDON (Reuters) -`` /
    ``By Jane Doe | BBC News`` and a ``(Reporting by …)`` line."""
    paras = list(d.paragraphs) or [""]
    if d.lang == "zh":
        agency, editor = rng.choice(_ZH_AGENCIES), rng.choice(_ZH_NAMES)
        head = rng.choice((f"来源：{agency}", f"本文来源：{agency}", f"（来源：{agency}）"))
        tail = rng.choice(
            (f"责任编辑：{editor}_NN{rng.randint(1000, 9999)}", f"（编辑：{editor}）", f"责任编辑：{editor}")
        )
        paras = [head, *paras, tail]
    else:
        a, b = rng.sample(_EN_NAMES, 2)
        style = rng.randrange(3)
        if style == 0:
            paras[0] = f"{rng.choice(_EN_CITIES)} (Reuters) - {paras[0]}"
            paras.append(f"(Reporting by {a}; Editing by {b})")
        elif style == 1:
            paras = [f"By {a} | BBC News", *paras]
        else:
            paras = [
                f"By {a}, {rng.choice(('Staff Writer', 'Associated Press', 'Business Reporter'))}",
                *paras,
                f"Additional reporting by {b}.",
            ]
    return d.step("source_line", paragraphs=tuple(paras))


def title_suffix(d: Draft, rng: random.Random, suffix: str | None = None) -> Draft:
    """Append a site name or repost mark to the headline: ``_网易新闻``, ``（转载）``, `` | Reuters`` …"""
    if suffix is None:
        choices = [p.suffix for p in portals(d.lang)] + list(_TITLE_MARKS.get(d.lang, ()))
        suffix = rng.choice(choices)
    title = d.title.rstrip()
    title = f"【转】{title}" if suffix == "【转】" and rng.random() < 0.5 else title + suffix
    return d.step("title_suffix", title=title)


_ZH_SYNONYMS = {
    "称": "表示",
    "表示": "称",
    "将": "拟",
    "拟": "将",
    "发布": "公布",
    "公布": "发布",
    "宣布": "公布",
    "男子": "男",
    "女子": "女",
    "超过": "逾",
    "近日": "日前",
    "日前": "近日",
    "首次": "首度",
    "曝光": "披露",
    "调查": "调查显示",
    "回应": "答复",
    "警方": "公安",
    "公司": "企业",
    "企业": "公司",
    "增长": "上涨",
    "下降": "下滑",
    "上涨": "增长",
    "下滑": "下降",
    "最新": "",
    "重磅": "",
    "突发": "",
    "被": "遭",
    "遭": "被",
    "将会": "将",
    "目前": "当前",
    "我国": "中国",
    "进行": "开展",
    "开展": "进行",
}
_EN_SYNONYMS = {
    "says": "said",
    "said": "says",
    "to": "will",
    "rise": "climb",
    "rises": "climbs",
    "falls": "drops",
    "fall": "drop",
    "shares": "stock",
    "firm": "company",
    "company": "firm",
    "uk": "Britain",
    "us": "U.S.",
    "government": "govt",
    "profit": "earnings",
    "net": "profit",
    "sees": "expects",
    "buy": "acquire",
    "plans": "proposes",
    "cut": "reduce",
    "raises": "lifts",
    "sets": "announces",
    "up": "higher",
    "down": "lower",
    "strike": "walkout",
    "talks": "negotiations",
    "new": "fresh",
    "big": "major",
}
_ZH_PREFIXES = ("快讯：", "视频：", "独家：", "最新！", "关注：")
_EN_PREFIXES = ("UPDATE 1-", "BREAKING: ", "WATCH: ", "Analysis: ")
_ORIGINAL_TITLE = re.compile(r"^[（(]原标题[：:](.+?)[）)]\s*")


def _tokens(title: str, lang: str) -> list[str]:
    if lang == "zh":
        import jieba  # deferred: only Chinese rewrites need it

        return [t for t in jieba.lcut(title) if t]
    return title.split()


def title_rewrite(d: Draft, rng: random.Random) -> Draft:
    """Reword the headline as an editor would: replace one or two words with synonyms, drop or swap
    words, add a tag prefix; English titles may also change case (Reuters ALL CAPS → Title Case).
    A Chinese repost also carries the natural signal ``（原标题：…）`` at the top of its body half the
    time. A body that already starts with ``（原标题：X）`` makes X the new headline instead."""
    paras = list(d.paragraphs)
    if paras and (m := _ORIGINAL_TITLE.match(paras[0])) and m.group(1).strip() != d.title.strip():
        title = m.group(1).strip()
        paras[0] = paras[0][m.end() :]
        return d.step("title_rewrite", title=title, paragraphs=tuple(p for p in paras if p))
    lang = d.lang
    synonyms = _ZH_SYNONYMS if lang == "zh" else _EN_SYNONYMS
    toks = _tokens(d.title, lang)
    ops = rng.sample(["synonym", "drop", "swap", "prefix"], k=2)
    for op in ops:
        if op == "synonym":
            idx = [i for i, t in enumerate(toks) if t.lower().strip(",:") in synonyms]
            if idx:
                i = rng.choice(idx)
                toks[i] = synonyms[toks[i].lower().strip(",:")]
                continue
            op = "drop"
        if op == "drop" and len(toks) > 4:
            i = rng.randrange(1, len(toks))
            del toks[i]
        elif op == "swap" and len(toks) > 3:
            i = rng.randrange(len(toks) - 1)
            toks[i], toks[i + 1] = toks[i + 1], toks[i]
        elif op == "prefix":
            toks.insert(0, rng.choice(_ZH_PREFIXES if lang == "zh" else _EN_PREFIXES))
    title = ("" if lang == "zh" else " ").join(t.strip() for t in toks if t.strip())
    if lang == "en" and title.isupper() and rng.random() < 0.7:
        title = " ".join(w if "." in w else w.capitalize() if len(w) > 3 else w.lower() for w in title.split())
    if lang == "zh" and rng.random() < 0.5:
        paras = [f"（原标题：{d.title.strip()}）", *paras]
    return d.step("title_rewrite", title=title.strip(), paragraphs=tuple(paras))


_EN_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_EN_MON = {m[:3].lower(): i + 1 for i, m in enumerate(_EN_MONTHS)}
_ZH_DATE = re.compile(r"(?<![\d\x00])((?:19|20)\d\d)\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日")
_ISO_DATE = re.compile(r"(?<![\d.\x00])((?:19|20)\d\d)[-/.](\d{1,2})[-/.](\d{1,2})(?![\d.])")
_EN_DATE = re.compile(
    r"(?<![A-Za-z\x00])(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+(\d{1,2}),?\s+((?:19|20)\d\d)(?!\d)"
)
_EN_DATE_DMY = re.compile(
    r"(?<![\w\x00])(\d{1,2})\s+(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?\s+((?:19|20)\d\d)(?!\d)"
)
_TIME_24 = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")


def _format_date(y: int, m: int, d: int, lang: str, rng: random.Random, avoid: str = "") -> str:
    """The date in a randomly chosen format other than ``avoid`` (how it was written)."""
    if lang == "zh":
        fmts = [
            f"{y}年{m}月{d}日",
            f"{y}-{m:02d}-{d:02d}",
            f"{y}/{m}/{d}",
            f"{y}.{m:02d}.{d:02d}",
            f"{y}年{m:02d}月{d:02d}日",
        ]
    else:
        mon = _EN_MONTHS[m - 1]
        fmts = [
            f"{mon} {d}, {y}",
            f"{d} {mon} {y}",
            f"{y}-{m:02d}-{d:02d}",
            f"{mon[:3]}. {d}, {y}",
            f"{m:02d}/{d:02d}/{y}",
        ]
    return rng.choice([f for f in fmts if f != avoid.strip()])


def date_format(d: Draft, rng: random.Random, fallback_date: tuple[int, int, int] = (2016, 3, 28)) -> Draft:
    """Rewrite every dated mention in the body into another format (``2016年3月28日`` ↔ ``2016-03-28``
    ↔ ``2016/3/28``; ``March 28, 1987`` ↔ ``28 March 1987`` ↔ ``03/28/1987``) and 24-hour times into
    12-hour ones (``14:10`` → ``下午2:10`` / ``2:10 PM``). A body without any date gets a dated
    publication line in a non-ISO format, as portals print one."""
    lang = d.lang
    changed = 0

    def ymd(y: str, m: str, day: str, written: str) -> str:
        nonlocal changed
        yi, mi, di = int(y), int(m), int(day)
        if not (1 <= mi <= 12 and 1 <= di <= 31):
            return written
        changed += 1
        # \x00 marks a rewritten date so that the next pattern leaves it alone (removed below).
        return "\x00" + _format_date(yi, mi, di, lang, rng, avoid=written)

    def time12(m: re.Match[str]) -> str:
        nonlocal changed
        h, mi = int(m.group(1)), m.group(2)
        changed += 1
        pm = h >= 12
        h12 = h - 12 if h > 12 else (12 if h == 0 else h)
        if lang == "zh":
            return f"{'下午' if pm else '上午'}{h12}:{mi}"
        return f"{h12}:{mi} {'PM' if pm else 'AM'}"

    def gap(m: re.Match[str]) -> str:
        return " " if m.string[m.end() : m.end() + 1].isdigit() else ""  # "28日14:10" → "28 14:10"

    paras = []
    for p in d.paragraphs:
        p = _ZH_DATE.sub(lambda m: ymd(*m.groups(), m.group(0)) + gap(m), p)
        p = _ISO_DATE.sub(lambda m: ymd(*m.groups(), m.group(0)) + gap(m), p)
        if lang == "en":
            p = _EN_DATE.sub(lambda m: ymd(m.group(3), str(_EN_MON[m.group(1).lower()]), m.group(2), m.group(0)), p)
            p = _EN_DATE_DMY.sub(lambda m: ymd(m.group(3), str(_EN_MON[m.group(2).lower()]), m.group(1), m.group(0)), p)
        p = _TIME_24.sub(time12, p)
        paras.append(p.replace("\x00", ""))
    if not changed:
        y, m, day = fallback_date
        when = _format_date(y, m, day, lang, rng)
        hh, mm = rng.randint(7, 22), rng.randint(0, 59)
        clock = (
            f"{'下午' if hh >= 12 else '上午'}{hh - 12 if hh > 12 else hh}:{mm:02d}"
            if lang == "zh"
            else f"{hh - 12 if hh > 12 else hh}:{mm:02d} {'PM' if hh >= 12 else 'AM'}"
        )
        paras.insert(0, f"发布时间：{when} {clock}" if lang == "zh" else f"Published: {when} {clock}")
    return d.step("date_format", paragraphs=tuple(paras))


_FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz%"}
_FULLWIDTH_TABLE = str.maketrans(_FULLWIDTH)


def fullwidth(d: Draft, rng: random.Random) -> Draft:
    """Digits, Latin letters and ``%`` to their full-width forms (``２０１６``, ＶＩＰ), title and body."""
    del rng  # deterministic: every character is converted
    return d.step(
        "fullwidth",
        title=d.title.translate(_FULLWIDTH_TABLE),
        paragraphs=tuple(p.translate(_FULLWIDTH_TABLE) for p in d.paragraphs),
    )


def paragraph_order(d: Draft, rng: random.Random) -> Draft:
    """Swap two paragraphs (for a one-paragraph body: two sentences)."""
    paras = list(d.paragraphs)
    if len(paras) >= 2:
        i, j = rng.sample(range(len(paras)), 2)
        paras[i], paras[j] = paras[j], paras[i]
    elif paras:
        sents = split_sentences(paras[0], d.lang)
        if len(sents) >= 2:
            i, j = rng.sample(range(len(sents)), 2)
            sents[i], sents[j] = sents[j], sents[i]
            paras = [join_sentences(sents, d.lang)]
    return d.step("paragraph_order", paragraphs=tuple(paras))


def truncate(d: Draft, rng: random.Random) -> Draft:
    """Drop the last paragraph (for a one-paragraph body: its last sentence)."""
    del rng
    paras = list(d.paragraphs)
    if len(paras) >= 2:
        paras.pop()
    elif paras:
        sents = split_sentences(paras[0], d.lang)
        if len(sents) >= 2:
            paras = [join_sentences(sents[:-1], d.lang)]
    return d.step("truncate", paragraphs=tuple(paras))


_ZH_CLAUSE = re.compile(r"[，,、]")
_ZH_FILLER = ("据了解，相关部门正在进一步调查处理。", "对此，记者将持续关注。", "目前，此事仍在进一步处理中。")
_EN_FILLER = (
    "The company did not immediately respond to a request for comment.",
    "Further details were not immediately available.",
    "Officials declined to comment further.",
)


def _reword(sentence: str, lang: str, rng: random.Random) -> str:
    """Drop one clause (between commas) or, without commas, a few words; keep the end mark."""
    if lang == "zh":
        parts = _ZH_CLAUSE.split(sentence)
        if len(parts) >= 3:
            del parts[rng.randrange(1, len(parts) - 1)]
            return "，".join(parts)
        if len(parts) == 2:
            return parts[0] + parts[1][-1:] if parts[1] else parts[0]
        cut = max(1, len(sentence) // 4)
        return sentence[: -cut - 1] + sentence[-1:] if len(sentence) > 8 else sentence
    parts = [p for p in sentence.split(", ")]
    if len(parts) >= 3:
        del parts[rng.randrange(1, len(parts) - 1)]
        return ", ".join(parts)
    words = sentence.split()
    if len(words) > 6:
        i = rng.randrange(1, len(words) - 3)
        del words[i : i + 2]
        return " ".join(words)
    return sentence


def edit_sentences(d: Draft, rng: random.Random, rate: float) -> Draft:
    """Edit ``rate`` of the sentences (at least one): each chosen sentence is replaced by a sentence
    of another article, deleted, reworded (a clause dropped), or followed by an inserted foreign
    sentence, in equal shares. Paragraph boundaries are kept. ``Draft.edit_rate`` records the
    fraction actually edited."""
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], not {rate!r}")
    lang = d.lang
    paras = [split_sentences(p, lang) for p in d.paragraphs]
    slots = [(i, j) for i, s in enumerate(paras) for j in range(len(s))]
    if not slots:
        return d.step(f"edit@{round(rate * 100)}%")
    n = max(1, round(rate * len(slots)))
    chosen = rng.sample(slots, min(n, len(slots)))
    pool = d.pool or (_ZH_FILLER if lang == "zh" else _EN_FILLER)
    ops = ["replace", "delete", "reword", "insert"]
    new = [list(s) for s in paras]
    for k, (i, j) in enumerate(sorted(chosen)):
        op = ops[(k + rng.randrange(4)) % 4]
        s = paras[i][j]
        if op == "replace":
            new[i][j] = rng.choice(pool)
        elif op == "delete":
            new[i][j] = ""
        elif op == "reword":
            r = _reword(s, lang, rng)
            new[i][j] = r if r != s else ""  # a sentence that cannot be reworded is deleted
        else:
            new[i][j] = s + ("" if lang == "zh" else " ") + rng.choice(pool)
    out = tuple(t for t in (join_sentences([x for x in s if x], lang) for s in new) if t)
    return d.step(f"edit@{round(rate * 100)}%", paragraphs=out, edit_rate=len(chosen) / len(slots))


# ---------------------------------------------------------------------------------------------
# Template
# ---------------------------------------------------------------------------------------------


def _related_links(portal: Portal, rng: random.Random, pool: Sequence[str]) -> str:
    heads = [h for h in pool if 6 <= len(h) <= 60] or list(_ZH_FILLER if portal.lang == "zh" else _EN_FILLER)
    items = "".join(
        f'<li><a href="https://{portal.key}.example.com/{rng.randrange(10**7):07d}.html">{html.escape(h)}</a></li>'
        for h in rng.sample(heads, min(5, len(heads)))
    )
    return f'<div class="related"><h3>{html.escape(portal.related)}</h3><ul>{items}</ul></div>'


def _article_region(d: Draft, portal: Portal, rng: random.Random) -> str:
    paras = [f"<p>{html.escape(p)}</p>" for p in d.paragraphs]
    ad = (
        f'<div class="ad-block"><script>var ad_slot="{portal.key}_{rng.randrange(1000)}";</script>'
        f'<a href="https://ad.{portal.key}.example.com/c?{rng.randrange(10**6)}"><img src="/ad.jpg" alt=""></a>'
        f"<span>{html.escape(portal.ad)}</span></div>"
    )
    paras.insert(min(2, len(paras)), ad)
    related = _related_links(portal, rng, d.headlines)
    return f'<div class="{portal.body_class}">\n' + "\n".join(paras) + f"\n{related}\n</div>"


def render_page(d: Draft, portal: Portal, region: str) -> str:
    """A whole page around an article region: head, navigation, headline, region, footer."""
    nav = "".join(
        f'<li><a href="https://{portal.key}.example.com/{i}/">{html.escape(n)}</a></li>'
        for i, n in enumerate(portal.nav)
    )
    title = html.escape(d.title)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}{html.escape(portal.suffix)}</title>'
        f"<style>.nav li{{display:inline}}</style><script>window.site='{portal.key}';</script></head>\n"
        f'<body><div class="nav"><ul>{nav}</ul></div>\n<div class="main"><h1>{title}</h1>\n'
        f'<div class="info">{html.escape(portal.name)}</div>\n{region}\n</div>\n'
        f'<div class="footer"><p>{html.escape(portal.footer)}</p></div></body></html>'
    )


def template(d: Draft, rng: random.Random, portal: str | None = None, full_page: bool = False) -> Draft:
    """Wrap the paragraphs in a portal's HTML: the body becomes the article region (``<p>``
    paragraphs with an ad block after the second and a related-links box at the end, both INSIDE
    the region), or with ``full_page`` the whole page (navigation, headline, footer around it)."""
    p = _pick_portal(d.lang, rng, portal)
    region = _article_region(d, p, rng)
    body = render_page(d, p, region) if full_page else region
    out = d.step(f"template:{p.key}")
    return replace(out, html=body)


# ---------------------------------------------------------------------------------------------
# Recipes
# ---------------------------------------------------------------------------------------------


def portal_repost(d: Draft, rng: random.Random, portal: str | None = None) -> Draft:
    """The typical portal repost: date_format + source_line + title_suffix, then template."""
    p = _pick_portal(d.lang, rng, portal)
    d = date_format(d, rng)
    d = source_line(d, rng)
    d = title_suffix(d, rng, suffix=p.suffix)
    return template(d, rng, portal=p.key)


Transform = Callable[[Draft, random.Random], Draft]


def _edit(rate: float, portal: bool = False) -> Transform:
    def run(d: Draft, rng: random.Random) -> Draft:
        d = title_rewrite(edit_sentences(d, rng, rate), rng)
        return portal_repost(d, rng) if portal else d

    return run


#: Named recipes the benchmark uses. ``edit@N%`` edits N% of the sentences AND rewrites the title,
#: so the body tier has to carry them (an editor who edits sentences also edits headlines).
RECIPES: dict[str, Transform] = {
    "template": template,
    "source_line": source_line,
    "title_suffix": title_suffix,
    "title_rewrite": title_rewrite,
    "date_format": date_format,
    "fullwidth": fullwidth,
    "paragraph_order": paragraph_order,
    "truncate": truncate,
    "portal": portal_repost,
    "edit@5%": _edit(0.05),
    "edit@10%": _edit(0.10),
    "edit@20%": _edit(0.20),
    "edit@30%": _edit(0.30),
    "portal+edit@10%": _edit(0.10, portal=True),
}

#: The nominal edit rate of each recipe (0 for recipes that leave sentences alone).
RECIPE_EDIT_RATE: dict[str, float] = {
    name: (float(name.rsplit("@", 1)[1].rstrip("%")) / 100 if "@" in name else 0.0) for name in RECIPES
}


def make_repost(
    article: Article, recipe: str, rng: random.Random, pool: Sequence[str] = (), headlines: Sequence[str] = ()
) -> Draft:
    """A repost of ``article`` made by the named recipe (see :data:`RECIPES`); ``pool``: sentences
    and ``headlines``: titles of other articles (for edits and the related-links box)."""
    try:
        fn = RECIPES[recipe]
    except KeyError:
        raise KeyError(f"unknown recipe {recipe!r}; known: {', '.join(RECIPES)}") from None
    return fn(Draft.of(article, pool, headlines), rng)
