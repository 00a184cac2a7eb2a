"""End to end: ``scrapy crawl news`` in a copy of example_project, checked against the site's manifest.

The crawl is a real subprocess (the command a user types), over real HTTP on 127.0.0.1, with the
plugin enabled through ``ADDONS`` and its default index under the copy's ``.scrapy/simhash/``.
What the plugin kept and dropped (feed + drop log lines) is compared with ``site/manifest.json``,
which says for every page whether it is an original or a repost, and which tier should drop it.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_project"
SITE = EXAMPLE / "site"
CORPUS = ROOT.parent / "shared" / "corpus"
MANIFEST = json.loads((SITE / "manifest.json").read_text(encoding="utf-8"))
PAGES = {p["path"]: p for p in MANIFEST["pages"]}


def _plugin_missing() -> str | None:
    try:
        importlib.import_module("scrapy_simhash").Addon  # noqa: B018
    except (ImportError, AttributeError) as exc:
        return f"scrapy_simhash.Addon is not importable yet ({exc}): the example crawl needs the plugin"
    return None


needs_plugin = pytest.mark.skipif(_plugin_missing() is not None, reason=_plugin_missing() or "")

#: One line per drop: this item's URL, the tier, the distance, the original's URL (and no item dump).
DROP_RE = re.compile(
    r"Dropped: near-duplicate (?P<url>\S+): (?P<tier>\w+) tier, distance (?P<distance>\d+), "
    r"original (?P<original>\S+)$", re.M,
)
CRAWLED_RE = re.compile(r"Crawled \(\d+\) <GET (?P<url>\S+)>")


@dataclass
class Crawl:
    """What one ``scrapy crawl news`` run did, in manifest paths."""

    returncode: int
    stdout: str
    stderr: str
    kept: list[str] = field(default_factory=list)
    dropped: dict[str, dict] = field(default_factory=dict)  # path -> tier, distance, original
    crawled_urls: list[str] = field(default_factory=list)

    def summary_count(self, label: str) -> int:
        m = re.search(rf"{re.escape(label)}:\s+(\d+)", self.stdout)
        assert m, f"summary line {label!r} missing from stdout:\n{self.stdout}"
        return int(m.group(1))


def _path(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def run_crawl(project: Path, *args: str) -> Crawl:
    """Run the spider in ``project``; parse the feed and the drop messages of the log."""
    feed = project / "out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "news", "-O", str(feed), "-s", "LOG_LEVEL=DEBUG", *args],
        cwd=project, capture_output=True, text=True, timeout=180,
    )
    crawl = Crawl(proc.returncode, proc.stdout, proc.stderr)
    assert proc.returncode == 0, f"scrapy crawl failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    assert "Traceback" not in proc.stderr, f"error in the crawl log:\n{proc.stderr[-4000:]}"
    assert "ScrapyDeprecationWarning" not in proc.stderr, f"deprecated Scrapy API used:\n{proc.stderr[-4000:]}"
    if feed.exists():
        crawl.kept = [_path(json.loads(line)["url"]) for line in feed.read_text("utf-8").splitlines() if line]
    drops = list(DROP_RE.finditer(proc.stderr))
    assert len(drops) == proc.stderr.count("Dropped:"), "a drop line not in the one-line form"
    for m in drops:
        following = proc.stderr[m.end():].lstrip("\r\n")
        assert not following or re.match(r"\d{4}-\d\d-\d\d ", following), (
            f"a drop line followed by more than one line (the item?):\n{following[:500]}")
        crawl.dropped[_path(m.group("url"))] = {
            "tier": m.group("tier"), "distance": int(m.group("distance")), "original": _path(m.group("original")),
        }
    crawl.crawled_urls = [m.group("url") for m in CRAWLED_RE.finditer(proc.stderr)]
    return crawl


def _distances(path: str, original: str) -> str:
    """Diagnostic only: the title/body distances between a page and its original, as the plugin's
    default Fingerprinter sees them with the spider's selectors."""
    try:
        from parsel import Selector

        from scrapy_simhash import Fingerprinter, hamming_distance

        sys.path.insert(0, str(EXAMPLE))
        from news_example.spiders.news import SELECTORS

        fp = Fingerprinter()

        def fps(p: str) -> tuple[int | None, int | None]:
            sel = SELECTORS[PAGES[p]["portal"]]
            doc = Selector((SITE / p).read_text(encoding="utf-8"))
            return fp.title(" ".join(doc.css(sel["title"]).getall())), fp.body(doc.css(sel["body"]).get())

        (t1, b1), (t2, b2) = fps(path), fps(original)
        return f"title distance {hamming_distance(t1, t2)}, body distance {hamming_distance(b1, b2)}"
    except Exception as exc:  # diagnostics must never hide the real assertion
        return f"(distances unavailable: {exc!r})"
    finally:
        if str(EXAMPLE) in sys.path:
            sys.path.remove(str(EXAMPLE))


def mismatches(crawl: Crawl) -> list[str]:
    """Every page where the crawl disagrees with the manifest, with what the plugin reported."""
    problems = []
    kept = Counter(crawl.kept)
    for path, page in PAGES.items():
        expected, original = page["expected_tier"], page["original"]
        got = crawl.dropped.get(path)
        if expected is None:
            if got is not None:
                problems.append(f"{path}: original/unique page DROPPED by the {got['tier']} tier at distance "
                                f"{got['distance']} as a repost of {got['original']}")
            elif kept[path] != 1:
                problems.append(f"{path}: original page kept {kept[path]} times (expected once)")
            continue
        if got is None:
            status = "KEPT" if kept[path] else "neither kept nor dropped"
            problems.append(f"{path}: repost of {original} {status}, expected a {expected}-tier drop "
                            f"({_distances(path, original)}); edits: {', '.join(page['edits'])}")
        elif got["tier"] != expected or got["original"] != original:
            problems.append(f"{path}: dropped by the {got['tier']} tier (distance {got['distance']}, original "
                            f"{got['original']}), expected the {expected} tier against {original} "
                            f"({_distances(path, original)})")
    return problems


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of example_project, so the committed one gets no .scrapy/ or feed."""
    dest = tmp_path_factory.mktemp("example") / "example_project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".scrapy", "*.jsonl", "__pycache__"))
    return dest


@pytest.fixture(scope="module")
def first_run(project: Path) -> Crawl:
    return run_crawl(project)


# -- the site itself (no plugin needed) ---------------------------------------------------------


def test_manifest_matches_site() -> None:
    """Every page of the manifest exists, is linked from its portal's list page, and the first copy
    of each story in crawl order is its original."""
    portal_order = [p["name"] for p in MANIFEST["portals"]]
    home = (SITE / "index.html").read_text(encoding="utf-8")
    assert [m for m in re.findall(r'data-portal="([^"]+)"', home)] == portal_order
    first: dict[str, str] = {}
    for page in MANIFEST["pages"]:  # in crawl order
        assert (SITE / page["path"]).is_file(), page["path"]
        listing = (SITE / page["portal"] / "index.html").read_text(encoding="utf-8")
        assert f'href="{Path(page["path"]).name}"' in listing, page["path"]
        assert page["original"] == first.get(page["story"]), page["path"]
        assert (page["expected_tier"] is None) == (page["original"] is None), page["path"]
        first.setdefault(page["story"], page["path"])
    tiers = Counter(p["expected_tier"] for p in MANIFEST["pages"])
    assert tiers["title"] >= 3 and tiers["body"] >= 3, tiers
    for neg in MANIFEST["negatives"]:
        stories = {PAGES[p]["story"] for p in neg["pages"]}
        assert len(stories) == len(neg["pages"]), f"a negative pair must be different stories: {neg}"
    notice = (SITE / "NOTICE").read_text(encoding="utf-8")
    for story in MANIFEST["stories"].values():
        assert story["commit"] in notice and story["license"] in ("MIT", "Apache-2.0")


def test_site_is_what_build_site_makes(tmp_path: Path) -> None:
    """The committed pages are exactly the generator's output from the shared corpus."""
    if not (CORPUS / "html").is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}: cannot rebuild the example site")
    subprocess.run([sys.executable, str(SITE / "build_site.py"), "--corpus", str(CORPUS), "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    built = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert built, "build_site.py wrote nothing"
    for rel in built:
        assert (tmp_path / rel).read_bytes() == (SITE / rel).read_bytes(), f"{rel} differs: rerun build_site.py"


# -- the crawl ----------------------------------------------------------------------------------


@needs_plugin
def test_first_crawl_matches_manifest(first_run: Crawl, project: Path) -> None:
    crawled_hosts = {urlsplit(u).hostname for u in first_run.crawled_urls}
    assert crawled_hosts == {"127.0.0.1"}, f"requests left the machine: {crawled_hosts}"
    assert {_path(u) for u in first_run.crawled_urls} >= set(PAGES), "not every article page was crawled"

    problems = mismatches(first_run)
    assert not problems, "the crawl disagrees with site/manifest.json:\n  " + "\n  ".join(problems)

    kept_per_story = Counter(PAGES[p]["story"] for p in first_run.kept)
    assert all(n == 1 for n in kept_per_story.values()), kept_per_story
    assert set(kept_per_story) == {p["story"] for p in PAGES.values()}

    expected = Counter(p["expected_tier"] for p in PAGES.values())
    assert first_run.summary_count("kept (passed to the feed)") == expected[None]
    assert first_run.summary_count("dropped by the title tier") == expected["title"]
    assert first_run.summary_count("dropped by the body tier") == expected["body"]
    assert first_run.summary_count("flagged for review") == 0
    index = project / ".scrapy" / "simhash"
    assert index.is_dir() and any(index.iterdir()), "no index under the project's .scrapy/simhash/"
    assert str(index.resolve()) in first_run.stdout, f"summary does not say where the index is:\n{first_run.stdout}"


@needs_plugin
def test_second_crawl_drops_everything_and_reset_starts_fresh(first_run: Crawl, project: Path) -> None:
    assert first_run.returncode == 0
    second = run_crawl(project)
    assert second.kept == [], f"second run kept {second.kept}: the index did not persist"
    assert set(second.dropped) == set(PAGES), f"not dropped on the second run: {set(PAGES) - set(second.dropped)}"
    assert second.summary_count("kept (passed to the feed)") == 0

    fresh = run_crawl(project, "-s", "SIMHASH_RESET=1")
    problems = mismatches(fresh)
    assert not problems, "after SIMHASH_RESET=1 the crawl disagrees with the manifest:\n  " + "\n  ".join(problems)


# -- the second spider: reviews on a product page, in the short mode ----------------------------

SHOP = MANIFEST["shop"]
REVIEWS = {r["id"]: r for r in SHOP["reviews"]}
#: A drop line of the reviews crawl: the review's URL, the reason (tier, distance, and what the short
#: mode adds), the original's URL.
REVIEW_DROP_RE = re.compile(r"Dropped: near-duplicate (?P<url>\S+): (?P<reason>.*?)\boriginal (?P<original>[^\s,;]+)")


def _short_mode_missing() -> str | None:
    try:
        from scrapy_simhash.settings import BY_NAME
    except ImportError as exc:
        return f"scrapy_simhash is not importable ({exc})"
    if "SIMHASH_PROFILE" not in BY_NAME:
        return "the plugin has no short mode (SIMHASH_PROFILE) yet: the reviews spider's expected counts need it"
    return None


needs_short_mode = pytest.mark.skipif(_short_mode_missing() is not None, reason=_short_mode_missing() or "")


def _review_id(url: str) -> str:
    return urlsplit(url).fragment


def run_reviews(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict], dict[str, dict]]:
    """``scrapy crawl reviews`` in ``project``: the process, the feed's items, the drops by review id."""
    feed = project / "reviews-out.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "reviews", "-O", str(feed), *args],
        cwd=project, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, f"scrapy crawl reviews failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    assert "Traceback" not in proc.stderr, f"error in the crawl log:\n{proc.stderr[-4000:]}"
    assert "ScrapyDeprecationWarning" not in proc.stderr, f"deprecated Scrapy API used:\n{proc.stderr[-4000:]}"
    items = [json.loads(line) for line in feed.read_text("utf-8").splitlines() if line] if feed.exists() else []
    drops = {_review_id(m.group("url")): {"reason": m.group("reason"), "original": _review_id(m.group("original"))}
             for m in REVIEW_DROP_RE.finditer(proc.stderr)}
    assert len(drops) == proc.stderr.count("Dropped:"), "a drop line without its review and original"
    return proc, items, drops


def _short_texts() -> object:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("short_texts")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_shop_manifest_matches_page() -> None:
    """Every review of the manifest is on the product page, in page order, with its text and author;
    a copy names an earlier review; the counts add up."""
    from parsel import Selector

    sys.path.insert(0, str(EXAMPLE))
    try:
        from news_example.spiders.reviews import PRODUCT_PAGE, SELECTORS
    finally:
        sys.path.remove(str(EXAMPLE))
    assert SHOP["page"] == PRODUCT_PAGE
    page = Selector((SITE / PRODUCT_PAGE).read_text(encoding="utf-8"))
    on_page = [(r.attrib["id"], " ".join(r.css(SELECTORS["text"]).getall()).strip(),
                " ".join(r.css(SELECTORS["author"]).getall()).strip()) for r in page.css(SELECTORS["review"])]
    assert on_page == [(r["id"], r["text"], r["author"]) for r in SHOP["reviews"]]
    seen: set[str] = set()
    for r in SHOP["reviews"]:
        assert r["copy_of"] is None or r["copy_of"] in seen, r
        assert (r["expected"] == "kept") == (r["copy_of"] is None), r
        seen.add(r["id"])
    kinds = Counter(r["kind"] for r in SHOP["reviews"])
    assert {"genuine", "one-word", "spam", "reworded", "shop-generic", "shop-templated"} <= set(kinds), kinds
    expected = Counter(r["expected"] for r in SHOP["reviews"])
    assert SHOP["summary"] == {"reviews": len(SHOP["reviews"]), "kept": expected["kept"],
                               "dropped": expected["dropped"]}


def test_shop_labels_follow_the_benchmark_copy_rule() -> None:
    """The page's labels are the short-text benchmark's definition of a copy: each copy is a copy of
    the review it names, and no review is a copy of (or too close to call against) an earlier review
    outside its own group."""
    rule = _short_texts()
    reviews = SHOP["reviews"]
    for n, r in enumerate(reviews):
        if r["copy_of"]:
            assert rule.is_copy(REVIEWS[r["copy_of"]]["text"], r["text"]), r  # type: ignore[attr-defined]
        group = r["original"] or r["id"]
        for earlier in reviews[:n]:
            if (earlier["original"] or earlier["id"]) != group:
                verdict = rule.pair_class(earlier["text"], r["text"], frozenset())  # type: ignore[attr-defined]
                assert verdict not in ("copy", "grey"), (earlier["id"], r["id"], verdict)


@pytest.fixture(scope="module")
def shop_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("shop") / "example_project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".scrapy", "*.jsonl", "__pycache__"))
    return dest


@needs_plugin
def test_reviews_spider_yields_one_item_per_review(shop_project: Path) -> None:
    """With the plugin off, the spider yields every review of the page once: its text, its author, a
    URL with the review's anchor, and no title."""
    _proc, items, drops = run_reviews(shop_project, "-s", "SIMHASH_ENABLED=False")
    assert not drops
    assert [_review_id(i["url"]) for i in items] == list(REVIEWS)
    for item in items:
        review = REVIEWS[_review_id(item["url"])]
        assert item["text"] == review["text"] and item["author"] == review["author"]
        assert "title" not in item
    assert {urlsplit(i["url"]).hostname for i in items} == {"127.0.0.1"}


@needs_plugin
@needs_short_mode
def test_reviews_crawl_matches_manifest(shop_project: Path) -> None:
    """In the short mode, the crawl keeps exactly the reviews the manifest keeps, drops every copy
    against a review of its own group, and its summary says so."""
    proc, items, drops = run_reviews(shop_project, "-s", "SIMHASH_RESET=1")
    kept = [_review_id(i["url"]) for i in items]
    expected_kept = [r["id"] for r in SHOP["reviews"] if r["expected"] == "kept"]
    problems = [f"{rid} ({REVIEWS[rid]['kind']}, copy of {REVIEWS[rid]['copy_of']}) KEPT: {REVIEWS[rid]['text']}"
                for rid in kept if rid not in expected_kept]
    for rid in expected_kept:
        if rid in drops:
            d = drops[rid]
            problems.append(f"{rid} ({REVIEWS[rid]['kind']}) DROPPED ({d['reason']}) as a copy of {d['original']}: "
                            f"{REVIEWS[rid]['text']} <- {REVIEWS.get(d['original'], {}).get('text')}")
    for rid, d in drops.items():
        r = REVIEWS[rid]
        if r["expected"] == "dropped" and (REVIEWS[d["original"]]["original"] or d["original"]) != r["original"]:
            problems.append(f"{rid} dropped against {d['original']}, outside its group ({r['original']})")
    assert not problems, "the reviews crawl disagrees with site/manifest.json:\n  " + "\n  ".join(problems)
    assert kept == expected_kept
    assert set(drops) == {r["id"] for r in SHOP["reviews"] if r["expected"] == "dropped"}
    m = re.search(r"kept \(passed to the feed\):\s+(\d+)", proc.stdout)
    assert m and int(m.group(1)) == SHOP["summary"]["kept"], proc.stdout
