"""Whole pages as bodies are reduced to their main text by default (issue 15): a spider that takes
``response.css("body").get()`` as the body still tells different stories apart, and the crawl stats
count the items whose body was a page (``simhash/main_text``)."""

from __future__ import annotations

import gzip

import lxml.html
import pytest

from scrapy_simhash.engine import DEFAULT_BODY_MAX_DISTANCE
from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
from scrapy_simhash.text.normalize import looks_like_page

from .conftest import CORPUS, STORY_ZH, crawl_settings, run_crawl


def body_of(name: str) -> tuple[str, str]:
    """Title and ``<body>`` element (as a spider's ``response.css("body").get()``) of a GNE test page."""
    path = CORPUS / "html" / "gne" / "tests" / name
    if not path.exists():
        pytest.skip(f"needs the shared corpus file {path}")
    with gzip.open(path) as f:
        root = lxml.html.fromstring(f.read())
    return root.findtext(".//title"), lxml.html.tostring(root.find(".//body"), encoding="unicode")


#: Two 163.com pages of different stories (姚明对周琦…, 男孩…) that land 1 bit apart as whole pages.
PAIR = ("163/2.html.gz", "163/6.html.gz")


def test_two_different_pages_are_reduced_and_kept_apart():
    (_, a), (_, b) = body_of(PAIR[0]), body_of(PAIR[1])
    whole = Fingerprinter(main_content=False, max_share=None)  # the previous defaults
    assert (whole.body(a) ^ whole.body(b)).bit_count() <= DEFAULT_BODY_MAX_DISTANCE  # the page chrome decides
    fp, main = Fingerprinter(), Fingerprinter(main_content=True)
    fa, fb = fp.fingerprint("", a), fp.fingerprint("", b)
    assert fa.main_text and fb.main_text
    assert (fa.body, fb.body) == (main.body(a), main.body(b))  # the main text, as with SIMHASH_MAIN_CONTENT
    assert (fa.body ^ fb.body).bit_count() > 3 * DEFAULT_BODY_MAX_DISTANCE


def test_an_extracted_article_is_not_a_page():
    assert not looks_like_page(STORY_ZH["body"])
    assert not Fingerprinter().fingerprint(STORY_ZH["title"], STORY_ZH["body"]).main_text
    assert not Fingerprinter(main_content=False).is_page("<html><body>x</body></html>")
    links = "".join(f'<li><a href="/{i}">headline {i}</a></li>' for i in range(20))
    assert looks_like_page(f"<div><p>text</p><ul>{links}</ul></div>")  # a link-dense block
    assert not looks_like_page(f"<div><p>text</p><ul>{links[: links.rindex('<li>')]}</ul></div>")


async def test_the_crawl_counts_page_bodies(tmp_path):
    (ta, a), (tb, b) = body_of(PAIR[0]), body_of(PAIR[1])
    items = [{"title": ta, "body": a, "url": "u1"}, {"title": tb, "body": b, "url": "u2"}, dict(STORY_ZH, url="u3")]
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3"), items)
    assert crawler.stats.get_value("simhash/main_text") == 2
    assert crawler.stats.get_value("simhash/new") == 3


def test_a_fragment_body_leaves_its_link_boxes_out():
    """In an HTML body that is no whole page, a block that is mostly links (a related-links box) is
    left out by default, a link inside a paragraph is kept, a body of nothing but links is kept
    whole, and ``main_content=False`` keeps the body as given."""
    box = (
        '<ul class="related"><li><a href="/1">第一条相关新闻的标题</a></li>'
        '<li><a href="/2">第二条相关新闻的标题</a></li></ul>'
    )
    body = f'<div><p>正文第一段，<a href="/x">链接</a>在段落里。</p>{box}</div>'
    assert Fingerprinter().clean_body(body) == "正文第一段,链接在段落里。"
    assert "第一条相关新闻的标题" in Fingerprinter(main_content=False).clean_body(body)
    assert "第二条相关新闻的标题" in Fingerprinter().clean_body(box)
