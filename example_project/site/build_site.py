"""Build the bundled offline news site of the example project from the shared corpus.

Run from anywhere (offline)::

    python example_project/site/build_site.py [--corpus /path/to/shared/corpus]

It reads real articles from the MIT/Apache parts of the shared corpus (``html/gerapy``,
``html/newspaper3k``, ``html/scrapinghub-aeb``), renders them on four fictional "portals" with four
different page templates, and writes ``index.html``, ``<portal>/index.html``, ``<portal>/<page>.html``
and ``manifest.json`` next to this script, and the product page of the ``reviews`` spider
(``shop/product.html``, made by ``build_shop.py`` from reviews written for it). The output is
committed, so the example works without the corpus; this script documents exactly how every page was made and regenerates it byte for byte.

The article text is copied unchanged (paragraphs as published). What is *not* from the corpus and was
written here: the page templates, navigation, ads, footers, the rewritten headlines of the body-tier
reposts, the ``来源``/``责任编辑``/"Source:" lines, and the edits a reposting site makes (title suffix,
full-width digits, an ad block inside the body, a dropped last paragraph). Each page lists its edits in
``manifest.json``.

Crawl order is part of the design: the spider reads the portals in the order of the top-level index
(``PORTALS`` below) and, on each portal, the articles in list order, one article at a time. The first
page of a story in that order is its original; every later copy is a repost, and ``expected_tier`` says
which tier of the plugin should drop it: ``"title"`` for light edits (same headline up to a site suffix,
a repost mark, letter case or full-width digits), ``"body"`` where the headline was rewritten.
"""

from __future__ import annotations

import argparse
import gzip
import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from parsel import Selector

from build_shop import PAGE as SHOP_PAGE
from build_shop import render_product_page, shop_manifest

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parents[2] / "shared" / "corpus"  # /work/main/example_project/site -> /work/shared

GERAPY_COMMIT = "d65ddd09d4714db4615ea0d522829b20ca7805e5"
NEWSPAPER_COMMIT = "1618b547f31c2d1fd19ae3b6afd8f7542dd02074"
AEB_COMMIT = "4a3bc979f76c0df73cb95fe272e2fc1b96f9f010"


# --------------------------------------------------------------------------------------------------
# Stories: real text, extracted from the corpus
# --------------------------------------------------------------------------------------------------


@dataclass
class Story:
    """One real article: where it comes from and its paragraphs."""

    id: str
    lang: str
    title: str  # the headline as published
    published: tuple[int, int, int, int, int]  # y, m, d, H, M (as published; minutes may be 0)
    agency: str  # who wrote it (shown in 来源/Source lines)
    repo: str
    commit: str
    license: str
    corpus_path: str
    original_site: str
    paragraphs: list[str] = field(default_factory=list)


def _gz(path: Path) -> str:
    return gzip.open(path).read().decode("utf-8")


def _paragraphs_of(html_text: str, css: str) -> list[str]:
    sel = Selector(html_text)
    out = []
    for p in sel.css(css).xpath(".//p"):
        text = re.sub(r"\s+", " ", "".join(p.xpath(".//text()").getall())).strip()
        if text:
            out.append(text)
    return out


def _text_file_paragraphs(path: Path, skip: int = 0) -> list[str]:
    blocks = [b.strip() for b in path.read_text(encoding="utf-8").split("\n\n")]
    return [re.sub(r"\s*\n\s*", " ", b) for b in blocks if b][skip:]


def load_stories(corpus: Path) -> dict[str, Story]:
    """Extract the article text of every story used on the site."""
    g = corpus / "html" / "gerapy" / "detail"
    n3k = corpus / "html" / "newspaper3k"
    aeb = corpus / "html" / "scrapinghub-aeb"
    truth = json.loads((aeb / "ground-truth.json").read_text(encoding="utf-8"))

    def aeb_story(sid: str, key: str, title: str, published: tuple, agency: str) -> Story:
        entry = truth[key]
        paras = [p.strip() for p in entry["articleBody"].split("\n") if p.strip()]
        return Story(sid, "en", title, published, agency, "scrapinghub/article-extraction-benchmark",
                     AEB_COMMIT, "MIT", f"html/scrapinghub-aeb/html/{key}.html.gz (+ ground-truth.json)",
                     entry["url"], paras)

    stories = [
        Story("neixu", "zh", "【中国稳健前行】坚定实施扩大内需战略", (2020, 7, 4, 12, 10), "求是网",
              "Gerapy/GerapyAutoExtractor", GERAPY_COMMIT, "Apache-2.0",
              "html/gerapy/detail/china_news1.html.gz", "chinanews.com (中新网), 2020-07-04, 来源：求是网",
              _paragraphs_of(_gz(g / "china_news1.html.gz"), "div.left_zw")),
        Story("gugong", "zh", "故宫，你低调点！故宫：不，实力已不允许我继续低调", (2019, 2, 20, 2, 26),
              "中国新闻网", "Gerapy/GerapyAutoExtractor", GERAPY_COMMIT, "Apache-2.0",
              "html/gerapy/detail/ifeng_news1_detail_20220630.html.gz (same text as ifeng_news1.html.gz)",
              "https://news.ifeng.com/c/7kQcQG2peWU (凤凰网, 2019-02-20; 作者 上官云 宋宇晟)",
              _paragraphs_of(_gz(g / "ifeng_news1_detail_20220630.html.gz"), "div[class^=text-]")),
        Story("covid", "zh", "美国新冠肺炎确诊病例超278万例 死亡129227例", (2020, 7, 4, 1, 55), "央视新闻客户端",
              "Gerapy/GerapyAutoExtractor", GERAPY_COMMIT, "Apache-2.0",
              "html/gerapy/detail/netease_news1.html.gz",
              "news.163.com (网易新闻), 2020-07-04, 来源：央视新闻客户端 "
              "http://m.news.cctv.com/2020/07/04/ARTIqcFzfVGxw62TsH9bU0if200704.shtml",
              _paragraphs_of(_gz(g / "netease_news1.html.gz"), "div#endText")),
        Story("liangzhenying", "zh", "港特首梁振英就住宅违建事件道歉", (2012, 12, 10, 0, 0), "BBC中文网",
              "codelucas/newspaper", NEWSPAPER_COMMIT, "MIT",
              "html/newspaper3k/text/chinese.txt (page: html/chinese_article.html.gz)",
              "http://www.bbc.co.uk/zhongwen/simp/chinese_news/2012/12/121210_hongkong_politics.shtml",
              _text_file_paragraphs(n3k / "text" / "chinese.txt")),
        aeb_story("meth-usatoday", "776a1c046798b474e410f6edf3225d6a27fecd0de6aac22aef7b7f64fe87caaf",
                  "South Dakota says, 'Meth. We're On It,' and Twitter asks, Are you guys OK?",
                  (2019, 11, 19, 0, 0), "Argus Leader / USA TODAY"),
        aeb_story("meth-thehill", "156770d676ce79905198e1c8407f81e5ecfb617d9aa44712718707eb7e3b8e38",
                  "South Dakota governor doubles down on 'meth, we're on it' anti-drug campaign",
                  (2019, 11, 19, 6, 56), "The Hill"),
        # newspaper3k's reference texts start with photo captions (and, for reuters.com2, a teaser
        # of another story): skip those blocks, keep the article from its dateline on.
        Story("airasia-search", "en", "Indonesia expands search for missing AirAsia jet, U.S. sends warship",
              (2014, 12, 30, 0, 0), "Reuters", "codelucas/newspaper", NEWSPAPER_COMMIT, "MIT",
              "html/newspaper3k/text/reuters.com2.txt (page: html/reuters.com2.html.gz)",
              "http://in.reuters.com/article/2014/12/30/indonesia-airplane-idINKBN0K703120141230",
              _text_file_paragraphs(n3k / "text" / "reuters.com2.txt", skip=2)),
        Story("airasia-bodies", "en", "Bodies, debris from missing AirAsia plane pulled from sea off Indonesia",
              (2014, 12, 30, 0, 0), "Reuters", "codelucas/newspaper", NEWSPAPER_COMMIT, "MIT",
              "html/newspaper3k/text/reuters.com3.txt (page: html/reuters.com3.html.gz)",
              "http://uk.reuters.com/article/2014/12/30/uk-indonesia-airplane-idUKKBN0K601G20141230",
              _text_file_paragraphs(n3k / "text" / "reuters.com3.txt", skip=1)),
    ]
    for s in stories:
        if len(s.paragraphs) < 3:
            raise SystemExit(f"story {s.id}: only {len(s.paragraphs)} paragraphs extracted, check the source")
    assert stories[6].paragraphs[0].startswith("JAKARTA (Reuters)"), stories[6].paragraphs[0]
    assert stories[7].paragraphs[0].startswith("SURABAYA"), stories[7].paragraphs[0]
    return {s.id: s for s in stories}


# --------------------------------------------------------------------------------------------------
# Edits a reposting site makes
# --------------------------------------------------------------------------------------------------

FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")

AD_ZH = ('<div class="ad-inline"><script>window.adSlots=(window.adSlots||[]).concat("inline")</script>'
         '<span class="ad-label">广告</span><a href="#">下载客户端，热点新闻抢先看</a></div>')
AD_EN = ('<aside class="ad-inline"><script>window.adSlots=(window.adSlots||[]).concat("inline")</script>'
         '<span class="ad-label">Advertisement</span><a href="#">Subscribe today: $1 for 6 months</a></aside>')


@dataclass
class Page:
    """One article page of the site: which story, where, with which edits."""

    portal: str
    slug: str
    story: str
    title: str
    expected_tier: str | None  # None for the first copy of a story in crawl order
    fullwidth: bool = False  # digits of the body (and date line) as full-width characters
    ad_after: int | None = None  # insert an ad block after this paragraph
    trim_last: int = 0  # drop this many paragraphs at the end
    source_line: bool = False  # a 来源/Source line at the top of the body
    editor_line: bool = False  # a 责任编辑/Editor line at the bottom of the body
    note: str = ""

    @property
    def path(self) -> str:
        return f"{self.portal}/{self.slug}.html"

    def edits(self) -> list[str]:
        out = []
        if self.expected_tier is not None:
            out.append("title: " + self.note if self.note else "title: as published")
        if self.source_line:
            out.append("source line in body")
        if self.editor_line:
            out.append("editor line in body")
        if self.fullwidth:
            out.append("full-width digits in body")
        if self.ad_after is not None:
            out.append(f"ad block inside body after paragraph {self.ad_after}")
        if self.trim_last:
            out.append(f"last {self.trim_last} paragraph(s) dropped")
        return out


# Portals in crawl order (the order of the links on the top-level index).
PORTALS = [
    ("huaxia", "华夏快讯网", "zh", "Chinese portal, original reports"),
    ("harbor", "The Harbor Times", "en", "English daily, original reports"),
    ("juhe", "聚合资讯", "zh", "Chinese aggregator: copies headlines with the source's site suffix"),
    ("digest", "环球文摘 World Digest", "zh+en", "bilingual digest: rewrites headlines, inserts ads"),
]

PAGES = [
    # huaxia: three different Chinese stories on one template (hard negatives for each other)
    Page("huaxia", "neixu", "neixu", "【中国稳健前行】坚定实施扩大内需战略", None, editor_line=True),
    Page("huaxia", "gugong", "gugong", "故宫，你低调点！故宫：不，实力已不允许我继续低调", None, editor_line=True),
    Page("huaxia", "covid", "covid", "美国新冠肺炎确诊病例超278万例 死亡129227例", None, editor_line=True),
    # harbor: four English stories; two pairs are on the same event but are different articles
    Page("harbor", "meth-campaign", "meth-usatoday",
         "South Dakota says, 'Meth. We're On It,' and Twitter asks, Are you guys OK?", None),
    Page("harbor", "meth-doubles-down", "meth-thehill",
         "South Dakota governor doubles down on 'meth, we're on it' anti-drug campaign", None),
    Page("harbor", "airasia-search", "airasia-search",
         "Indonesia expands search for missing AirAsia jet, U.S. sends warship", None),
    Page("harbor", "airasia-bodies", "airasia-bodies",
         "Bodies, debris from missing AirAsia plane pulled from sea off Indonesia", None),
    # juhe: light edits (headline kept, suffix/mark added) -> title tier; plus one story of its own
    Page("juhe", "a1001", "neixu", "【中国稳健前行】坚定实施扩大内需战略（转载）", "title",
         source_line=True, editor_line=True, note="repost mark （转载） appended"),
    Page("juhe", "a1002", "gugong", "故宫，你低调点！故宫：不，实力已不允许我继续低调_凤凰网", "title",
         source_line=True, ad_after=20, note="source site suffix _凤凰网 appended"),
    Page("juhe", "a1003", "covid", "美国新冠肺炎确诊病例超２７８万例 死亡１２９２２７例_网易新闻", "title",
         source_line=True, fullwidth=True, note="full-width digits and suffix _网易新闻"),
    Page("juhe", "a1004", "liangzhenying", "港特首梁振英就住宅违建事件道歉", None, source_line=True),
    # digest: rewritten headlines -> body tier; English reposts with only letter case changed -> title tier
    Page("digest", "zh-0712", "neixu", "扩大内需：应对风险挑战的战略基点", "body", source_line=True,
         editor_line=True, fullwidth=True, ad_after=3, trim_last=1, note="rewritten"),
    Page("digest", "zh-0713", "gugong", "故宫首办元宵“灯会” 近600岁的紫禁城越来越年轻", "body",
         source_line=True, editor_line=True, ad_after=12, trim_last=1, note="rewritten"),
    Page("digest", "zh-0714", "covid", "约翰斯·霍普金斯大学：美国确诊超278万 至少19州下令戴口罩", "body",
         source_line=True, editor_line=True, ad_after=4, note="rewritten"),
    Page("digest", "en-0715", "meth-usatoday",
         "South Dakota Says, 'Meth. We're On It,' And Twitter Asks, Are You Guys OK?", "title",
         source_line=True, ad_after=5, note="headline in title case"),
    Page("digest", "en-0716", "airasia-search",
         "Indonesia Expands Search For Missing AirAsia Jet, U.S. Sends Warship", "title",
         source_line=True, ad_after=8, trim_last=1, note="headline in title case"),
    Page("digest", "en-0717", "airasia-bodies",
         "AirAsia QZ8501: rescuers recover bodies and wreckage off Borneo", "body",
         source_line=True, ad_after=10, trim_last=1, note="rewritten"),
]

# Pairs of *different* stories a careless deduplicator might merge: they must all be kept.
NEGATIVES = [
    (["harbor/meth-campaign.html", "harbor/meth-doubles-down.html"],
     "same event (South Dakota's 'Meth. We're on it' campaign, 2019-11-19), two different articles "
     "(USA TODAY/Argus Leader vs The Hill), one template"),
    (["harbor/airasia-search.html", "harbor/airasia-bodies.html"],
     "follow-up on one event (AirAsia QZ8501, 2014-12-30): two Reuters reports of the same day that "
     "share several background paragraphs verbatim, one template"),
    (["huaxia/neixu.html", "huaxia/gugong.html", "huaxia/covid.html"],
     "different stories on one template (no Chinese same-event pair exists in the MIT/Apache sources)"),
    (["juhe/a1004.html", "juhe/a1001.html"],
     "a story of the aggregator's own next to reposts, one template"),
]


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------

E = html.escape
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


def fmt_date(portal: str, d: tuple[int, int, int, int, int], fullwidth: bool = False) -> str:
    """The date as each portal prints it."""
    y, m, day, hh, mm = d
    if portal == "huaxia":
        s = f"{y}年{m:02d}月{day:02d}日 {hh:02d}:{mm:02d}"
    elif portal == "harbor":
        s = f"{MONTHS[m - 1]} {day}, {y}"
    elif portal == "juhe":
        s = f"{y}-{m:02d}-{day:02d} {hh:02d}:{mm:02d}:00"
    else:
        s = f"{y}年{m}月{day}日"
    return s.translate(FULLWIDTH) if fullwidth else s


def body_html(page: Page, story: Story) -> str:
    paras = list(story.paragraphs)
    if page.trim_last:
        paras = paras[: -page.trim_last]
    zh = story.lang == "zh"
    parts = []
    if page.source_line:
        line = f"来源：{story.agency}" if zh else f"Source: {story.agency}"
        parts.append(f'<p class="source">{E(line)}</p>')
    for i, text in enumerate(paras, 1):
        if page.fullwidth:
            text = text.translate(FULLWIDTH)
        parts.append(f"<p>{E(text)}</p>")
        if page.ad_after == i:
            parts.append(AD_ZH if zh else AD_EN)
    if page.editor_line:
        parts.append(f'<p class="editor">{"责任编辑：王婧" if zh else "Editor: M. Jones"}</p>')
    return "\n".join(parts)


def related(page: Page, pages: list[Page], n: int = 3) -> list[Page]:
    same = [p for p in pages if p.portal == page.portal and p is not page]
    return same[:n]


def render_article(page: Page, story: Story, pages: list[Page], portal_name: str) -> str:
    body = body_html(page, story)
    rel = related(page, pages)
    t = E(page.title)
    if page.portal == "huaxia":
        rel_html = "".join(f'<li><a href="{p.slug}.html">{E(p.title)}</a></li>' for p in rel)
        return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{t} - {portal_name}</title>
<link rel="stylesheet" href="/static/huaxia.css"></head>
<body>
<div class="top-nav"><a href="/huaxia/index.html">首页</a> | <a href="#">国内</a> | <a href="#">国际</a> | <a href="#">财经</a> | <a href="#">文化</a> | <a href="#">视频</a></div>
<div class="banner-ad"><a href="#"><img src="/static/banner.png" alt="广告：春季购车节 全场低至五折"></a></div>
<div class="content_left">
  <div class="crumb">您当前的位置：<a href="/huaxia/index.html">首页</a> &gt; 正文</div>
  <h1 class="content-title">{t}</h1>
  <div class="left-t"><span class="pubtime">{fmt_date("huaxia", story.published)}</span>　来源：{E(story.agency)}　<a href="#comments">参与互动</a></div>
  <div class="left_zw">
{body}
  </div>
  <div class="share">分享到：<a href="#">微信</a> <a href="#">微博</a> <a href="#">QQ空间</a></div>
  <div class="related"><h3>相关新闻</h3><ul>{rel_html}</ul></div>
</div>
<div class="right"><h3>热点排行</h3><ol><li><a href="#">全国多地迎来降温天气</a></li><li><a href="#">高校毕业生就业观察</a></li></ol>
<div class="side-ad">广告位招租 热线：400-000-0000</div></div>
<div class="footer">关于我们 | 联系我们 | 广告服务 | 法律声明<br>华夏快讯网（示例站点，内容转载自公开来源）版权所有</div>
</body></html>
"""
    if page.portal == "harbor":
        rel_html = "".join(f'<li><a href="{p.slug}.html">{E(p.title)}</a></li>' for p in rel)
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{t} | The Harbor Times</title>
<meta property="og:title" content="{t}"></head>
<body>
<header class="masthead"><a class="logo" href="/harbor/index.html">The Harbor Times</a>
<nav><a href="#">World</a> <a href="#">U.S.</a> <a href="#">Business</a> <a href="#">Opinion</a> <a href="#">Sports</a></nav></header>
<div class="leaderboard-ad">Advertisement</div>
<main>
<article class="story">
  <h1 class="headline">{t}</h1>
  <p class="byline">By staff and wire reports | <time datetime="{story.published[0]:04d}-{story.published[1]:02d}-{story.published[2]:02d}">{fmt_date("harbor", story.published)}</time></p>
  <div class="story-body">
{body}
  </div>
</article>
<section class="more-stories"><h2>More from The Harbor Times</h2><ul>{rel_html}</ul></section>
</main>
<footer><p>&copy; The Harbor Times (an example site). Terms of Service | Privacy Policy | Contact us</p></footer>
</body></html>
"""
    if page.portal == "juhe":
        rel_html = "".join(f'<li><a href="{p.slug}.html">{E(p.title)}</a></li>' for p in rel)
        return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>{t}_聚合资讯</title></head>
<body>
<div class="ntes-nav">聚合资讯 | <a href="/juhe/index.html">首页</a> <a href="#">新闻</a> <a href="#">体育</a> <a href="#">娱乐</a> <a href="#">财经</a> <a href="#">科技</a></div>
<div class="post_main">
  <h1>{t}</h1>
  <div class="post_info">{fmt_date("juhe", story.published)}　来源: <a href="#">{E(story.agency)}</a></div>
  <div class="post_body" id="endText">
{body}
  </div>
  <div class="post_end_ad"><a href="#">【广告】聚合资讯APP 每天领红包</a></div>
  <div class="post_recommend"><h3>相关推荐</h3><ul>{rel_html}</ul></div>
  <div class="post_comment">跟贴 0 人参与</div>
</div>
<div class="footer">聚合资讯（示例站点） 本站内容均转载自互联网，如有侵权请联系删除</div>
</body></html>
"""
    rel_html = "".join(f'<li><a href="{p.slug}.html">{E(p.title)}</a></li>' for p in rel)
    lang_attr = "zh-CN" if story.lang == "zh" else "en"
    label = "发布时间：" if story.lang == "zh" else "Published: "
    date = (fmt_date("digest", story.published, fullwidth=True) if story.lang == "zh"
            else f"{story.published[0]}/{story.published[1]}/{story.published[2]}")
    return f"""<!DOCTYPE html>
<html lang="{lang_attr}"><head><meta charset="utf-8"><title>环球文摘 World Digest - {t}</title></head>
<body>
<table class="layout"><tr><td class="sidebar">
<ul class="menu"><li><a href="/digest/index.html">首页 Home</a></li><li><a href="#">要闻 Top</a></li><li><a href="#">国际 World</a></li></ul>
<div class="sponsor">赞助商 Sponsor</div>
</td><td class="main">
<div id="article">
  <h2 class="art-title">{t}</h2>
  <div class="art-meta">{label}{date}</div>
  <div class="art-content">
{body}
  </div>
  <div class="art-tags">标签 Tags: <a href="#">news</a></div>
</div>
<div class="also-read"><b>延伸阅读 Also read</b><ul>{rel_html}</ul></div>
</td></tr></table>
<div id="foot">环球文摘 World Digest — an example site. All articles are reposts, credited in each article.</div>
</body></html>
"""


def render_list(portal: str, name: str, lang: str, pages: list[Page]) -> str:
    mine = [p for p in pages if p.portal == portal]
    if portal == "huaxia":
        items = "\n".join(f'<li><a href="{p.slug}.html">{E(p.title)}</a></li>' for p in mine)
        main = f'<ul class="news-list">\n{items}\n</ul>'
    elif portal == "harbor":
        items = "\n".join(f'<div class="teaser"><h2><a href="{p.slug}.html">{E(p.title)}</a></h2></div>'
                          for p in mine)
        main = f'<section class="latest">\n{items}\n</section>'
    elif portal == "juhe":
        items = "\n".join(f'<div class="list-item"><a class="title" href="{p.slug}.html">{E(p.title)}</a></div>'
                          for p in mine)
        main = f'<div class="news-flow">\n{items}\n</div>'
    else:
        items = "\n".join(f'<li><a href="{p.slug}.html">{E(p.title)}</a></li>' for p in mine)
        main = f'<ol class="digest">\n{items}\n</ol>'
    return f"""<!DOCTYPE html>
<html lang="{"en" if lang == "en" else "zh-CN"}"><head><meta charset="utf-8"><title>{E(name)}</title></head>
<body>
<div class="nav"><a href="/index.html">All portals</a> | <a href="index.html">{E(name)}</a> | <a href="#">About</a></div>
<div class="ad">Advertisement / 广告</div>
{main}
<div class="footer">{E(name)} — an example site of scrapy-simhash</div>
</body></html>
"""


def render_home() -> str:
    items = "\n".join(f'<li><a class="portal" data-portal="{k}" href="{k}/index.html">{E(n)}</a> — {E(d)}</li>'
                      for k, n, _lang, d in PORTALS)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>scrapy-simhash example news sites</title></head>
<body>
<h1>Example news portals</h1>
<p>Four small static news sites full of real reposts. See manifest.json for which page reposts which.</p>
<ul class="portals">
{items}
</ul>
</body></html>
"""


def build_manifest(stories: dict[str, Story]) -> dict:
    """Manifest: per page its story, the original (first copy in crawl order) and the expected tier."""
    order = {k: i for i, (k, *_rest) in enumerate(PORTALS)}
    crawl = sorted(PAGES, key=lambda p: order[p.portal])  # stable: list order within a portal
    first: dict[str, str] = {}
    pages = []
    for p in crawl:
        original = first.get(p.story)
        if original is None:
            first[p.story] = p.path
            if p.expected_tier is not None:
                raise SystemExit(f"{p.path}: first copy of {p.story} in crawl order cannot be a repost")
        elif p.expected_tier not in ("title", "body"):
            raise SystemExit(f"{p.path}: repost of {original} needs an expected tier")
        pages.append({
            "path": p.path, "portal": p.portal, "story": p.story, "lang": stories[p.story].lang,
            "title": p.title, "original": original, "expected_tier": p.expected_tier, "edits": p.edits(),
        })
    tiers = [p["expected_tier"] for p in pages]
    return {
        "description": "Pages of the bundled example site in crawl order. 'original' is the path of the "
                       "first copy of the same story in crawl order (null: this page is the original); "
                       "'expected_tier' is the tier that should drop the page (null: kept).",
        "crawl_order": "portals in this order, articles in list order, one article at a time",
        "portals": [{"name": k, "title": n, "lang": lang, "list": f"{k}/index.html", "about": d}
                    for k, n, lang, d in PORTALS],
        "stories": {s.id: {"lang": s.lang, "headline": s.title, "source_repo": s.repo, "commit": s.commit,
                           "license": s.license, "corpus_path": s.corpus_path,
                           "original_site": s.original_site}
                    for s in stories.values()},
        "pages": pages,
        "negatives": [{"pages": ps, "why": why} for ps, why in NEGATIVES],
        "summary": {"pages": len(pages), "kept": tiers.count(None), "title": tiers.count("title"),
                    "body": tiers.count("body")},
    }


NOTICE_HEAD = """Third-party content in this example site
=========================================

The article text on these pages is real news, copied unchanged (paragraph by paragraph) from the
MIT/Apache-licensed parts of the scrapy-simhash shared corpus by build_site.py. The repository
license covers the repository's distribution of these files; the text itself remains the copyright
of its publisher. It is bundled only as a small, attributed example. The page templates, headlines
rewritten for reposts, ads, source/editor lines and footers were written for this example.

"""


def build_notice(stories: dict[str, Story]) -> str:
    lines = [NOTICE_HEAD]
    for s in stories.values():
        used = ", ".join(p.path for p in PAGES if p.story == s.id)
        lines.append(
            f"* {s.id}: \"{s.title}\"\n"
            f"  source repository: https://github.com/{s.repo} (commit {s.commit}), license {s.license}\n"
            f"  file: {s.corpus_path}\n"
            f"  original site: {s.original_site}\n"
            f"  used on: {used}\n"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    if not (args.corpus / "html").is_dir():
        raise SystemExit(f"corpus not found at {args.corpus} (pass --corpus)")
    stories = load_stories(args.corpus)
    out: Path = args.out
    names = {k: n for k, n, _l, _d in PORTALS}
    (out / "index.html").write_text(render_home(), encoding="utf-8")
    for key, name, lang, _d in PORTALS:
        (out / key).mkdir(parents=True, exist_ok=True)
        (out / key / "index.html").write_text(render_list(key, name, lang, PAGES), encoding="utf-8")
    for p in PAGES:
        (out / p.path).write_text(render_article(p, stories[p.story], PAGES, names[p.portal]), encoding="utf-8")
    (out / SHOP_PAGE).parent.mkdir(parents=True, exist_ok=True)
    (out / SHOP_PAGE).write_text(render_product_page(), encoding="utf-8")
    manifest = build_manifest(stories)
    manifest["shop"] = shop_manifest()
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1) + "\n",
                                       encoding="utf-8")
    (out / "NOTICE").write_text(build_notice(stories), encoding="utf-8")
    print(f"wrote {len(PAGES)} article pages, {len(PORTALS)} portals to {out}: {manifest['summary']}")


if __name__ == "__main__":
    main()
