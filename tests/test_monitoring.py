"""The Spidermon suite (``scrapy_simhash.monitoring``) in real crawls of the example project.

A copy of ``example_project`` gets the one line that turns the suite on (with Spidermon's own two
settings) and is crawled over real HTTP, offline, as a user types it: a few daily crawls of the site
as it is (each with ``SIMHASH_RESET``: a day's new stories, the index's history of runs kept), then one
more, which the suite passes, then one of the site after a template change that makes every
article's body a copy of one article: its dedup rate jumps and the suite fails, naming the rate and
the band. The other monitors are exercised on the stats they read.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("spidermon")

from tests.conftest import REPO  # noqa: E402

EXAMPLE = REPO / "example_project"
SITE = EXAMPLE / "site"
MANIFEST = json.loads((SITE / "manifest.json").read_text(encoding="utf-8"))
#: What the user adds to settings.py (the last line is the suite; the others are Spidermon's own setup).
SPIDERMON_SETTINGS = """
SPIDERMON_ENABLED = True
EXTENSIONS = {"spidermon.contrib.scrapy.extensions.Spidermon": 500}
SPIDERMON_SPIDER_CLOSE_MONITORS = ("scrapy_simhash.monitoring.SimhashMonitorSuite",)
"""
#: Spidermon's result lines: "[Spidermon] <monitor name>... OK|FAIL".
RESULT_RE = re.compile(r"\[Spidermon\] (?P<name>[^\n]*?)\.\.\. (?P<result>OK|FAIL|SKIPPED|ERROR)")


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".scrapy", "__pycache__", "*.jsonl"))
    settings = project / "news_example" / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + SPIDERMON_SETTINGS, encoding="utf-8")
    return project


def _copied_site(tmp_path: Path) -> Path:
    """The bundled site after a template change: every article page's body element (the one the
    spider reads) holds the body of one article, so every article is a copy of it; titles, list
    pages and the rest of each template are as they were."""
    import lxml.html

    sys.path.insert(0, str(EXAMPLE))
    try:
        from news_example.spiders.news import SELECTORS
    finally:
        sys.path.remove(str(EXAMPLE))
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    pages = MANIFEST["pages"]
    first = pages[0]
    source = lxml.html.fromstring((SITE / first["path"]).read_bytes())
    (text,) = source.cssselect(SELECTORS[first["portal"]]["body"])
    for page in pages:
        path = site / page["path"]
        doc = lxml.html.fromstring(path.read_bytes())
        (body,) = doc.cssselect(SELECTORS[page["portal"]]["body"])
        for child in list(body):
            body.remove(child)
        body.text = text.text
        for child in text:
            body.append(lxml.html.fromstring(lxml.html.tostring(child)))
        path.write_bytes(lxml.html.tostring(doc, encoding="utf-8", doctype="<!DOCTYPE html>"))
    return site


def _crawl(project: Path, *args: str, fails: bool = False) -> tuple[dict[str, Any], dict[str, str], str]:
    """One ``scrapy crawl news`` in ``project``: its simhash stats, Spidermon's results and its log."""
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "news", "-O", str(project / "out.jsonl"),
         "-s", "SIMHASH_RESET=1", "-s", "SIMHASH_MONITOR_MIN_RUNS=2", *args],
        cwd=project, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # (Spidermon shows a failed monitor's assertion as a traceback)
    assert fails or "Traceback" not in proc.stderr, proc.stderr[-4000:]
    stats = dict(re.findall(r"'(simhash/[^']+)': ([^,\n]+)", proc.stderr))
    results = {m.group("name"): m.group("result") for m in RESULT_RE.finditer(proc.stderr)}
    return stats, results, proc.stderr


@pytest.mark.slow
def test_the_suite_fails_a_crawl_whose_dedup_rate_jumps_and_passes_a_normal_one(tmp_path: Path) -> None:
    project = _project(tmp_path)
    for day in range(2):  # the history: two finished runs of the site as it is
        stats, results, log = _crawl(project)
        assert results and set(results.values()) == {"OK"}, log[-3000:]
    assert float(stats["simhash/dedup_rate"]) == pytest.approx(9 / 17, abs=1e-4)  # the manifest's 9 reposts
    stats, results, log = _crawl(project)  # the third day, compared with the band of two
    assert stats["simhash/history/runs"] == "2" and float(stats["simhash/history/dedup_rate_median"]) == \
        pytest.approx(9 / 17, abs=1e-4), stats
    assert len(results) == 5 and set(results.values()) == {"OK"}, results
    assert "dedup rate within the band of recent runs" in " ".join(results), results
    for key in ("p50_ms", "p95_ms", "max_ms"):
        assert float(stats[f"simhash/latency/{key}"]) > 0, stats
    assert stats["simhash/latency/items"] == "17", stats

    changed = _copied_site(tmp_path)
    stats, results, log = _crawl(project, "-s", f"NEWS_SITE_DIR={changed}", fails=True)
    assert float(stats["simhash/dedup_rate"]) > 0.9, stats  # every article but the first is a copy
    failed = [name for name, result in results.items() if result != "OK"]
    assert len(failed) == 1 and "dedup rate" in failed[0], results
    assert re.search(r"dedup rate 9\d\.\d% is outside the band of the last 3 runs of this spider: median 52\.9%",
                     log), log[-3000:]

    listed = subprocess.run([sys.executable, "-m", "scrapy", "simhash", "runs", "--json"], cwd=project,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["checked"] for r in runs] == [17] * 4 and all(r["spider"] == "news" for r in runs)
    assert runs[0]["dedup_rate"] > 0.9 and {round(r["dedup_rate"], 4) for r in runs[1:]} == {round(9 / 17, 4)}
