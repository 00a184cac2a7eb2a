"""The HTML report: gathered from a real SQLite index with known distances, parsed with lxml, and
rendered by a real headless Chromium when one is installed."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import lxml.html
import pytest

from scrapy_simhash.index import IndexParams, Query, open_index
from scrapy_simhash.report import gather, render, write_report

BASE_T = 0x0123_4567_89AB_CDEF
BASE_B = 0x0FED_CBA9_8765_4321


def flip(fp: int, n: int, start: int = 0) -> int:
    """``fp`` with ``n`` bits flipped (bits start, start+5, …: spread over the bands)."""
    for i in range(n):
        fp ^= 1 << ((start + 5 * i) % 64)
    return fp


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    """Entries and decisions at known distances: title duplicates at 1 and 2 bits, a body duplicate
    at 3, and new entries whose nearest earlier entry is 3, 5 and 9 bits away (title) / 4 and 6 (body)."""
    path = tmp_path / "index.sqlite3"
    idx = open_index(str(path), params=IndexParams(title_bands=3, body_bands=4))
    now = time.time() - 3600

    def add(title_fp: int, body_fp: int, url: str, title: str) -> None:
        nonlocal now
        now += 1
        out = idx.check_and_add(Query(title_fp, body_fp, 2, 3, url=url, title=title, seen_at=now))
        assert out.match is None, (url, out)

    def dup(title_fp: int, body_fp: int, url: str) -> None:
        nonlocal now
        now += 1
        out = idx.check_and_add(Query(title_fp, body_fp, 2, 3, url=url, title="ignored", seen_at=now))
        assert out.match is not None, url

    add(BASE_T, BASE_B, "http://a.example/1", "原始新闻一")
    add(flip(BASE_T, 9, 1), flip(BASE_B, 4, 2), "http://a.example/2", "相近但不同的新闻二")  # 9 / 4 bits
    add(flip(BASE_T, 5, 3), flip(BASE_B, 30, 7), "http://a.example/3", "新闻三")  # title 5 from #1
    add(flip(BASE_T, 3, 4), flip(BASE_B, 6, 3), "http://a.example/4", "新闻四")  # title 3 from #1
    # title tier, 1 and 2 bits (bodies 10 bits from #1's: within the title tier's body check)
    dup(flip(BASE_T, 1), flip(BASE_B, 10, 1), "http://dup.example/1")
    dup(flip(BASE_T, 2, 10), flip(BASE_B, 10, 2), "http://dup.example/2")
    dup(flip(BASE_T, 40, 2) ^ 0xFFFF_0000_0000, flip(BASE_B, 3, 11), "http://dup.example/3")  # body, 3 bits
    idx.close()
    return path


def test_gather_finds_decisions_and_near_misses(index_path: Path) -> None:
    idx = open_index(str(index_path), readonly=True)
    try:
        data = gather(idx, recent=100)
    finally:
        idx.close()
    decisions = sorted((p.tier, p.distance, p.left_url) for p in data.decisions)
    assert decisions == [("body", 3, "http://dup.example/3"), ("title", 1, "http://dup.example/1"),
                         ("title", 2, "http://dup.example/2")]
    assert all(p.right is not None and p.right.url == "http://a.example/1" for p in data.decisions)
    near = {(p.tier, p.left_url): p.distance for p in data.near}
    # nearest earlier entry, computed independently here from the fingerprints stored above
    fps = {
        "http://a.example/1": (BASE_T, BASE_B),
        "http://a.example/2": (flip(BASE_T, 9, 1), flip(BASE_B, 4, 2)),
        "http://a.example/3": (flip(BASE_T, 5, 3), flip(BASE_B, 30, 7)),
        "http://a.example/4": (flip(BASE_T, 3, 4), flip(BASE_B, 6, 3)),
    }
    urls = list(fps)
    for i, url in enumerate(urls[1:], 1):
        for t, tier in enumerate(("title", "body")):
            expected = min((fps[url][t] ^ fps[u][t]).bit_count() for u in urls[:i])
            assert near[(tier, url)] == expected
    assert near[("title", "http://a.example/4")] == 3 and near[("body", "http://a.example/2")] == 4
    assert data.examined == 3 and data.entries == 4


def _page(index_path: Path, out: Path, **kwargs: object) -> lxml.html.HtmlElement:
    idx = open_index(str(index_path), readonly=True)
    try:
        write_report(idx, out, **kwargs)  # type: ignore[arg-type]
    finally:
        idx.close()
    return lxml.html.fromstring(out.read_bytes())


def test_page_has_histograms_and_pairs_on_both_sides(index_path: Path, tmp_path: Path) -> None:
    doc = _page(index_path, tmp_path / "report.html")
    for tier, inside, outside in (("title", {1, 2}, {3, 5}), ("body", {3}, {4, 6})):
        section = doc.get_element_by_id(f"tier-{tier}")
        svg = section.xpath(".//svg[@data-tier=$t]", t=tier)
        assert len(svg) == 1
        bars = {(b.get("class"), int(b.get("data-distance"))): int(b.get("data-count"))
                for b in svg[0].xpath(".//rect")}
        for d in inside:
            assert bars[("bar decision", d)] >= 1, (tier, bars)
        for d in outside:
            assert bars[("bar near", d)] >= 1, (tier, bars)
        assert svg[0].xpath(".//line[@class='threshold']")
        rows = ".//div[contains(@class,$side)]//tr[@class='pair']"
        left = [int(r.get("data-distance")) for r in section.xpath(rows, side="inside")]
        right = [int(r.get("data-distance")) for r in section.xpath(rows, side="outside")]
        assert set(left) == inside and left == sorted(left, reverse=True)  # weakest match first
        assert outside <= set(right) and right == sorted(right)  # closest miss first
    text = doc.text_content()
    assert "http://dup.example/1" in text and "原始新闻一" in text and "新闻四" in text
    # self-contained: no scripts, no external resources
    assert not doc.xpath("//script")
    assert not [e for e in doc.xpath("//*[@src or @href]") if "://" in (e.get("src") or e.get("href") or "")]
    assert "<style>" in (tmp_path / "report.html").read_text("utf-8")


def test_decision_files_of_dedup_runs_are_read(index_path: Path, tmp_path: Path) -> None:
    extra = tmp_path / "decisions.jsonl"
    extra.write_text("\n".join(json.dumps(r) for r in [
        {"line": 1, "url": "http://file.example/9", "status": "duplicate", "tier": "body", "distance": 2,
         "original": "http://a.example/2", "error": None},
        {"line": 2, "url": "http://file.example/10", "status": "new", "tier": None, "distance": None,
         "original": None, "error": None},
        {"line": 3, "url": "http://dup.example/1", "status": "duplicate", "tier": "title", "distance": 1,
         "original": "http://a.example/1", "error": None},  # already known from the index
    ]) + "\nnot json\n", "utf-8")
    idx = open_index(str(index_path), readonly=True)
    try:
        data = gather(idx, decision_files=[extra])
    finally:
        idx.close()
    urls = [p.left_url for p in data.decisions]
    assert urls.count("http://dup.example/1") == 1 and "http://file.example/10" not in urls
    from_file = next(p for p in data.decisions if p.left_url == "http://file.example/9")
    assert (from_file.tier, from_file.distance, from_file.right.url) == ("body", 2, "http://a.example/2")


def test_sentence_tier_decisions_are_counted_and_listed(tmp_path: Path) -> None:
    """A match of the opt-in sentence tier (from the index and from a decision file) is counted with
    the others, in the page and the summary, and listed in its own section."""
    path = tmp_path / "s.sqlite3"
    hashes = [f"{n:016x}" for n in (0xA1, 0xB2, 0xC3, 0xD4)]
    with open_index(str(path)) as idx:
        assert idx.check_and_add(Query(BASE_T, BASE_B, 2, 3, url="http://a.example/1", title="原始新闻",
                                       sentences=tuple(hashes[:3]))).match is None
        m = idx.check_and_add(Query(flip(BASE_T, 20), flip(BASE_B, 20), 2, 3, url="http://s.example/1",
                                    sentences=(hashes[0], hashes[1], hashes[3]), sentences_shared=50)).match
        assert m is not None and (m.tier, m.distance) == ("sentence", 1)
    extra = tmp_path / "decisions.jsonl"
    extra.write_text(json.dumps({"line": 1, "url": "http://s.example/2", "status": "duplicate", "tier": "sentence",
                                 "distance": 0, "original": "http://a.example/1", "error": None}) + "\n", "utf-8")
    out = tmp_path / "report.html"
    with open_index(str(path), readonly=True) as idx:
        summary = write_report(idx, out, decision_files=[extra])
    assert "2 decisions (title 0, body 0, sentence 2)" in summary, summary
    doc = lxml.html.fromstring(out.read_bytes())
    assert "decisions: title 0, body 0, sentence 2" in " ".join(doc.text_content().split())
    rows = doc.get_element_by_id("tier-sentence").xpath(".//tr[@class='pair']")
    assert sorted(int(r.get("data-distance")) for r in rows) == [0, 1]
    assert "http://s.example/1" in rows[0].text_content() and "原始新闻" in rows[0].text_content()


def test_empty_index_renders(tmp_path: Path) -> None:
    idx = open_index(str(tmp_path / "empty.sqlite3"))
    try:
        page = render(gather(idx))
    finally:
        idx.close()
    doc = lxml.html.fromstring(page)
    assert len(doc.xpath("//svg[@class='histogram']")) == 2
    assert "no pairs on this side" in doc.text_content()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_renders_in_headless_chromium(index_path: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium)")
    out = tmp_path / "report.html"
    _page(index_path, out)
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run"]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([*common, f"--user-data-dir={profile}", "--dump-dom", out.as_uri()],
                             capture_output=True, timeout=90, text=True)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = lxml.html.fromstring(dom.stdout)  # the DOM as the browser built it
    assert len(rendered.xpath("//svg[@class='histogram']//rect[contains(@class,'bar')]")) >= 6
    assert len(rendered.xpath("//tr[@class='pair']")) >= 7
    shot = tmp_path / "report.png"
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([*common, f"--user-data-dir={profile}", f"--screenshot={shot}",
                               "--window-size=1200,1600", out.as_uri()], capture_output=True, timeout=90)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    assert _png_size(shot) == (1200, 1600)
    assert shot.stat().st_size > 20_000  # a blank page compresses to a few KB
