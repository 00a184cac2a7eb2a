"""Fingerprinter on real pages and real articles: reposts land within the tiers, different news far apart."""

from __future__ import annotations

import gzip
import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import html as lxml_html

from scrapy_simhash import Fingerprinter, hamming_distance
from tests.conftest import REPO, STORY_EN, STORY_ZH, STORY_ZH_2, read_jsonl, repost_with_new_title, repost_with_suffix

FIXTURES = Path(__file__).parent / "fixtures"
TITLE_K, BODY_K = 2, 3


@pytest.fixture(scope="module")
def fp() -> Fingerprinter:
    return Fingerprinter()


def page(name: str) -> bytes:
    return gzip.open(FIXTURES / name).read()


def page_title(raw: bytes) -> str:
    return lxml_html.fromstring(raw).findtext(".//title")


def test_same_article_on_two_ifeng_templates_is_within_both_tiers():
    # gerapy's ifeng article saved under two page templates (400 KB vs 80 KB of HTML): whole pages,
    # so the main text is taken (SIMHASH_MAIN_CONTENT); titles differ by their site suffix only.
    fp = Fingerprinter(main_content=True)
    a, b = page("ifeng_news1.html.gz"), page("ifeng_news1_detail_20220630.html.gz")
    assert page_title(a) != page_title(b)
    assert hamming_distance(fp.title(page_title(a)), fp.title(page_title(b))) <= TITLE_K
    assert hamming_distance(fp.body(a), fp.body(b)) <= BODY_K
    # ... and a different article on another site is far away on both.
    c = page("china_news1.html.gz")
    assert hamming_distance(fp.body(a), fp.body(c)) > 3 * BODY_K
    assert hamming_distance(fp.title(page_title(a)), fp.title(page_title(c))) > 3 * TITLE_K


def test_whole_pages_without_main_content_differ():
    # Why pages are reduced to their main text: the two templates' boilerplate pulls the bodies apart.
    fp = Fingerprinter(main_content=False)
    a, b = page("ifeng_news1.html.gz"), page("ifeng_news1_detail_20220630.html.gz")
    assert hamming_distance(fp.body(a), fp.body(b)) > BODY_K
    assert Fingerprinter().body(a) == Fingerprinter(main_content=True).body(a)  # by default: the main text


@pytest.mark.parametrize("story", [STORY_ZH, STORY_ZH_2, STORY_EN], ids=["zh", "zh2", "en"])
def test_repost_lands_within_tiers(fp, story):
    suffix = " | Example News" if story is STORY_EN else " - 网易新闻"
    repost = repost_with_suffix(story, suffix)
    assert hamming_distance(fp.title(story["title"]), fp.title(repost["title"])) <= TITLE_K
    assert hamming_distance(fp.body(story["body"]), fp.body(repost["body"])) <= BODY_K
    rewritten = repost_with_new_title(story, "A headline written anew by another desk editor today")
    assert hamming_distance(fp.body(story["body"]), fp.body(rewritten["body"])) <= BODY_K


def test_unrelated_stories_far_apart(fp):
    stories = [STORY_ZH, STORY_ZH_2, STORY_EN]
    for i, a in enumerate(stories):
        for b in stories[i + 1:]:
            assert hamming_distance(fp.title(a["title"]), fp.title(b["title"])) > 3 * TITLE_K
            assert hamming_distance(fp.body(a["body"]), fp.body(b["body"])) > 3 * BODY_K


def test_real_corpus_reposts_and_unrelated(fp):
    """200 real newsspider articles: a repost (site suffix, source line, ISO date, full-width digits,
    wrapped in another template with an ad) keeps its title fingerprint; unrelated articles never meet."""
    docs = [d for d in read_jsonl("zh/newsspider-2016.jsonl.gz") if len(d["body"]) >= 300][:200]
    full_width = str.maketrans("0123456789", "０１２３４５６７８９")
    title_hits = body_close = 0
    originals = []
    for d in docs:
        title = d["title"].strip()
        paragraphs = [p for p in d["body"].replace("\r", "").split("\n") if p.strip()]
        body_html = "<div class='art'><p>来源：新华社</p>" + "".join(
            f"<p>{p.translate(full_width)}</p>" for p in paragraphs
        ) + "<div class='ad'><a href='/ad'>下载客户端</a></div></div>"
        a, b = fp.fingerprint(title, d["body"]), fp.fingerprint(title + "_网易新闻", body_html)
        originals.append(a)
        title_hits += hamming_distance(a.title, b.title) <= TITLE_K
        body_close += hamming_distance(a.body, b.body) <= BODY_K
    assert title_hits == len(docs)
    assert body_close >= 0.9 * len(docs), f"only {body_close}/{len(docs)} repost bodies within {BODY_K} bits"
    # Unrelated articles (neighbours in the corpus, mostly different stories) are far apart: allow the
    # handful of natural reposts the corpus holds, no more.
    near = sum(
        hamming_distance(a.body, b.body) <= BODY_K and hamming_distance(a.title, b.title) <= TITLE_K
        for a, b in itertools.pairwise(originals)
    )
    assert near <= 2


def test_short_texts_make_no_fingerprint(fp):
    assert fp.title("") is None and fp.title("新闻") is None and fp.title(None) is None
    assert fp.body("短文。") is None and fp.body("<p> </p>") is None and fp.body(None) is None
    result = fp.fingerprint("", "   ")
    assert not result.usable


def test_identical_across_fresh_processes():
    code = (
        "from scrapy_simhash import Fingerprinter; from tests.conftest import STORY_ZH as s;"
        "f = Fingerprinter(); print(f.title(s['title']), f.body(s['body']))"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout.strip()
        for seed in ("0", "12345")
    }
    assert len(runs) == 1
    f = Fingerprinter()
    assert runs.pop() == f"{f.title(STORY_ZH['title'])} {f.body(STORY_ZH['body'])}"


def test_bits_option():
    for bits in (32, 128):
        f = Fingerprinter(bits=bits)
        assert 0 < f.body(STORY_EN["body"]) < 1 << bits
    with pytest.raises(ValueError, match="bits"):
        Fingerprinter(bits=48)


def test_the_idf_table_read_from_its_mapped_file_is_a_whole_mapping(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``values()`` and ``items()`` work on the mapped table as on the parsed one (its packed values are
    an attribute of another name than the Mapping method)."""
    import jieba

    from scrapy_simhash.fingerprint.dictionary import MappedTable, load_idf

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = Path(jieba.__file__).parent / "analyse" / "idf.txt"
    parsed, median = load_idf(source)  # parsed, and its table file written
    mapped, mapped_median = load_idf(source)
    assert isinstance(mapped, MappedTable) and not isinstance(parsed, MappedTable)
    assert mapped_median == median and len(mapped) == len(parsed)
    assert list(mapped.values()) == list(parsed.values())
    assert dict(mapped.items()) == parsed
